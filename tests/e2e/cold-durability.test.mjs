// SPDX-License-Identifier: MIT
// The cold tier at the edges of the durability contract (issue 11): kill -9 during flushes
// under concurrent posts leaves no row in the bucket that the restarted server lacks; retention
// deletions survive a crash between the manifest change and the delete; seq never comes again
// after retention, eviction + re-warm or a repair; listing survives retention + eviction; and
// user names of any shape flush to keys every backend takes (issue 12.6).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { S3rver } from './sigv4-proxy.mjs';
import { test } from 'node:test';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { runStrata, sleep, startStrata, tempDir } from './lib.mjs';

async function readAll(s, u) {
  const out = [];
  let cursor = null;
  for (let pages = 0; pages < 10000; pages++) {
    const qs = new URLSearchParams({ limit: '500', ...(cursor ? { cursor } : {}) });
    const r = await s.req('GET', `/v1/users/${encodeURIComponent(u)}/messages?${qs}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.json.messages);
    if (!r.json.next) return out;
    cursor = r.json.next;
  }
  throw new Error('too many pages');
}

const filesOf = (d) => (existsSync(d) ? parquetFiles(d) : []);
// The rows of a bucket. Start-up deletes the orphans of a crash while the test reads: a file
// listed but gone before DuckDB opens it is read again from a fresh listing.
async function rowsOf(d) {
  for (let i = 0; ; i++) {
    const files = filesOf(d);
    if (!files.length) return [];
    try {
      return await duckRows(files);
    } catch (e) {
      if (i >= 20 || files.every((f) => existsSync(f))) throw e;
      await sleep(50);
    }
  }
}
const stats = async (s, u) => (await s.req('GET', `/v1/users/${encodeURIComponent(u)}/stats`)).json;
const metric = async (s, name) => Number((await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1] ?? 0);

async function flushAll(s, users) {
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  for (const u of users) await waitFor(`${u} flushed`, async () => (await stats(s, u)).hot_messages === 0);
}

async function post(s, u, conv, content = 'm') {
  const r = await s.req('POST', `/v1/users/${encodeURIComponent(u)}/messages`, { conversation_id: conv, from: 'a', content });
  assert.equal(r.status, 201, r.text);
  return r.json;
}

const USERS = ['w0', 'w1', 'w2', 'w3'];

test('regression: kill -9 during flushes under concurrent posts: DuckDB finds no row the restarted server lacks, and after the next flush each message is in the files once', async () => {
  const dir = tempDir('flushcrash');
  // --table-keep 0: a compaction's replaced objects go at once (not held for kept snapshots), so
  // "each message once" is about the files the manifest names
  const args = ['--flush-rows', '40', '--flush-interval', '3600', '--table-keep', '0'];
  let s = await startStrata({ dataDir: dir, args });
  const acked = Object.fromEntries(USERS.map((u) => [u, []]));
  for (let round = 0; round < 4; round++) {
    // every answer is a 201; only a connection error after the kill ends a worker
    let killed = false;
    const workers = [];
    for (let w = 0; w < 16; w++) {
      workers.push((async () => {
        const u = USERS[w % USERS.length];
        for (let i = 0; ; i++) {
          let r;
          try {
            r = await s.req('POST', `/v1/users/${u}/messages`, { conversation_id: `c${i % 3}`, from: 'a', content: `r${round} w${w} i${i} ${'x'.repeat(3000)}` });
          } catch (e) {
            if (killed) return; // the server is gone: this one never got its answer
            throw e;
          }
          assert.equal(r.status, 201, r.text);
          acked[u].push(r.json.msg_id);
        }
      })());
    }
    const done = Promise.allSettled(workers);
    // flushes (every 40 hot rows of a user) run under the posts; the kill lands among them
    await waitFor('flushes under way', async () => (await metric(s, 'strata_flush_rows_total')) > 0);
    await sleep(50 + 97 * round);
    killed = true;
    await s.kill9();
    for (const w of await done) if (w.status === 'rejected') throw w.reason;
    s = await startStrata({ dataDir: dir, args });
    for (const u of USERS) {
      const have = new Set((await readAll(s, u)).map((m) => m.msg_id));
      for (const id of acked[u]) assert.ok(have.has(id), `${u}: acknowledged ${id} survived`);
      const rows = await rowsOf(path.join(dir, 'cold', u));
      for (const r of rows) assert.ok(have.has(r.msg_id), `round ${round}: ${u}'s bucket holds ${r.msg_id}, which the restarted server does not have`);
      const st = await stats(s, u);
      assert.equal(st.total_messages, have.size, `${u}: counts follow the messages`);
      assert.ok(st.hot_messages >= 0 && st.cold_messages >= 0 && st.cold_messages <= st.total_messages, JSON.stringify(st));
    }
  }
  // the next flush completes and the orphans of the crashes are gone: each message once
  await flushAll(s, USERS);
  for (const u of USERS) {
    const want = (await readAll(s, u)).map((m) => m.msg_id);
    await waitFor(`${u}'s files hold each message once`, async () => {
      const ids = (await rowsOf(path.join(dir, 'cold', u))).map((r) => r.msg_id);
      return JSON.stringify(ids) === JSON.stringify(want);
    });
    assert.equal((await stats(s, u)).cold_messages, want.length);
  }
  assert.equal((await s.stop()).code, 0);
  s.cleanup();
});

