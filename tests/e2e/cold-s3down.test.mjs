// SPDX-License-Identifier: MIT
// Flush passes while object storage fails (issue 48: failures are tested, not hoped for). The S3
// cold tier is s3rver in a process of its own behind a TCP proxy the test switches (s3-lib.mjs):
// - down before a pass (every connection refused) and down in the middle of one (a PUT cut after
//   its head, then nothing answered): posts go on being acknowledged while the pass cannot
//   write, hot reads answer exactly, a read that needs an unreachable object answers 503
//   cold_unavailable (not a hang, not a shorter list), /healthz stays 200 (the node takes writes:
//   SPEC §7) and /metrics counts the failed flushes; no object in the bucket is half written;
//   once storage is back every acknowledged message is read exactly once (hot and cold merged),
//   is in the Parquet objects once (DuckDB) and in the Iceberg table once (icebird);
// - slow, not down (the storage process SIGSTOPped as a pass's first PUT reaches it, for a few
//   seconds): the same, with nothing failing, and a flush asked for meanwhile is not lost (it
//   was, for the users whose flush was waiting: src/cold/flush.c);
// - a post to a conversation with no hot record: a new one is acknowledged with storage down (it
//   was refused: its owner's footers were read first), an evicted one is refused until storage
//   is back and then goes on from its cold seq, across a kill -9 and a rebuild-meta.
import assert from 'node:assert/strict';
import { readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { icebergRead } from 'icebird';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { runStrataAsync, sleep, startStrata, tempDir } from './lib.mjs';
import { frontProxy, s3Fetch, s3Process } from './s3-lib.mjs';

const USERS = ['dn0', 'dn1', 'dn2', 'dn3', 'dn4', 'dn5'];

const metric = async (s, re) => Number((await s.req('GET', '/metrics')).text.match(re)?.[1] ?? 0);
const flushErrors = (s) => metric(s, /^strata_flush_total\{result="error"\} (\d+)/m);
const stats = async (s, u) => (await s.req('GET', `/v1/users/${u}/stats`)).json;

async function readAll(s, u, q = {}) {
  const out = [];
  for (let cursor = null; ;) {
    const r = await s.req('GET', `/v1/users/${u}/messages?${new URLSearchParams({ limit: '500', ...q, ...(cursor ? { cursor } : {}) })}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.json.messages);
    if (!r.json.next) return out;
    cursor = r.json.next;
  }
}

// Posts round the users until stop(); every answer must be 201 (recorded in acked).
function writers(sv, acked, n = 4) {
  let on = true;
  let i = 0;
  const bad = [];
  const run = Array.from({ length: n }, async () => {
    while (on) {
      const k = i++;
      const u = USERS[k % USERS.length];
      const r = await sv().req('POST', `/v1/users/${u}/messages`, { conversation_id: `c${Math.floor(k / USERS.length) % 3}`, from: u, content: `m ${k}` });
      if (r.status === 201) acked.get(u).push(r.json.msg_id);
      else bad.push(`${r.status} ${r.text}`);
    }
  });
  return {
    count: () => [...acked.values()].reduce((a, l) => a + l.length, 0),
    async stop() {
      on = false;
      await Promise.all(run);
      assert.deepEqual(bad, [], 'every post acknowledged');
    },
  };
}

const args = (port) => ['--cold-url', 's3://bk/cold', '--s3-endpoint', `http://127.0.0.1:${port}`, '--s3-access-key', 'S3RVER',
  '--s3-secret-key', 'S3RVER', '--flush-interval', '3600', '--table-commit-interval', '1', '--cold-retries', '0'];

// Everything acknowledged, exactly once: the API (hot and cold merged), the objects (DuckDB), the
// Iceberg table's current snapshot (icebird).
// flush: ask for a flush first (false: the test asked for one already, and that one must do).
async function exactlyOnce(s, bucketDir, acked, { flush = true } = {}) {
  if (flush) assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  for (const u of USERS)
    await waitFor(`${u} flushed`, async () => { const st = await stats(s, u); return st.hot_messages === 0 && st.cold_messages === acked.get(u).length; }, 45000);
  const all = [];
  for (const u of USERS) {
    const want = [...acked.get(u)].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
    assert.deepEqual((await readAll(s, u)).map((m) => m.msg_id), want, `${u}: every acknowledged message once`);
    all.push(...want);
  }
  all.sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
  // every object opens, and together they hold each message once (orphans are deleted before
  // the user's next flush, which the one above was)
  const files = parquetFiles(path.join(bucketDir, 'bk', 'cold')).filter((f) => !f.includes('/_tables/'));
  assert.deepEqual((await duckRows(files)).map((r) => r.msg_id), all, 'the objects hold each message once');
  const meta = path.join(bucketDir, 'bk', 'cold', '_tables', 'messages', 'metadata');
  await waitFor('the table committed', async () => (await s.req('GET', '/v1/admin/tables')).json.tables.find((t) => t.table === 'messages').pending === 0, 30000);
  const v = Math.max(...readdirSync(meta).map((n) => /^v(\d+)\.metadata\.json\._S3rver_object$/.exec(n)?.[1] ?? 0).map(Number));
  const restore = s3Fetch(bucketDir);
  let rows;
  try {
    rows = await icebergRead({ tableUrl: 's3://bk/cold/_tables/messages', metadataFileName: `v${v}.metadata.json` });
  } finally {
    restore();
  }
  assert.deepEqual(rows.map((r) => String(r.msg_id)).sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)), all, `v${v} holds each message once`);
}

test('storage down before a pass and in the middle of one: posts acknowledged, reads answer or 503, nothing lost or doubled once it is back', { timeout: 120000 }, async () => {
  const bucketDir = tempDir('s3down');
  const s3 = await s3Process(bucketDir);
  const front = await frontProxy(s3.port);
  const dataDir = tempDir();
  const acked = new Map(USERS.map((u) => [u, []]));
  let s = await startStrata({ dataDir, args: [...args(front.port), '--cold-timeout-ms', '1500'] });
  let w;
  const shown = [];
  try {
    // each user's three conversations get a hot record here (a record stays hot until the
    // conversation idles for --hot-ttl): the writers below post to conversations known hot
    for (const u of USERS)
      for (let i = 0; i < 10; i++) {
        const r = await s.req('POST', `/v1/users/${u}/messages`, { conversation_id: `c${i % 3}`, from: u, content: `cold ${i}` });
        assert.equal(r.status, 201, r.text);
        acked.get(u).push(r.json.msg_id);
      }
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    for (const u of USERS) await waitFor(`${u} cold`, async () => (await stats(s, u)).cold_messages === 10);
    const lastCold = new Map(USERS.map((u) => [u, acked.get(u).at(-1)]));
    // a restart: nothing of the objects in memory, reads of cold data must reach storage
    await s.stop();
    s = await startStrata({ dataDir, args: [...args(front.port), '--cold-timeout-ms', '1500'] });
    w = writers(() => s, acked);

    // down before the pass
    front.set('refuse');
    const n0 = w.count();
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('a failed flush', async () => (await flushErrors(s)) >= 1);
    await waitFor('posts acknowledged meanwhile', async () => w.count() >= n0 + 30);
    for (const u of USERS.slice(0, 2)) {
      const r = await s.req('GET', `/v1/users/${u}/messages?limit=500`);
      assert.equal(r.status, 503, `a read needing an unreachable object: ${r.text}`);
      assert.equal(r.json.error.code, 'cold_unavailable');
      // the hot part alone answers, exactly what was acknowledged after the cold part
      const before = acked.get(u).slice(10);
      const hot = (await readAll(s, u, { after: lastCold.get(u) })).map((m) => m.msg_id);
      const got = new Set(hot);
      assert.equal(got.size, hot.length, `${u}: no message twice`);
      for (const id of before) assert.ok(got.has(id), `${u}: acknowledged ${id} read back`);
      shown.push([u, hot]); // checked against everything acknowledged once the writers stop
    }
    let h = await s.req('GET', '/healthz');
    assert.equal(h.status, 200, `writes are taken: not degraded (SPEC §7): ${h.text}`);
    assert.ok((await metric(s, /^strata_flush_pending (\d+)/m)) >= 1, 'the failed owners wait for a retry');

    // back for a moment, then cut in the middle of the next pass's first object
    front.cutAt(/^PUT \/bk\/cold\/dn\d\/batch-/);
    front.set('pass');
    const e1 = await flushErrors(s);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('a PUT cut half way', async () => front.mode === 'blackhole', 30000);
    const n1 = w.count();
    await waitFor('posts acknowledged while storage answers nothing', async () => w.count() >= n1 + 30);
    const r = await s.req('GET', `/v1/users/${USERS[2]}/messages?limit=500`);
    assert.equal(r.status, 503, `a read needing an unanswered object: ${r.text}`);
    assert.equal(r.json.error.code, 'cold_unavailable');
    await waitFor('the cut flush failed', async () => (await flushErrors(s)) > e1, 30000);
    h = await s.req('GET', '/healthz');
    assert.equal(h.status, 200, h.text);
    // no object half written: every one in the bucket opens and reads whole
    const objs = parquetFiles(path.join(bucketDir, 'bk', 'cold')).filter((f) => !f.includes('/_tables/'));
    for (const f of objs) await duckRows([f]);

    // back for good
    front.set('pass');
    await sleep(200);
    await w.stop();
    w = null;
    for (const [u, hot] of shown) {
      const all = new Set(acked.get(u));
      for (const id of hot) assert.ok(all.has(id), `${u}: ${id} was shown but never acknowledged`);
    }
    await exactlyOnce(s, bucketDir, acked);
  } catch (e) {
    console.error(s.log().slice(-6000));
    throw e;
  } finally {
    if (w) await w.stop().catch(() => {});
    await s.stop();
    s.cleanup();
    await front.close();
    await s3.stop();
  }
});

test('storage stopped (SIGSTOP) as a pass writes its first object: posts acknowledged meanwhile, all flushed exactly once after SIGCONT', { timeout: 120000 }, async () => {
  const bucketDir = tempDir('s3stop');
  const s3 = await s3Process(bucketDir);
  const front = await frontProxy(s3.port);
  const acked = new Map(USERS.map((u) => [u, []]));
  const s = await startStrata({ args: args(front.port) });
  const w = writers(() => s, acked);
  let stopped = false;
  try {
    await waitFor('posts', async () => w.count() >= 120);
    front.onFirst(/^PUT \/bk\/cold\/dn\d\/batch-/, () => { s3.pause(); stopped = true; });
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('storage stopped under a pass', async () => stopped, 30000);
    const n = w.count();
    await waitFor('posts acknowledged while storage is stopped', async () => w.count() >= n + 30);
    assert.equal((await s.req('GET', '/healthz')).status, 200);
    await sleep(3000); // a few seconds stopped
    await w.stop();
    // a flush asked for while the pass's flushes wait for storage covers every post before it
    // (it was dropped for the owners whose flush was in flight: their later rows stayed hot)
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    s3.resume();
    await exactlyOnce(s, bucketDir, acked, { flush: false });
  } catch (e) {
    console.error(s.log().slice(-6000));
    console.error((await s.req('GET', '/metrics')).text.split('\n').filter((l) => /flush|table/.test(l) && !l.startsWith('#')).join('\n'));
    for (const u of USERS) console.error(u, acked.get(u).length, JSON.stringify(await stats(s, u)));
    throw e;
  } finally {
    s3.resume();
    await w.stop().catch(() => {});
    await s.stop();
    s.cleanup();
    await front.close();
    await s3.stop();
  }
});

// A post to a conversation with no hot record: new, or evicted (its rows all cold, its record
// dropped after --hot-ttl). It read the footers of all the owner's objects to tell which, so with
// storage down a post to a new conversation was refused 503 cold_unavailable, and with storage
// slow it waited (SPEC §7). The hot store now knows which conversations may have cold rows
// (src/chat/marks.c): a new one is acknowledged without storage; an evicted one still needs its
// footers, and is refused rather than restarted at seq 1.
test('a post to a new conversation while storage is down is acknowledged', { timeout: 60000 }, async () => {
  const bucketDir = tempDir('s3newconv');
  const s3 = await s3Process(bucketDir);
  const front = await frontProxy(s3.port);
  const dataDir = tempDir();
  let s = await startStrata({ dataDir, args: args(front.port) });
  try {
    for (let i = 0; i < 3; i++) assert.equal((await s.req('POST', '/v1/users/nc/messages', { conversation_id: 'old', from: 'nc', content: `m ${i}` })).status, 201);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('cold', async () => (await stats(s, 'nc')).cold_messages === 3);
    await s.stop();
    s = await startStrata({ dataDir, args: [...args(front.port), '--cold-timeout-ms', '1500'] });
    front.set('refuse');
    const r = await s.req('POST', '/v1/users/nc/messages', { conversation_id: 'new', from: 'nc', content: 'x' });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.seq, 1);
    const c = await s.req('GET', '/v1/users/nc/conversations/new');
    assert.equal(c.status, 200, c.text);
    assert.equal(c.json.total_messages, 1);
  } finally {
    await s.stop();
    s.cleanup();
    await front.close();
    await s3.stop();
  }
});

