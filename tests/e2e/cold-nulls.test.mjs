// SPDX-License-Identifier: MIT
// SPEC v5 §5.1 and §2.2 (issue 45): in the cold tier's Parquet files and Iceberg tables a deleted
// message's content and metadata are null, never "", and an erased user's room tombstones carry
// `from` null (no file under the cold folder names the user); reads answer as SPEC §2.2 says, hot
// and cold alike. Files written by an older strata (from and content REQUIRED) stay readable,
// editable and compactable: set STRATA_OLD_BIN to a build of main before the change to run that
// part (not registered otherwise). edited_at and deleted_at are columns of the objects and the tables
// too, the flush's and the fold's (issue 45).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { icebergRead } from 'icebird';
import { duckQuery, duckRows, erasureDone, filesHolding, parquetFiles, waitFor } from './cold-lib.mjs';
import { serveFiles } from './iceberg-lib.mjs';
import { startStrata } from './lib.mjs';

const ok = async (s, method, p, body, status = 200) => {
  const r = await s.req(method, p, body);
  assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
  return r.json;
};
const batchFiles = (dir, sub) => parquetFiles(path.join(dir, 'cold', sub)).filter((f) => path.basename(f).startsWith('batch-'));
const list = (fs) => `[${fs.map((f) => `'${f}'`).join(',')}]`;


async function flushed(s, u) {
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor('the flush', async () => (await s.req('GET', `/v1/users/${u}/stats`)).json.hot_messages === 0);
}

// The rows of the message objects, DuckDB's answer on null-ness (null while the reaper deletes
// one between listing and reading).
async function nullness(files) {
  try {
    return await duckQuery(`SELECT msg_id::VARCHAR AS msg_id, content IS NULL AS cn, metadata IS NULL AS mn, "from" IS NULL AS fn, "from" AS f, content
      FROM read_parquet(${list(files)}) ORDER BY msg_id::BIGINT`);
  } catch { return null; }
}

async function readAll(s, p) {
  const r = await ok(s, 'GET', `${p}?limit=1000`);
  return r.messages;
}

const tableDir = (s, t) => path.join(s.dir, 'cold', '_tables', t, 'metadata');
const hint = (s, t) => Number(readFileSync(path.join(tableDir(s, t), 'version-hint.text'), 'utf8'));
const tableMeta = (s, t) => JSON.parse(readFileSync(path.join(tableDir(s, t), `v${hint(s, t)}.metadata.json`), 'utf8'));
// Waits until no table has a change pending.
const committed = (s) => waitFor('the tables committed', async () => (await ok(s, 'GET', '/v1/admin/tables')).tables.every((t) => t.pending === 0), 30000);
async function iceRows(s, t) {
  const m = tableMeta(s, t);
  const restore = serveFiles();
  try { return await icebergRead({ tableUrl: m.location, metadataFileName: `v${hint(s, t)}.metadata.json` }); } finally { restore(); }
}

