// SPDX-License-Identifier: MIT
// Helpers for end-to-end tests: start the real strata binary on a free port with a temp data
// dir, talk HTTP over real sockets (keep-alive agent or raw TCP), and stop or kill -9 it.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';

export const BIN = process.env.STRATA_BIN || path.resolve('../../build/strata');

// A test skips only where this machine truly lacks a capability (not root, a tool not installed),
// and says why. CI runs every test: with STRATA_NO_SKIP=1 (tools/test.sh sets it when CI=true) a
// skip is a failure instead. skipIf(reason) is for the `skip` option of test() or describe() (it
// returns false when there is no reason); skipNow(t, reason) skips a running test.
export const NO_SKIP = process.env.STRATA_NO_SKIP === '1';
function noSkip(reason) {
  return new Error(`STRATA_NO_SKIP=1 and this test would skip: ${reason}`);
}
export function skipIf(reason) {
  if (reason && NO_SKIP) throw noSkip(reason);
  return reason || false;
}
export function skipNow(t, reason) {
  if (NO_SKIP) throw noSkip(reason);
  t.skip(reason);
}

// A temp dir, removed when this test file's process ends well (a data dir is tens of MiB: a
// suite run left gigabytes in /tmp). Kept after a failure, or always with STRATA_KEEP_TMP=1.
const tempDirs = new Set();
export function tempDir(tag = 'e2e') {
  const dir = mkdtempSync(path.join(os.tmpdir(), `strata-${tag}-`));
  tempDirs.add(dir);
  return dir;
}
process.on('exit', (code) => {
  if (code !== 0 || process.exitCode > 0 || process.env.STRATA_KEEP_TMP === '1') return;
  for (const dir of tempDirs) {
    try { rmSync(dir, { recursive: true, force: true }); } catch { /* a server killed just now may still write */ }
  }
});

// What the sanitizer builds print when they find a fault: ASan, LeakSanitizer (a leak at exit:
// exit 23, or an abort with ASAN_OPTIONS=abort_on_error=1) and UBSan. The asan pass of
// tools/test.sh runs every e2e file against such a build, so every strata a test ends on purpose
// is checked here, in one place: stop()/ended() below for servers, runStrata() and
// runStrataAsync() for commands that run to their end (cluster-lib and netns-lib groups call
// these too). A kill -9 is exempt (nothing runs at exit).
export const SANITIZER_REPORT = /ERROR: AddressSanitizer|LeakSanitizer|runtime error:/;

// Throws unless strata ended with exit code `expect` and printed no sanitizer report.
// ex: {code, sig} as the 'exit' event gives them; out: everything it printed.
export function checkExit(what, ex, out, expect = 0) {
  const report = SANITIZER_REPORT.exec(out);
  if (report) throw new Error(`${what}: sanitizer report (${report[0]}):\n${out.slice(-6000)}`);
  if (ex.code !== expect) {
    throw new Error(`${what} ended with ${ex.code === null ? `signal ${ex.sig}` : `exit ${ex.code}`}, `
      + `expected exit ${expect}:\n${out.slice(-6000)}`);
  }
}

// A strata command that runs to its end (--help, rebuild-meta, a start that must fail): its exit
// code must be `expect` and its output free of sanitizer reports. Returns spawnSync's result
// (stdout and stderr as strings).
export function runStrata(args, { expect = 0, ...opts } = {}) {
  const r = spawnSync(BIN, args, { encoding: 'utf8', ...opts });
  if (r.error) throw r.error;
  checkExit(`strata ${args.join(' ')}`, { code: r.status, sig: r.signal }, `${r.stdout}${r.stderr}`, expect);
  return r;
}

