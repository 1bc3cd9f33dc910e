import WebSocket from 'ws';
import fs from 'fs';
const port = process.argv[2]; const pid = process.argv[3]; const base = `http://127.0.0.1:${port}`;
const rss = () => fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1];
const post = async (p, b) => { const r = await fetch(base + p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(b) }); return [r.status, await r.text()]; };
const get = async (p) => { const r = await fetch(base + p); return [r.status, await r.text()]; };
const sleep = ms => new Promise(r => setTimeout(r, ms));
function open() { return new Promise((res, rej) => { const w = new WebSocket(`ws://127.0.0.1:${port}/v1/stream`); w.frames = []; w.n = 0; w.on('message', d => { w.n++; if (w.frames.length < 50) w.frames.push(JSON.parse(d)); }); w.on('open', () => res(w)); w.on('error', e => { w.err = e.message; }); w.closeInfo = null; w.on('close', (c, r) => w.closeInfo = [c, r.toString()]); }); }
const members = ['alice', 'bob', 'carol', 'slow'];
console.log((await post('/v1/rooms', { room_id: 'r2', members }))[0]);
const a = await open(); a.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'r2', user: 'alice' }));
const slow = await open(); slow.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'r2', user: 'slow' }));
await sleep(300); slow._socket.pause(); a.frames = []; a.n = 0;
console.log('rss start', rss());
const b = await open();
const t0 = Date.now(); let cyc = 0;
while (Date.now() - t0 < 12000) {
  for (let i = 0; i < 200; i++) { b.send(JSON.stringify({ type: 'subscribe', id: 'c' + cyc, topic: 'room', room_id: 'r2', user: 'bob', metadata: 'x'.repeat(0) })); b.send(JSON.stringify({ type: 'unsubscribe', id: 'c' + cyc })); cyc++; }
  await sleep(20);
}
await sleep(1500);
console.log('cycles', cyc, 'alice frames', a.n, 'bob frames', b.n, 'rss', rss(), 'slow close', slow.closeInfo, 'b close', b.closeInfo);
console.log('presence', await get('/v1/rooms/r2/presence'));
slow._socket.resume(); await sleep(1500); console.log('slow after resume', slow.closeInfo, slow.n, JSON.stringify(slow.frames.slice(-2)));
console.log('alice last', JSON.stringify(a.frames.slice(-3)));
// thousands of rooms
const N = 2000; let ok = 0;
for (let i = 0; i < N; i += 50) { const rs = await Promise.all(Array.from({ length: 50 }, (_, j) => post('/v1/rooms', { room_id: `m${i + j}`, members: ['alice', 'bob'] }))); ok += rs.filter(r => r[0] === 201 || r[0] === 409).length; }
console.log('rooms', ok, 'rss', rss());
const c = await open();
for (let i = 0; i < N; i++) c.send(JSON.stringify({ type: 'subscribe', id: 'm' + i, topic: 'room', room_id: `m${i}`, user: 'bob' }));
await sleep(3000); console.log('c frames', c.n, c.closeInfo, 'rss', rss(), JSON.stringify(c.frames.slice(-2)));
console.log(await get('/v1/rooms/m1999/presence'), await get('/v1/rooms/m0/presence'));
c.terminate(); await sleep(1000);
console.log(await get('/v1/rooms/m1999/presence'), await get('/v1/rooms/m0/presence'), 'rss', rss());
a.close(); b.close(); slow.terminate(); await sleep(300);