test('a deleted message folded into its object: content and metadata null in Parquet and in the table', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--table-commit-interval', '1'] });
  try {
    const ms = [];
    for (let i = 0; i < 4; i++)
      ms.push(await ok(s, 'POST', '/v1/users/nia/messages', { conversation_id: 'c', from: 'nia', content: `secret ${i}`, metadata: { i } }, 201));
    // a hot tombstone flushed, then a cold one folded in
    const hot = await ok(s, 'DELETE', `/v1/users/nia/messages/${ms[1].msg_id}`);
    await flushed(s, 'nia');
    await committed(s);
    const cold = await ok(s, 'DELETE', `/v1/users/nia/messages/${ms[2].msg_id}`);
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'nia' })).status, 202);
    const rows = await waitFor('the fold', async () => {
      // the fold's own object ("…-{seq}.{n}.parquet"): the objects it replaced are held in
      // storage while the kept snapshots name them (SPEC v5 §5.1)
      const rs = await nullness(batchFiles(s.dir, 'nia').filter((f) => /-\d+\.\d+\.parquet$/.test(f)));
      return rs && rs.length === 4 && rs[2].cn ? rs : null;
    }, 30000);
    for (const [i, dead] of [[0, false], [1, true], [2, true], [3, false]]) {
      assert.equal(rows[i].msg_id, ms[i].msg_id);
      assert.deepEqual([rows[i].cn, rows[i].mn, rows[i].fn], [dead, dead, false], `row ${i}`);
    }
    // the API answers a tombstone as SPEC §2.2 says, the same as it answered the delete
    const got = await readAll(s, '/v1/users/nia/messages');
    for (const t of [hot, cold]) {
      const m = got.find((x) => x.msg_id === t.msg_id);
      assert.deepEqual([m.content, m.metadata, m.deleted_at], [null, null, t.deleted_at]);
    }
    // icebird reads the table: the tombstones' content and metadata are null, the others' not
    const ice = await waitFor('the table', async () => {
      try {
        const r = await iceRows(s, 'messages');
        return r.length === 4 && r.find((x) => String(x.msg_id) === cold.msg_id)?.content === null ? r : null;
      } catch { return null; }
    }, 30000);
    for (const x of ice) {
      const dead = [hot.msg_id, cold.msg_id].includes(String(x.msg_id));
      assert.equal(x.content === null, dead);
      assert.equal(x.metadata === null, dead);
      assert.equal(x.from, 'nia');
    }
    // the fold changed rows: its snapshot is an overwrite, never a replace (SPEC v5 §5.1)
    await committed(s);
    const ops = tableMeta(s, 'messages').snapshots.map((x) => x.summary.operation);
    assert.deepEqual(ops, ['append', 'overwrite']);
  } finally {
    await s.stop();
    s.cleanup();
  }
});

// The edit and delete times of the message objects (µs as text; null: null), DuckDB's answer.
async function times(files) {
  try {
    return await duckQuery(`SELECT msg_id::VARCHAR AS msg_id, epoch_us(edited_at)::VARCHAR AS e, epoch_us(deleted_at)::VARCHAR AS d
      FROM read_parquet(${list(files)}) ORDER BY msg_id::BIGINT`);
  } catch { return null; }
}
const us = (v) => (v === null || v === undefined ? null : String(v));
// icebird's timestamptz value as µs (a Date holds ms only: compared at that precision by the caller)
const iceUs = (v) => (v === null || v === undefined ? null : v instanceof Date ? v.getTime() * 1000 : Number(v));

