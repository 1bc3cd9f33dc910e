// SPDX-License-Identifier: MIT
// The hot store's marks of conversations with cold rows (src/chat/marks.c, issue 48; SPEC §7: no
// request waits on object storage): where they were left incomplete, a post to a conversation
// with no hot record read its owner's footers, so with object storage down it was refused 503.
// - a deleted conversation kept its mark: a post re-creating it read the footers. Its delete now
//   takes the mark out (every row of it is masked from then on), and the re-created one goes on
//   from the deleted one's last seq (SPEC §2: a seq is never issued twice in a conversation).
// Object storage is s3rver behind a proxy the test switches to refuse (s3-lib.mjs, as in
// cold-s3down.test.mjs); each server is restarted before storage goes down, so no footer is in
// its memory.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renameSync } from 'node:fs';
import path from 'node:path';
import { parquetFiles, waitFor } from './cold-lib.mjs';
import { startStrata, tempDir, withServer } from './lib.mjs';
import { frontProxy, s3Process } from './s3-lib.mjs';

const args = (port) => ['--cold-url', 's3://bk/cold', '--s3-endpoint', `http://127.0.0.1:${port}`, '--s3-access-key', 'S3RVER',
  '--s3-secret-key', 'S3RVER', '--flush-interval', '3600', '--table-commit-interval', '1', '--cold-retries', '0',
  '--cold-timeout-ms', '1500'];
const stats = async (s, u) => (await s.req('GET', `/v1/users/${u}/stats`)).json;
const postTo = (s, u, c, content = 'x') => s.req('POST', `/v1/users/${u}/messages`, { conversation_id: c, from: u, content });

test('a deleted conversation with cold rows, re-created while storage is down: acknowledged, its seq going on', { timeout: 90000 }, async () => {
  const s3 = await s3Process(tempDir('s3delconv'));
  const front = await frontProxy(s3.port);
  const dataDir = tempDir();
  let s = await startStrata({ dataDir, args: args(front.port) });
  try {
    for (let i = 1; i <= 3; i++) assert.equal((await postTo(s, 'dl', 'gone', `m ${i}`)).json.seq, i);
    assert.equal((await postTo(s, 'dl', 'kept')).status, 201);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('cold', async () => (await stats(s, 'dl')).cold_messages === 4);
    const d = await s.req('DELETE', '/v1/users/dl/conversations/gone');
    assert.equal(d.status, 200, d.text);
    assert.equal(d.json.deleted, 3);
    // its rows are still in the object (masked until a fold rewrites it): a re-created
    // conversation's seq comes from the delete's record of its last, not from them
    await s.stop();
    s = await startStrata({ dataDir, args: args(front.port) });
    front.set('refuse');
    const r = await postTo(s, 'dl', 'gone');
    assert.equal(r.status, 201, `a deleted conversation's name needs no cold read: ${r.text}`);
    assert.equal(r.json.seq, 4, 'the seq goes on from the deleted one (never issued twice)');
    const c = await s.req('GET', '/v1/users/dl/conversations/gone');
    assert.equal(c.status, 200, c.text);
    assert.equal(c.json.total_messages, 1, 'the deleted messages are not counted');
    front.set('pass');
    const k = await postTo(s, 'dl', 'kept');
    assert.equal(k.json.seq, 2, k.text);
  } catch (e) {
    console.error(s.log().slice(-6000));
    throw e;
  } finally {
    front.set('pass');
    await s.stop();
    s.cleanup();
    await front.close();
    await s3.stop();
  }
});

// - an owner whose objects were written before the marks (no 'L') kept the footer read until
//   rebuild-meta: the server now writes its marks in the background (src/chat/backfill.c), once
//   object storage answers, and then a new conversation of it needs no cold read while an evicted
//   one still needs its footers (refused with storage down, never restarted at seq 1).
// The old store is made by this binary with STRATA_TEST_NO_MARKS=1 (it writes no marks, as
// releases before them did), or by such a release's binary when STRATA_PREMARKS_BIN names one
// (c679f39's: `git archive c679f39 | tar -x -C DIR`, then build it).
const PREMARKS = process.env.STRATA_PREMARKS_BIN;
const premarks = PREMARKS ? { bin: PREMARKS } : { env: { STRATA_TEST_NO_MARKS: '1' } };
const metric = async (s, re) => Number((await s.req('GET', '/metrics')).text.match(re)?.[1] ?? -1);

