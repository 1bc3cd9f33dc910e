// SPDX-License-Identifier: MIT
// `strata rebuild-meta` over a lost data dir (SPEC §9, issue 38 item 2): the cold tier holds
// messages only, so a rebuild from it alone would restart every sequence at 1 and lose counters,
// events and hot bookings. It refuses (non-zero, naming what is lost, writing nothing) unless
// --backup-url supplies them or --accept-loss is given; an empty cold tier is refused too.
// The Iceberg tables are the truth of the cold tier (SPEC v5 §5.1, issue 45): objects of the
// bucket that the current snapshot does not name (a deleted conversation folded away, an object a
// fold replaced) are not taken back.
import assert from 'node:assert/strict';
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, sleep, startStrata, tempDir } from './lib.mjs';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { metric, ok, runAsync, shipped } from './backup-lib.mjs';

const run = runAsync; // a sanitizer report fails the test (backup-lib.mjs)

// Sequence 101 issued, a counter, distinct members, an event with a held booking, messages
// flushed to the cold tier and more still hot. Returns what must come back.
async function writeAll(s) {
  const w = {};
  w.seq = (await ok(s, 'POST', '/v1/sequences/invoice/next', { count: 101 })).json.last;
  assert.equal(w.seq, 101);
  for (let i = 0; i < 4; i++) await ok(s, 'POST', '/v1/counters/visits/incr', { by: 5 });
  for (const m of ['ann', 'bob', 'ann']) await ok(s, 'POST', '/v1/counters/people/distinct', { member: m });
  await ok(s, 'POST', '/v1/events', { event_id: 'gig', hold_seconds: 3600, sections: [{ name: 'A', rows: 2, cols: 5, price: 100 }] }, {}, 201);
  w.held = (await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', seats: ['1-1', '1-2'] }, {}, 201)).json;
  for (let i = 0; i < 5; i++) await ok(s, 'POST', '/v1/users/alice/messages', { conversation_id: 'c1', from: 'a', content: `cold ${i}` }, {}, 201);
  await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
  await waitFor('the flush', async () => (await s.req('GET', '/v1/users/alice/stats')).json.cold_messages === 5);
  for (let i = 0; i < 2; i++) await ok(s, 'POST', '/v1/users/alice/messages', { conversation_id: 'c1', from: 'b', content: `hot ${i}` }, {}, 201);
  w.messages = (await ok(s, 'GET', '/v1/users/alice/messages?limit=100')).json.messages;
  assert.equal(w.messages.length, 7);
  w.event = (await ok(s, 'GET', '/v1/events/gig')).json;
  return w;
}

// A node with a cold tier and (when bk) a backup, written to, then lost: data dir deleted.
async function lostNode(dir, bk) {
  const args = ['--cold-url', `file://${dir}/cold`, '--flush-interval', '3600'];
  if (bk) args.push('--backup-url', bk, '--backup-interval', '100');
  const s = await startStrata({ dataDir: path.join(dir, 'data'), args });
  try {
    if (bk) await waitFor('the first snapshot', async () => (await metric(s, 'strata_backup_snapshots_total')) >= 1);
    const w = await writeAll(s);
    if (bk) await shipped(s);
    return w;
  } finally {
    await s.kill9();
    rmSync(path.join(dir, 'data'), { recursive: true, force: true });
  }
}

test('regression: rebuild-meta over a lost data dir refuses to restart sequences (exit non-zero, names what is lost, writes nothing)', async () => {
  const dir = tempDir('rbm');
  try {
    await lostNode(dir);
    const data = path.join(dir, 'data');
    const r = await run(['rebuild-meta', '--data-dir', data, '--cold-url', `file://${dir}/cold`]);
    assert.notEqual(r.code, 0, `rebuild-meta must not succeed without the lost state:\n${r.err}`);
    assert.match(r.err, /sequences \(numbers already issued would be issued again\)/);
    assert.match(r.err, /counters/);
    assert.match(r.err, /events and their bookings still hot/);
    assert.match(r.err, /--backup-url URL .* or --accept-loss/);
    assert.match(r.err, /holds 1 object\(s\) of 1 user\(s\)/, 'it says what the cold tier does hold');
    assert.ok(!existsSync(path.join(data, 'data.mdb')), 'no store a later start would use');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('rebuild-meta --backup-url: sequences continue past their old last, counters, events and bookings come back, messages from cold and backup', async () => {
  const dir = tempDir('rbm');
  const bk = `file://${dir}/bk`;
  let s;
  try {
    const w = await lostNode(dir, bk);
    const data = path.join(dir, 'data');
    const args = ['--cold-url', `file://${dir}/cold`];
    const r = await run(['rebuild-meta', '--data-dir', data, '--backup-url', bk, ...args]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, /rebuild-meta: from the backup: snapshot \S+ \+ \d+ record\(s\)/);
    assert.match(r.err, /rebuild-meta: 1 users, 1 conversations, 5 cold messages/);
    assert.deepEqual(readdirSync(data).sort(), ['data.mdb'], 'the scratch dir is gone');
    // run again into a dir that now holds a store: --backup-url is refused, nothing changed
    const again = await run(['rebuild-meta', '--data-dir', data, '--backup-url', bk, ...args]);
    assert.notEqual(again.code, 0);
    assert.match(again.err, /holds one \(data\.mdb\)/);
    s = await startStrata({ dataDir: data, args });
    assert.equal((await ok(s, 'GET', '/v1/sequences/invoice')).json.last >= 101, true);
    const next = (await ok(s, 'POST', '/v1/sequences/invoice/next')).json;
    assert.ok(next.first > w.seq, `number ${next.first} was issued before (last was ${w.seq})`);
    assert.equal((await ok(s, 'GET', '/v1/counters/visits')).json.value, 20);
    assert.equal((await ok(s, 'GET', '/v1/counters/people')).json.value, 2);
    assert.equal((await ok(s, 'POST', '/v1/counters/people/distinct', { member: 'bob' })).json.added, false);
    const ev = (await ok(s, 'GET', '/v1/events/gig')).json;
    assert.deepEqual(ev.sections, w.event.sections);
    const held = (await ok(s, 'GET', `/v1/bookings/${w.held.booking_id}`)).json;
    assert.equal(held.status, 'reserved');
    assert.deepEqual(held.seats, ['1-1', '1-2']);
    assert.deepEqual((await ok(s, 'GET', '/v1/users/alice/messages?limit=100')).json.messages, w.messages);
    const stats = (await ok(s, 'GET', '/v1/users/alice/stats')).json;
    assert.equal(stats.cold_messages, 5);
    assert.equal(stats.hot_messages, 2);
  } finally {
    if (s) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('rebuild-meta --accept-loss rebuilds the messages from cold and exits 0, saying what was lost', async () => {
  const dir = tempDir('rbm');
  let s;
  try {
    const w = await lostNode(dir);
    const data = path.join(dir, 'data');
    const args = ['--cold-url', `file://${dir}/cold`];
    const r = await run(['rebuild-meta', '--data-dir', data, '--accept-loss', ...args]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, /--accept-loss: not rebuilt, lost: sequences/);
    assert.match(r.err, /rebuild-meta: 1 users, 1 conversations, 5 cold messages/);
    s = await startStrata({ dataDir: data, args });
    assert.deepEqual((await ok(s, 'GET', '/v1/users/alice/messages?limit=100')).json.messages, w.messages.slice(0, 5));
  } finally {
    if (s) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('rebuild-meta over an empty or missing cold dir says nothing was found and exits non-zero (0 with --accept-loss)', async () => {
  const dir = tempDir('rbm');
  try {
    mkdirSync(path.join(dir, 'empty'));
    for (const cold of ['empty', 'missing']) {
      const data = path.join(dir, `data-${cold}`);
      const r = await run(['rebuild-meta', '--data-dir', data, '--cold-url', `file://${dir}/${cold}`]);
      assert.notEqual(r.code, 0, cold);
      assert.match(r.err, new RegExp(`no cold objects found at file://${dir}/${cold}: nothing to rebuild from`), cold);
      assert.doesNotMatch(r.err, /0 users/);
      assert.ok(!existsSync(path.join(data, 'data.mdb')), cold);
    }
    assert.ok(!existsSync(path.join(dir, 'missing')), 'a missing cold dir is not created');
    const r = await run(['rebuild-meta', '--data-dir', path.join(dir, 'd'), '--cold-url', `file://${dir}/empty`, '--accept-loss']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, /no cold objects found/);
    assert.ok(existsSync(path.join(dir, 'd', 'data.mdb')));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Every file under dir (relative paths), but the tables' metadata.
function objectsUnder(dir, rel = '') {
  const out = [];
  for (const e of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = path.join(rel, e.name);
    if (e.isDirectory()) { if (r !== '_tables') out.push(...objectsUnder(dir, r)); } else out.push(r);
  }
  return out;
}

test('rebuild-meta takes the tables\' current snapshot as the truth: a deleted conversation, a deleted and an edited cold message stay as the live node showed them (issue 45)', async () => {
  const dir = tempDir('rbm');
  const bk = `file://${dir}/bk`;
  const cold = path.join(dir, 'cold');
  const args = ['--cold-url', `file://${cold}`, '--flush-interval', '3600', '--table-commit-interval', '1',
    '--delta-max-age', '1', '--booking-hot-seconds', '0'];
  const post = async (s, conv, content) => (await ok(s, 'POST', '/v1/users/alice/messages', { conversation_id: conv, from: 'a', content }, {}, 201)).json;
  const flushed = async (s, cold) => {
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('the flush', async () => (await s.req('GET', '/v1/users/alice/stats')).json.cold_messages === cold);
  };
  const tables = async (s) => Object.fromEntries((await ok(s, 'GET', '/v1/admin/tables')).json.tables.map((t) => [t.table, t]));
  const committed = (s, after = -1) => waitFor('the tables committed', async () => {
    const t = await tables(s);
    const all = Object.values(t).every((x) => x.pending === 0 && x.snapshot_id !== null);
    return all && t.messages.sequence_number > after ? t : null;
  }, 30000);
  const answers = async (s) => ({
    messages: (await ok(s, 'GET', '/v1/users/alice/messages?limit=100')).json.messages,
    convs: (await ok(s, 'GET', '/v1/users/alice/conversations')).json.conversations.map((c) => [c.conversation_id, c.total_messages]),
    kept: (await ok(s, 'GET', '/v1/users/alice/conversations/kept')).json.total_messages,
    stats: (({ total_messages, cold_messages, hot_messages }) => ({ total_messages, cold_messages, hot_messages }))((await ok(s, 'GET', '/v1/users/alice/stats')).json),
    room: (await ok(s, 'GET', '/v1/rooms/rbroom/messages?limit=100')).json.messages,
    bookings: (await ok(s, 'GET', '/v1/events/gig/bookings?limit=100')).json.bookings,
  });
  let s = await startStrata({ dataDir: path.join(dir, 'data'), args: [...args, '--backup-url', bk, '--backup-interval', '100'] });
  let live;
  try {
    await waitFor('the first snapshot', async () => (await metric(s, 'strata_backup_snapshots_total')) >= 1);
    // 'gone' in an object of its own, then 'kept' (and a room's messages, finished bookings)
    for (let i = 0; i < 4; i++) await post(s, 'gone', `gone ${i}`);
    await flushed(s, 4);
    const kept = [];
    for (let i = 0; i < 3; i++) kept.push(await post(s, 'kept', `kept ${i}`));
    await ok(s, 'POST', '/v1/rooms', { room_id: 'rbroom', members: ['bob'] }, {}, 201);
    for (let i = 0; i < 2; i++) await ok(s, 'POST', '/v1/rooms/rbroom/messages', { from: 'bob', content: `room ${i}` }, {}, 201);
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', sections: [{ name: 'A', rows: 1, cols: 5, price: 10 }] }, {}, 201);
    for (let i = 1; i <= 2; i++) {
      const b = (await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', seats: [`1-${i}`] }, {}, 201)).json;
      await ok(s, 'POST', `/v1/bookings/${b.booking_id}/confirm`);
    }
    await flushed(s, 7);
    const before = (await committed(s)).messages.sequence_number;
    // a copy of the bucket as it is now: synced back below by a copy that deletes nothing, so the
    // objects the changes replace are still in the bucket rebuild-meta reads
    cpSync(cold, path.join(dir, 'stale'), { recursive: true, filter: (src) => path.basename(src) !== '_tables' });
    assert.deepEqual((await ok(s, 'DELETE', '/v1/users/alice/conversations/gone')).json, { deleted: 4 });
    await ok(s, 'DELETE', `/v1/users/alice/messages/${kept[1].msg_id}`);
    await ok(s, 'PATCH', `/v1/users/alice/messages/${kept[2].msg_id}`, { content: 'kept 2 edited' });
    await ok(s, 'POST', '/v1/admin/compact', {}, {}, 202);
    // the objects the fold replaced stay in the bucket (a kept backup point names them): the
    // newest object is the fold's
    await waitFor('the fold', async () => {
      const files = parquetFiles(path.join(cold, 'alice')).filter((f) => path.basename(f).startsWith('batch-'))
        .filter((f) => !existsSync(path.join(dir, 'stale', path.relative(cold, f))))
        .sort((a, b) => statSync(a).mtimeMs - statSync(b).mtimeMs).slice(-1);
      const rows = files.length ? await duckRows(files).catch(() => null) : null;
      return rows && rows.length === 3 && rows.every((r) => r.conversation_id === 'kept') &&
        rows.some((r) => r.content === 'kept 2 edited');
    }, 30000);
    await committed(s, before);
    live = await answers(s);
    assert.deepEqual(live.convs, [['kept', 2]], 'the live node shows the deletes');
    assert.equal(live.stats.total_messages, 2);
    await shipped(s);
  } finally {
    await s.kill9();
    rmSync(path.join(dir, 'data'), { recursive: true, force: true });
  }
  try {
    let back = 0;
    for (const f of objectsUnder(path.join(dir, 'stale'))) {
      if (existsSync(path.join(cold, f))) { // still there: held for the kept backup point
        if (/alice\/batch-/.test(f)) back++;
        continue;
      }
      mkdirSync(path.dirname(path.join(cold, f)), { recursive: true });
      copyFileSync(path.join(dir, 'stale', f), path.join(cold, f));
      back++;
    }
    assert.ok(back >= 2, `the replaced objects are in the bucket again (${back})`);
    const r = await run(['rebuild-meta', '--data-dir', path.join(dir, 'data'), '--backup-url', bk, ...args]);
    assert.equal(r.code, 0, r.err);
    s = await startStrata({ dataDir: path.join(dir, 'data'), args });
    assert.equal((await s.req('GET', '/v1/users/alice/conversations/gone')).status, 404, 'the deleted conversation stays gone');
    const now = await answers(s);
    assert.deepEqual(now.convs, live.convs);
    assert.equal(now.kept, live.kept);
    assert.deepEqual(now.stats, live.stats);
    assert.deepEqual(now.messages, live.messages);
    const [m0, m1, m2] = now.messages.slice().sort((a, b) => (BigInt(a.msg_id) < BigInt(b.msg_id) ? -1 : 1));
    assert.equal(m0.content, 'kept 0');
    assert.equal(m1.content, null, 'the deleted message stays deleted');
    assert.equal(m2.content, 'kept 2 edited');
    assert.deepEqual(now.room, live.room);
    assert.equal(now.room.length, 2);
    assert.deepEqual(now.bookings, live.bookings);
    assert.equal(now.bookings.length, 2);
    assert.match(r.err, /rebuild-meta: table messages v\d+, snapshot -?\d+: 1 data file\(s\)/);
    assert.match(r.err, /rebuild: 2 object\(s\) no table snapshot names \(replaced or deleted before it was committed\) not taken/);
  } finally {
    if (s) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('rebuild-meta: a user whose every object retention dropped stays empty, though the dropped objects are still in the bucket (held for the kept snapshot that names them; issue 45)', async () => {
  const dir = tempDir('rbm-solo');
  const cold = path.join(dir, 'cold');
  const args = ['--cold-url', `file://${cold}`, '--flush-interval', '3600', '--table-commit-interval', '1', '--retention-seconds', '2'];
  const tables = async (s) => (await ok(s, 'GET', '/v1/admin/tables')).json.tables.find((t) => t.table === 'messages');
  const committed = (s, after = -1) => waitFor('the tables committed', async () => {
    const t = await tables(s);
    return t.pending === 0 && t.snapshot_id !== null && t.sequence_number > after ? t : null;
  }, 30000);
  const stats = async (s) => (({ total_messages, cold_messages }) => [total_messages, cold_messages])((await ok(s, 'GET', '/v1/users/solo/stats')).json);
  let s = await startStrata({ dataDir: path.join(dir, 'data'), args });
  let held;
  try {
    for (let i = 0; i < 3; i++) await ok(s, 'POST', '/v1/users/solo/messages', { conversation_id: 'only', from: 'a', content: `only ${i}` }, {}, 201);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('the flush', async () => (await stats(s))[1] === 3);
    const before = (await committed(s)).sequence_number;
    held = parquetFiles(path.join(cold, 'solo'));
    assert.equal(held.length, 1, 'solo has one object');
    await sleep(2500);
    // the pass drops the expired object and flushes another user's message: one commit that
    // adds and deletes (an overwrite; a commit that only deletes keeps them too:
    // tables-expire.test.mjs)
    await ok(s, 'POST', '/v1/users/other/messages', { conversation_id: 'c', from: 'o', content: 'young' }, {}, 201);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('retention', async () => (await stats(s))[0] === 0, 30000);
    await committed(s, before);
    // the snapshot before names it and is kept (--table-keep, a day): the object is held
    assert.ok(existsSync(held[0]), `${held[0]} is held`);
    assert.deepEqual((await ok(s, 'GET', '/v1/users/solo/messages?limit=100')).json.messages, []);
  } finally {
    await s.kill9();
    rmSync(path.join(dir, 'data'), { recursive: true, force: true });
  }
  try {
    const r = await run(['rebuild-meta', '--data-dir', path.join(dir, 'data'), '--accept-loss', ...args]);
    assert.equal(r.code, 0, r.err);
    assert.ok(existsSync(held[0]), 'the object is still in the bucket');
    s = await startStrata({ dataDir: path.join(dir, 'data'), args });
    assert.deepEqual((await ok(s, 'GET', '/v1/users/solo/messages?limit=100')).json.messages, [], 'the dropped messages stay gone');
    const c = await s.req('GET', '/v1/users/solo/conversations/only');
    assert.ok(c.status === 404 || c.json.total_messages === 0, c.text);
    assert.deepEqual(await stats(s), [0, 0]);
    assert.match(r.err, /rebuild-meta: 1 older snapshot\(s\) kept name 1 file\(s\) the current one does not/);
  } finally {
    if (s) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
