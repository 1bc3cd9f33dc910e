// SPDX-License-Identifier: MIT
// The Iceberg tables' committed file set lives in the store, not in RAM (issue 48): a commit reads
// the provenance records of the owners whose files changed, so the heap its file sets take
// (strata_table_files_bytes, docs/memory.md) follows the change, not the objects the tables hold,
// and a restart reads no file record until something changes. After a restart, a commit of one
// changed owner still makes a snapshot icebird reads with every row, and the manifests name every
// object once.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { icebergRead } from 'icebird';
import { waitFor } from './cold-lib.mjs';
import { avroRecords, serveFiles } from './iceberg-lib.mjs';
import { startStrata, withServer } from './lib.mjs';

const ARGS = ['--flush-interval', '3600', '--table-commit-interval', '1'];
const USERS = 20;
// bytes a commit's sets take for n changed owners at most: about 2 KiB of its own (manifest names, the
// previous commit's) and about 550 a file (docs/memory.md: 400, and a new file's column stats from
// its file record, ~130, which its manifest entry's metrics are made of instead of its footer)
const cap = (n) => 2048 + n * 550;

const metric = async (s, name) => {
  const m = (await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\S+)`, 'm'));
  assert.ok(m, `${name} is in /metrics`);
  return Number(m[1]);
};
const pending = async (s) => (await s.req('GET', '/v1/admin/tables')).json.tables.reduce((n, t) => n + t.pending, 0);
const post = async (s, u, content) => {
  const r = await s.req('POST', `/v1/users/${u}/messages`, { conversation_id: 'c', from: u, content });
  assert.equal(r.status, 201, r.text);
};

// Posts one message for each of users, cools them and waits for the commit; the gauge after.
async function coolAndCommit(s, users) {
  for (const u of users) await post(s, u, `${u} text`);
  const passes = await metric(s, 'strata_flush_passes_total');
  const commits = await metric(s, 'strata_table_commits_total');
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor('the flush', async () => (await metric(s, 'strata_flush_passes_total')) > passes &&
    (await metric(s, 'strata_flush_running')) === 0 && (await metric(s, 'strata_flush_pending')) === 0, 30000);
  await waitFor('the commit', async () => (await metric(s, 'strata_table_commits_total')) > commits &&
    (await pending(s)) === 0, 30000);
  return metric(s, 'strata_table_files_bytes');
}
const names = (from, n) => Array.from({ length: n }, (_, i) => `m${from + i}`);

const metaDir = (s) => path.join(s.dir, 'cold', '_tables', 'messages', 'metadata');
const hint = (s) => Number(readFileSync(path.join(metaDir(s), 'version-hint.text'), 'utf8'));
const metadata = (s) => JSON.parse(readFileSync(path.join(metaDir(s), `v${hint(s)}.metadata.json`), 'utf8'));
const records = (uri) => avroRecords(readFileSync(new URL(uri))).records;

test('a commit holds the changed owners\' files only; after a restart it reads nothing until a change, and its snapshot has every row', async () => {
  const first = await startStrata({ args: ARGS });
  let one, three;
  await withServer(first, async () => {
    assert.equal(await metric(first, 'strata_table_files_bytes'), 0, 'no object, nothing held');
    one = await coolAndCommit(first, names(0, USERS));
    await coolAndCommit(first, names(USERS, USERS));
    three = await coolAndCommit(first, names(2 * USERS, USERS));
    // A flush of USERS owners may be committed by one tick or split over two (the commit timer
    // runs beside the flush): the gauge is the last commit's sets, so the bounds are absolute —
    // what USERS changed owners' files take at most (cap, above),
    // far below the whole committed set the binary before held (~290 bytes an object: 6,112 for
    // 20 objects, 16,000 for 60, and as much again for a commit of one owner).
    assert.ok(one > 0 && one <= cap(USERS), `${one} bytes for a commit of ${USERS} new objects`);
    // the third commit adds as many objects as the first while the tables hold three times as many
    assert.ok(three > 0 && three <= cap(USERS), `${three} bytes for a commit of ${USERS} new objects when the tables hold ${3 * USERS} (${one} when they held ${USERS})`);
    const single = await coolAndCommit(first, ['m5']);
    assert.ok(single > 0 && single <= cap(4), `${single} bytes for a commit of one changed owner (${one} for ${USERS})`);
  }, { keepDir: true });

  const s = await startStrata({ dataDir: first.dir, args: ARGS });
  await withServer(s, async () => {
    await new Promise((r) => setTimeout(r, 2500)); // two ticks: a member that starts to commit
    assert.equal(await metric(s, 'strata_table_view_files_total'), 0, 'a restart reads no file record');
    assert.equal(await metric(s, 'strata_table_files_bytes'), 0, 'nothing read back into memory');
    const seq = metadata(s)['last-sequence-number'];
    const after = await coolAndCommit(s, ['m7', 'new1']);
    assert.ok(after > 0 && after <= cap(4), `${after} bytes for two changed owners after the restart`);
    assert.ok(await metric(s, 'strata_table_view_files_total') <= 6, 'the changed owners\' records only');
    const m = metadata(s);
    assert.ok(m['last-sequence-number'] > seq, 'a new snapshot');
    const snap = m.snapshots.find((x) => x['snapshot-id'] === m['current-snapshot-id']);
    const want = 3 * USERS + 3; // one object per user, m5 and m7 a second, new1 its first
    assert.equal(Number(snap.summary['total-data-files']), want, 'the summary counts every object');
    const paths = records(snap['manifest-list']).flatMap((mf) => records(mf.manifest_path))
      .filter((e) => e.status !== 2).map((e) => e.data_file.file_path);
    assert.equal(paths.length, want, 'the manifests name every object');
    assert.equal(new Set(paths).size, want, 'each once');
    const restore = serveFiles();
    let rows;
    try {
      rows = (await icebergRead({ tableUrl: m.location, metadataFileName: `v${hint(s)}.metadata.json` })).map((r) => r.content);
    } finally {
      restore();
    }
    const expect = [...names(0, 3 * USERS), 'm5', 'm7', 'new1'].map((u) => `${u} text`);
    assert.deepEqual(rows.sort(), expect.sort(), 'icebird reads every row');
  });
});
