// SPDX-License-Identifier: MIT
// SPEC v5 §5.1 (issue 45): edit_history is a column of the message files and of the `messages`
// and `room_messages` tables (list<struct<content, metadata, edited_at>>, field ids 11 to 15,
// Parquet's three-level LIST), so a table reader sees each row as the API shows it: a message
// edited while hot gets its history from the flush, one edited cold from the fold, a tombstone
// an empty list, a message never edited null (its answers have no edit_history), and
// --max-edit-history bounds it as it bounds the answers; an erased author's room messages keep no
// history text. Two readers we did not write check it:
// icebird over the table, and DuckDB over the current snapshot's data files (found with avsc),
// which reads the column as a LIST of STRUCT; every data file's column metrics in its manifest
// entry are DuckDB's counts, min and max of that file after the edits, deletes, folds and erasure
// (issue 48). Files written by an older strata (no edit_history
// column) read as null and are folded into the new layout: set STRATA_OLD_BIN to a build from
// before the change to run that part (not registered otherwise).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { icebergRead } from 'icebird';
import { duckQuery, erasureDone, filesHolding, waitFor } from './cold-lib.mjs';
import { avroRecords, checkMetrics, currentEntries, serveFiles } from './iceberg-lib.mjs';
import { startStrata, withServer } from './lib.mjs';

const ARGS = ['--flush-interval', '3600', '--table-commit-interval', '1', '--max-edit-history', '2', '--erase-within', '5'];

const ok = async (s, method, p, body, status = 200) => {
  const r = await s.req(method, p, body);
  assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
  return r.json;
};

const metaDir = (s, t) => path.join(s.dir, 'cold', '_tables', t, 'metadata');
const hint = (s, t) => Number(readFileSync(path.join(metaDir(s, t), 'version-hint.text'), 'utf8'));
const tableMeta = (s, t) => JSON.parse(readFileSync(path.join(metaDir(s, t), `v${hint(s, t)}.metadata.json`), 'utf8'));

// Waits until the tables have snapshots and nothing pending.
const committed = (s, tables) => waitFor('the tables committed', async () => {
  const r = await ok(s, 'GET', '/v1/admin/tables');
  const by = Object.fromEntries(r.tables.map((t) => [t.table, t]));
  return r.tables.every((t) => t.pending === 0) && tables.every((t) => by[t].snapshot_id !== null);
}, 30000);

// The table's rows as icebird reads them (its newest metadata version).
async function iceRows(s, t) {
  const m = tableMeta(s, t);
  const restore = serveFiles();
  try { return await icebergRead({ tableUrl: m.location, metadataFileName: `v${hint(s, t)}.metadata.json` }); } finally { restore(); }
}

// The data files of the table's current snapshot (its manifests read with avsc; no delete files).
function dataFiles(s, t) {
  const m = tableMeta(s, t);
  const snap = m.snapshots.find((x) => x['snapshot-id'] === m['current-snapshot-id']);
  const files = [];
  for (const mf of avroRecords(readFileSync(new URL(snap['manifest-list']))).records) {
    assert.equal(Number(mf.content), 0, 'a data manifest (no position deletes left)');
    for (const e of avroRecords(readFileSync(new URL(mf.manifest_path))).records)
      if (Number(e.status) !== 2) files.push(fileURLToPath(e.data_file.file_path));
  }
  return files;
}

// DuckDB over those files: each row's edit_history (µs exact) and its type.
async function duckHist(s, t) {
  const list = dataFiles(s, t).map((f) => `'${f}'`).join(',');
  const rs = await duckQuery(`SELECT msg_id::VARCHAR AS msg_id, typeof(edit_history) AS t,
      to_json(list_transform(edit_history, e -> {'content': e.content, 'metadata': e.metadata::VARCHAR,
        'edited_at': epoch_us(e.edited_at)}))::VARCHAR AS h
    FROM read_parquet([${list}], union_by_name = true) ORDER BY msg_id::BIGINT`);
  return rs.map((r) => ({ msg_id: r.msg_id, type: r.t, hist: r.h === null ? null : JSON.parse(r.h) }));
}

