// SPDX-License-Identifier: MIT
// Helpers for bench/loopstall.sh (run from the repo root with node):
//   hot URL SECONDS            paced hot reads (GET /v1/counters/x every 2 ms, one keep-alive
//                              connection): prints "n p50_ms p99_ms max_ms"
//   fragment URL EVENT         creates EVENT, one 1000 x 1000 section, and books every other
//                              seat (5,000 explicit bookings of 100 seats)
//   best URL EVENT SECONDS     best-available bookings of 100 seats, 20 a second
//   coldread URL USERS SECONDS reads the newest 50 messages of users u1..USERS in turn, 4 at once
//   s3 DIR S3PORT PROXYPORT MS s3rver (bucket "cold") and a TCP proxy in front of it that delays
//                              every chunk by MS/2 each way (MS per round trip); runs until killed
//   rooms URL USER OTHER N     rooms ROOM1 and ROOM2 with USER and OTHER, N messages in each
//                              (USER's and OTHER's in turn, 16 in flight)
//   edits URL USER CONV N      edits N of USER's oldest messages in CONV and deletes N/2 more,
//                              and edits N/10 of USER's messages in each room
//   erase URL USER MAXSECONDS  DELETE /v1/users/USER, then GET /v1/admin/erasures/{id} every
//                              50 ms until done, with the paced hot reads of `hot` meanwhile:
//                              prints "n p50_ms p99_ms max_ms seconds_to_done" (the reads of the
//                              erasure's window only)
//   left URL USER              what is still readable of USER: "messages room_posts" (its
//                              messages, all pages; room messages whose from names it)
import { createRequire } from 'node:module';
import http from 'node:http';
import net from 'node:net';

const [cmd, ...args] = process.argv.slice(2);
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function req(base, method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const r = http.request(`${base}${path}`, { method, agent, headers: data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString() }));
    });
    r.on('error', reject);
    if (data) r.write(data);
    r.end();
  });
}

// Paced hot reads until done() says stop: "n p50_ms p99_ms max_ms"
async function paced(base, done) {
  const one = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const lat = [];
  let next = performance.now();
  while (!done()) {
    const wait = next - performance.now();
    if (wait > 0) await sleep(wait);
    next += 2;
    const t0 = performance.now();
    await new Promise((resolve, reject) => {
      http.get(`${base}/v1/counters/x`, { agent: one }, (res) => { res.resume(); res.on('end', resolve); }).on('error', reject);
    });
    lat.push(performance.now() - t0);
  }
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(2);
  one.destroy();
  return `${lat.length} ${q(0.5)} ${q(0.99)} ${lat[lat.length - 1].toFixed(2)}`;
}

async function hot(base, seconds) {
  const until = performance.now() + seconds * 1000;
  console.log(await paced(base, () => performance.now() >= until));
}

async function ok(r, what) {
  const x = await r;
  if (x.status >= 300) throw new Error(`${what}: ${x.status} ${x.text}`);
  return x.text ? JSON.parse(x.text) : null;
}

async function rooms(base, user, other, n) {
  for (const room of ['ROOM1', 'ROOM2']) {
    await ok(req(base, 'POST', '/v1/rooms', { room_id: room, members: [user, other] }), 'room');
    let next = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let i; (i = next++) < n;)
        await ok(req(base, 'POST', `/v1/rooms/${room}/messages`, { from: i % 2 ? other : user, content: `room ${room} message ${i} from ${i % 2 ? other : user}` }), 'room post');
    }));
  }
}

async function edits(base, user, conv, n) {
  const page = await ok(req(base, 'GET', `/v1/users/${user}/messages?conversation_id=${conv}&limit=${Math.min(1000, n + n / 2)}`), 'read');
  const ids = page.messages.map((m) => m.msg_id);
  for (const [i, id] of ids.entries()) {
    if (i < n) await ok(req(base, 'PATCH', `/v1/users/${user}/messages/${id}`, { content: `edited by ${user}` }), 'edit');
    else await ok(req(base, 'DELETE', `/v1/users/${user}/messages/${id}`), 'delete');
  }
  for (const room of ['ROOM1', 'ROOM2']) {
    const msgs = (await ok(req(base, 'GET', `/v1/rooms/${room}/messages?limit=1000`), 'room read')).messages.filter((m) => m.from === user);
    for (const m of msgs.slice(0, Math.ceil(n / 10)))
      await ok(req(base, 'PATCH', `/v1/rooms/${room}/messages/${m.msg_id}`, { content: `room edit by ${user}` }), 'room edit');
  }
}

