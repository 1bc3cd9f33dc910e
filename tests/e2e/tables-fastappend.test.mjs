// SPDX-License-Identifier: MIT
// A table commit costs what it changes, not what the table holds (issues 45, 48; Iceberg's fast
// append): after many flushes, a commit of one new file writes one manifest of one entry and
// carries every earlier manifest over unchanged; a compaction's commit rewrites only the
// manifests naming its inputs (their other entries EXISTING, counts and partition summaries
// recomputed); an erasure's commit rewrites only the manifests naming the user, writes no DELETED
// entry, and leaves no manifest (nor any other file of the tables) naming the user. Read with
// avsc (manifest lists and manifests) and icebird (rows), readers we did not write.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { icebergRead } from 'icebird';
import { erasureDone, filesHolding, waitFor } from './cold-lib.mjs';
import { avroRecords, serveFiles } from './iceberg-lib.mjs';
import { ok } from './backup-lib.mjs';
import { startStrata } from './lib.mjs';

const ARGS = ['--flush-interval', '3600', '--table-commit-interval', '1'];
const metaDir = (cold, t) => path.join(cold, '_tables', t, 'metadata');
const hint = (cold, t) => Number(readFileSync(path.join(metaDir(cold, t), 'version-hint.text'), 'utf8'));
const metadata = (cold, t) => JSON.parse(readFileSync(path.join(metaDir(cold, t), `v${hint(cold, t)}.metadata.json`), 'utf8'));
const current = (m) => m.snapshots.find((x) => x['snapshot-id'] === m['current-snapshot-id']);
const records = (uri) => avroRecords(readFileSync(new URL(uri))).records;

// The current snapshot of t: its id, operation and manifest list, each manifest with its entries.
function snapshot(cold, t = 'messages') {
  const m = metadata(cold, t);
  const snap = current(m);
  const list = records(snap['manifest-list']).map((mf) => ({ ...mf, entries: records(mf.manifest_path) }));
  return { m, id: BigInt(snap['snapshot-id']), op: snap.summary.operation, list };
}

// Every manifest's line agrees with its entries: counts, min sequence number, partition bounds.
function checkLines(list) {
  for (const mf of list) {
    const by = (s) => mf.entries.filter((e) => e.status === s);
    assert.equal(mf.added_files_count, by(1).length, `${mf.manifest_path}: added`);
    assert.equal(mf.existing_files_count, by(0).length, `${mf.manifest_path}: existing`);
    assert.equal(mf.deleted_files_count, 0);
    assert.equal(by(2).length, 0, 'no DELETED entries');
    const rows = (s) => by(s).reduce((a, e) => a + BigInt(e.data_file.record_count), 0n);
    assert.equal(BigInt(mf.added_rows_count), rows(1));
    assert.equal(BigInt(mf.existing_rows_count), rows(0));
    const seqs = mf.entries.map((e) => BigInt(e.sequence_number ?? mf.sequence_number));
    assert.equal(BigInt(mf.min_sequence_number), seqs.reduce((a, b) => (b < a ? b : a)));
    const parts = mf.entries.map((e) => Object.values(e.data_file.partition)[0]).sort();
    const [sum] = mf.partitions;
    assert.equal(Buffer.from(sum.lower_bound).toString(), parts[0], 'the lower bound is the lowest partition');
    assert.equal(Buffer.from(sum.upper_bound).toString(), parts.at(-1), 'the upper bound is the highest partition');
  }
}

const tables = async (s) => Object.fromEntries((await ok(s, 'GET', '/v1/admin/tables')).json.tables.map((t) => [t.table, t]));
const committed = (s, after = -1) => waitFor('messages committed', async () => {
  const x = (await tables(s)).messages;
  return x.pending === 0 && x.snapshot_id !== null && x.sequence_number > after ? x : null;
}, 30000);
const post = (s, u, content) => ok(s, 'POST', `/v1/users/${u}/messages`, { conversation_id: 'c', from: 'a', content }, {}, 201);

// Posts one message for each user, flushes, and waits for the commit: one snapshot.
async function flush(s, users, after) {
  for (const u of users) await post(s, u, `${u} text`);
  await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
  return committed(s, after.sequence_number);
}

async function rows(cold) {
  const m = metadata(cold, 'messages');
  const restore = serveFiles();
  try {
    return (await icebergRead({ tableUrl: m.location, metadataFileName: `v${hint(cold, 'messages')}.metadata.json` }))
      .map((r) => r.content).sort();
  } finally {
    restore();
  }
}

const uriOf = (e) => e.data_file.file_path;