test('regression: a retention delete survives kill -9 between the manifest change and the delete; start-up finishes it', async () => {
  const dir = tempDir('retcrash');
  // --table-keep 0, no backup: nothing holds the dropped object (restore-cold.test.mjs: the hold)
  const args = ['--retention-seconds', '1', '--flush-interval', '3600', '--table-keep', '0'];
  let s = await startStrata({ dataDir: dir, args });
  for (let i = 0; i < 10; i++) await post(s, 'rk', `c${i % 2}`);
  await flushAll(s, ['rk']);
  const [old] = parquetFiles(path.join(dir, 'cold', 'rk'));
  assert.ok(old);
  await sleep(1300);
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  // the answer shows the object out of the manifest, so that batch is durable; kill at once
  for (let i = 0; i < 2000 && (await stats(s, 'rk')).cold_messages !== 0; i++) await sleep(2);
  await s.kill9();
  s = await startStrata({ dataDir: dir, args });
  await waitFor('the expired object deleted after the restart', async () => !parquetFiles(path.join(dir, 'cold', 'rk')).includes(old), 30000);
  const st = await stats(s, 'rk');
  assert.deepEqual([st.total_messages, st.cold_messages, st.hot_messages], [0, 0, 0]);
  assert.equal((await s.stop()).code, 0);
  s.cleanup();
});

test('regression: seq continues after retention empties a conversation (it used to start again at 1)', async () => {
  const s = await startStrata({ args: ['--retention-seconds', '1', '--flush-interval', '3600'] });
  for (let i = 1; i <= 5; i++) assert.equal((await post(s, 'rs', 'c')).seq, i);
  await flushAll(s, ['rs']);
  await sleep(1300);
  await s.req('POST', '/v1/admin/flush');
  await waitFor('retention', async () => (await stats(s, 'rs')).cold_messages === 0);
  assert.equal((await post(s, 'rs', 'c')).seq, 6);
  assert.equal((await s.req('GET', '/v1/users/rs/conversations/c')).json.total_messages, 1);
  await s.stop();
  s.cleanup();
});

test('regression: seq continues after partial retention, eviction and re-warm (it followed the remaining count)', async () => {
  // retention 6 s (3 s left the second object ~1.5 s before it expired too, under the eviction
  // below, on a loaded machine)
  const s = await startStrata({ args: ['--retention-seconds', '6', '--hot-ttl', '1', '--flush-interval', '3600'] });
  for (let i = 1; i <= 3; i++) assert.equal((await post(s, 're', 'c')).seq, i);
  await flushAll(s, ['re']);
  await sleep(6200);
  for (let i = 4; i <= 5; i++) assert.equal((await post(s, 're', 'c')).seq, i);
  await flushAll(s, ['re']); // drops the first object (expired), writes the second
  await waitFor('retention', async () => (await stats(s, 're')).cold_messages === 2);
  await sleep(1200);
  const evicted = await metric(s, 'strata_hot_evictions_total');
  await s.req('POST', '/v1/admin/flush'); // evicts the idle conversation (its rows are all cold)
  await waitFor('eviction', async () => (await metric(s, 'strata_hot_evictions_total')) > evicted);
  const c = (await s.req('GET', '/v1/users/re/conversations/c')).json;
  assert.equal(c.total_messages, 2);
  assert.equal((await post(s, 're', 'c')).seq, 6, 're-warmed from cold: seq goes on from the highest issued');
  const seqs = (await readAll(s, 're')).map((m) => m.seq);
  assert.deepEqual(seqs, [4, 5, 6]);
  await s.stop();
  s.cleanup();
});

