// SPDX-License-Identifier: MIT
// The tables' commit works on the event loop in slices (issue 48; SPEC §7: the loop never waits,
// its longest stall stays under 5 ms): the view of the changed owners before a commit's worker job
// and the job's writes after it. With a slice budget of 0 (STRATA_TEST_TABLES_SLICE_NS, tests
// only) each slice reads one owner's records or stages one write, so a commit of USERS owners
// takes many loop turns, and flushes and an erasure land between its slices. Every snapshot kept
// holds each file once (avsc over the manifests; icebird reads each post once), `pending` goes to
// 0, the erased user is in no file of the tables, and a restart finds no commit cut off (it reads
// no file record: no whole view). A stop while a commit works in slices exits cleanly.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { icebergRead } from 'icebird';
import { erasureDone, filesHolding, waitFor } from './cold-lib.mjs';
import { avroRecords, serveFiles } from './iceberg-lib.mjs';
import { ok } from './backup-lib.mjs';
import { startStrata } from './lib.mjs';

// no compaction: a restart's compaction of every owner would read them again (not a whole view)
const ARGS = ['--flush-interval', '3600', '--table-commit-interval', '1', '--compact-objects', '1000'];
const ENV = { STRATA_TEST_TABLES_SLICE_NS: '0' };
const USERS = 40;
const GONE = 'zqsliceerasedzq';

