// SPDX-License-Identifier: MIT
// The tables' commit tick reads on the loop only what changed (issues 45 and 48, SPEC v5 §5.1:
// "a commit never runs on the loop"): the tier marks an owner whose file records change, and a
// commit's view reads only those owners' records (strata_table_view_files_total counts the file
// records the ticks read), not every object the tables hold; every one of them only once when a
// member starts to commit (when the store still holds provenance records from before they were
// keyed by owner, or none). The tables still end up with every object, each exactly once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { startStrata } from './lib.mjs';

const ARGS = ['--table-commit-interval', '1'];
const USERS = 24;

const metric = async (s, name) => {
  const m = (await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\d+)`, 'm'));
  assert.ok(m, `${name} is in /metrics`);
  return Number(m[1]);
};
const tables = async (s) => Object.fromEntries((await s.req('GET', '/v1/admin/tables')).json.tables.map((t) => [t.table, t]));
const post = async (s, u, content) => {
  const r = await s.req('POST', `/v1/users/${u}/messages`, { conversation_id: 'c', from: u, content });
  assert.equal(r.status, 201, r.text);
};
// Flushes and waits until no flush runs or waits any more.
async function flush(s) {
  const passes = await metric(s, 'strata_flush_passes_total');
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor('the flush', async () => (await metric(s, 'strata_flush_passes_total')) > passes &&
    (await metric(s, 'strata_flush_running')) === 0 && (await metric(s, 'strata_flush_pending')) === 0, 30000);
}
// Waits for a commit past `commits` that leaves nothing of `messages` pending.
const committed = (s, commits) => waitFor('the commit', async () =>
  (await metric(s, 'strata_table_commits_total')) > commits && (await tables(s)).messages.pending === 0, 30000);
// The objects of the current snapshot of `messages` (its summary's total-data-files).
const totalFiles = async (s) => {
  const { readFileSync } = await import('node:fs');
  const dir = `${s.dir}/cold/_tables/messages/metadata`;
  const v = Number(readFileSync(`${dir}/version-hint.text`, 'utf8'));
  const m = JSON.parse(readFileSync(`${dir}/v${v}.metadata.json`, 'utf8'));
  const snap = m.snapshots.find((x) => x['snapshot-id'] === m['current-snapshot-id']);
  return Number(snap.summary['total-data-files']);
};

test('a commit reads the changed owner\'s file records, not every object of the tables', async () => {
  let s = await startStrata({ args: ARGS });
  try {
    for (let i = 0; i < USERS; i++) await post(s, `u${i}`, `first ${i}`);
    let commits = await metric(s, 'strata_table_commits_total');
    await flush(s);
    await committed(s, commits);
    assert.equal(await totalFiles(s), USERS);
    // one user changes: the next commit reads that user's records only
    let read = await metric(s, 'strata_table_view_files_total');
    commits = await metric(s, 'strata_table_commits_total');
    await post(s, 'u7', 'second');
    await flush(s);
    await committed(s, commits);
    assert.equal(await totalFiles(s), USERS + 1, 'the new object is in the snapshot');
    const delta = (await metric(s, 'strata_table_view_files_total')) - read;
    assert.ok(delta >= 2 && delta <= 4, `the commit read ${delta} file records: u7's 2 (a retried tick may read them again), not the ${USERS + 1} the table holds`);
    // nothing changed: a tick reads nothing
    read = await metric(s, 'strata_table_view_files_total');
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal(await metric(s, 'strata_table_view_files_total'), read, 'an idle tick reads no file record');

    // a restart: the committed set is in the store's provenance records, keyed by owner, so the
    // member that starts to commit reads no file record (no whole view), then deltas again
    await s.stop();
    s = await startStrata({ dataDir: s.dir, args: ARGS });
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal(await metric(s, 'strata_table_view_files_total'), 0, 'no whole view after a restart');
    read = 0;
    commits = await metric(s, 'strata_table_commits_total');
    await post(s, 'u3', 'third');
    await flush(s);
    await committed(s, commits);
    assert.equal(await totalFiles(s), USERS + 2);
    const after = (await metric(s, 'strata_table_view_files_total')) - read;
    assert.ok(after >= 2 && after <= 4, `after the restart the commit read ${after} file records (u3's 2)`);
  } finally {
    await s.stop();
    s.cleanup();
  }
});
