import WebSocket from 'ws';
import fs from 'fs';
import http from 'http';
const port = process.argv[2]; const pid = process.argv[3]; const base = `http://127.0.0.1:${port}`;
const rss = () => fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1];
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
const post = (p, b) => new Promise(res => { const s = JSON.stringify(b); const r = http.request(base + p, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) } }, rr => { let t = ''; rr.on('data', d => t += d); rr.on('end', () => res([rr.statusCode, t])); }); r.on('error', e => res([0, e.message])); r.end(s); });
const get = async (p) => { const r = await fetch(base + p); return [r.status, await r.text()]; };
const sleep = ms => new Promise(r => setTimeout(r, ms));
function open() { return new Promise((res, rej) => { const w = new WebSocket(`ws://127.0.0.1:${port}/v1/stream`); w.types = {}; w.n = 0; w.typingBy = {}; w.on('message', d => { w.n++; const f = JSON.parse(d); w.types[f.type] = (w.types[f.type] || 0) + 1; if (f.type === 'typing') w.typingBy[f.user] = (w.typingBy[f.user] || 0) + 1; w.last = f; }); w.on('open', () => res(w)); w.on('error', e => { w.err = e.message; }); w.closeInfo = null; w.on('close', (c, r) => w.closeInfo = [c, r.toString(), Date.now()]); }); }
const U = Array.from({ length: 256 }, (_, i) => 'u' + i);
console.log((await post('/v1/rooms', { room_id: 'r3', members: ['alice', 'slow', ...U] }))[0]);
const a = await open(); a.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'r3', user: 'alice' }));
const slow = await open(); slow.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'r3', user: 'slow' }));
await sleep(300); slow._socket.pause();
const cs = []; for (let k = 0; k < 4; k++) cs.push(await open());
console.log('rss start', rss());
const t0 = Date.now(); let cyc = 0, typ = {}, stop = false;
const typer = (async () => { while (!stop) { const rs = await Promise.all(U.slice(0, 32).map(u => post('/v1/rooms/r3/typing', { user: u }))); for (const r of rs) typ[r[0]] = (typ[r[0]] || 0) + 1; } })();
while (Date.now() - t0 < 15000) {
  for (let k = 0; k < 4; k++) for (let j = 0; j < 64; j++) { const u = U[k * 64 + j]; cs[k].send(JSON.stringify({ type: 'subscribe', id: 'c' + j, topic: 'room', room_id: 'r3', user: u })); }
  await sleep(30);
  for (let k = 0; k < 4; k++) for (let j = 0; j < 64; j++) cs[k].send(JSON.stringify({ type: 'unsubscribe', id: 'c' + j }));
  cyc++; await sleep(30);
  if (cyc % 50 == 0) console.log('t', Date.now() - t0, 'rss', rss(), 'alice', JSON.stringify(a.types), 'slow', slow.closeInfo);
}
stop = true; await typer;
const tt = (Date.now() - t0) / 1000;
await sleep(1500);
console.log('cycles', cyc, 'typing http', typ, 'alice', JSON.stringify(a.types), 'rss', rss());
const tb = Object.values(a.typingBy); console.log('typing frames per user max', Math.max(...tb), 'over', tt, 's; users', tb.length);
console.log('presence', await get('/v1/rooms/r3/presence'));
console.log('slow closeInfo before resume', slow.closeInfo);
const tr = Date.now(); slow._socket.resume(); await sleep(2000); console.log('slow after resume', slow.closeInfo, slow.n, JSON.stringify(slow.types));
for (const c of cs) c.close(); a.close(); await sleep(300);
