// SPDX-License-Identifier: MIT
// GET /v1/admin/tables's `pending` after a flush of many owners (issue 48). The route runs on the
// event loop and bench/atsize.sh polls it while a flush of a million users commits: it read every
// dirty owner's file and provenance records, a million owners' work in one loop turn. It now reads
// a bounded number of a table's dirty owners (src/tables/look.c): exact for a small flush, a lower
// bound above 0 for a big one, and 0 only once every object written is in a snapshot.
// Commits are held off (--table-commit-interval 3600: the first tick, at start, creates the tables
// and then none runs) so what the flush wrote is all pending; a restart with a 1 s interval then
// commits it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { parquetFiles, waitFor } from './cold-lib.mjs';
import { startStrata, withServer } from './lib.mjs';

const SMALL = 100; // below the look's bound (ST_TABLES_LOOK_OWNERS, 256): the figure is exact
const BIG = 3000; // far above it

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

test('pending after a flush of many owners: exact for a few, bounded above 0 for thousands, 0 once committed', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--table-commit-interval', '3600'] });
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
    // The binary before read every dirty owner and answered SMALL + BIG.
    assert.ok(t.messages.pending > 0, 'objects are pending: never 0 then');
    assert.ok(t.messages.pending < SMALL + BIG, `a bounded look (${t.messages.pending} of ${SMALL + BIG})`);
    assert.equal(t.room_messages.pending, 0, 'another table\'s figure stays exact');
    assert.equal(t.bookings.pending, 0);
    assert.equal(t.messages.snapshot_id, null, 'still no commit');
  }, { keepDir: true });

  // commits on: each figure read is above 0 until the snapshot holds every object, then 0
  const s2 = await startStrata({ dataDir: s.dir, args: ['--flush-interval', '3600', '--table-commit-interval', '1'] });
  await withServer(s2, async () => {
    let reads = 0;
    await waitFor('everything committed', async () => {
      const p = (await tables(s2)).messages.pending;
      reads++;
      if (p > 0) return false;
      assert.equal(committedFiles(s2), SMALL + BIG, 'pending 0: the current snapshot has every object');
      return true;
    }, 60000);
    assert.ok(reads >= 1);
    const t = await tables(s2);
    assert.equal(t.messages.pending, 0);
    assert.ok(t.messages.snapshot_id !== null && t.messages.sequence_number >= 1);
    assert.equal(await metric(s2, 'strata_table_commit_lag_seconds'), 0, 'nothing left to commit');
  });
});