const convOf = (s, u, c) => s.req('GET', `/v1/users/${u}/conversations/${c}`);
const postTo = (s, u, c, content = 'x') => s.req('POST', `/v1/users/${u}/messages`, { conversation_id: c, from: u, content });

// Evicts every idle conversation whose rows are all cold (--hot-ttl 1): at least `n` more.
async function evict(s, n) {
  const before = await metric(s, /^strata_hot_evictions_total (\d+)/m);
  await sleep(1200); // idle past --hot-ttl
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor('eviction', async () => (await metric(s, /^strata_hot_evictions_total (\d+)/m)) >= before + n);
}

// With storage down: the evicted conversation `ev` (cold seqs 1..seq) is refused, never restarted
// at seq 1; a conversation never posted to (`fresh`) is acknowledged at seq 1. Then storage up:
// `ev` goes on at seq + 1, its total_messages counting its cold rows.
async function downThenUp(s, front, u, seq, fresh) {
  front.set('refuse');
  const r = await postTo(s, u, 'ev');
  assert.equal(r.status, 503, `an evicted conversation needs its footers, never restarts: ${r.text}`);
  assert.equal(r.json.error.code, 'cold_unavailable');
  const n = await postTo(s, u, fresh);
  assert.equal(n.status, 201, `a new conversation needs no cold read: ${n.text}`);
  assert.equal(n.json.seq, 1);
  front.set('pass');
  const e = await postTo(s, u, 'ev');
  assert.equal(e.status, 201, e.text);
  assert.equal(e.json.seq, seq + 1, 'seq goes on from the cold rows');
  assert.equal((await convOf(s, u, 'ev')).json.total_messages, seq + 1);
}