// The API's edit_history as a table holds it: null when the answer has none; metadata as JSON.
const apiHist = (m) => (m.edit_history === undefined ? null
  : m.edit_history.map((e) => ({ content: e.content, metadata: e.metadata ?? null, edited_at: e.edited_at })));
// metadata is JSON text (Parquet's JSON type): DuckDB gives the text, icebird the value
const parseMeta = (v) => (v === null || v === undefined ? null : typeof v === 'string' ? JSON.parse(v) : v);
// icebird's timestamptz as µs; a Date holds ms only (then the API's value is cut to ms)
const iceUs = (v, want) => (v instanceof Date ? [v.getTime(), Math.floor(want / 1000)] : [Number(v), want]);

// Every row of the table (icebird and DuckDB) holds the edit_history the API shows for it.
async function sameAsApi(s, t, api) {
  await checkMetrics(t, tableMeta(s, t), currentEntries(tableMeta(s, t))); // each file's metrics
  assert.ok(api.length > 0);
  const ice = await iceRows(s, t);
  assert.equal(ice.length, api.length, `${t}: every row once`);
  const duck = await duckHist(s, t);
  assert.deepEqual(duck.map((r) => r.msg_id), api.map((m) => m.msg_id), `${t}: DuckDB's rows`);
  for (const m of api) {
    const want = apiHist(m);
    const x = ice.find((y) => String(y.msg_id) === m.msg_id);
    const d = duck.find((y) => y.msg_id === m.msg_id);
    const what = `${t} ${m.msg_id} (${m.content})`;
    assert.equal(d.type.replaceAll('"', ''), 'STRUCT(content VARCHAR, metadata JSON, edited_at TIMESTAMP WITH TIME ZONE)[]', `${what}: a LIST of STRUCT`);
    if (want === null) {
      assert.equal(x.edit_history ?? null, null, `${what}: icebird null`);
      assert.equal(d.hist, null, `${what}: DuckDB null`);
      continue;
    }
    assert.ok(Array.isArray(x.edit_history), `${what}: icebird reads a list`);
    assert.deepEqual(x.edit_history.map((e) => [e.content ?? null, parseMeta(e.metadata)]),
      want.map((e) => [e.content, e.metadata]), `${what}: icebird's versions`);
    x.edit_history.forEach((e, i) => assert.deepEqual(...iceUs(e.edited_at, want[i].edited_at), `${what}: icebird's edited_at ${i}`));
    assert.deepEqual(d.hist.map((e) => ({ ...e, metadata: parseMeta(e.metadata), edited_at: Number(e.edited_at) })), want,
      `${what}: DuckDB's versions, µs exact`);
  }
}

const userMsgs = async (s, u) => (await ok(s, 'GET', `/v1/users/${u}/messages?limit=1000`)).messages;
const roomMsgs = async (s, r) => (await ok(s, 'GET', `/v1/rooms/${r}/messages?limit=1000`)).messages;

// Flushes every hot row, then waits for the user's and the room's rows to be cold and committed.
async function flushAll(s, u, room, n) {
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor('the user flushed', async () => (await ok(s, 'GET', `/v1/users/${u}/stats`)).hot_messages === 0, 30000);
  if (room) await waitFor('the room in its table', async () => { try { return (await iceRows(s, 'room_messages')).length === n; } catch { return false; } }, 30000);
  await committed(s, room ? ['messages', 'room_messages'] : ['messages']);
}