test('regression: a count repair does not move seq (a repeat after reconciliation)', async () => {
  const s = await startStrata({ args: ['--test-hooks', '1', '--flush-interval', '3600'] });
  for (let i = 1; i <= 3; i++) assert.equal((await post(s, 'rr', 'c')).seq, i);
  const d = await s.req('POST', '/v1/admin/test/drift', { user: 'rr', conversation_id: 'c', by: -2 });
  assert.equal(d.status, 200, d.text);
  assert.equal((await post(s, 'rr', 'c')).seq, 4);
  const up = await s.req('POST', '/v1/admin/test/drift', { user: 'rr', conversation_id: 'c', by: 5 });
  assert.equal(up.status, 200, up.text);
  const r = await s.req('POST', '/v1/admin/reconcile', { user: 'rr', conversation_id: 'c' });
  assert.equal(r.status, 200, r.text);
  assert.equal((await post(s, 'rr', 'c')).seq, 5);
  const seqs = (await readAll(s, 'rr')).map((m) => m.seq);
  assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
  assert.equal((await s.req('GET', '/v1/users/rr/conversations/c')).json.total_messages, 5);
  await s.stop();
  s.cleanup();
});

test('regression: listing conversations after retention + idle eviction answers 200 (it was 404), the same everywhere', async () => {
  // retention 4 s (2 s left the first object, and later the message 'back', under a second of
  // expiring on a loaded machine before the flushes that must not drop them)
  const s = await startStrata({ args: ['--retention-seconds', '4', '--hot-ttl', '1', '--flush-interval', '3600'] });
  for (let i = 0; i < 4; i++) await post(s, 'le', `c${1 + (i % 2)}`);
  const postedAt = Date.now();
  await flushAll(s, ['le']);
  await sleep(1200);
  await s.req('POST', '/v1/admin/flush'); // both conversations are idle and all cold: evicted
  await waitFor('eviction', async () => (await metric(s, 'strata_hot_evictions_total')) >= 2);
  await sleep(postedAt + 4300 - Date.now()); // the first object has expired
  await post(s, 'le', 'c2', 'back'); // c2 is re-warmed; c1 stays evicted
  await s.req('POST', '/v1/admin/flush'); // the first object expires: c1 is emptied
  await waitFor('retention and the flush', async () => {
    const st = await stats(s, 'le');
    return st.cold_messages === 1 && st.hot_messages === 0;
  });
  const check = async () => {
    const l = await s.req('GET', '/v1/users/le/conversations?limit=10');
    assert.equal(l.status, 200, l.text);
    const byId = Object.fromEntries(l.json.conversations.map((c) => [c.conversation_id, c]));
    assert.equal(byId.c2.total_messages, 1);
    assert.ok(byId.c1, 'an emptied conversation stays listed');
    assert.equal(byId.c1.total_messages, 0);
    const one = await s.req('GET', '/v1/users/le/conversations/c1');
    assert.equal(one.status, 200, one.text);
    assert.equal(one.json.total_messages, 0);
    const st = await stats(s, 'le');
    assert.deepEqual([st.conversations, st.total_messages], [2, 1]);
    // paging one at a time gives the same
    const paged = [];
    let cursor = null;
    do {
      const p = await s.req('GET', `/v1/users/le/conversations?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      assert.equal(p.status, 200, p.text);
      paged.push(...p.json.conversations);
      cursor = p.json.next;
    } while (cursor);
    assert.deepEqual(paged, l.json.conversations);
  };
  await check();
  await sleep(1200);
  await s.req('POST', '/v1/admin/flush'); // another eviction pass: c2 goes, c1 keeps its record
  await waitFor('c2 evicted', async () => (await metric(s, 'strata_hot_evictions_total')) >= 3);
  await check();
  assert.equal((await post(s, 'le', 'c1', 'again')).seq, 3, 'c1 goes on from its last seq');
  await s.stop();
  s.cleanup();
});

test('regression: user names of leading dots (85+ used to overflow a path component) flush, read back in DuckDB and rebuild', async () => {
  const dir = tempDir('dots');
  let s = await startStrata({ dataDir: dir, args: ['--flush-interval', '3600'] });
  const users = ['.'.repeat(200) + 'x', '.', '..', '.'.repeat(255), 'u'.repeat(255), 'plain'];
  const posted = {};
  for (const u of users) {
    posted[u] = [];
    for (let i = 0; i < 3; i++) posted[u].push((await post(s, u, `c${i}`)).msg_id);
  }
  await flushAll(s, users);
  for (const u of users) {
    const folder = u.startsWith('.') ? `~${u.slice(1)}` : u;
    const files = parquetFiles(path.join(dir, 'cold', folder));
    assert.equal(files.length, 1, u);
    for (const part of path.relative(dir, files[0]).split('/')) assert.ok(Buffer.byteLength(part) <= 255, part);
    assert.deepEqual((await duckRows(files)).map((r) => r.msg_id), posted[u], u);
    assert.deepEqual((await readAll(s, u)).map((m) => m.msg_id), posted[u], u);
  }
  assert.equal(await metric(s, 'strata_flush_stuck_users'), 0);
  await s.stop();
  for (const f of ['data.mdb', 'lock.mdb', 'strata.wal']) rmSync(path.join(dir, f), { force: true });
  const r = runStrata(['rebuild-meta', '--data-dir', dir, '--accept-loss']);
  assert.match(r.stderr, new RegExp(`rebuild-meta: ${users.length} users`));
  s = await startStrata({ dataDir: dir, args: ['--flush-interval', '3600'] });
  for (const u of users) assert.deepEqual((await readAll(s, u)).map((m) => m.msg_id), posted[u], u);
  await s.stop();
  s.cleanup();
});

test('a flush that can never succeed (a key longer than S3 allows) is reported once, not retried forever', async () => {
  const sdir = mkdtempSync(path.join(tmpdir(), 'strata-s3-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, directory: sdir, silent: true, configureBuckets: [{ name: 'cold' }] });
  const { port } = await server.run();
  const prefix = Array(4).fill('p'.repeat(220)).join('/'); // components a disk can hold
  const s = await startStrata({
    args: ['--cold-url', `s3://cold/${prefix}`, '--s3-endpoint', `http://127.0.0.1:${port}`,
      '--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER', '--flush-interval', '3600'],
  });
  try {
    const long = 'l'.repeat(200);
    for (let i = 0; i < 3; i++) await post(s, long, 'c');
    for (let i = 0; i < 3; i++) await post(s, 'short', 'c');
    await s.req('POST', '/v1/admin/flush');
    await waitFor('the stuck user reported', async () => (await metric(s, 'strata_flush_stuck_users')) === 1).catch((e) => { throw new Error(`${e.message}\n${s.log()}`); });
    await waitFor('the other user flushed', async () => (await stats(s, 'short')).cold_messages === 3);
    await sleep(2500); // a retry with backoff would have come by now
    await s.req('POST', '/v1/admin/flush'); // and asking again does not retry it either
    await sleep(300);
    const log = s.log();
    assert.equal(log.match(/can never be flushed/g)?.length, 1, log);
    assert.doesNotMatch(log, /could not delete|retrying in/, 'no retries of what cannot succeed');
    assert.equal(await metric(s, 'strata_flush_stuck_users'), 1);
    const st = await stats(s, long);
    assert.deepEqual([st.hot_messages, st.cold_messages], [3, 0], 'its messages stay hot and readable');
    assert.equal((await readAll(s, long)).length, 3);
  } finally {
    await s.stop();
    s.cleanup();
    await server.close();
    rmSync(sdir, { recursive: true, force: true });
  }
});

