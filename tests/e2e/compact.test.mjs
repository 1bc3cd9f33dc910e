// SPDX-License-Identifier: MIT
// Cold-tier compaction (issue 17, SPEC §5): a user's small objects are merged in the background
// (more than --compact-objects), and POST /v1/admin/compact is a major compaction (issue 21: as
// few objects as --compact-max-mb allows); the swap is one batch, so
// strata's reads are exact throughout, kill -9 during a compaction loses and duplicates nothing
// (local directory and s3rver), and DuckDB reads each message once. Retention rewrites an object
// mixing expired and live rows; quiet users are not flushed at every interval.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { S3rver } from './sigv4-proxy.mjs';
import { test } from 'node:test';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { sleep, startStrata } from './lib.mjs';

async function readAll(s, u) {
  const out = [];
  let cursor = null;
  for (let pages = 0; pages < 10000; pages++) {
    const qs = new URLSearchParams({ limit: '300', ...(cursor ? { cursor } : {}) });
    const r = await s.req('GET', `/v1/users/${encodeURIComponent(u)}/messages?${qs}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.json.messages);
    if (!r.json.next) return out;
    cursor = r.json.next;
  }
  throw new Error('too many pages');
}

// Objects a compaction replaced are deleted at once only when nothing may still name them: no
// kept Iceberg snapshot (--table-keep 0), no backup (restore-cold.test.mjs checks the hold).
const NOHOLD = ['--table-keep', '0'];
const filesOf = (d) => (existsSync(d) ? parquetFiles(d) : []);
const stats = async (s, u) => (await s.req('GET', `/v1/users/${encodeURIComponent(u)}/stats`)).json;
const metric = async (s, name) => Number((await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1] ?? 0);

async function post(s, u, conv, content = 'm') {
  const r = await s.req('POST', `/v1/users/${encodeURIComponent(u)}/messages`, { conversation_id: conv, from: 'a', content });
  assert.equal(r.status, 201, r.text);
  return r.json.msg_id;
}

async function flush(s, u) {
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor(`${u} flushed`, async () => (await stats(s, u)).hot_messages === 0);
}

// n flushes of k messages each (conversations alternate); returns the msg_ids in order.
async function flushes(s, u, n, k, ids = []) {
  for (let f = 0; f < n; f++) {
    for (let i = 0; i < k; i++) ids.push(await post(s, u, `c${(f + i) % 3}`, `flush ${f} message ${i}`));
    await flush(s, u);
  }
  return ids;
}

const idsOf = (msgs) => msgs.map((m) => m.msg_id);

// A clean stop: exit 0 and no sanitizer report (the ASan build runs these tests too).
async function stopClean(s) {
  const { code } = await s.stop();
  assert.doesNotMatch(s.log(), /Sanitizer|runtime error/);
  assert.equal(code, 0, s.log().slice(-2000));
}

// Objects in storage once the reaper has deleted what the manifest no longer holds.
async function settledFiles(s, dir) {
  let prev = -1;
  return waitFor('storage settled', async () => {
    const n = filesOf(dir).length;
    const idle = (await metric(s, 'strata_flush_running')) === 0;
    if (idle && n === prev) return filesOf(dir);
    prev = n;
    await sleep(1200); // a reaper pass runs every second
    return null;
  }, 60000);
}

test('200 flushes of 5 messages: compaction keeps ≤ 8 objects, reads racing it are exact, DuckDB reads each message once', async () => {
  const s = await startStrata({ args: [...NOHOLD, '--flush-interval', '3600'] });
  try {
    const u = 'busy';
    const ids = [];
    let stop = false, reads = 0;
    const reader = (async () => {
      while (!stop) {
        const want = ids.slice();
        const got = idsOf(await readAll(s, u));
        // posts only append: a read sees at least what was posted before it began, in order, once
        assert.deepEqual(got.slice(0, want.length), want, 'a read racing flushes and compactions');
        assert.equal(new Set(got).size, got.length, 'no message twice');
        reads++;
      }
    })();
    await flushes(s, u, 200, 5, ids);
    stop = true;
    await reader;
    assert.ok(reads > 0);
    assert.ok((await metric(s, 'strata_compactions_total\\{result="ok"\\}')) > 0, 'compactions ran');
    assert.equal(await metric(s, 'strata_compactions_total\\{result="error"\\}'), 0);
    const files = await settledFiles(s, path.join(s.dir, 'cold', u));
    assert.ok(files.length <= 8, `${files.length} objects`);
    assert.deepEqual(idsOf(await readAll(s, u)), ids, 'strata reads each message once, in order');
    assert.deepEqual((await duckRows(files)).map((r) => r.msg_id), ids, 'DuckDB reads each message once');
    const st = await stats(s, u);
    assert.deepEqual([st.cold_messages, st.hot_messages, st.total_messages], [1000, 0, 1000]);
    const rewritten = await metric(s, 'strata_compaction_rows_rewritten_total');
    assert.ok(rewritten > 0 && rewritten < 1000 * 8, `write amplification ${rewritten / 1000}`);
    await waitFor('objects counted in /metrics', async () => (await metric(s, 'strata_cold_objects\\{tier="small"\\}')) === files.length, 15000);
    const m = (await s.req('GET', '/metrics')).text;
    for (const v of ['GET', 'PUT', 'DELETE']) assert.match(m, new RegExp(`strata_objstore_requests_total\\{verb="${v}"\\} [1-9]`));
  } finally {
    await stopClean(s);
    s.cleanup();
  }
});

test('POST /v1/admin/compact merges a user\'s small objects at once (202); a body that is not JSON is 400', async () => {
  const s = await startStrata({ args: [...NOHOLD, '--flush-interval', '3600', '--compact-objects', '1000'] });
  try {
    const ids = await flushes(s, 'few', 6, 3);
    const dir = path.join(s.dir, 'cold', 'few');
    assert.equal(filesOf(dir).length, 6, 'no automatic compaction under --compact-objects');
    const r = await s.req('POST', '/v1/admin/compact', { user: 'few' });
    assert.equal(r.status, 202, r.text);
    assert.equal((await s.req('POST', '/v1/admin/compact', '{')).status, 400);
    await waitFor('compacted', async () => filesOf(dir).length === 1);
    assert.deepEqual(idsOf(await readAll(s, 'few')), ids);
    assert.deepEqual((await duckRows(filesOf(dir))).map((x) => x.msg_id), ids);
    assert.equal((await s.req('POST', '/v1/admin/compact')).status, 202, 'no body: every user');
  } finally {
    await stopClean(s);
    s.cleanup();
  }
});

// Objects of a user and their bytes (after the reaper has deleted what the manifest dropped).
const sizeOf = (files) => files.reduce((a, f) => a + statSync(f).size, 0);

// A major compaction asked for is done: strata_compactions_pending back to 0 (it is at least 1
// from the 202 on), then storage settled.
async function compacted(s, dir) {
  await waitFor('compactions done', async () => (await metric(s, 'strata_compactions_pending')) === 0, 60000);
  return settledFiles(s, dir);
}

test('POST /v1/admin/compact is a major compaction: 12 small objects become one, about the bytes of one flush of the same rows; each message read once (API, DuckDB)', async () => {
  const s = await startStrata({ args: [...NOHOLD, '--flush-interval', '3600', '--compact-objects', '1000'] });
  try {
    const k = 50, n = 12;
    const content = (f, i) => `flush ${f} message ${i}: the quick brown fox ${(f * k + i) % 17}`;
    // the same rows in one flush, for the bytes to compare with
    for (let f = 0; f < n; f++) for (let i = 0; i < k; i++) await post(s, 'once', `c${i % 3}`, content(f, i));
    await flush(s, 'once');
    const once = filesOf(path.join(s.dir, 'cold', 'once'));
    assert.equal(once.length, 1);
    const ids = [];
    for (let f = 0; f < n; f++) {
      for (let i = 0; i < k; i++) ids.push(await post(s, 'many', `c${i % 3}`, content(f, i)));
      await flush(s, 'many');
    }
    const dir = path.join(s.dir, 'cold', 'many');
    const before = filesOf(dir);
    assert.equal(before.length, n);
    const beforeBytes = sizeOf(before);
    const r = await s.req('POST', '/v1/admin/compact', { user: 'many' });
    assert.equal(r.status, 202, r.text);
    assert.deepEqual(r.json, { compacting: 1 });
    const files = await compacted(s, dir);
    assert.equal(files.length, 1, `${files.length} objects after a major compaction`);
    const ratio = sizeOf(files) / sizeOf(once);
    assert.ok(ratio <= 1.2, `${sizeOf(files)} bytes, ${ratio.toFixed(2)}x one flush of the same rows (${sizeOf(once)}); before: ${beforeBytes}`);
    assert.deepEqual(idsOf(await readAll(s, 'many')), ids, 'strata reads each message once, in order');
    const rows = await duckRows(files);
    assert.deepEqual(rows.map((x) => x.msg_id), ids, 'DuckDB reads each message once');
    assert.equal(rows[k + 1].content, content(1, 1));
    const st = await stats(s, 'many');
    assert.deepEqual([st.cold_messages, st.hot_messages, st.total_messages], [n * k, 0, n * k]);
    assert.equal(await metric(s, 'strata_compactions_total\\{result="error"\\}'), 0);
    // asked again: nothing more to merge, nothing rewritten
    const rewritten = await metric(s, 'strata_compaction_rows_rewritten_total');
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'many' })).status, 202);
    assert.deepEqual(await compacted(s, dir), files);
    assert.equal(await metric(s, 'strata_compaction_rows_rewritten_total'), rewritten);
  } finally {
    await stopClean(s);
    s.cleanup();
  }
});

test('a major compaction (no body: every user) stays under --compact-max-mb: several objects, each under the cap, as few as it allows', async () => {
  const cap = 1 << 20;
  const s = await startStrata({ args: [...NOHOLD, '--flush-interval', '3600', '--compact-objects', '1000', '--compact-max-mb', '1'] });
  try {
    // ~2.5 MB of barely compressible content in 10 objects of ~250 KB
    const ids = [];
    for (let f = 0; f < 10; f++) {
      for (let i = 0; i < 16; i++) ids.push(await post(s, 'big', `c${i % 2}`, randomBytes(18000).toString('base64')));
      await flush(s, 'big');
    }
    const small = await flushes(s, 'small', 3, 4);
    const dir = path.join(s.dir, 'cold', 'big');
    const before = filesOf(dir);
    assert.equal(before.length, 10);
    assert.ok(before.every((f) => statSync(f).size < cap / 2));
    const total = sizeOf(before);
    assert.ok(total > 2 * cap, `${total} bytes`);
    const r = await s.req('POST', '/v1/admin/compact');
    assert.equal(r.status, 202, r.text);
    assert.equal(r.json.compacting, 2);
    const files = await compacted(s, dir);
    const sizes = files.map((f) => statSync(f).size);
    assert.ok(sizes.every((b) => b <= cap), `objects under the cap: ${sizes}`);
    // as few as the cap allows: no two neighbours fit in one object, so fewer than 2 x bytes/cap + 1
    assert.ok(files.length >= 2 && files.length <= Math.floor(2 * sizeOf(files) / cap) + 1, `${files.length} objects: ${sizes}`);
    assert.ok(files.length < before.length);
    assert.deepEqual(idsOf(await readAll(s, 'big')), ids, 'strata reads each message once, in order');
    assert.deepEqual((await duckRows(files)).map((x) => x.msg_id), ids, 'DuckDB reads each message once');
    assert.equal(filesOf(path.join(s.dir, 'cold', 'small')).length, 1, 'every user compacted');
    assert.deepEqual(idsOf(await readAll(s, 'small')), small);
    assert.equal(await metric(s, 'strata_compactions_total\\{result="error"\\}'), 0);
  } finally {
    await stopClean(s);
    s.cleanup();
  }
});

async function killDuringCompaction(t, { args, dirOf }) {
  let s = await startStrata({ args: [...NOHOLD, ...args, '--compact-objects', '1000'] });
  const dataDir = s.dir;
  const u = 'crash';
  const ids = await flushes(s, u, 24, 4);
  const hits = { orphans: 0, compacted: 0 };
  for (const delay of [0, 2, 5, 10, 20, 40]) {
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: u })).status, 202);
    await sleep(delay);
    await s.kill9();
    const prevLog = s.log();
    s = await startStrata({ dataDir, args: [...NOHOLD, ...args, '--compact-objects', '1000'] });
    hits.orphans += await metric(s, "strata_flush_orphans_total");
    hits.compacted += /compacted \d+ objects/.test(prevLog) ? 1 : 0;
    assert.deepEqual(idsOf(await readAll(s, u)), ids, `after kill -9 ${delay} ms into a compaction`);
    const st = await stats(s, u);
    assert.equal(st.cold_messages, ids.length);
    // more flushes, so the next round has small objects to merge again
    await flushes(s, u, 3, 4, ids);
  }
  assert.equal((await s.req('POST', '/v1/admin/compact', { user: u })).status, 202);
  await waitFor('compacted', async () => (await metric(s, 'strata_compactions_total\\{result="ok"\\}')) > 0);
  const files = await settledFiles(s, dirOf(s));
  assert.deepEqual(idsOf(await readAll(s, u)), ids);
  assert.deepEqual((await duckRows(files)).map((r) => r.msg_id), ids, 'each message once in storage');
  assert.ok(hits.orphans > 0, `some kill landed inside a compaction: ${JSON.stringify(hits)}`);
  await stopClean(s);
  return s;
}

test('regression: kill -9 during compactions loses and duplicates nothing (local directory)', async (t) => {
  const s = await killDuringCompaction(t, { args: ['--flush-interval', '3600'], dirOf: (x) => path.join(x.dir, 'cold', 'crash') });
  s.cleanup();
});

test('regression: kill -9 during compactions loses and duplicates nothing (s3rver)', async (t) => {
  const sdir = mkdtempSync(path.join(tmpdir(), 'strata-s3-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, directory: sdir, silent: true, configureBuckets: [{ name: 'cold' }] });
  const { port } = await server.run();
  try {
    const s = await killDuringCompaction(t, {
      args: ['--cold-url', 's3://cold/pre', '--s3-endpoint', `http://127.0.0.1:${port}`,
        '--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER', '--flush-interval', '3600'],
      dirOf: () => path.join(sdir, 'cold'),
    });
    s.cleanup();
  } finally {
    await server.close();
    rmSync(sdir, { recursive: true, force: true });
  }
});