const metaDir = (cold) => path.join(cold, '_tables', 'messages', 'metadata');
const hint = (cold) => Number(readFileSync(path.join(metaDir(cold), 'version-hint.text'), 'utf8'));
const metadata = (cold) => JSON.parse(readFileSync(path.join(metaDir(cold), `v${hint(cold)}.metadata.json`), 'utf8'));
const records = (uri) => avroRecords(readFileSync(new URL(uri))).records;
const metric = async (s, name) => {
  const m = (await ok(s, 'GET', '/metrics')).text.match(new RegExp(`^${name} (\\d+)`, 'm'));
  assert.ok(m, `${name} is in /metrics`);
  return Number(m[1]);
};
const tables = async (s) => (await ok(s, 'GET', '/v1/admin/tables')).json.tables;
const post = (s, u, content) => ok(s, 'POST', `/v1/users/${u}/messages`, { conversation_id: 'c', from: 'a', content }, {}, 201);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Every snapshot the metadata keeps: each live file (entries not DELETED, over every manifest of
// its list) named once. Returns the current snapshot's files.
function checkSnapshots(cold) {
  const m = metadata(cold);
  let cur = null;
  for (const snap of m.snapshots) {
    const files = records(snap['manifest-list']).flatMap((mf) => records(mf.manifest_path))
      .filter((e) => e.status !== 2).map((e) => e.data_file.file_path);
    assert.equal(new Set(files).size, files.length, `snapshot ${snap['snapshot-id']} names each file once`);
    assert.equal(Number(snap.summary['total-data-files']), files.length, 'its summary counts them');
    if (snap['snapshot-id'] === m['current-snapshot-id']) cur = files;
  }
  assert.ok(cur, 'a current snapshot');
  return cur;
}

async function rows(cold) {
  const restore = serveFiles();
  try {
    return (await icebergRead({ tableUrl: metadata(cold).location, metadataFileName: `v${hint(cold)}.metadata.json` }))
      .map((r) => r.content).sort();
  } finally {
    restore();
  }
}

// No flush running or waiting, every table committed with nothing pending, no lag.
const settled = (s) => waitFor('everything committed', async () =>
  (await metric(s, 'strata_flush_running')) === 0 && (await metric(s, 'strata_flush_pending')) === 0 &&
  (await tables(s)).every((t) => t.pending === 0) && (await tables(s))[0].snapshot_id !== null &&
  (await metric(s, 'strata_table_commit_lag_seconds')) === 0, 60000);

test('a commit in slices, with flushes and an erasure landing between them: each file once in every snapshot, pending 0', async () => {
  let s = await startStrata({ args: ARGS, env: ENV });
  const cold = path.join(s.dir, 'cold');
  const want = [];
  try {
    for (let i = 0; i < USERS; i++) {
      await post(s, `sl-u${i}`, `sl-u${i} first`);
      want.push(`sl-u${i} first`);
    }
    await post(s, GONE, `${GONE} first`);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await settled(s);
    const slices = await metric(s, 'strata_table_commit_slices_total');
    assert.ok(slices > USERS, `the commit of ${USERS + 1} owners took ${slices} loop turns: one owner a slice`);
    assert.equal(checkSnapshots(cold).length, USERS + 1);
    assert.deepEqual(await rows(cold), [...want, `${GONE} first`].sort());

    // flushes of some of the owners again and of new ones, one after another without waiting for
    // the commits (their slices run meanwhile), and the erasure of one user among them
    for (let r = 0; r < 8; r++) {
      for (let i = 0; i < USERS + 8; i++) {
        await post(s, `sl-u${i}`, `sl-u${i} round ${r}`);
        want.push(`sl-u${i} round ${r}`);
      }
      if (r === 2) await post(s, GONE, `${GONE} again`);
      await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
      if (r === 4) {
        const eid = (await ok(s, 'DELETE', `/v1/users/${GONE}`, undefined, {}, 202)).json.erasure_id;
        await erasureDone(s, eid, { ms: 30000 });
      }
    }
    await settled(s);
    assert.ok((await metric(s, 'strata_table_commit_slices_total')) > slices);
    const files = checkSnapshots(cold);
    assert.deepEqual(await rows(cold), want.sort(), 'every post once, none of the erased user');
    assert.deepEqual(filesHolding(path.join(cold, '_tables'), GONE), [], 'no file names the erased user');
    assert.equal(await metric(s, 'strata_tables_pending_repairs_total'), 0, 'no pending count drifted');

    // a restart: the last commit's writes all landed (no marker of writes cut off): no whole view
    await s.stop();
    s = await startStrata({ dataDir: s.dir, args: ARGS, env: ENV });
    await sleep(2500);
    assert.equal(await metric(s, 'strata_table_view_files_total'), 0, 'no whole view after a restart');
    assert.deepEqual(checkSnapshots(cold).sort(), files.sort());
  } catch (e) {
    console.error(s.log());
    throw e;
  } finally {
    await s.stop();
    s.cleanup();
  }
});

test('a whole view in slices (a first commit after a flush with none): each file once, pending 0', async () => {
  // flushed with no commit at all (--table-commit-interval 0): the next start reads every file
  let s = await startStrata({ args: ['--flush-interval', '3600', '--table-commit-interval', '0'] });
  const cold = path.join(s.dir, 'cold');
  const want = [];
  try {
    for (let i = 0; i < USERS; i++) {
      await post(s, `wv-u${i}`, `wv-u${i} first`);
      want.push(`wv-u${i} first`);
    }
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('the flush', async () => (await metric(s, 'strata_flush_passes_total')) > 0 &&
      (await metric(s, 'strata_flush_running')) === 0 && (await metric(s, 'strata_flush_pending')) === 0, 30000);
    await s.stop();
    s = await startStrata({ dataDir: s.dir, args: ARGS, env: ENV });
    // stopped as soon as the commit works in slices (its view or its writes): a clean exit (no
    // sanitizer report), and the next start commits everything
    await waitFor('a slice', async () => (await metric(s, 'strata_table_commit_slices_total')) > 0, 10000);
    await s.stop();
    s = await startStrata({ dataDir: s.dir, args: ARGS, env: ENV });
    // flushes while the whole view is read, an owner a slice
    for (let r = 0; r < 3; r++) {
      for (let i = r; i < USERS + 4; i += 3) {
        await post(s, `wv-u${i}`, `wv-u${i} round ${r}`);
        want.push(`wv-u${i} round ${r}`);
      }
      await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
      await sleep(30);
    }
    await settled(s);
    assert.ok((await metric(s, 'strata_table_view_files_total')) >= USERS, 'a whole view read every file record');
    assert.ok((await metric(s, 'strata_table_commit_slices_total')) > USERS, 'in slices');
    checkSnapshots(cold);
    assert.deepEqual(await rows(cold), want.sort(), 'every post once');
  } catch (e) {
    console.error(s.log());
    throw e;
  } finally {
    await s.stop();
    s.cleanup();
  }
});
