import WebSocket from 'ws';
import { execSync } from 'child_process';
const port = process.argv[2]; const base = `http://127.0.0.1:${port}`;
const tok = (s, a, e) => execSync(`python3 /tmp/jwt.py ${s} ${a ? 1 : 0} ${e ?? ''}`).toString().trim();
const ALI = tok('alice');
const get = async (p) => (await fetch(base + p, { headers: { authorization: 'Bearer ' + ALI } })).text();
const sleep = ms => new Promise(r => setTimeout(r, ms));
const exp = tok('bob', 0, Math.floor(Date.now() / 1000) + 2);
const b = new WebSocket(`ws://127.0.0.1:${port}/v1/stream?access_token=${exp}`); const fr = []; b.on('message', d => fr.push(d.toString()));
b.on('close', (c, r) => { console.log(new Date().toISOString(), 'bob closed', c, r.toString()); });
await new Promise(r => b.on('open', r)); b.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'p1', user: 'bob' }));
const a = new WebSocket(`ws://127.0.0.1:${port}/v1/stream?access_token=${ALI}`); const af = []; a.on('message', d => af.push(d.toString()));
await new Promise(r => a.on('open', r)); a.send(JSON.stringify({ type: 'subscribe', id: 's', topic: 'room', room_id: 'p1', user: 'alice' }));
for (let i = 0; i < 9; i++) { await sleep(5000); console.log(new Date().toISOString(), await get('/v1/rooms/p1/presence')); if (b.readyState === 3) { await sleep(1200); console.log(await get('/v1/rooms/p1/presence'), af.slice(-2)); break; } }
a.close(); b.close(); await sleep(200);
