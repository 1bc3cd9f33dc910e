// SPDX-License-Identifier: MIT
// The Iceberg tables' committed file set is held in memory, a record and its key, URI and
// partition per cold object (issue 48: the largest holder per object outside any flag). /metrics
// shows its heap as strata_table_files_bytes (docs/memory.md): it grows by a few hundred bytes
// for each object a commit adds, and after a restart it is the set read back from the store.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { startStrata, withServer } from './lib.mjs';

const ARGS = ['--table-commit-interval', '1'];
const USERS = 20;

const metric = async (s, name) => {
  const m = (await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\S+)`, 'm'));
  assert.ok(m, `${name} is in /metrics`);
  return Number(m[1]);
};
const pending = async (s) => (await s.req('GET', '/v1/admin/tables')).json.tables.reduce((n, t) => n + t.pending, 0);

// USERS new users with a message each, cooled, then committed; the gauge after.
async function coolAndCommit(s, from) {
  for (let i = from; i < from + USERS; i++) {
    const r = await s.req('POST', `/v1/users/m${i}/messages`, { conversation_id: 'c', from: `m${i}`, content: `hi ${i}` });
    assert.equal(r.status, 201, r.text);
  }
  const passes = await metric(s, 'strata_flush_passes_total');
  const commits = await metric(s, 'strata_table_commits_total');
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor('the flush', async () => (await metric(s, 'strata_flush_passes_total')) > passes &&
    (await metric(s, 'strata_flush_running')) === 0 && (await metric(s, 'strata_flush_pending')) === 0, 30000);
  await waitFor('the commit', async () => (await metric(s, 'strata_table_commits_total')) > commits &&
    (await pending(s)) === 0, 30000);
  return metric(s, 'strata_table_files_bytes');
}

test('strata_table_files_bytes grows with the objects the tables hold, and is read back after a restart', async () => {
  const first = await startStrata({ args: ARGS });
  let two;
  await withServer(first, async () => {
    assert.equal(await metric(first, 'strata_table_files_bytes'), 0, 'no object, nothing held');
    const one = await coolAndCommit(first, 0);
    two = await coolAndCommit(first, USERS);
    const per = (two - one) / USERS;
    assert.ok(per >= 100 && per <= 1000, `${per} bytes per committed object (${one} then ${two})`);
    assert.ok(one >= USERS * 100, `${one} bytes for ${USERS} objects`);
  }, { keepDir: true });
  const s = await startStrata({ dataDir: first.dir, args: ARGS });
  await withServer(s, async () => {
    // read back from the store's provenance at the start (keys only, no URI or partition yet)
    const back = await metric(s, 'strata_table_files_bytes');
    assert.ok(back >= 2 * USERS * 64 && back <= 2 * two, `${back} bytes after the restart (${two} before)`);
  });
});