test('the marks of an owner from before them are written in the background', { timeout: 120000 }, async () => {
  const s3 = await s3Process(tempDir('s3backfill'));
  const front = await frontProxy(s3.port);
  const dataDir = tempDir();
  const a = [...args(front.port), '--hot-ttl', '1'];
  let s = await startStrata({ dataDir, args: a, ...premarks });
  try {
    for (let i = 1; i <= 3; i++) assert.equal((await postTo(s, 'bf', 'old', `m ${i}`)).json.seq, i);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('cold', async () => (await stats(s, 'bf')).cold_messages === 3);
    // idle past --hot-ttl, then a pass evicts the conversation (all its rows cold)
    await new Promise((r) => setTimeout(r, 1200));
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('eviction', async () => (await metric(s, /^strata_hot_evictions_total (\d+)/m)) >= 1);
    await s.stop();

    // the new binary with storage down: no marks yet, so a new conversation needs the footers
    front.set('refuse');
    s = await startStrata({ dataDir, args: a });
    await waitFor('the backfill found the owner', async () => (await metric(s, /^strata_marks_backfill_pending (\d+)/m)) === 1);
    const r0 = await postTo(s, 'bf', 'first');
    assert.equal(r0.status, 503, `an owner from before the marks: ${r0.text}`);
    assert.equal((await metric(s, /^strata_marks_backfill_done (\d+)/m)), 0);
    // storage back: the backfill retries and writes the owner's marks
    front.set('pass');
    await waitFor('the backfill done', async () => (await metric(s, /^strata_marks_backfill_done (\d+)/m)) === 1, 30000);
    assert.equal(await metric(s, /^strata_marks_backfill_pending (\d+)/m), 0);
    assert.equal(await metric(s, /^strata_marks_backfilled_total (\d+)/m), 1);
    await s.stop();

    // restarted (no footer in memory), storage down
    s = await startStrata({ dataDir, args: a });
    front.set('refuse');
    const n = await postTo(s, 'bf', 'second');
    assert.equal(n.status, 201, `a new conversation needs no cold read once marked: ${n.text}`);
    assert.equal(n.json.seq, 1);
    const e = await postTo(s, 'bf', 'old');
    assert.equal(e.status, 503, `an evicted conversation needs its footers, never restarts: ${e.text}`);
    assert.equal(e.json.error.code, 'cold_unavailable');
    front.set('pass');
    const e2 = await postTo(s, 'bf', 'old');
    assert.equal(e2.status, 201, e2.text);
    assert.equal(e2.json.seq, 4, 'seq goes on from the cold rows');
  } catch (e) {
    console.error(s.log().slice(-6000));
    throw e;
  } finally {
    front.set('pass');
    await s.stop();
    s.cleanup();
    await front.close();
    await s3.stop();
  }
});

// n owners on s (PREFIX00, PREFIX01 …, in that order by name), one post each, flushed until every
// one's row is cold: the backfill's pages (32 owners) of the two tests below. Returns their names.
async function coldOwners(s, prefix, n) {
  const users = Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);
  for (const u of users) assert.equal((await postTo(s, u, 'c')).status, 201);
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor('cold', async () => {
    for (const u of users) if ((await stats(s, u)).cold_messages !== 1) return false;
    return true;
  });
  return users;
}

// - one object lost for good (404) held the backfill at its page: every owner after that page
//   kept the footer read. A page that failed ST__BF_FAILS (5) times in a row, 5 s apart, is now
//   passed over, its owners left for the next walk.
test('an object lost for good holds back no owner on a later page of the backfill', { timeout: 120000 }, async () => {
  const dataDir = tempDir();
  const a = ['--flush-interval', '3600'];
  let s = await startStrata({ dataDir, args: a, ...premarks });
  await withServer(() => s, async () => {
    // 40 owners: more than a page (32), the first by name to lose its object
    const users = await coldOwners(s, 'lost', 40);
    await s.stop();
    const [obj] = parquetFiles(path.join(dataDir, 'cold', users[0]));
    assert.ok(obj, 'the flush wrote an object');
    renameSync(obj, `${obj}.away`);
    s = await startStrata({ dataDir, args: a });
    // every owner but the one whose object is lost gets its marks, those past the first page too
    await waitFor('the other owners marked', async () =>
      (await metric(s, /^strata_marks_backfilled_total (\d+)/m)) === users.length - 1, 80000);
    assert.equal(await metric(s, /^strata_marks_backfill_done (\d+)/m), 0, 'the lost one is still owed');
  });
});