test('edit_history in the tables equals the API: hot edits flushed, cold edits folded, deletes empty, the bound kept', async () => {
  const s = await startStrata({ args: ARGS });
  await withServer(s, async () => {
    const post = (i) => ok(s, 'POST', '/v1/users/ehu/messages', { conversation_id: `c${i % 2}`, from: 'ehu', content: `m${i}`, ...(i % 2 ? { metadata: { i } } : {}) }, 201);
    const ms = [];
    for (let i = 0; i < 6; i++) ms.push(await post(i));
    await ok(s, 'POST', '/v1/rooms', { room_id: 'ehroom', members: ['ehu', 'ehv'] }, 201);
    const rs = [];
    for (let i = 0; i < 4; i++)
      rs.push(await ok(s, 'POST', '/v1/rooms/ehroom/messages', { from: i % 2 ? 'ehv' : 'ehu', content: i === 1 ? 'ehv secret one' : `r${i}`, metadata: { r: i } }, 201));
    const edit = (p, id, body) => ok(s, 'PATCH', `${p}/messages/${id}`, body);
    const U = '/v1/users/ehu', R = '/v1/rooms/ehroom';
    // hot: m0 edited three times (two kept), m1 once (metadata only), m5 deleted after an edit;
    // in the room r0 twice, r3 deleted
    await edit(U, ms[0].msg_id, { content: 'm0 v1' });
    await edit(U, ms[0].msg_id, { content: 'm0 v2', metadata: { v: 2, s: 'ü "q"' } });
    const m0 = await edit(U, ms[0].msg_id, { content: 'm0 v3' });
    assert.deepEqual(m0.edit_history.map((h) => h.content), ['m0 v1', 'm0 v2'], '--max-edit-history 2');
    await edit(U, ms[1].msg_id, { metadata: { i: 1, more: [1, 2] } });
    await edit(U, ms[5].msg_id, { content: 'm5 v1' });
    const dead = await ok(s, 'DELETE', `${U}/messages/${ms[5].msg_id}`);
    assert.deepEqual(dead.edit_history, []);
    await edit(R, rs[0].msg_id, { content: 'r0 v1' });
    await edit(R, rs[0].msg_id, { content: 'r0 v2', metadata: null });
    await ok(s, 'DELETE', `${R}/messages/${rs[3].msg_id}`);
    await flushAll(s, 'ehu', 'ehroom', 4);
    // the flush's snapshot: the hot edits' histories
    await sameAsApi(s, 'messages', await userMsgs(s, 'ehu'));
    await sameAsApi(s, 'room_messages', await roomMsgs(s, 'ehroom'));

    // cold: m0 again (the bound drops its oldest), m2 twice, m4 deleted, r1 edited, r2 deleted
    const m0c = await edit(U, ms[0].msg_id, { content: 'm0 v4' });
    assert.deepEqual(m0c.edit_history.map((h) => h.content), ['m0 v2', 'm0 v3']);
    await edit(U, ms[2].msg_id, { content: 'm2 v1', metadata: { cold: true } });
    const m2 = await edit(U, ms[2].msg_id, { content: 'm2 v2' });
    assert.equal(m2.edit_history.length, 2);
    await ok(s, 'DELETE', `${U}/messages/${ms[4].msg_id}`);
    await edit(R, rs[1].msg_id, { content: 'ehv secret two' });
    await ok(s, 'DELETE', `${R}/messages/${rs[2].msg_id}`);
    const before = { user: hint(s, 'messages'), room: hint(s, 'room_messages') };
    assert.equal((await s.req('POST', '/v1/admin/compact', {})).status, 202);
    // the fold's snapshots: the cold changes in both tables
    await waitFor('the folds committed', async () => {
      if (hint(s, 'messages') <= before.user || hint(s, 'room_messages') <= before.room) return false;
      try {
        const u = await iceRows(s, 'messages'), r = await iceRows(s, 'room_messages');
        const len = (rows, id) => rows.find((x) => String(x.msg_id) === id)?.edit_history?.length;
        return len(u, ms[2].msg_id) === 2 && len(u, ms[4].msg_id) === 0 && len(r, rs[1].msg_id) === 1 && len(r, rs[2].msg_id) === 0;
      } catch { return false; }
    }, 60000);
    await committed(s, ['messages', 'room_messages']);
    const api = await userMsgs(s, 'ehu'), apiRoom = await roomMsgs(s, 'ehroom');
    assert.deepEqual(api.map((m) => (m.edit_history === undefined ? null : m.edit_history.length)), [2, 1, 2, null, 0, 0]);
    assert.deepEqual(apiRoom.map((m) => (m.edit_history === undefined ? null : m.edit_history.length)), [2, 1, 0, 0]);
    await sameAsApi(s, 'messages', api);
    await sameAsApi(s, 'room_messages', apiRoom);

    // ehv erased: its room messages are tombstones with an empty edit_history in the API and the
    // table, and no file under the cold folder keeps its versions' text (SPEC §2.2)
    const e = await ok(s, 'DELETE', '/v1/users/ehv', undefined, 202);
    await erasureDone(s, e.erasure_id);
    await committed(s, ['messages', 'room_messages']);
    const erased = await roomMsgs(s, 'ehroom');
    assert.deepEqual(erased.map((m) => [m.from, m.edit_history?.length ?? null]), [['ehu', 2], [null, 0], ['ehu', 0], [null, 0]]);
    await waitFor('the table without ehv\'s versions', async () => {
      try { return (await iceRows(s, 'room_messages')).find((x) => String(x.msg_id) === rs[1].msg_id)?.from === null; } catch { return false; }
    }, 30000);
    await committed(s, ['messages', 'room_messages']);
    await sameAsApi(s, 'room_messages', erased);
    await waitFor('no file holds ehv\'s text', async () => filesHolding(path.join(s.dir, 'cold'), 'ehv secret').length === 0, 30000);
  });
});

