import WebSocket from 'ws';
const port = process.argv[2]; const base = `http://127.0.0.1:${port}`;
const get = async (p) => { const r = await fetch(base + p); return [r.status, await r.text()]; };
const sleep = ms => new Promise(r => setTimeout(r, ms));
const c = new WebSocket(`ws://127.0.0.1:${port}/v1/stream`); const types = {}; const errs = {}; let last;
c.on('message', d => { const f = JSON.parse(d); types[f.type] = (types[f.type] || 0) + 1; last = f; if (f.type === 'error') errs[f.code + ':' + f.message] = (errs[f.code + ':' + f.message] || 0) + 1; });
c.on('close', (code, r) => console.log('close', code, r.toString()));
await new Promise(r => c.on('open', r));
const N = 2000;
for (let i = 0; i < N; i++) c.send(JSON.stringify({ type: 'subscribe', id: 'm' + i, topic: 'room', room_id: `m${i}`, user: 'bob' }));
for (let k = 0; k < 6; k++) { await sleep(1000); console.log(JSON.stringify(types)); }
console.log(errs, JSON.stringify(last));
console.log(await get('/v1/rooms/m1999/presence'), await get('/v1/rooms/m500/presence'), await get('/v1/rooms/m700/presence'));
c.close(); await sleep(300);