test('edited_at and deleted_at are columns of the objects and the table: the flush\'s and the fold\'s', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--table-commit-interval', '1'] });
  try {
    const ms = [];
    for (let i = 0; i < 5; i++)
      ms.push(await ok(s, 'POST', '/v1/users/tia/messages', { conversation_id: 'c', from: 'tia', content: `m ${i}` }, 201));
    // edited while hot, then flushed: the flush's object says when
    const hotEdit = await ok(s, 'PATCH', `/v1/users/tia/messages/${ms[0].msg_id}`, { content: 'hot edit' });
    assert.equal(typeof hotEdit.edited_at, 'number');
    await flushed(s, 'tia');
    const flushT = await times(batchFiles(s.dir, 'tia'));
    assert.ok(flushT, 'DuckDB reads edited_at and deleted_at of the flush\'s object');
    assert.deepEqual(flushT.map((r) => [r.msg_id, r.e, r.d]),
      ms.map((m, i) => [m.msg_id, i === 0 ? us(hotEdit.edited_at) : null, null]));
    await committed(s);
    // a cold edit and a cold delete, folded in
    const coldEdit = await ok(s, 'PATCH', `/v1/users/tia/messages/${ms[2].msg_id}`, { content: 'cold edit' });
    const del = await ok(s, 'DELETE', `/v1/users/tia/messages/${ms[3].msg_id}`);
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'tia' })).status, 202);
    const rows = await waitFor('the fold', async () => {
      const rs = await times(batchFiles(s.dir, 'tia').filter((f) => /-\d+\.\d+\.parquet$/.test(f)));
      return rs && rs.length === 5 && rs[3].d ? rs : null;
    }, 30000);
    // the API answers as before the fold; the fold's object holds the same times
    const got = await readAll(s, '/v1/users/tia/messages');
    assert.equal(got.length, 5);
    assert.equal(got[0].edited_at, hotEdit.edited_at);
    assert.equal(got[2].edited_at, coldEdit.edited_at);
    assert.equal(got[3].deleted_at, del.deleted_at);
    const want = got.map((m) => [m.msg_id, us(m.edited_at), us(m.deleted_at)]);
    assert.deepEqual(rows.map((r) => [r.msg_id, r.e, r.d]), want);
    assert.deepEqual(want.map(([, e, d]) => [e !== null, d !== null]),
      [[true, false], [false, false], [true, false], [del.edited_at != null, true], [false, false]]);
    // icebird reads the table: the same times
    const ice = await waitFor('the table', async () => {
      try {
        const r = await iceRows(s, 'messages');
        return r.length === 5 && r.some((x) => x.deleted_at != null) ? r : null;
      } catch { return null; }
    }, 30000);
    for (const m of got) {
      const x = ice.find((y) => String(y.msg_id) === m.msg_id);
      for (const k of ['edited_at', 'deleted_at']) {
        const v = iceUs(x[k]);
        if (m[k] == null) assert.equal(v, null, `${m.msg_id} ${k}`);
        else if (x[k] instanceof Date) assert.equal(v, Math.floor(m[k] / 1000) * 1000, `${m.msg_id} ${k}`);
        else assert.equal(v, m[k], `${m.msg_id} ${k}`);
      }
    }
  } finally {
    await s.stop();
    s.cleanup();
  }
});

test('an erased user\'s room tombstones: from null in the API and in Parquet, the name in no cold file', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--erase-within', '5', '--table-commit-interval', '1'] });
  try {
    await ok(s, 'POST', '/v1/rooms', { room_id: 'nullroom', members: ['zelda', 'yuri'] }, 201);
    const post = (from, content) => ok(s, 'POST', '/v1/rooms/nullroom/messages', { from, content }, 201);
    const early = await post('zelda', 'cold by zelda');
    await post('yuri', 'cold by yuri');
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    const roomDir = path.join('shared', 'conversations', 'nullroom');
    await waitFor('the room flushed', async () => ((await nullness(batchFiles(s.dir, roomDir))) || []).length === 2);
    await post('zelda', 'hot by zelda');
    // a tombstone made before the erasure (a cold one: its delta names the author) loses its from too
    const t0 = await ok(s, 'DELETE', `/v1/rooms/nullroom/messages/${early.msg_id}`);
    assert.equal(t0.from, 'zelda');
    const e = await ok(s, 'DELETE', '/v1/users/zelda', undefined, 202);
    await erasureDone(s, e.erasure_id);
    const got = await readAll(s, '/v1/rooms/nullroom/messages');
    assert.deepEqual(got.map((m) => [m.from, m.content]), [[null, null], ['yuri', 'cold by yuri'], [null, null]]);
    assert.equal(got[0].deleted_at, t0.deleted_at, 'the earlier tombstone keeps its time');
    assert.equal((await ok(s, 'GET', '/v1/rooms/nullroom')).total_messages, 1);
    // the hot tombstone flushed too: every row of the room in Parquet, zelda's with from null
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    const rows = await waitFor('the room\'s objects', async () => {
      const rs = await nullness(batchFiles(s.dir, roomDir));
      return rs && rs.length === 3 && rs[0].fn ? rs : null;
    }, 30000);
    assert.deepEqual(rows.map((r) => [r.f, r.cn]), [[null, true], ['yuri', false], [null, true]]);
    // no file under the cold folder (objects, deltas, table metadata) holds the name
    await waitFor('no file names zelda', async () => filesHolding(path.join(s.dir, 'cold'), 'zelda').length === 0, 30000);
  } finally {
    await s.stop();
    s.cleanup();
  }
});

