// SPDX-License-Identifier: MIT
// GET /v1/admin/tables's `pending` after a flush of many owners (issue 48, SPEC §5.1): the
// objects written and not in a committed snapshot, exact at any scale. The route runs on the event
// loop and bench/atsize.sh polls it while a flush of a million users commits, so it reads one
// running count a table (src/tables/look.c), changed in the batch of every file record and every
// commit: exact for a small flush and a big one (once a lower bound past 256 dirty owners), through
// an erasure and a compaction made while commits are held off, and across a kill -9.
// Commits are held off (--table-commit-interval 3600: the first tick, at start, creates the tables
// and then none runs; after the kill, 0: no tick at all) so what the flush wrote is all pending; a
// restart with a 1 s interval then commits it. Each figure is checked against the disk: the
// Parquet files under the cold dir that the current snapshot's manifests (avsc) do not name.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { parquetFiles, waitFor } from './cold-lib.mjs';
import { avroRecords } from './iceberg-lib.mjs';
import { sleep, startStrata, withServer } from './lib.mjs';

const SMALL = 100;
const BIG = 3000; // far above the 256 dirty owners the route once read (then a lower bound)
const ERASED = 5; // users of SMALL erased while commits are held off
const PIECES = 3; // objects of one user, compacted into one while commits are held off
// replaced objects are deleted at once (no kept snapshot may name them): the disk is the truth
const NOHOLD = ['--table-keep', '0', '--compact-objects', '1000'];

