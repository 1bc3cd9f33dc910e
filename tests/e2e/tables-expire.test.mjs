// SPDX-License-Identifier: MIT
// Which commits expire the Iceberg tables' earlier snapshots (SPEC v5 §5.1, issue 45). Only an
// erasure's overrides --table-keep: its commit expires every earlier snapshot, whatever else it
// holds (a flush's files in the same commit too), and so does the erasure of a user's room posts,
// whose room objects a fold rewrote. A deleted conversation's or retention's commit drops whole
// objects but is an ordinary snapshot: the snapshot before stays listed, icebird reads it as it
// was (its objects held in the bucket), and rebuild-meta, seeing what that snapshot named and the
// current one does not, does not take the deleted conversation back.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { icebergRead } from 'icebird';
import { duckRows, erasureDone, filesHolding, filesUnder, parquetFiles, readIfThere, waitFor } from './cold-lib.mjs';
import { avroRecords, newestMetadata, newestVersion, readSettled, serveFiles } from './iceberg-lib.mjs';
import { ok, runAsync } from './backup-lib.mjs';
import { sleep, startStrata, tempDir } from './lib.mjs';

const metaDir = (cold, t) => path.join(cold, '_tables', t, 'metadata');
// the newest version: the hint, probed upward (a commit rewrites it after it deletes what expired)
const hint = (cold, t) => newestVersion(metaDir(cold, t));
const metadata = (cold, t) => newestMetadata(metaDir(cold, t));
const currentOp = (m) => m.snapshots.find((x) => x['snapshot-id'] === m['current-snapshot-id'])?.summary.operation;
const byId = (a, b) => (BigInt(a.msg_id) < BigInt(b.msg_id) ? -1 : 1);
const json = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? String(x) : x));

// The rows of table t at snapshot id (the newest metadata, that snapshot made current: time
// travel as an engine does it), read by icebird, sorted by msg_id.
async function rowsAt(cold, t, id) {
  const m = metadata(cold, t);
  assert.ok(m.snapshots.some((x) => x['snapshot-id'] === id), `${t}: snapshot ${id} is listed`);
  const restore = serveFiles();
  try {
    const rows = await icebergRead({ tableUrl: m.location, metadata: { ...m, 'current-snapshot-id': id } });
    return rows.map(({ msg_id, user, conversation_id, content }) => ({ msg_id: String(msg_id), user, conversation_id, content })).sort(byId);
  } finally {
    restore();
  }
}

// The data files every snapshot the table keeps names (avsc over the manifest lists), read from
// the newest metadata. A commit landing between the metadata read and a manifest list's expires
// what that version named (the file is gone: ENOENT): read again, after a pause (readSettled); a
// file the newest metadata still names and the bucket does not hold fails the test.
const namedFiles = (cold, t) => readSettled(() => {
  const out = new Set();
  for (const snap of metadata(cold, t).snapshots)
    for (const mf of avroRecords(readFileSync(new URL(snap['manifest-list']))).records)
      for (const e of avroRecords(readFileSync(new URL(mf.manifest_path))).records) out.add(e.data_file.file_path);
  return [...out];
});

const tables = async (s) => Object.fromEntries((await ok(s, 'GET', '/v1/admin/tables')).json.tables.map((t) => [t.table, t]));
// Waits until table t has committed everything, with a sequence number above after.
const committed = (s, t, after = -1) => waitFor(`${t} committed`, async () => {
  const x = (await tables(s))[t];
  return x.pending === 0 && x.snapshot_id !== null && x.sequence_number > after ? x : null;
}, 30000);
const post = (s, u, conv, content) => ok(s, 'POST', `/v1/users/${u}/messages`, { conversation_id: conv, from: 'a', content }, {}, 201);
const stats = async (s, u) => (({ total_messages, cold_messages }) => [total_messages, cold_messages])((await ok(s, 'GET', `/v1/users/${u}/stats`)).json);