// - one owner's objects were all read and marked in one loop turn (an owner of thousands made one
//   long turn: issue 48's bar is a longest turn under 5 ms), and every start walked all owners
//   again, long after the backfill was done. An owner is now marked a row group at a time within
//   the turn's budget, 'L' in the turn that reads its manifest again; where the walk is (or that it
//   is done) is a record written with the walk's batches.
const many = ['--flush-interval', '3600', '--flush-rows', '100000000', '--compact-objects', '1000000'];

test('an owner of many objects gets every conversation marked; a start after the backfill walks nothing', { timeout: 180000 }, async () => {
  const dataDir = tempDir();
  let s = await startStrata({ dataDir, args: many, ...premarks });
  const convs = new Set();
  await withServer(() => s, async () => {
    // one object a flush (compaction off): 150 objects, 2 conversations' rows in each
    for (let f = 0; f < 150; f++) {
      for (const c of [`c${f % 60}`, `d${f % 7}`]) {
        assert.equal((await postTo(s, 'many', c)).status, 201);
        convs.add(c);
      }
      assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
      await waitFor('cold', async () => (await stats(s, 'many')).hot_messages === 0);
    }
    await s.stop();
    // with --hot-ttl 1 from here (a conversation evicted while the flushes went on was warmed
    // again by its next post): idle past it, the next pass evicts every one
    s = await startStrata({ dataDir, args: [...many, '--hot-ttl', '1'], ...premarks });
    await new Promise((r) => setTimeout(r, 1200));
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('eviction', async () => (await metric(s, /^strata_hot_evictions_total (\d+)/m)) === convs.size);
    await s.stop();
    assert.equal(parquetFiles(path.join(dataDir, 'cold', 'many')).length, 150);

    s = await startStrata({ dataDir, args: many });
    await waitFor('the backfill done', async () => (await metric(s, /^strata_marks_backfill_done (\d+)/m)) === 1, 60000);
    assert.equal(await metric(s, /^strata_marks_backfilled_total (\d+)/m), 1);
    await s.stop();

    // started again: done at once, no owner looked at (before, each start walked them all)
    s = await startStrata({ dataDir, args: many });
    assert.equal(await metric(s, /^strata_marks_backfill_done (\d+)/m), 1, 'the walk done before this start');
    assert.equal(await metric(s, /^strata_marks_backfill_checked_total (\d+)/m), 0, 'no owner walked');
    assert.equal(await metric(s, /^strata_marks_backfill_pending (\d+)/m), 0);
    // object storage gone for the owner: a new conversation needs no footer (its marks complete),
    // and every evicted one is marked: it needs its footers, never restarts at seq 1
    renameSync(path.join(dataDir, 'cold', 'many'), path.join(dataDir, 'cold', 'many.away'));
    const n = await postTo(s, 'many', 'new');
    assert.equal(n.status, 201, `a new conversation of a marked owner: ${n.text}`);
    assert.equal(n.json.seq, 1);
    for (const c of convs) {
      const e = await postTo(s, 'many', c);
      assert.equal(e.status, 503, `${c} has cold rows: its mark says so (${e.text})`);
    }
    assert.equal(await metric(s, /^strata_marks_backfill_checked_total (\d+)/m), 0);
  });
});