const metric = async (s, name) => {
  const m = (await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\S+)`, 'm'));
  assert.ok(m, `${name} is in /metrics`);
  return Number(m[1]);
};
const tables = async (s) => {
  const r = await s.req('GET', '/v1/admin/tables');
  assert.equal(r.status, 200, r.text);
  return Object.fromEntries(r.json.tables.map((t) => [t.table, t]));
};
const metaDir = (s) => path.join(s.dir, 'cold', '_tables', 'messages', 'metadata');
const hint = (s) => {
  try { return Number(readFileSync(path.join(metaDir(s), 'version-hint.text'), 'utf8')); } catch { return 0; }
};
// the current snapshot's count of data files (its summary), null before the first snapshot
const committedFiles = (s) => {
  const m = JSON.parse(readFileSync(path.join(metaDir(s), `v${hint(s)}.metadata.json`), 'utf8'));
  const snap = (m.snapshots || []).find((x) => x['snapshot-id'] === m['current-snapshot-id']);
  return snap ? Number(snap.summary['total-data-files']) : null;
};

// The current snapshot's live data and delete files (avsc: its manifest list, then each
// manifest's entries not DELETED), as absolute paths; none before the first snapshot.
const snapshotFiles = (s) => {
  const m = JSON.parse(readFileSync(path.join(metaDir(s), `v${hint(s)}.metadata.json`), 'utf8'));
  const snap = (m.snapshots || []).find((x) => x['snapshot-id'] === m['current-snapshot-id']);
  const out = new Set();
  if (!snap) return out;
  for (const mf of avroRecords(readFileSync(new URL(snap['manifest-list']))).records)
    for (const e of avroRecords(readFileSync(new URL(mf.manifest_path))).records)
      if (e.status !== 2) out.add(new URL(e.data_file.file_path).pathname);
  return out;
};
// The Parquet files on disk that the current snapshot does not name: what `pending` counts.
const notInSnapshot = (s) => {
  const named = snapshotFiles(s);
  return parquetFiles(path.join(s.dir, 'cold')).filter((f) => !named.has(path.resolve(f))).length;
};
// pending, once the disk has settled (the reaper deletes what an erasure or a compaction took
// out of the manifest within a pass or two): equal to the files on disk the snapshot does not name
async function pendingMatchesDisk(s, want) {
  return waitFor(`pending ${want} = the files on disk not in the snapshot`, async () => {
    const p = (await tables(s)).messages.pending;
    assert.equal(p, want, 'pending is exact');
    const d = notInSnapshot(s);
    if (d !== want) { await sleep(500); return false; }
    return true;
  }, 30000);
}

// One message for each of users (a few at a time), then a flush of every user, waited for.
async function postAndFlush(s, users) {
  for (let i = 0; i < users.length; i += 32) {
    await Promise.all(users.slice(i, i + 32).map(async (u) => {
      const r = await s.req('POST', `/v1/users/${u}/messages`, { conversation_id: 'c', from: u, content: `${u} text` });
      assert.equal(r.status, 201, r.text);
    }));
  }
  const passes = await metric(s, 'strata_flush_passes_total');
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor('the flush', async () => (await metric(s, 'strata_flush_passes_total')) > passes &&
    (await metric(s, 'strata_flush_running')) === 0 && (await metric(s, 'strata_flush_pending')) === 0, 60000);
}
const names = (pfx, n) => Array.from({ length: n }, (_, i) => `${pfx}${i}`);

async function erase(s, u) {
  const r = await s.req('DELETE', `/v1/users/${u}`);
  assert.equal(r.status, 202, r.text);
  await waitFor(`${u} erased`, async () => (await s.req('GET', `/v1/admin/erasures/${r.json.erasure_id}`)).json.status === 'done', 60000);
}

test('pending is exact at any scale: a few owners, thousands, an erasure and a compaction while commits are held off, a kill -9; 0 once committed', async () => {
  const s = await startStrata({ args: [...NOHOLD, '--flush-interval', '3600', '--table-commit-interval', '3600'] });
  const objects = () => parquetFiles(path.join(s.dir, 'cold')).length;
  await withServer(s, async () => {
    await waitFor('v1 of messages (the first tick, done)', async () => hint(s) === 1 &&
      (await tables(s)).messages.sequence_number === 0);
    await postAndFlush(s, names('a', SMALL));
    assert.equal(objects(), SMALL, 'one object a user');
    let t = await tables(s);
    assert.equal(t.messages.pending, SMALL, 'every object the flush wrote, none committed');
    assert.equal(t.messages.snapshot_id, null, 'no commit ran');
    assert.equal(t.room_messages.pending, 0, 'the users\' owners are no other table\'s');
    assert.equal(t.bookings.pending, 0);

    await postAndFlush(s, names('b', BIG));
    assert.equal(objects(), SMALL + BIG);
    t = await tables(s);
    // The binary before read 256 dirty owners and answered a lower bound (about 256).
    assert.equal(t.messages.pending, SMALL + BIG, 'every object of thousands of owners');
    assert.equal(notInSnapshot(s), SMALL + BIG);
    assert.equal(t.room_messages.pending, 0, 'another table\'s figure stays exact');
    assert.equal(t.bookings.pending, 0);
    assert.equal(t.messages.snapshot_id, null, 'still no commit');
    await s.kill9(); // pending > 0: the count is in the store with the records it counts
  }, { keepDir: true });

  // no commits at all: the count as it was, then moved by an erasure and a compaction
  const s1 = await startStrata({ dataDir: s.dir, args: [...NOHOLD, '--flush-interval', '3600', '--table-commit-interval', '0'] });
  await withServer(s1, async () => {
    await pendingMatchesDisk(s1, SMALL + BIG);
    for (let i = 0; i < ERASED; i++) await erase(s1, `a${i}`);
    await pendingMatchesDisk(s1, SMALL + BIG - ERASED);
    for (let i = 0; i < PIECES; i++) await postAndFlush(s1, ['piece']);
    await pendingMatchesDisk(s1, SMALL + BIG - ERASED + PIECES);
    assert.equal((await s1.req('POST', '/v1/admin/compact', { user: 'piece' })).status, 202);
    await waitFor('piece compacted', () => parquetFiles(path.join(s1.dir, 'cold', 'piece')).length === 1, 30000);
    await pendingMatchesDisk(s1, SMALL + BIG - ERASED + 1);
    assert.equal(await metric(s1, 'strata_tables_pending_repairs_total'), 0, 'no drift repaired');
    await s1.kill9();
  }, { keepDir: true });

  // commits on: each figure read is above 0 until the snapshot holds every object, then 0
  const want = SMALL + BIG - ERASED + 1;
  const s2 = await startStrata({ dataDir: s.dir, args: [...NOHOLD, '--flush-interval', '3600', '--table-commit-interval', '1'] });
  await withServer(s2, async () => {
    let reads = 0;
    await waitFor('everything committed', async () => {
      const p = (await tables(s2)).messages.pending;
      reads++;
      if (p > 0) return false;
      assert.equal(committedFiles(s2), want, 'pending 0: the current snapshot has every object');
      return true;
    }, 60000);
    assert.ok(reads >= 1);
    const t = await tables(s2);
    assert.equal(t.messages.pending, 0);
    assert.equal(notInSnapshot(s2), 0, 'every file on disk is in the snapshot');
    assert.ok(t.messages.snapshot_id !== null && t.messages.sequence_number >= 1);
    assert.equal(await metric(s2, 'strata_table_commit_lag_seconds'), 0, 'nothing left to commit');
    assert.equal(await metric(s2, 'strata_tables_pending_repairs_total'), 0, 'no drift repaired');
  });
});
