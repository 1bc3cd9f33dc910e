import WebSocket from 'ws';
const port = process.argv[2]; const base = `http://127.0.0.1:${port}`;
const post = async (p, b) => { const r = await fetch(base + p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(b) }); return [r.status, await r.text()]; };
const get = async (p) => { const r = await fetch(base + p); return [r.status, await r.text()]; };
const sleep = ms => new Promise(r => setTimeout(r, ms));
function open() { return new Promise((res, rej) => { const w = new WebSocket(`ws://127.0.0.1:${port}/v1/stream`); w.frames = []; w.on('message', d => w.frames.push(JSON.parse(d))); w.on('open', () => res(w)); w.on('error', rej); w.closeInfo = null; w.on('close', (c, r) => w.closeInfo = [c, r.toString()]); }); }
console.log(await post('/v1/rooms', { room_id: 'r1', members: ['alice', 'bob', 'carol'] }));
const a = await open(); a.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'r1', user: 'alice' }));
await sleep(300); console.log('alice frames', JSON.stringify(a.frames));
console.log('presence', await get('/v1/rooms/r1/presence'));
const b = await open(); b.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'r1', user: 'bob' }));
await sleep(300); console.log('alice frames', JSON.stringify(a.frames.slice(-2))); console.log('bob frames', JSON.stringify(b.frames));
console.log('presence', await get('/v1/rooms/r1/presence'));
// non-member
const x = await open(); x.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'r1', user: 'mallory' }));
x.send(JSON.stringify({ type: 'subscribe', id: 's2', topic: 'room', room_id: 'nosuch', user: 'mallory' }));
x.send(JSON.stringify({ type: 'subscribe', id: 's3', topic: 'room', room_id: 'r1' }));
x.send(JSON.stringify({ type: 'subscribe', id: 's4', topic: 'room', room_id: 'r1', user: 'bad user!' }));
x.send(JSON.stringify({ type: 'subscribe', id: 's5', topic: 'room', room_id: 'r1', user: 123 }));
await sleep(300); console.log('mallory frames', JSON.stringify(x.frames));
console.log('presence', await get('/v1/rooms/r1/presence'));
// bob two streams, close one
const b2 = await open(); b2.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'r1', user: 'bob' }));
await sleep(200); a.frames = []; b2.close(); await sleep(300); console.log('after b2 close, alice got', JSON.stringify(a.frames), await get('/v1/rooms/r1/presence'));
b.send(JSON.stringify({ type: 'unsubscribe', id: 's' })); await sleep(300); console.log('after bob unsub, alice got', JSON.stringify(a.frames), await get('/v1/rooms/r1/presence'));
// same socket subscribes twice same room under 2 ids, then unsub one
a.frames = [];
b.send(JSON.stringify({ type: 'subscribe', id: 'p', topic: 'room', room_id: 'r1', user: 'bob' }));
b.send(JSON.stringify({ type: 'subscribe', id: 'q', topic: 'room', room_id: 'r1', user: 'bob' }));
await sleep(200); b.send(JSON.stringify({ type: 'unsubscribe', id: 'p' })); await sleep(300);
console.log('bob 2 subs/unsub 1: alice got', JSON.stringify(a.frames), await get('/v1/rooms/r1/presence'), 'bob', JSON.stringify(b.frames.slice(-4)));
// dup id
b.send(JSON.stringify({ type: 'subscribe', id: 'q', topic: 'room', room_id: 'r1', user: 'carol' })); await sleep(300);
console.log('dup id q as carol:', JSON.stringify(b.frames.slice(-2)), await get('/v1/rooms/r1/presence'));
// remove bob from room
a.frames = [];
console.log(await post('/v1/rooms/r1/members', { remove: ['bob'] })); await sleep(300);
console.log('bob removed; bob frames', JSON.stringify(b.frames.slice(-3)), 'alice', JSON.stringify(a.frames), await get('/v1/rooms/r1/presence'));
// terminate w/o close
a.frames = []; b.terminate(); await sleep(500); console.log('after bob terminate', JSON.stringify(a.frames), await get('/v1/rooms/r1/presence'));
for (const p of ['/v1/rooms/nosuch/presence', '/v1/rooms/r1/presence?x=1', '/v1/rooms/bad%20room/presence', '/v1/rooms/r1/presence/x']) console.log(p, await get(p));
console.log(await fetch(base + '/v1/rooms/r1/presence', { method: 'POST' }).then(r => r.status));
// delete room
a.frames = [];
console.log(await fetch(base + '/v1/rooms/r1', { method: 'DELETE' }).then(async r => [r.status, await r.text()]));
await sleep(500); console.log('after delete alice', JSON.stringify(a.frames), a.closeInfo, await get('/v1/rooms/r1/presence'));
console.log(await post('/v1/rooms', { room_id: 'r1', members: ['alice', 'bob'] }));
console.log('recreated presence', await get('/v1/rooms/r1/presence'));
a.close(); x.close(); await sleep(200);