test('an evicted conversation posted to with storage down and up keeps its seq and total; kill -9 after the eviction; rebuild-meta keeps the markers', { timeout: 120000 }, async () => {
  const bucketDir = tempDir('s3evict');
  const s3 = await s3Process(bucketDir);
  const front = await frontProxy(s3.port);
  const dataDir = tempDir();
  const a = (...more) => [...args(front.port), '--hot-ttl', '1', '--cold-timeout-ms', '1500', ...more];
  let s = await startStrata({ dataDir, args: a() });
  try {
    for (let i = 1; i <= 3; i++) assert.equal((await postTo(s, 'ek', 'ev', `m ${i}`)).json.seq, i);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('cold', async () => (await stats(s, 'ek')).cold_messages === 3);
    await evict(s, 1);
    // kill -9 between the eviction and the post: the restart has no footer in memory
    await sleep(300); // the eviction's batch durable (checked below: the record is gone)
    await s.kill9();
    s = await startStrata({ dataDir, args: a() });
    front.set('refuse');
    const g = await convOf(s, 'ek', 'ev');
    assert.equal(g.status, 503, `evicted: its fields need the footers: ${g.text}`);
    await downThenUp(s, front, 'ek', 3, 'fresh');

    // a store rebuilt from the cold tier alone (rebuild-meta --accept-loss): the markers and the
    // owner's "complete" come from the objects' footers
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('all cold', async () => (await stats(s, 'ek')).hot_messages === 0);
    await waitFor('the table committed', async () => (await s.req('GET', '/v1/admin/tables')).json.tables.find((t) => t.table === 'messages').pending === 0, 30000);
    await s.stop();
    const rebuilt = tempDir();
    const rb = await runStrataAsync(['rebuild-meta', '--data-dir', rebuilt, '--accept-loss', ...args(front.port)]);
    assert.equal(rb.code, 0, rb.err);
    s = await startStrata({ dataDir: rebuilt, args: a() });
    assert.equal((await convOf(s, 'ek', 'ev')).json.total_messages, 4);
    await evict(s, 2); // ev and fresh: rebuilt hot, idle, all cold
    await s.stop();
    s = await startStrata({ dataDir: rebuilt, args: a() });
    await downThenUp(s, front, 'ek', 4, 'brand');
    // fresh was evicted too: with storage down it is answered from the footers read just now
    // (in memory) or refused, never restarted
    front.set('refuse');
    const f = await postTo(s, 'ek', 'fresh');
    front.set('pass');
    if (f.status !== 201) assert.equal(f.json?.error?.code, 'cold_unavailable', f.text);
    else assert.equal(f.json.seq, 2, 'fresh goes on from its cold row');
    const f2 = await postTo(s, 'ek', 'fresh');
    assert.equal(f2.json.seq, f.status === 201 ? 3 : 2);
    assert.equal((await convOf(s, 'ek', 'fresh')).json.total_messages, f2.json.seq);
  } catch (e) {
    console.error(s.log().slice(-6000));
    throw e;
  } finally {
    front.set('pass');
    await s.stop();
    s.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
    await front.close();
    await s3.stop();
  }
});
