// SPDX-License-Identifier: MIT
// bench/roomsweep.sh's loader: node bench/roomsweep.mjs URL ROOM N AUTHORS
// makes ROOM with AUTHORS members a0…a(AUTHORS-1) and posts N messages, author i % AUTHORS,
// 32 keep-alive requests in flight.
import http from 'node:http';

const [url, room, n, authors] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
function req(method, p, body) {
  return new Promise((resolve, reject) => {
    const data = body ? JSON.stringify(body) : undefined;
    const r = http.request(url + p, { method, agent, headers: data ? { 'content-type': 'application/json' } : {} }, (res) => {
      let t = '';
      res.on('data', (c) => (t += c));
      res.on('end', () => (res.statusCode < 300 ? resolve(t) : reject(new Error(`${method} ${p}: ${res.statusCode} ${t}`))));
    });
    r.on('error', reject);
    r.end(data);
  });
}
const names = Array.from({ length: authors }, (_, i) => `a${i}`);
await req('POST', '/v1/rooms', { room_id: room, members: names.slice(0, 1000) });
for (let i = 1000; i < authors; i += 1000) await req('POST', `/v1/rooms/${room}/members`, { add: names.slice(i, i + 1000) });
let next = 0;
await Promise.all(Array.from({ length: 32 }, async () => {
  for (let i; (i = next++) < n;) await req('POST', `/v1/rooms/${room}/messages`, { from: names[i % authors], content: `post ${i}` });
}));
agent.destroy();