test('a start in the middle of the backfill goes on at its page', { timeout: 180000 }, async () => {
  const dataDir = tempDir();
  const a = ['--flush-interval', '3600'];
  let s = await startStrata({ dataDir, args: a, ...premarks });
  await withServer(() => s, async () => {
    // 40 owners: a page of 32, then 8; one of the second page's object lost, so the walk stays
    // there (a page that fails is tried again, 5 s apart, 5 times)
    const users = await coldOwners(s, 'mid', 40);
    await s.stop();
    const [obj] = parquetFiles(path.join(dataDir, 'cold', users[35]));
    renameSync(obj, `${obj}.away`);

    s = await startStrata({ dataDir, args: a });
    await waitFor('the first page and the second but one marked', async () =>
      (await metric(s, /^strata_marks_backfilled_total (\d+)/m)) === users.length - 1 &&
      (await metric(s, /^strata_marks_backfill_pending (\d+)/m)) === 1, 60000);
    assert.equal(await metric(s, /^strata_marks_backfill_checked_total (\d+)/m), users.length);
    await s.stop();

    // started again: the walk goes on at the second page; the first one's 32 are not looked at
    s = await startStrata({ dataDir, args: a });
    await waitFor('the lost one found again', async () => (await metric(s, /^strata_marks_backfill_pending (\d+)/m)) === 1, 60000);
    assert.equal(await metric(s, /^strata_marks_backfill_checked_total (\d+)/m), 8, 'only the second page walked');
    assert.equal(await metric(s, /^strata_marks_backfill_done (\d+)/m), 0);
    // its object back: the walk ends, then once more from the first page, and is done
    renameSync(`${obj}.away`, obj);
    await waitFor('the backfill done', async () => (await metric(s, /^strata_marks_backfill_done (\d+)/m)) === 1, 80000);
    assert.equal(await metric(s, /^strata_marks_backfilled_total (\d+)/m), 1);
  });
});

// - the backfill kept the owner it was marking (its manifest, its footers pinned) across turns and
//   never read the manifest again before marking the next object: an owner erased in between (its
//   'G' come and gone: a whole erasure during a fetch or a retry, or on another leader) got 'R'
//   marks naming it written after its erasure, kept for good. Each object is now looked up
//   before it is marked. STRATA_TEST_BF_HOLD_MS holds the walk after each object of an owner.
test('an owner erased while the backfill holds it gets no marks after its erasure', { timeout: 180000 }, async () => {
  const dataDir = tempDir();
  let s = await startStrata({ dataDir, args: many, ...premarks });
  await withServer(() => s, async () => {
    // two objects (compaction off): 'a' in the first, 'b' in the second
    for (const c of ['a', 'b']) {
      assert.equal((await postTo(s, 'gx', c)).status, 201);
      assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
      await waitFor('cold', async () => (await stats(s, 'gx')).hot_messages === 0);
    }
    await s.stop();
    assert.equal(parquetFiles(path.join(dataDir, 'cold', 'gx')).length, 2);

    // the backfill marks the first object, then holds; the whole erasure fits in the hold
    s = await startStrata({ dataDir, args: many, env: { STRATA_TEST_BF_HOLD_MS: '20000' } });
    await waitFor('the backfill holds at gx', async () => s.log().includes('marks backfill holds'), 60000);
    const r = await s.req('DELETE', '/v1/users/gx');
    assert.equal(r.status, 202, r.text);
    await waitFor('the erasure done', async () =>
      (await s.req('GET', `/v1/admin/erasures/${r.json.erasure_id}`)).json.status === 'done', 60000);
    assert.equal(await metric(s, /^strata_marks_backfill_done (\d+)/m), 0, 'still held when the erasure ended');
    // the walk goes on with gx (its second object next), then ends: nothing of gx is left
    await waitFor('the backfill done', async () => (await metric(s, /^strata_marks_backfill_done (\d+)/m)) === 1, 60000);
    assert.equal(await metric(s, /^strata_marks_backfilled_total (\d+)/m), 0);
    // gx again: its first flush completes its marks ('L'); a mark left of the erased 'b' would
    // send a post to 'b' to gx's footers
    assert.equal((await postTo(s, 'gx', 'new')).status, 201);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('cold', async () => (await stats(s, 'gx')).cold_messages === 1);
    await s.stop();
    s = await startStrata({ dataDir, args: many });
    renameSync(path.join(dataDir, 'cold', 'gx'), path.join(dataDir, 'cold', 'gx.away'));
    const b = await postTo(s, 'gx', 'b');
    assert.equal(b.status, 201, `no mark of the erased user's conversation: ${b.text}`);
    assert.equal(b.json.seq, 1);
  });
});