// A manual upgrade check, registered only with STRATA_OLD_BIN set (a build of 887ca6c or older):
// building an old binary is not part of the suite. CI covers the old layouts through unit_chat
// (old-layout files read and merge byte-exact with new ones), not through a skipped case.
if (process.env.STRATA_OLD_BIN) test('cold files of an older strata (from and content REQUIRED) read, change and compact after the upgrade', async () => {
  const args = ['--flush-interval', '3600'];
  const old = await startStrata({ args, bin: process.env.STRATA_OLD_BIN });
  const dir = old.dir;
  const ms = [];
  try {
    for (let i = 0; i < 6; i++)
      ms.push(await ok(old, 'POST', '/v1/users/oto/messages', { conversation_id: `c${i % 2}`, from: 'oto', content: `old ${i}`, ...(i % 3 ? {} : { metadata: { i } }) }, 201));
    await ok(old, 'DELETE', `/v1/users/oto/messages/${ms[5].msg_id}`); // a tombstone of the old layout
    await flushed(old, 'oto');
    await ok(old, 'POST', '/v1/users/oto/messages', { conversation_id: 'c0', from: 'oto', content: 'old 6' }, 201).then((m) => ms.push(m));
    await flushed(old, 'oto');
  } finally {
    await old.stop();
  }
  const oldFiles = batchFiles(dir, 'oto');
  assert.equal(oldFiles.length, 2);
  // the old layout: content REQUIRED (a tombstone's ""), as DuckDB sees it
  assert.equal((await duckRows(oldFiles)).find((r) => r.msg_id === ms[5].msg_id).content, '');
  const s = await startStrata({ dataDir: dir, args });
  try {
    const before = await readAll(s, '/v1/users/oto/messages');
    assert.deepEqual(before.map((m) => m.content), ['old 0', 'old 1', 'old 2', 'old 3', 'old 4', null, 'old 6']);
    assert.deepEqual(before.map((m) => m.metadata), [{ i: 0 }, null, null, { i: 3 }, null, null, null]);
    // changes of old rows, then a compaction of both old objects into one of the new layout
    await ok(s, 'PATCH', `/v1/users/oto/messages/${ms[1].msg_id}`, { content: 'edited' });
    const del = await ok(s, 'DELETE', `/v1/users/oto/messages/${ms[3].msg_id}`);
    await ok(s, 'POST', '/v1/users/oto/messages', { conversation_id: 'c1', from: 'oto', content: 'new 7' }, 201).then((m) => ms.push(m));
    await flushed(s, 'oto');
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'oto' })).status, 202);
    const rows = await waitFor('one object of the new layout', async () => {
      const fs = batchFiles(dir, 'oto');
      if (fs.length !== 1 || fs.includes(oldFiles[0]) || fs.includes(oldFiles[1])) return null;
      const rs = await nullness(fs);
      return rs && rs.length === 8 ? rs : null;
    }, 30000);
    assert.deepEqual(rows.map((r) => r.content), ['old 0', 'edited', 'old 2', null, 'old 4', null, 'old 6', 'new 7']);
    assert.deepEqual(rows.map((r) => r.mn), [false, true, true, true, true, true, true, true]);
    const after = await readAll(s, '/v1/users/oto/messages');
    assert.deepEqual(after.map((m) => m.content), ['old 0', 'edited', 'old 2', null, 'old 4', null, 'old 6', 'new 7']);
    assert.equal(after[3].deleted_at, del.deleted_at);
    assert.deepEqual(after.map((m) => m.from), Array(8).fill('oto'));
  } finally {
    await s.stop();
    s.cleanup();
  }
});
