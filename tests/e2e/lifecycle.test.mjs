// SPDX-License-Identifier: MIT
// Operations: graceful SIGTERM with requests in flight, storage full (507, reads keep working),
// the connection limit, idle keep-alive close, --help and environment configuration.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import net from 'node:net';
import { test } from 'node:test';
import { BIN, raw, request, sleep, startStrata, tempDir } from './lib.mjs';

test('--help lists every flag with its environment twin', () => {
  const out = execFileSync(BIN, ['--help']).toString();
  for (const env of ['STRATA_LISTEN', 'STRATA_DATA_DIR', 'STRATA_COLD_URL', 'STRATA_MAP_SIZE',
    'STRATA_FLUSH_INTERVAL', 'STRATA_FLUSH_ROWS', 'STRATA_RECONCILE_INTERVAL', 'STRATA_JWT_SECRET',
    'STRATA_NODE_ID', 'STRATA_MAX_BODY', 'STRATA_MAX_CONNECTIONS', 'STRATA_S3_ENDPOINT',
    'STRATA_S3_REGION', 'STRATA_S3_ACCESS_KEY', 'STRATA_S3_SECRET_KEY', 'STRATA_S3_CA_FILE', 'STRATA_S3_PATH_STYLE'])
    assert.ok(out.includes(env), env);
  assert.ok(out.includes('--listen'));
  let code = 0;
  try { execFileSync(BIN, ['--no-such-flag'], { stdio: 'pipe' }); } catch (e) { code = e.status; }
  assert.equal(code, 2);
});

test('a failed start-up (unusable --listen) exits 1 after undoing what it opened', () => {
  const dir = tempDir('badlisten');
  const r = spawnSync(BIN, ['--listen', '999.0.0.1:1', '--data-dir', dir], { encoding: 'utf8' });
  assert.equal(r.signal, null, r.stderr);
  assert.equal(r.status, 1, r.stderr);
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

test('SIGTERM: in-flight writes are answered and durable, then exit 0', async () => {
  const s = await startStrata();
  const pending = Array.from({ length: 200 }, () => s.req('POST', '/v1/counters/term/incr').catch(() => null));
  await sleep(5);
  s.proc.kill('SIGTERM');
  const results = await Promise.all(pending);
  const ex = await s.exited;
  assert.equal(ex.code, 0, s.log());
  assert.doesNotMatch(s.log(), /did not finish in time/); // drained, not cut off by the deadline
  assert.match(s.log(), /stopped cleanly/);
  const acked = results.filter((r) => r && r.status === 200).length;
  const s2 = await startStrata({ dataDir: s.dir });
  const v = await s2.req('GET', '/v1/counters/term');
  assert.ok(acked === 0 || v.json.value >= acked, `${v.json.value} < ${acked} acknowledged`);
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
