import WebSocket from 'ws';
import http from 'http';
const port = process.argv[2]; const base = `http://127.0.0.1:${port}`;
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
const post = (p, b) => new Promise(res => { const s = JSON.stringify(b); const r = http.request(base + p, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) } }, rr => { rr.resume(); rr.on('end', () => res(rr.statusCode)); }); r.end(s); });
const sleep = ms => new Promise(r => setTimeout(r, ms));
const a = new WebSocket(`ws://127.0.0.1:${port}/v1/stream`); let n = 0; a.on('message', d => { if (JSON.parse(d).type === 'typing') n++; });
await new Promise(r => a.on('open', r)); a.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'r4', user: 'alice' })); await sleep(300);
const t0 = Date.now(); let k = 0; const codes = {};
while (Date.now() - t0 < 3000) { const rs = await Promise.all(Array.from({ length: 4 }, () => post('/v1/cluster/typing', { room_id: 'r4', user: 'mallory', until: 1 }))); k += 4; for (const c of rs) codes[c] = (codes[c] || 0) + 1; }
await sleep(300); console.log('cluster typing posts', k, codes, 'frames at alice', n, 'in 3s');
a.close();
