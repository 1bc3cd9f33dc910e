// SPDX-License-Identifier: MIT
// Operations: graceful SIGTERM with requests in flight, storage full (507, reads keep working),
// the connection limit, idle keep-alive close, --help and environment configuration.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { test } from 'node:test';
import { answered } from './disk-lib.mjs';
import { raw, request, runStrata, sleep, startStrata, tempDir } from './lib.mjs';

test('--help lists every flag with its environment twin', () => {
  const out = runStrata(['--help']).stdout;
  for (const env of ['STRATA_LISTEN', 'STRATA_DATA_DIR', 'STRATA_COLD_URL', 'STRATA_MAP_SIZE',
    'STRATA_FLUSH_INTERVAL', 'STRATA_FLUSH_ROWS', 'STRATA_RECONCILE_INTERVAL', 'STRATA_RECONCILE_QUEUE', 'STRATA_JWT_SECRET',
    'STRATA_NODE_ID', 'STRATA_MAX_BODY', 'STRATA_MAX_CONNECTIONS', 'STRATA_S3_ENDPOINT',
    'STRATA_S3_REGION', 'STRATA_S3_ACCESS_KEY', 'STRATA_S3_SECRET_KEY', 'STRATA_S3_CA_FILE', 'STRATA_S3_PATH_STYLE',
    'STRATA_WS_PING_SECONDS'])
    assert.ok(out.includes(env), env);
  assert.ok(out.includes('--listen'));
  // Every flag, the subcommands' too, has its twin (only --help and --version have none).
  for (const line of out.split('\n').filter((l) => /^  --/.test(l))) {
    const [flag, env] = line.trim().split(/\s+/);
    if (flag === '--help' || flag === '--version') continue;
    assert.match(env, /^STRATA_[A-Z0-9_]+$/, `${flag} has no environment twin`);
  }
  runStrata(['--no-such-flag'], { expect: 2 });
});

test('a failed start-up (unusable --listen) exits 1 after undoing what it opened', () => {
  const dir = tempDir('badlisten');
  const r = runStrata(['--listen', '999.0.0.1:1', '--data-dir', dir], { expect: 1 });
  assert.match(r.stderr, /bad address in --listen/);
  rmSync(dir, { recursive: true, force: true });
});

test('environment configures the server; open mode is announced', async () => {
  const s = await startStrata({ env: { STRATA_MAX_BODY: '2048' } });
  assert.match(s.log(), /auth is OFF/);
  const r = await s.req('POST', '/v1/counters/e/incr', `{"by":1${' '.repeat(3000)}}`);
  assert.equal(r.status, 413);
  await s.stop();
  s.cleanup();
});

test('regression: a stop right after writes waits for LMDB to settle, not for the deadline', async () => {
  const s = await startStrata({ env: { STRATA_JWT_SECRET: 'k' } });
  await Promise.all(Array.from({ length: 20 }, () => s.req('POST', '/v1/counters/x/incr')));
  const ex = await s.stop();
  assert.equal(ex.code, 0);
  assert.doesNotMatch(s.log(), /did not finish in time/);
  s.cleanup();
});

// SPEC §7: SIGTERM stops accepting, finishes in-flight requests, commits, exits 0. 24 clients
// post 200 KB messages in a loop on keep-alive connections, enough that the server (not the
// clients) is the bottleneck and a commit is always under way; SIGTERM lands under that load.
// Every answer is a 201; a request fails only with a connection error and only after the SIGTERM
// (the server no longer takes it); and after a restart the count is exactly the number answered:
// every write the server took was answered (none applied and cut off), every answered one is
// durable.
test('SIGTERM: in-flight writes are answered and durable, then exit 0', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600'] });
  const CLIENTS = 24;
  let termSent = false, acked = 0, drained = 0, refused = 0;
  const content = 'x'.repeat(200000);
  const client = async (w) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (;;) {
        let r;
        try {
          r = await request(s.port, 'POST', '/v1/users/term/messages', { conversation_id: `c${w % 4}`, from: 'a', content }, {}, agent);
        } catch (e) {
          assert.ok(termSent, `a request failed before the SIGTERM: ${e.message}`);
          assert.ok(['ECONNRESET', 'ECONNREFUSED', 'EPIPE'].includes(e.code) || /socket hang up/.test(e.message),
            `not a connection error: ${e.code} ${e.message}`);
          refused++;
          return;
        }
        assert.equal(r.status, 201, r.text);
        acked++;
        if (termSent) drained++;
      }
    } finally {
      agent.destroy();
    }
  };
  const clients = Promise.allSettled(Array.from({ length: CLIENTS }, (_, w) => client(w)));
  await sleep(500);
  // a loaded machine may not have answered a write yet: SIGTERM once one was
  for (const end = Date.now() + 30000; !acked && Date.now() < end;) await sleep(20);
  const before = acked;
  s.proc.kill('SIGTERM');
  termSent = true;
  for (const c of await answered(clients, 'the clients after the SIGTERM')) if (c.status === 'rejected') throw c.reason;
  await answered(s.ended(), 'the exit after SIGTERM'); // exit 0, no sanitizer report
  assert.doesNotMatch(s.log(), /did not finish in time/); // drained, not cut off by the deadline
  assert.match(s.log(), /stopped cleanly/);
  assert.ok(before > 0, 'no write was answered before the SIGTERM');
  assert.equal(refused, CLIENTS, 'each client ends on a request the server no longer takes');
  const s2 = await startStrata({ dataDir: s.dir, args: ['--flush-interval', '3600'] });
  const st = await s2.req('GET', '/v1/users/term/stats');
  assert.equal(st.status, 200, st.text);
  assert.equal(st.json.total_messages, acked, `${acked} answered, ${drained} of them after the SIGTERM`);
  await s2.stop();
  s2.cleanup();
});