// A manual upgrade check, registered only with STRATA_OLD_BIN set (a build from before
// edit_history was a column): building an old binary is not part of the suite. CI covers old
// files through unit_chat and unit_cold (files without the column read null and merge into the
// new layout byte for byte), not through a skipped case.
if (process.env.STRATA_OLD_BIN) test('files of an older strata (no edit_history column) read null, and a fold writes the API\'s histories', async () => {
  const args = ['--flush-interval', '3600', '--table-commit-interval', '1'];
  const old = await startStrata({ args, bin: process.env.STRATA_OLD_BIN });
  const dir = old.dir;
  const ms = [];
  try {
    for (let i = 0; i < 4; i++)
      ms.push(await ok(old, 'POST', '/v1/users/eho/messages', { conversation_id: 'c', from: 'eho', content: `old ${i}` }, 201));
    await ok(old, 'PATCH', `/v1/users/eho/messages/${ms[0].msg_id}`, { content: 'old 0 edited hot' });
    await ok(old, 'DELETE', `/v1/users/eho/messages/${ms[3].msg_id}`);
    await flushAll(old, 'eho');
  } finally {
    await old.stop();
  }
  const s = await startStrata({ dataDir: dir, args });
  await withServer(s, async () => {
    const before = await userMsgs(s, 'eho');
    assert.deepEqual(before.map((m) => m.content), ['old 0 edited hot', 'old 1', 'old 2', null]);
    assert.equal(before[0].edit_history.length, 1);
    // the old object has no edit_history column: both readers see null in every row
    const ice = await iceRows(s, 'messages');
    assert.equal(ice.length, 4);
    assert.ok(ice.every((x) => (x.edit_history ?? null) === null), 'icebird reads the old file');
    const duck = await duckQuery(`SELECT count(*)::INT AS n FROM parquet_schema([${dataFiles(s, 'messages').map((f) => `'${f}'`).join(',')}]) WHERE name = 'edit_history'`);
    assert.equal(duck[0].n, 0, 'the old file lacks the column');
    // a cold edit of an old row, then a fold: the new layout with every row's history
    await ok(s, 'PATCH', `/v1/users/eho/messages/${ms[1].msg_id}`, { content: 'old 1 edited cold' });
    const v = hint(s, 'messages');
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'eho' })).status, 202);
    await waitFor('the fold committed', async () => {
      if (hint(s, 'messages') <= v) return false;
      try { return (await iceRows(s, 'messages')).find((x) => String(x.msg_id) === ms[1].msg_id)?.edit_history?.length === 1; } catch { return false; }
    }, 60000);
    await committed(s, ['messages']);
    const api = await userMsgs(s, 'eho');
    assert.deepEqual(api.map((m) => m.content), ['old 0 edited hot', 'old 1 edited cold', 'old 2', null]);
    await sameAsApi(s, 'messages', api);
  });
});