// The same for a command the test awaits while it serves other processes (a proxy, s3rver) in
// this one: resolves {code, out, err} for the caller to check the exit code (some commands must
// fail); rejects on a sanitizer report, or when strata died of a signal (no test sends one to a
// command: a crash is never the failure a test expects).
export function runStrataAsync(args, { env = {} } = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, args, { env: { ...process.env, ...env } });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.on('error', reject);
    p.on('close', (code, sig) => {
      const report = SANITIZER_REPORT.exec(out + err);
      if (report) reject(new Error(`strata ${args.join(' ')}: sanitizer report (${report[0]}):\n${(out + err).slice(-6000)}`));
      else if (sig) reject(new Error(`strata ${args.join(' ')}: died of ${sig}:\n${(out + err).slice(-6000)}`));
      else resolve({ code, out, err });
    });
  });
}

// Every strata this file started and that still runs. A test that fails before its own stop()
// would leave its server running, and the server's pipes would keep this test process alive until
// ctest's timeout (600 s, one failed assertion reported as a timeout): the root test's after hook
// kills what is left, so a failure ends the file at once and shows as what it is.
const live = new Set();
after(() => {
  for (const proc of live) proc.kill('SIGKILL');
});

// A port for a server the test starts later (a group's members, a proxy). Taken from outside the
// kernel's ephemeral range: a port from bind(0) is in that range, and between this pick and the
// server's own bind any outgoing connection may be given it as its local port — or a member's
// retried connect to a peer not yet started may connect to itself (TCP simultaneous open), which
// makes that peer's start fail with EADDRINUSE. Ports outside the range are never handed out that
// way. Each is bound once to check it is free, and never handed out twice by this process.
const handedOut = new Set();
// [low, high) outside /proc/sys/net/ipv4/ip_local_port_range: below it, or above it where a
// tuned host starts the range low (e.g. 1024 65535 leaves no room: then bind(0), as before)
const PICK = (() => {
  let lo = 32768, hi = 60999;
  try { [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number); }
  catch { /* the usual range */ }
  if (lo - 1024 >= 1000) return [Math.max(1024, lo - 16384), lo];
  if (65535 - hi >= 1000) return [hi + 1, Math.min(65536, hi + 1 + 16384)];
  return null;
})();
const bindable = (port) => new Promise((resolve) => {
  const srv = net.createServer();
  srv.once('error', () => resolve(0));
  srv.listen(port, '127.0.0.1', () => { const p = srv.address().port; srv.close(() => resolve(p)); });
});
export async function freePort() {
  for (let tries = 0; tries < 1000; tries++) {
    const port = PICK ? PICK[0] + Math.floor(Math.random() * (PICK[1] - PICK[0])) : 0;
    if (handedOut.has(port)) continue;
    const got = await bindable(port);
    if (got) { handedOut.add(got); return got; }
  }
  throw new Error(`no free port in ${PICK}`);
}

// Starts strata; resolves once it logged "listening on HOST:PORT".
export async function startStrata({ dataDir, args = [], env = {}, bin = BIN } = {}) {
  const dir = dataDir || tempDir();
  const proc = spawn(bin, ['--listen', '127.0.0.1:0', '--data-dir', dir, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(proc);
  proc.on('exit', () => live.delete(proc));
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`strata did not start:\n${log}`)), 30000);
    const onData = (d) => {
      log += d;
      const m = /listening on (?:\[[^\]]+\]|[0-9.]+):(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    proc.stderr.on('data', onData);
    proc.stdout.on('data', onData);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`strata exited with ${code}:\n${log}`));
    });
  });
  proc.removeAllListeners('exit');
  // 'close', not 'exit': by then its pipes are drained, so log() holds a sanitizer's last words
  const exited = new Promise((resolve) => proc.on('close', (code, sig) => resolve({ code, sig })));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  let termSent = false;
  const s = {
    port, dir, proc, agent, exited,
    log: () => log,
    req: (method, p, body, headers) => request(port, method, p, body, headers, agent),
    // a request that must succeed (any 2xx, else the assertion names the answer); resolves its JSON
    async ok(method, p, body, headers) {
      const r = await s.req(method, p, body, headers);
      assert.ok(r.status < 300, `${method} ${p}: ${r.status} ${r.text}`);
      return r.json;
    },
    // SIGTERM (once: a second signal makes strata exit 1 at once), then the exit is checked:
    // exit code `expect` (0 unless the test made strata fail on purpose) and no sanitizer report,
    // else it throws. Resolves {code, sig}.
    async stop({ expect = 0 } = {}) {
      agent.destroy();
      if (!termSent && proc.exitCode === null && proc.signalCode === null) {
        termSent = true;
        proc.kill('SIGTERM');
      }
      return s.ended({ expect });
    },
    // The same check for a strata that exits by itself or on a signal the test sent itself.
    async ended({ expect = 0 } = {}) {
      const ex = await exited;
      if (ex.sig !== 'SIGKILL') checkExit(`strata on port ${port}`, ex, log, expect);
      return ex;
    },
    async kill9() {
      agent.destroy();
      proc.kill('SIGKILL');
      return exited;
    },
    cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return s;
}