test('LMDB map full: writes get 507, reads keep working, nothing acknowledged is lost', async () => {
  const s = await startStrata({ args: ['--map-size', '1MiB'] });
  await s.req('POST', '/v1/counters/kept/incr', { by: 3 });
  let full = null;
  let added = 0;
  for (let i = 0; i < 20000 && !full; i += 50) {
    const rs = await Promise.all(Array.from({ length: 50 }, (_, j) =>
      s.req('POST', '/v1/counters/fill/distinct', { member: `m${i + j}-${'x'.repeat(200)}` })));
    for (const r of rs) {
      if (r.status === 200) added++;
      else if (r.status === 507) full = r;
      else assert.fail(`unexpected ${r.status} ${r.text}`);
    }
  }
  assert.ok(full, 'the map never filled');
  assert.equal(full.json.error.code, 'storage_full');
  assert.equal((await s.req('GET', '/v1/counters/kept')).json.value, 3);
  const fill = await s.req('GET', '/v1/counters/fill');
  assert.equal(fill.status, 200);
  assert.ok(fill.json.value <= added && fill.json.value > 0);
  const h = await s.req('GET', '/healthz'); // SPEC §7 v2: degraded while writes are refused
  assert.equal(h.status, 503, h.text);
  assert.ok(h.json.reasons.includes('store_full'), h.text);
  await s.stop();
  const s2 = await startStrata({ dataDir: s.dir, args: ['--map-size', '1MiB'] });
  assert.equal((await s2.req('GET', '/v1/counters/fill')).json.value, fill.json.value);
  await s2.stop();
  s2.cleanup();
});

test('POST /v1/admin/flush was refused with 507 while the store was full (the flush is what frees it)', async () => {
  const s = await startStrata({ args: ['--map-size', '1MiB'] });
  try {
    let full = null;
    for (let i = 0; i < 20000 && !full; i += 50) {
      const rs = await Promise.all(Array.from({ length: 50 }, (_, j) =>
        s.req('POST', '/v1/counters/fill/distinct', { member: `m${i + j}-${'x'.repeat(200)}` })));
      full = rs.find((r) => r.status === 507) || null;
    }
    assert.ok(full, 'the map never filled');
    assert.equal((await s.req('POST', '/v1/counters/other/incr', {})).status, 507);
    const f = await s.req('POST', '/v1/admin/flush');
    assert.equal(f.status, 202, f.text);
    assert.equal(typeof f.json.flushing, 'number');
  } finally {
    await s.stop();
    s.cleanup();
  }
});

test('connections over the limit get 503; idle keep-alive connections are closed', async () => {
  const s = await startStrata({ args: ['--max-connections', '4', '--idle-timeout', '1'] });
  const socks = [];
  for (let i = 0; i < 4; i++) {
    const c = net.connect(s.port, '127.0.0.1');
    await new Promise((r) => c.on('connect', r));
    socks.push(c);
  }
  await sleep(50);
  const over = await raw(s.port, 'GET /healthz HTTP/1.1\r\n\r\n', { idleMs: 500 });
  assert.match(over, /^HTTP\/1.1 503/);
  assert.match(over, /"unavailable"/);
  // the idle ones are closed after ~1 s, then new connections are accepted again
  const closed = await Promise.all(socks.map((c) => new Promise((r) => c.on('close', () => r(true)))));
  assert.equal(closed.length, 4);
  const ok = await request(s.port, 'GET', '/healthz');
  assert.equal(ok.status, 200);
  await s.stop();
  s.cleanup();
});