test('regression: a flipped bit in a cold page answers 503 cold_unavailable, never wrong data; DuckDB reads the intact file', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--cold-cache', '0'] });
  const posted = [];
  for (let i = 0; i < 30; i++) posted.push((await post(s, 'flip', `c${i % 2}`, `message ${i} ${'w'.repeat(i)}`)).msg_id);
  await flushAll(s, ['flip']);
  const [file] = parquetFiles(path.join(s.dir, 'cold', 'flip'));
  assert.deepEqual((await duckRows([file])).map((r) => r.msg_id), posted, 'DuckDB reads pages with CRCs');
  const good = readFileSync(file);
  const want = JSON.stringify(await readAll(s, 'flip'));
  const footer = good.readUInt32LE(good.length - 8);
  const dataEnd = good.length - 8 - footer;
  let wrong = 0, unavailable = 0;
  for (let at = 4; at < dataEnd; at += Math.max(1, Math.floor((dataEnd - 4) / 150))) {
    const bad = Buffer.from(good);
    bad[at] ^= 1 << (at % 8);
    writeFileSync(file, bad);
    const r = await s.req('GET', '/v1/users/flip/messages?limit=1000');
    if (r.status === 503) {
      assert.equal(r.json.error.code, 'cold_unavailable');
      unavailable++;
    } else {
      assert.equal(r.status, 200, r.text);
      if (JSON.stringify(r.json.messages) !== want) wrong++;
    }
  }
  writeFileSync(file, good);
  assert.equal(wrong, 0, `${wrong} flips answered 200 with wrong data (${unavailable} answered 503)`);
  assert.ok(unavailable > 100);
  assert.equal(JSON.stringify(await readAll(s, 'flip')), want, 'the intact file reads again');
  await s.stop();
  s.cleanup();
});