test('a deleted conversation is an ordinary snapshot: the one before stays readable (icebird), and rebuild-meta does not bring it back', async () => {
  const dir = tempDir('tbx-conv');
  const cold = path.join(dir, 'cold');
  const args = ['--cold-url', `file://${cold}`, '--flush-interval', '3600', '--table-commit-interval', '1', '--delta-max-age', '1'];
  let s = await startStrata({ dataDir: path.join(dir, 'data'), args });
  let gone, live;
  try {
    for (let i = 0; i < 3; i++) await post(s, 'xalice', 'diary', `diary ${i}`);
    for (let i = 0; i < 2; i++) await post(s, 'xbob', 'c', `bob ${i}`);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('the flush', async () => (await stats(s, 'xalice'))[1] === 3 && (await stats(s, 'xbob'))[1] === 2);
    const first = await committed(s, 'messages');
    const before = await rowsAt(cold, 'messages', first.snapshot_id);
    assert.equal(before.length, 5);
    assert.deepEqual(before.filter((r) => r.user === 'xalice').map((r) => r.content), ['diary 0', 'diary 1', 'diary 2']);
    gone = parquetFiles(path.join(cold, 'xalice'));
    assert.equal(gone.length, 1, 'the conversation is an object of its own');

    assert.deepEqual((await ok(s, 'DELETE', '/v1/users/xalice/conversations/diary')).json, { deleted: 3 });
    await ok(s, 'POST', '/v1/admin/compact', {}, {}, 202);
    // the fold leaves nothing of the object: a commit that only deletes
    await waitFor('a delete snapshot', async () => (await committed(s, 'messages', first.sequence_number)) && currentOp(metadata(cold, 'messages')) === 'delete', 30000);
    const m = metadata(cold, 'messages');
    assert.ok(m.snapshots.some((x) => x['snapshot-id'] === first.snapshot_id), 'the snapshot before the delete is kept (--table-keep)');
    assert.deepEqual(await rowsAt(cold, 'messages', first.snapshot_id), before, 'it reads as it was');
    const now = await rowsAt(cold, 'messages', m['current-snapshot-id']);
    assert.deepEqual(now, before.filter((r) => r.user === 'xbob'), 'the current snapshot has only bob');
    assert.ok(existsSync(gone[0]), 'the object the kept snapshot names is held in the bucket');
    live = (await ok(s, 'GET', '/v1/users/xalice/stats')).json.total_messages;
    assert.equal(live, 0);
  } finally {
    await s.kill9();
    rmSync(path.join(dir, 'data'), { recursive: true, force: true });
  }
  s = null;
  try {
    const r = await runAsync(['rebuild-meta', '--data-dir', path.join(dir, 'data'), '--accept-loss', ...args]);
    assert.equal(r.code, 0, r.err);
    assert.ok(existsSync(gone[0]), 'the deleted conversation\'s object is still in the bucket');
    s = await startStrata({ dataDir: path.join(dir, 'data'), args });
    const c = await s.req('GET', '/v1/users/xalice/conversations/diary');
    assert.ok(c.status === 404 || c.json.total_messages === 0, `the deleted conversation stays gone: ${c.text}`);
    assert.deepEqual((await ok(s, 'GET', '/v1/users/xalice/messages?limit=100')).json.messages, []);
    assert.deepEqual(await stats(s, 'xalice'), [0, 0]);
    assert.deepEqual(await stats(s, 'xbob'), [2, 2]);
    assert.match(r.err, /rebuild-meta: \d+ older snapshot\(s\) kept name 1 file\(s\) the current one does not/);
  } finally {
    if (s) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('retention dropping a whole object is an ordinary snapshot: the one before stays readable (icebird), the object held', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--table-commit-interval', '1', '--retention-seconds', '2'] });
  const cold = path.join(s.dir, 'cold');
  try {
    for (let i = 0; i < 3; i++) await post(s, 'xsolo', 'only', `only ${i}`);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('the flush', async () => (await stats(s, 'xsolo'))[1] === 3);
    const first = await committed(s, 'messages');
    const before = await rowsAt(cold, 'messages', first.snapshot_id);
    assert.deepEqual(before.map((r) => r.content), ['only 0', 'only 1', 'only 2']);
    const held = parquetFiles(path.join(cold, 'xsolo'));
    assert.equal(held.length, 1);
    await sleep(2500);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202); // the pass retains
    await waitFor('retention', async () => (await stats(s, 'xsolo'))[0] === 0, 30000);
    await waitFor('a delete snapshot', async () => (await committed(s, 'messages', first.sequence_number)) && currentOp(metadata(cold, 'messages')) === 'delete', 30000);
    const m = metadata(cold, 'messages');
    assert.equal(m.snapshots.length, 2, 'the snapshot before the drop is kept (--table-keep)');
    assert.deepEqual(await rowsAt(cold, 'messages', first.snapshot_id), before, 'it reads as it was');
    assert.ok(existsSync(held[0]), `${held[0]} is held for it`);
  } finally {
    await s.stop();
    s.cleanup();
  }
});

test('an erasure whose removal shares a commit with another user\'s flush still expires every earlier snapshot; nothing under the cold tier names the user', async () => {
  const dir = tempDir('tbx-erase');
  const cold = path.join(dir, 'cold');
  const base = ['--cold-url', `file://${cold}`, '--flush-interval', '3600'];
  let s = await startStrata({ dataDir: path.join(dir, 'data'), args: [...base, '--table-commit-interval', '1'] });
  try {
    for (let i = 0; i < 2; i++) await post(s, 'zqgoneuserzq', 'c', `erased text ${i}`);
    await post(s, 'xcarl', 'c', 'carl 0');
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('the flush', async () => (await stats(s, 'zqgoneuserzq'))[1] === 2);
    const first = await committed(s, 'messages');
    await post(s, 'xcarl', 'c', 'carl 1');
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await committed(s, 'messages', first.sequence_number);
    assert.equal(metadata(cold, 'messages').snapshots.length, 2);
    await s.stop();
    // commits an hour apart (after the first tick): the erasure and a flush land in one commit
    s = await startStrata({ dataDir: path.join(dir, 'data'), args: [...base, '--table-commit-interval', '3600'] });
    await committed(s, 'messages'); // the first tick (200 ms after the start) read the tables: the next is an hour on
    await sleep(500);
    const eid = (await ok(s, 'DELETE', '/v1/users/zqgoneuserzq', undefined, {}, 202)).json.erasure_id;
    await erasureDone(s, eid, { ms: 30000 });
    await post(s, 'xdora', 'c', 'dora 0');
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('dora flushed', async () => (await tables(s)).messages.pending === 1);
    const n = hint(cold, 'messages');
    await s.stop();
    s = await startStrata({ dataDir: path.join(dir, 'data'), args: [...base, '--table-commit-interval', '1'] });
    await waitFor('the commit', async () => hint(cold, 'messages') > n && (await committed(s, 'messages')));
    assert.equal(hint(cold, 'messages'), n + 1, 'one commit');
    const m = metadata(cold, 'messages');
    assert.equal(currentOp(m), 'overwrite', 'dora added, the user deleted');
    assert.equal(m.snapshots.length, 1, 'every earlier snapshot expired');
    assert.deepEqual((await rowsAt(cold, 'messages', m['current-snapshot-id'])).map((r) => r.content), ['carl 0', 'carl 1', 'dora 0']);
    for (const f of filesUnder(cold)) {
      assert.ok(!f.includes('zqgoneuserzq'), `${f} is named after the user`);
      assert.ok(!readIfThere(f)?.includes('zqgoneuserzq'), `${f} names the user`);
    }
  } finally {
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an erasure whose owner a commit\'s view does not reach yet: the commit that takes its objects out expires every earlier snapshot', async () => {
  // a view takes ST_TABLES_VIEW_OWNERS dirty owners (here 1): the erased user, last by name, is
  // read by the third commit after the restart; the first two carry its objects over and must
  // not consume the erasure (they did: the third then expired nothing, and two kept snapshots
  // named the erased objects, deleted from the bucket, for --table-keep)
  const dir = tempDir('tbx-erase-late');
  const cold = path.join(dir, 'cold');
  const base = ['--cold-url', `file://${cold}`, '--flush-interval', '3600'];
  let s = await startStrata({ dataDir: path.join(dir, 'data'), args: [...base, '--table-commit-interval', '1'] });
  try {
    for (const u of ['xalpha', 'xbeta', 'zzgonezz']) await post(s, u, 'c', `${u} 0`);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('the flush', async () => (await stats(s, 'zzgonezz'))[1] === 1 && (await stats(s, 'xbeta'))[1] === 1);
    await committed(s, 'messages');
    await s.stop();
    // commits an hour apart: two other users' flushes and the erasure wait for the next start
    s = await startStrata({ dataDir: path.join(dir, 'data'), args: [...base, '--table-commit-interval', '3600'] });
    await committed(s, 'messages');
    await sleep(500);
    for (const u of ['xalpha', 'xbeta']) await post(s, u, 'c', `${u} 1`);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('the flush', async () => (await stats(s, 'xalpha'))[1] === 2 && (await stats(s, 'xbeta'))[1] === 2);
    const eid = (await ok(s, 'DELETE', '/v1/users/zzgonezz', undefined, {}, 202)).json.erasure_id;
    await erasureDone(s, eid, { ms: 30000 });
    await s.stop();
    s = await startStrata({ dataDir: path.join(dir, 'data'), args: [...base, '--table-commit-interval', '1'], env: { STRATA_TEST_TABLES_VIEW_OWNERS: '1' } });
    await committed(s, 'messages');
    await waitFor('no kept snapshot names the erased user\'s objects', async () =>
      !(await namedFiles(cold, 'messages')).some((f) => f.includes('zzgonezz')), 15000);
    const m = metadata(cold, 'messages');
    assert.deepEqual((await rowsAt(cold, 'messages', m['current-snapshot-id'])).map((r) => r.content).sort(),
      ['xalpha 0', 'xalpha 1', 'xbeta 0', 'xbeta 1']);
    assert.deepEqual(filesHolding(cold, 'zzgonezz'), [], 'no file names the user');
  } finally {
    await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an erasure of a user\'s room posts expires the room table\'s earlier snapshots, which name the objects the fold replaced', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--table-commit-interval', '1'] });
  const cold = path.join(s.dir, 'cold');
  try {
    await ok(s, 'POST', '/v1/rooms', { room_id: 'xlobby', members: ['xbob', 'xamy'] }, {}, 201);
    await ok(s, 'POST', '/v1/rooms/xlobby/messages', { from: 'xbob', content: 'bob-secret-0' }, {}, 201);
    await ok(s, 'POST', '/v1/rooms/xlobby/messages', { from: 'xamy', content: 'amy-stays' }, {}, 201);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    const first = await committed(s, 'room_messages');
    await ok(s, 'POST', '/v1/rooms/xlobby/messages', { from: 'xbob', content: 'bob-secret-1' }, {}, 201);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await committed(s, 'room_messages', first.sequence_number);
    assert.equal(metadata(cold, 'room_messages').snapshots.length, 2);

    const eid = (await ok(s, 'DELETE', '/v1/users/xbob', undefined, {}, 202)).json.erasure_id;
    await erasureDone(s, eid);
    await waitFor('the room table keeps one snapshot', async () => {
      const x = await committed(s, 'room_messages');
      return x && metadata(cold, 'room_messages').snapshots.length === 1;
    }, 30000);
    // what the table still names exists and holds none of the user's text
    const named = await namedFiles(cold, 'room_messages');
    assert.ok(named.length > 0);
    for (const uri of named) {
      const f = new URL(uri).pathname;
      assert.ok(existsSync(f), `${f}, named by a kept snapshot, is in the bucket`);
      assert.doesNotMatch(json(await duckRows([f])), /secret|xbob/, `${f} holds the user's text`);
    }
    const rows = await rowsAt(cold, 'room_messages', metadata(cold, 'room_messages')['current-snapshot-id']);
    assert.deepEqual(rows.map((r) => r.content), [null, 'amy-stays', null]);
  } finally {
    await s.stop();
    s.cleanup();
  }
});