async function erase(base, user, maxSeconds) {
  let doneAt = 0;
  const hotRun = paced(base, () => doneAt > 0);
  const t0 = performance.now();
  try {
    const { erasure_id: id } = await ok(req(base, 'DELETE', `/v1/users/${user}`), 'erase');
    for (;;) {
      const st = await ok(req(base, 'GET', `/v1/admin/erasures/${id}`), 'erasure status');
      if (st.status === 'done') break;
      if (performance.now() - t0 > maxSeconds * 1000) throw new Error(`erasure ${id} not done after ${maxSeconds} s`);
      await sleep(50);
    }
  } finally {
    doneAt = performance.now();
  }
  console.log(`${await hotRun} ${((doneAt - t0) / 1000).toFixed(2)}`);
}

async function fragment(base, id) {
  const r = await req(base, 'POST', '/v1/events', { event_id: id, hold_seconds: 86400, sections: [{ name: 'A', rows: 1000, cols: 1000, price: 1 }] });
  if (r.status !== 201) throw new Error(r.text);
  let next = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    for (let b; (b = next++) < 5000;) {
      const seats = Array.from({ length: 100 }, (_, k) => { const i = (b * 100 + k) * 2 + 1; return `${Math.floor(i / 1000) + 1}-${(i % 1000) + 1}`; });
      const x = await req(base, 'POST', `/v1/events/${id}/bookings`, { section: 'A', seats });
      if (x.status !== 201) throw new Error(x.text);
    }
  }));
}

async function best(base, id, seconds) {
  const until = Date.now() + seconds * 1000;
  let ok = 0, n = 0;
  while (Date.now() < until) {
    const r = await req(base, 'POST', `/v1/events/${id}/bookings`, { section: 'A', quantity: 100 });
    n++;
    ok += r.status === 201;
    await sleep(50);
  }
  console.error(`best-available: ${n} requests, ${ok} booked`);
}

async function coldread(base, users, seconds) {
  const until = Date.now() + seconds * 1000;
  let next = 0, n = 0, bad = 0;
  await Promise.all(Array.from({ length: 4 }, async () => {
    while (Date.now() < until) {
      const u = (next++ % users) + 1;
      const r = await req(base, 'GET', `/v1/users/u${u}/messages?limit=50`);
      n++;
      bad += r.status !== 200;
    }
  }));
  console.error(`cold reads: ${n} requests, ${bad} not 200`);
}

async function s3(dir, s3port, proxyport, ms) {
  const require = createRequire(new URL('../tests/e2e/package.json', import.meta.url));
  const S3rver = require('s3rver');
  await new S3rver({ address: '127.0.0.1', port: Number(s3port), directory: dir, silent: true, configureBuckets: [{ name: 'cold' }] }).run();
  const half = Number(ms) / 2;
  // every chunk is held half a round trip in each direction; equal delays keep the order
  net.createServer((c) => {
    const up = net.connect(Number(s3port), '127.0.0.1');
    c.on('data', (d) => setTimeout(() => up.write(d), half));
    up.on('data', (d) => setTimeout(() => c.write(d), half));
    c.on('end', () => setTimeout(() => up.end(), half));
    up.on('end', () => setTimeout(() => c.end(), half));
    c.on('error', () => up.destroy());
    up.on('error', () => c.destroy());
  }).listen(Number(proxyport), '127.0.0.1');
  console.error(`s3rver on ${s3port}, delay proxy (${ms} ms per round trip) on ${proxyport}`);
}

async function all(base, path) {
  const out = [];
  for (let cursor = ''; ;) {
    const r = await req(base, 'GET', `${path}${path.includes('?') ? '&' : '?'}limit=1000${cursor && `&cursor=${encodeURIComponent(cursor)}`}`);
    if (r.status === 404) return out;
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.text}`);
    const j = JSON.parse(r.text);
    out.push(...j.messages);
    if (!j.next) return out;
    cursor = j.next;
  }
}

async function left(base, user) {
  const mine = await all(base, `/v1/users/${user}/messages`);
  let named = 0;
  for (const room of ['ROOM1', 'ROOM2']) named += (await all(base, `/v1/rooms/${room}/messages`)).filter((m) => m.from === user).length;
  console.log(`${mine.length} ${named}`);
}

const cmds = { hot, fragment, best, coldread, s3, rooms, edits, erase, left };
if (!cmds[cmd]) {
  console.error('usage: node bench/loopstall.mjs hot|fragment|best|coldread|s3|rooms|edits|erase|left ...');
  process.exit(2);
}
await cmds[cmd](args[0], ...args.slice(1).map((a) => (/^\d+$/.test(a) ? Number(a) : a)));
if (cmd !== 's3') agent.destroy();