// One HTTP request; resolves {status, headers, text, json}. body: object (JSON), string or Buffer.
// A GET or HEAD that went out on a pooled keep-alive socket the server had just closed (its idle
// timeout racing the reuse: ECONNRESET on a reused socket, nothing was read) is sent again, as
// Node's documentation advises; anything else fails as it happened.
export async function request(port, method, p, body, headers = {}, agent) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await requestOnce(port, method, p, body, headers, agent);
    } catch (err) {
      if (!(err.reusedSocket && err.code === 'ECONNRESET' && (method === 'GET' || method === 'HEAD') && attempt < 3)) throw err;
    }
  }
}

function requestOnce(port, method, p, body, headers, agent) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined
      : Buffer.isBuffer(body) || typeof body === 'string' ? body : JSON.stringify(body);
    const r = http.request(
      { host: '127.0.0.1', port, method, path: p, agent,
        headers: { ...(data !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}), ...headers } },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          let json;
          try { json = JSON.parse(text); } catch { json = undefined; }
          resolve({ status: res.statusCode, headers: res.headers, text, json });
        });
        res.on('error', reject);
      });
    r.on('error', (err) => { err.reusedSocket = r.reusedSocket; reject(err); });
    if (data !== undefined) r.write(data);
    r.end();
  });
}

// Sends raw bytes on a fresh TCP connection; resolves with everything received until the server
// closes or `idleMs` passes without data — before the first byte, `firstMs` (at least 15 s: a
// loaded machine may take longer than idleMs to answer at all).
export function raw(port, bytes, { idleMs = 1500, firstMs = Math.max(idleMs, 15000), writes } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    const chunks = [];
    let timer;
    const finish = () => { clearTimeout(timer); sock.destroy(); resolve(Buffer.concat(chunks).toString('latin1')); };
    const arm = () => { clearTimeout(timer); timer = setTimeout(finish, chunks.length ? idleMs : firstMs); };
    sock.on('connect', async () => {
      if (writes) {
        for (const w of writes) {
          if (typeof w === 'number') await new Promise((r) => setTimeout(r, w));
          else sock.write(w);
        }
      } else {
        sock.write(bytes);
      }
      arm();
    });
    sock.on('data', (d) => { chunks.push(d); arm(); });
    sock.on('end', finish);
    sock.on('close', finish);
    sock.on('error', (e) => (e.code === 'ECONNRESET' ? finish() : reject(e)));
  });
}