test('after many flushes a commit of one file writes one manifest of one entry; a compaction rewrites only the manifests naming its inputs', async () => {
  const s = await startStrata({ args: ARGS });
  const cold = path.join(s.dir, 'cold');
  try {
    let at = { sequence_number: -1 };
    // fa-a and fa-c share a flush (one manifest); fa-a flushes again; then eight users one by one
    at = await flush(s, ['fa-a', 'fa-c'], at);
    at = await flush(s, ['fa-a'], at);
    for (let i = 0; i < 8; i++) at = await flush(s, [`fa-u${i}`], at);
    const before = snapshot(cold);
    assert.equal(before.list.length, 10, 'one manifest per commit, carried over');
    at = await flush(s, ['fa-new'], at);
    const after = snapshot(cold);
    assert.equal(after.op, 'append');
    const added = after.list.filter((mf) => BigInt(mf.added_snapshot_id) === after.id);
    assert.equal(added.length, 1, 'the commit wrote one manifest');
    assert.equal(added[0].entries.length, 1, 'of one entry');
    assert.equal(added[0].entries[0].status, 1);
    assert.equal(added[0].entries[0].data_file.partition.user, 'fa-new');
    assert.deepEqual(after.list.filter((mf) => mf !== added[0]).map((mf) => mf.manifest_path).sort(),
      before.list.map((mf) => mf.manifest_path).sort(), 'every earlier manifest carried over unchanged');
    checkLines(after.list);
    assert.equal((await rows(cold)).length, 12);

    // a major compaction merges fa-a's two objects: only the manifests naming them are rewritten
    const inputs = after.list.flatMap((mf) => mf.entries).filter((e) => e.data_file.partition.user === 'fa-a').map(uriOf);
    assert.equal(inputs.length, 2);
    const holding = after.list.filter((mf) => mf.entries.some((e) => inputs.includes(uriOf(e)))).map((mf) => mf.manifest_path);
    assert.equal(holding.length, 2);
    const untouched = after.list.map((mf) => mf.manifest_path).filter((p) => !holding.includes(p));
    await ok(s, 'POST', '/v1/admin/compact', {}, {}, 202);
    await waitFor('a replace snapshot', async () => (await committed(s, at.sequence_number)) && snapshot(cold).op === 'replace', 30000);
    const c = snapshot(cold);
    const paths = c.list.map((mf) => mf.manifest_path);
    for (const p of untouched) assert.ok(paths.includes(p), `${p} names no input: carried over`);
    for (const p of holding) assert.ok(!paths.includes(p), `${p} named an input: rewritten`);
    const fresh = c.list.filter((mf) => BigInt(mf.added_snapshot_id) === c.id);
    assert.equal(fresh.length, 2, 'the shared manifest rewritten, one manifest of the output');
    const kept = fresh.find((mf) => mf.entries.some((e) => e.data_file.partition.user === 'fa-c'));
    assert.deepEqual(kept.entries.map((e) => [e.status, e.data_file.partition.user]), [[0, 'fa-c']], 'fa-c\'s entry stays, EXISTING');
    const out = fresh.find((mf) => mf !== kept);
    assert.deepEqual(out.entries.map((e) => [e.status, e.data_file.partition.user]), [[1, 'fa-a']]);
    for (const e of c.list.flatMap((mf) => mf.entries)) assert.ok(!inputs.includes(uriOf(e)), 'no manifest names an input');
    checkLines(c.list);
    assert.equal((await rows(cold)).length, 12);
  } catch (e) {
    console.error(s.log());
    throw e;
  } finally {
    await s.stop();
    s.cleanup();
  }
});

test('an erasure rewrites only the manifests naming the user, with no DELETED entry; no file of the tables names the user', async () => {
  const s = await startStrata({ args: ARGS });
  const cold = path.join(s.dir, 'cold');
  try {
    let at = { sequence_number: -1 };
    at = await flush(s, ['fb-amy', 'zqfberasedzq'], at); // the user is the manifest's upper bound
    at = await flush(s, ['zqfberasedzq'], at);
    at = await flush(s, ['fb-bob'], at);
    at = await flush(s, ['fb-cat'], at);
    const before = snapshot(cold);
    const naming = before.list.filter((mf) => mf.entries.some((e) => e.data_file.partition.user === 'zqfberasedzq')).map((mf) => mf.manifest_path);
    assert.equal(naming.length, 2);
    const eid = (await ok(s, 'DELETE', '/v1/users/zqfberasedzq', undefined, {}, 202)).json.erasure_id;
    await erasureDone(s, eid, { ms: 30000 });
    await waitFor('a delete snapshot, the only one kept', async () => (await committed(s, at.sequence_number)) &&
      snapshot(cold).op === 'delete' && metadata(cold, 'messages').snapshots.length === 1, 30000);
    const e = snapshot(cold);
    const paths = e.list.map((mf) => mf.manifest_path);
    for (const mf of before.list)
      if (!naming.includes(mf.manifest_path)) assert.ok(paths.includes(mf.manifest_path), `${mf.manifest_path} names no erased file: carried over`);
    for (const p of naming) assert.ok(!paths.includes(p), `${p} named the user: not listed`);
    const fresh = e.list.filter((mf) => BigInt(mf.added_snapshot_id) === e.id);
    assert.equal(fresh.length, 1, 'the shared manifest rewritten; the user\'s own dropped');
    assert.deepEqual(fresh[0].entries.map((x) => [x.status, x.data_file.partition.user]), [[0, 'fb-amy']]);
    checkLines(e.list);
    assert.deepEqual(filesHolding(path.join(cold, '_tables'), 'zqfberasedzq'), [], 'no file names the erased user');
    assert.deepEqual(await rows(cold), ['fb-amy text', 'fb-bob text', 'fb-cat text']);
  } catch (err) {
    console.error(s.log());
    throw err;
  } finally {
    await s.stop();
    s.cleanup();
  }
});
