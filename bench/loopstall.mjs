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

async function hot(base, seconds) {
  const one = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const lat = [];
  const until = performance.now() + seconds * 1000;
  let next = performance.now();
  while (performance.now() < until) {
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
  console.log(`${lat.length} ${q(0.5)} ${q(0.99)} ${lat[lat.length - 1].toFixed(2)}`);
  one.destroy();
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

const cmds = { hot, fragment, best, coldread, s3 };
if (!cmds[cmd]) {
  console.error('usage: node bench/loopstall.mjs hot|fragment|best|coldread|s3 ...');
  process.exit(2);
}
await cmds[cmd](args[0], ...args.slice(1).map((a) => (/^\d+$/.test(a) ? Number(a) : a)));
if (cmd !== 's3') agent.destroy();