test('retention on compacted objects: an object mixing expired and live rows is rewritten without the expired ones', async () => {
  // retention 10 s, 4 s between the old and the live rows: the merge must end before the old
  // ones expire (~6 s for the live flushes and the merge), retention runs half a second after
  // they expired and ~3.5 s before the live ones do (retention 6 s and a fixed 2.5 s sleep after
  // the merge left a loaded machine 2 s and 1 s)
  const s = await startStrata({ args: [...NOHOLD, '--flush-interval', '3600', '--retention-seconds', '10'] });
  try {
    const u = 'ret';
    const old = await flushes(s, u, 2, 3);
    const oldEnd = Date.now();
    await sleep(4000);
    const live = await flushes(s, u, 2, 3);
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: u })).status, 202);
    const dir = path.join(s.dir, 'cold', u);
    await waitFor('merged', async () => filesOf(dir).length === 1);
    assert.ok(Date.now() < oldEnd + 10000, 'merged before the old rows expired');
    await sleep(oldEnd + 10500 - Date.now()); // the first messages expire, the last do not
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202); // runs retention
    await waitFor('expired rows dropped', async () => (await stats(s, u)).cold_messages === live.length, 10000);
    assert.deepEqual(idsOf(await readAll(s, u)), live, 'message-exact retention');
    const st = await stats(s, u);
    assert.equal(st.total_messages, live.length);
    const files = await settledFiles(s, dir);
    assert.deepEqual((await duckRows(files)).map((r) => r.msg_id), live);
    assert.ok(old.length === 6);
    assert.ok((await metric(s, 'strata_compaction_expired_rows_total')) === 6);
  } finally {
    await stopClean(s);
    s.cleanup();
  }
});

test('quiet users are not flushed at every interval (--flush-min-rows, --flush-max-age); /v1/admin/flush still flushes them', async () => {
  const s = await startStrata({ args: [...NOHOLD, '--flush-interval', '1', '--flush-min-rows', '10', '--flush-max-age', '3600'] });
  try {
    for (let i = 0; i < 3; i++) await post(s, 'quiet', 'c');
    for (let i = 0; i < 12; i++) await post(s, 'loud', 'c');
    await waitFor('the busy user flushed', async () => (await stats(s, 'loud')).hot_messages === 0);
    await sleep(2500); // two more intervals
    assert.equal((await stats(s, 'quiet')).hot_messages, 3, 'the quiet user waits');
    await flush(s, 'quiet');
  } finally {
    await stopClean(s);
    s.cleanup();
  }
});