// Splits a raw byte stream of HTTP responses into [{status, headers, body}].
export function parseResponses(text) {
  const out = [];
  let rest = text;
  while (rest.length) {
    const he = rest.indexOf('\r\n\r\n');
    if (he < 0) break;
    const head = rest.slice(0, he).split('\r\n');
    const status = Number(head[0].split(' ')[1]);
    const headers = {};
    for (const h of head.slice(1)) {
      const i = h.indexOf(':');
      headers[h.slice(0, i).toLowerCase()] = h.slice(i + 1).trim();
    }
    const len = Number(headers['content-length'] || 0);
    const body = rest.slice(he + 4, he + 4 + len);
    rest = rest.slice(he + 4 + len);
    let json;
    try { json = JSON.parse(body); } catch { json = undefined; }
    out.push({ status, headers, body, json });
  }
  return out;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Waits until pred holds for every stream; a reader that failed (st.error) fails the wait at
// once with its own error, and not holding after ms fails it with "in time: what".
export async function waitStreams(streams, pred, what, ms = 120000) {
  const end = Date.now() + ms;
  for (;;) {
    for (const st of streams) if (st.error) throw st.error;
    if (streams.every(pred)) return;
    if (Date.now() >= end) throw new Error(`in time: ${what}`);
    await sleep(20);
  }
}

// A small WebSocket client over a raw socket (Node 18/20 have none built in): masked client
// frames, server frames parsed as they come. next() yields {op, text, json, code, reason}; op -1
// when the socket closed. A ping is answered with a pong and not yielded, unless opts.pong is
// false (never answered: a silent peer) or opts.pings is true (yielded too, as {op: 9, at}); the
// times pings arrived (Date.now()) are kept in the returned pings array either way.
export function wsConnect(port, path = '/v1/stream', headers = {}, opts = {}) {
  const { pong = true, pings: showPings = false } = opts;
  const pings = [];
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    const key = Buffer.from(Array.from({ length: 16 }, () => Math.floor(Math.random() * 256))).toString('base64');
    let buf = Buffer.alloc(0), upgraded = false, waiting = null;
    const queue = [];
    const push = (f) => { if (waiting) { const w = waiting; waiting = null; w(f); } else queue.push(f); };
    const parse = () => {
      for (;;) {
        if (buf.length < 2) return;
        const op = buf[0] & 15;
        let len = buf[1] & 127, off = 2;
        if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
        else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10; }
        if (buf.length < off + len) return;
        const payload = buf.subarray(off, off + len);
        buf = buf.subarray(off + len);
        if (op === 9) { // ping -> pong
          pings.push(Date.now());
          if (pong) send(payload, 10);
          if (showPings) push({ op, at: pings.at(-1), text: payload.toString() });
          continue;
        }
        const f = { op, text: payload.toString() };
        if (op === 8) { f.code = len >= 2 ? payload.readUInt16BE(0) : 1005; f.reason = payload.subarray(2).toString(); }
        try { f.json = JSON.parse(f.text); } catch { f.json = undefined; }
        push(f);
      }
    };
    const send = (data, op = 1) => {
      const payload = Buffer.isBuffer(data) ? data : Buffer.from(typeof data === 'string' ? data : JSON.stringify(data));
      const mask = Buffer.from([1, 2, 3, 4].map(() => Math.floor(Math.random() * 256)));
      let head;
      if (payload.length < 126) head = Buffer.from([0x80 | op, 0x80 | payload.length]);
      else if (payload.length < 65536) { head = Buffer.alloc(4); head[0] = 0x80 | op; head[1] = 0x80 | 126; head.writeUInt16BE(payload.length, 2); }
      else { head = Buffer.alloc(10); head[0] = 0x80 | op; head[1] = 0x80 | 127; head.writeBigUInt64BE(BigInt(payload.length), 2); }
      sock.write(Buffer.concat([head, mask, Buffer.from(payload.map((b, i) => b ^ mask[i % 4]))]));
    };
    sock.on('connect', () => {
      const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      sock.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`);
    });
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString();
        const status = Number(head.split(' ')[1]);
        buf = buf.subarray(end + 4);
        upgraded = true;
        if (status !== 101) { sock.destroy(); resolve({ status, head, body: buf.toString() }); return; }
        resolve({
          status, sock, send, pings,
          sendBinary: (b) => send(b, 2),
          next: (ms = 15000) => queue.length ? Promise.resolve(queue.shift()) : new Promise((res, rej) => {
            const t = setTimeout(() => { waiting = null; rej(new Error('no frame in time')); }, ms);
            waiting = (f) => { clearTimeout(t); res(f); };
          }),
          close: () => sock.destroy(),
        });
      }
      parse();
    });
    sock.on('close', () => push({ op: -1 }));
    sock.on('error', (e) => (upgraded ? push({ op: -1, error: e }) : reject(e)));
  });
}

// An HS256 token signed with secret for payload (exp an hour from now unless payload says).
export function hs256(secret, payload) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64({ exp: Math.floor(Date.now() / 1000) + 3600, ...payload });
  return `${h}.${p}.${createHmac('sha256', secret).update(`${h}.${p}`).digest('base64url')}`;
}

// A WebSocket's frames until pred holds (the ones seen are returned), or a timeout.
export async function wsUntil(ws, pred, ms = 10000) {
  const got = [];
  const end = Date.now() + ms;
  for (;;) {
    const f = await ws.next(Math.max(1, end - Date.now()));
    assert.notEqual(f.op, -1, `the stream stayed open; got ${JSON.stringify(got)}`);
    if (f.json) got.push(f.json);
    if (f.json && pred(f.json)) return got;
  }
}
// Every frame of a WebSocket that arrives within ms.
export async function wsDrain(ws, ms) {
  const got = [];
  const end = Date.now() + ms;
  for (;;) {
    const left = end - Date.now();
    if (left <= 0) return got;
    let f;
    try { f = await ws.next(left); } catch { return got; }
    if (f.op === -1) return got;
    if (f.json) got.push(f.json);
  }
}

// Runs fn with the server s (startStrata's), its log printed if fn fails; then stops it and
// removes its data (keepDir: keeps it, for a restart on the same data dir): the
// try/catch/finally every test around one server writes otherwise. s may be a function that
// returns the server: a test that restarts it in fn (`s = await startStrata(...)`) passes
// `() => s`, and the one running when fn ends or fails is the one whose log is printed and
// that is stopped.
export async function withServer(s, fn, { keepDir = false } = {}) {
  const cur = typeof s === 'function' ? s : () => s;
  try {
    await fn();
  } catch (e) {
    console.error(cur().log());
    throw e;
  } finally {
    await cur().stop();
    if (!keepDir) cur().cleanup();
  }
}

// Server arguments for a test that cools only on POST /v1/admin/flush (no interval pass, no row
// threshold), so what is hot and what is cold is the test's doing.
export const FLUSH_ON_ASK = ['--flush-interval', '3600', '--flush-rows', '100000000'];

// One server for a describe block: started before its tests, stopped and its data dir removed
// after them. Returns a stand-in for startStrata's server object (its fields once before() ran),
// so that the tests can name it where they are declared.
export function suiteServer(opts) {
  let s = null;
  before(async () => { s = await startStrata(opts); });
  after(async () => { if (s) { await s.stop(); s.cleanup(); } });
  return new Proxy({}, { get: (_, k) => s[k] });
}

// fn(0) … fn(n - 1), `width` at a time (writers in parallel, each taking the next index)
export async function parallel(n, fn, width = 16) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => { for (let i; (i = next++) < n;) await fn(i); }));
}

// Every item of a paged listing (GET p with 1000 a page, following `next` to the end): the
// messages of /v1/users/U/messages or /v1/rooms/R/messages. query: more parameters.
export async function readPages(s, p, query = {}) {
  const out = [];
  for (let cursor = null; ;) {
    const r = await s.req('GET', `${p}?${new URLSearchParams({ limit: '1000', ...query, ...(cursor ? { cursor } : {}) })}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.json.messages);
    if (!r.json.next) return out;
    cursor = r.json.next;
  }
}
// every message of user u (readPages)
export const readAll = (s, u, query) => readPages(s, `/v1/users/${u}/messages`, query);
