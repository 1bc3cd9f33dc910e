// SPDX-License-Identifier: MIT
// SPEC §2.1 over real sockets: rooms. Create and 409, members (roles, paging, the room cap),
// posts by members only, a 50-member room read by all with one seq, hybrid fields and reads
// across hot and cold after a flush (the objects under shared/conversations/{room}/ read with
// DuckDB), read markers, a user's rooms newest first with paging, the room stream (replay, live,
// room_member frames, a removed member's stream ending forbidden), restart and kill -9, auth-on
// rules, hostile input.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { existsSync, readdirSync, renameSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { sleep, startStrata, tempDir, wsConnect } from './lib.mjs';

const SECRET = 'rooms-test-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64({ exp: Math.floor(Date.now() / 1000) + 3600, ...payload });
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const bearer = (sub, extra = {}) => ({ Authorization: `Bearer ${jwt({ sub, ...extra })}` });

async function allMessages(s, room, q = {}, headers) {
  const out = [];
  let cursor = null;
  for (let pages = 0; pages < 10000; pages++) {
    const qs = new URLSearchParams({ ...q, ...(cursor ? { cursor } : {}) });
    const r = await s.req('GET', `/v1/rooms/${room}/messages?${qs}`, undefined, headers);
    assert.equal(r.status, 200, r.text);
    out.push(...r.json.messages);
    cursor = r.json.next;
    if (cursor === null) return out;
  }
  throw new Error('paging did not end');
}

async function frames(ws, pred, ms = 5000) {
  const got = [];
  const end = Date.now() + ms;
  for (;;) {
    const f = await ws.next(Math.max(1, end - Date.now()));
    if (f.op === -1) throw new Error(`stream closed; got ${JSON.stringify(got)}`);
    if (f.json) got.push(f.json);
    if (f.json && pred(f.json, got)) return got;
  }
}

describe('rooms (auth off)', () => {
  let s;
  before(async () => { s = await startStrata({ args: ['--flush-interval', '3600', '--max-room-members', '60'] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('create: 201 with the room, 409 for an existing id, the route must name it', async () => {
    const r = await s.req('POST', '/v1/rooms', { room_id: 'r1', name: 'Room one', members: ['alice', 'bob'] });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.room_id, 'r1');
    assert.equal(r.json.name, 'Room one');
    assert.equal(r.json.members, 2);
    assert.equal(r.json.total_messages, 0);
    assert.equal(r.json.last_msg_id, null);
    assert.equal(r.json.updated, r.json.created);
    const again = await s.req('POST', '/v1/rooms', { room_id: 'r1', members: ['carol'] });
    assert.equal(again.status, 409, again.text);
    assert.equal(again.json.error.code, 'conflict');
    const route = await s.req('POST', '/v1/rooms?route=room:other', { room_id: 'r2', members: ['a'] });
    assert.equal(route.status, 400, route.text);
    const ok = await s.req('POST', '/v1/rooms?route=room:r2', { room_id: 'r2', members: ['a'] });
    assert.equal(ok.status, 201, ok.text);
    assert.equal((await s.req('GET', '/v1/rooms/nope')).status, 404);
    const got = await s.req('GET', '/v1/rooms/r1');
    assert.equal(got.status, 200);
    assert.deepEqual(got.json, r.json);
  });

  test('members: owner first, add and remove, paging, the room cap', async () => {
    await s.req('POST', '/v1/rooms', { room_id: 'm1', members: ['own', 'x1'] });
    let r = await s.req('POST', '/v1/rooms/m1/members', { add: ['x2', 'x3', 'x1'], remove: ['nobody'] });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { room_id: 'm1', members: 4 });
    r = await s.req('POST', '/v1/rooms/m1/members', { remove: ['x3'] });
    assert.deepEqual(r.json, { room_id: 'm1', members: 3 });
    const seen = [];
    let cursor = null;
    do {
      const q = new URLSearchParams({ limit: '2', ...(cursor ? { cursor } : {}) });
      const p = await s.req('GET', `/v1/rooms/m1/members?${q}`);
      assert.equal(p.status, 200, p.text);
      assert.ok(p.json.members.length <= 2);
      seen.push(...p.json.members);
      cursor = p.json.next;
    } while (cursor);
    assert.deepEqual(seen.map((m) => m.user).sort(), ['own', 'x1', 'x2']);
    const own = seen.find((m) => m.user === 'own');
    assert.equal(own.role, 'owner');
    assert.equal(seen.find((m) => m.user === 'x2').role, 'member');
    for (const m of seen) {
      assert.equal(typeof m.joined_at, 'number');
      assert.equal(m.last_read_seq, 0);
      assert.equal(m.unread, 0);
    }
    // --max-room-members 60: an add past it is 409 and changes nothing
    const many = Array.from({ length: 58 }, (_, i) => `cap${i}`);
    r = await s.req('POST', '/v1/rooms/m1/members', { add: many });
    assert.equal(r.status, 409, r.text);
    assert.equal((await s.req('GET', '/v1/rooms/m1')).json.members, 3);
    r = await s.req('POST', '/v1/rooms', { room_id: 'toobig', members: Array.from({ length: 61 }, (_, i) => `u${i}`) });
    assert.equal(r.status, 400, r.text);
    r = await s.req('POST', '/v1/rooms/m1/members', { add: ['both'], remove: ['both'] });
    assert.equal(r.status, 400, r.text);
    assert.equal((await s.req('POST', '/v1/rooms/none/members', { add: ['a'] })).status, 404);
  });

  test('posts: members only, room_id in place of conversation_id, gapless seq', async () => {
    await s.req('POST', '/v1/rooms', { room_id: 'p1', members: ['alice', 'bob'] });
    const ok = await s.req('POST', '/v1/rooms/p1/messages', { from: 'alice', content: 'hi', metadata: { conversation_id: 'kept' } });
    assert.equal(ok.status, 201, ok.text);
    assert.deepEqual(Object.keys(ok.json).sort(), ['msg_id', 'room_id', 'seq', 'timestamp']);
    assert.equal(ok.json.room_id, 'p1');
    assert.equal(ok.json.seq, 1);
    const no = await s.req('POST', '/v1/rooms/p1/messages', { from: 'mallory', content: 'hi' });
    assert.equal(no.status, 403, no.text);
    assert.equal(no.json.error.code, 'forbidden');
    assert.equal((await s.req('POST', '/v1/rooms/zz/messages', { from: 'a', content: 'x' })).status, 404);
    const two = await s.req('POST', '/v1/rooms/p1/messages', { from: 'bob', content: 'yo' });
    assert.equal(two.json.seq, 2);
    const list = await s.req('GET', '/v1/rooms/p1/messages');
    assert.equal(list.status, 200);
    assert.equal(list.json.messages.length, 2);
    const m = list.json.messages[0];
    assert.deepEqual(Object.keys(m).sort(), ['content', 'from', 'metadata', 'msg_id', 'room_id', 'seq', 'timestamp']);
    assert.deepEqual(m.metadata, { conversation_id: 'kept' });
    assert.equal(m.room_id, 'p1');
    // a member added later reads the whole history; a removed one cannot post
    await s.req('POST', '/v1/rooms/p1/members', { add: ['late'], remove: ['bob'] });
    const late = (await s.req('GET', '/v1/rooms/p1/members')).json.members.find((x) => x.user === 'late');
    assert.equal(late.unread, 2);
    assert.equal((await s.req('POST', '/v1/rooms/p1/messages', { from: 'bob', content: 'x' })).status, 403);
    // a room's messages are nobody's user messages
    const u = await s.req('GET', '/v1/users/alice/conversations');
    assert.deepEqual(u.json.conversations, []);
  });

  test('Idempotency-Key: a retried post or create answers the first answer and changes nothing', async () => {
    await s.req('POST', '/v1/rooms', { room_id: 'idem', members: ['a'] });
    const k = { 'Idempotency-Key': 'room-post-1' };
    const one = await s.req('POST', '/v1/rooms/idem/messages', { from: 'a', content: 'once' }, k);
    const two = await s.req('POST', '/v1/rooms/idem/messages', { from: 'a', content: 'once' }, k);
    assert.equal(two.status, 201);
    assert.deepEqual(two.json, one.json);
    assert.equal(two.headers['idempotent-replayed'], 'true');
    assert.equal((await s.req('POST', '/v1/rooms/idem/messages', { from: 'a', content: 'other' }, k)).status, 422);
    assert.equal((await s.req('GET', '/v1/rooms/idem')).json.total_messages, 1);
    const c = { 'Idempotency-Key': 'room-create-1' };
    const r1 = await s.req('POST', '/v1/rooms', { room_id: 'idem2', members: ['a'] }, c);
    const r2 = await s.req('POST', '/v1/rooms', { room_id: 'idem2', members: ['a'] }, c);
    assert.equal(r2.status, 201, 'the first answer, not 409');
    assert.deepEqual(r2.json, r1.json);
  });

  test('a 50-member room: one post, read by every member with one seq', async () => {
    const members = Array.from({ length: 50 }, (_, i) => `fifty${i}`);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'big', name: 'Big', members })).status, 201);
    const p = await s.req('POST', '/v1/rooms/big/messages', { from: 'fifty7', content: 'hello all' });
    assert.equal(p.status, 201);
    const ms = (await s.req('GET', '/v1/rooms/big/members?limit=1000')).json.members;
    assert.equal(ms.length, 50);
    // unread counts others' messages (SPEC §2.1 v5): the author's own post moved its marker
    for (const m of ms) assert.equal(m.unread, m.user === 'fifty7' ? 0 : 1, m.user);
    await Promise.all(members.map(async (u) => {
      const r = await s.req('GET', `/v1/users/${u}/rooms`);
      assert.equal(r.status, 200, r.text);
      const row = r.json.rooms.find((x) => x.room_id === 'big');
      assert.equal(row.last_msg_id, p.json.msg_id);
      assert.equal(row.total_messages, 1);
      assert.equal(row.unread, u === 'fifty7' ? 0 : 1, u);
      assert.equal(row.name, 'Big');
    }));
    const msgs = await allMessages(s, 'big');
    assert.equal(msgs.length, 1);
    assert.equal(msgs[0].seq, p.json.seq);
  });

  test('read markers only move forward; unread counts the others\' messages after the marker', async () => {
    await s.req('POST', '/v1/rooms', { room_id: 'rd', members: ['a', 'b'] });
    for (let i = 0; i < 5; i++) await s.req('POST', '/v1/rooms/rd/messages', { from: 'a', content: `m${i}` });
    let r = await s.req('POST', '/v1/rooms/rd/read', { user: 'b', seq: 3 });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { room_id: 'rd', user: 'b', last_read_seq: 3, unread: 2 });
    r = await s.req('POST', '/v1/rooms/rd/read', { user: 'b', seq: 1 });
    assert.deepEqual(r.json, { room_id: 'rd', user: 'b', last_read_seq: 3, unread: 2 });
    r = await s.req('POST', '/v1/rooms/rd/read', { user: 'b', seq: 99 });
    assert.deepEqual(r.json, { room_id: 'rd', user: 'b', last_read_seq: 5, unread: 0 });
    assert.equal((await s.req('POST', '/v1/rooms/rd/read', { user: 'zed', seq: 1 })).status, 403);
    assert.equal((await s.req('POST', '/v1/rooms/rd/read', { user: 'b' })).status, 400);
    assert.equal((await s.req('POST', '/v1/rooms/rd/read', { user: 'b', seq: -1 })).status, 400);
    await s.req('POST', '/v1/rooms/rd/messages', { from: 'a', content: 'new' });
    const m = (await s.req('GET', '/v1/rooms/rd/members')).json.members;
    // a's own posts moved its marker: it has nothing unread
    assert.deepEqual(m.map((x) => [x.user, x.last_read_seq, x.unread]), [['a', 6, 0], ['b', 5, 1]]);
  });

  test("a user's rooms: newest updated first, paged", async () => {
    for (const id of ['o1', 'o2', 'o3', 'o4']) await s.req('POST', '/v1/rooms', { room_id: id, members: ['olga'] });
    await s.req('POST', '/v1/rooms/o2/messages', { from: 'olga', content: 'x' });
    await sleep(2);
    await s.req('POST', '/v1/rooms/o1/messages', { from: 'olga', content: 'y' });
    const seen = [];
    let cursor = null;
    do {
      const q = new URLSearchParams({ limit: '3', ...(cursor ? { cursor } : {}) });
      const r = await s.req('GET', `/v1/users/olga/rooms?${q}`);
      assert.equal(r.status, 200, r.text);
      seen.push(...r.json.rooms);
      cursor = r.json.next;
    } while (cursor);
    assert.deepEqual(seen.map((x) => x.room_id).slice(0, 2), ['o1', 'o2']);
    assert.deepEqual(seen.map((x) => x.room_id).sort(), ['o1', 'o2', 'o3', 'o4']);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i - 1].updated >= seen[i].updated);
    assert.equal((await s.req('GET', '/v1/users/olga/rooms?cursor=junk')).status, 400);
    assert.deepEqual((await s.req('GET', '/v1/users/nobody/rooms')).json, { rooms: [], next: null });
  });

  test('hot and cold: hybrid fields exact after a flush, reads merged, objects under shared/conversations', async () => {
    await s.req('POST', '/v1/rooms', { room_id: 'cold1', members: ['c1', 'c2'] });
    const posted = [];
    for (let i = 0; i < 30; i++) posted.push((await s.req('POST', '/v1/rooms/cold1/messages', { from: i % 2 ? 'c1' : 'c2', content: `m${i}` })).json);
    const before = (await s.req('GET', '/v1/rooms/cold1')).json;
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    const dir = path.join(s.dir, 'cold', 'shared', 'conversations', 'cold1');
    const files = await waitFor('the room flush', () => { try { const f = parquetFiles(dir); return f.length ? f : null; } catch { return null; } });
    assert.match(path.basename(files[0]), /^batch-\d+-w[0-9a-f]{16}-\d+\.parquet$/);
    const rows = await duckRows(files);
    assert.equal(rows.length, 30);
    assert.ok(rows.every((r) => r.conversation_id === 'cold1'), 'the room id in conversation_id');
    assert.deepEqual(rows.map((r) => r.seq), posted.map((p) => p.seq));
    // more hot ones after the cold ones
    for (let i = 30; i < 40; i++) posted.push((await s.req('POST', '/v1/rooms/cold1/messages', { from: 'c1', content: `m${i}` })).json);
    const room = (await s.req('GET', '/v1/rooms/cold1')).json;
    assert.equal(room.total_messages, 40);
    assert.equal(room.last_msg_id, posted.at(-1).msg_id);
    assert.equal(room.first_msg_id, before.first_msg_id);
    assert.equal(room.updated, posted.at(-1).timestamp);
    const ids = posted.map((p) => p.msg_id);
    for (const [q, want] of [
      [{ limit: '7' }, ids],
      [{ limit: '7', order: 'desc' }, [...ids].reverse()],
      [{ limit: '4', after: ids[25] }, ids.slice(26)],
      [{ limit: '4', before: ids[33], order: 'desc' }, ids.slice(0, 33).reverse()],
    ]) {
      const got = await allMessages(s, 'cold1', q);
      assert.deepEqual(got.map((m) => m.msg_id), want, JSON.stringify(q));
      assert.ok(got.every((m) => m.room_id === 'cold1' && !('conversation_id' in m)));
    }
    const page = (await s.req('GET', `/v1/rooms/cold1/messages?before=${ids[33]}&limit=5`)).json;
    assert.deepEqual(page.messages.map((m) => m.seq), [29, 30, 31, 32, 33]);
  });

  test('the room stream: replay then live, no gap or duplicate; room_member frames; a removed member ends forbidden', async () => {
    await s.req('POST', '/v1/rooms', { room_id: 'st', members: ['sa', 'sb'] });
    const first = [];
    for (let i = 0; i < 5; i++) first.push((await s.req('POST', '/v1/rooms/st/messages', { from: 'sa', content: `a${i}` })).json);
    const ws = await wsConnect(s.port);
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 'r', topic: 'room', room_id: 'st', after: '0', user: 'sb' });
    let got = await frames(ws, (f) => f.type === 'replay_done');
    const replayed = got.filter((f) => f.type === 'message').map((f) => f.message);
    assert.deepEqual(replayed.map((m) => m.msg_id), first.map((p) => p.msg_id));
    assert.ok(replayed.every((m) => m.room_id === 'st'));
    const live = await s.req('POST', '/v1/rooms/st/messages', { from: 'sb', content: 'live' });
    got = await frames(ws, (f) => f.type === 'message');
    assert.equal(got.at(-1).message.msg_id, live.json.msg_id);
    assert.equal(got.at(-1).message.seq, 6);
    // without after: live only
    const ws2 = await wsConnect(s.port);
    ws2.send({ type: 'subscribe', id: 'x', topic: 'room', room_id: 'st' });
    got = await frames(ws2, (f) => f.type === 'replay_done');
    assert.ok(!got.some((f) => f.type === 'message'));
    await s.req('POST', '/v1/rooms/st/members', { add: ['sc'] });
    got = await frames(ws, (f) => f.type === 'room_member');
    assert.deepEqual(got.at(-1), { type: 'room_member', id: 'r', room_id: 'st', user: 'sc', change: 'added' });
    // removed: its stream ends forbidden; the other stream hears of it
    await s.req('POST', '/v1/rooms/st/members', { remove: ['sb'] });
    got = await frames(ws, (f) => f.type === 'error');
    assert.equal(got.at(-1).code, 'forbidden');
    assert.equal(got.at(-1).id, 'r');
    got = await frames(ws2, (f) => f.type === 'room_member' && f.change === 'removed');
    assert.equal(got.at(-1).user, 'sb');
    await s.req('POST', '/v1/rooms/st/messages', { from: 'sa', content: 'after removal' });
    got = await frames(ws2, (f) => f.type === 'message');
    await assert.rejects(ws.next(300), /no frame/, 'the removed member gets nothing more');
    // a non-member cannot subscribe as itself; an unknown room is not_found
    ws.send({ type: 'subscribe', id: 'again', topic: 'room', room_id: 'st', user: 'sb' });
    got = await frames(ws, (f) => f.type === 'error');
    assert.equal(got.at(-1).code, 'forbidden');
    ws.send({ type: 'subscribe', id: 'nf', topic: 'room', room_id: 'nope' });
    got = await frames(ws, (f) => f.type === 'error');
    assert.equal(got.at(-1).code, 'not_found');
    ws.close();
    ws2.close();
  });

  test('hostile input: bad names, unknown fields, huge arrays, a 255-byte room id', async () => {
    const bad = [
      [{ room_id: 'a b', members: ['x'] }, 'room_id'],
      [{ room_id: 'ok1', members: ['x y'] }, 'members[0]'],
      [{ room_id: 'ok1', members: 'x' }, 'members'],
      [{ room_id: 'ok1' }, 'members'],
      [{ room_id: 'ok1', members: ['x', 'x'] }, 'members[1]'],
      [{ room_id: 'ok1', members: ['x'], bye: 1 }, 'bye'],
      [{ room_id: 'ok1', members: ['x'], name: 5 }, 'name'],
      [{ room_id: 'ok1', members: Array.from({ length: 1001 }, (_, i) => `h${i}`) }, 'members'],
      [{ room_id: 'ok1', members: [] }, 'members'],
    ];
    for (const [body, field] of bad) {
      const r = await s.req('POST', '/v1/rooms', body);
      assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${r.text}`);
      assert.equal(r.json.error.field, field, r.text);
    }
    assert.equal((await s.req('GET', '/v1/rooms/ok1')).status, 404, 'nothing was created');
    assert.equal((await s.req('POST', '/v1/rooms/p1/messages', { from: 'alice', content: 'x', conversation_id: 'c' })).status, 400);
    assert.equal((await s.req('POST', '/v1/rooms/p1/messages', { from: 'alice', content: '' })).status, 400);
    assert.equal((await s.req('POST', '/v1/rooms/p1/members', { add: 'x' })).status, 400);
    assert.equal((await s.req('POST', '/v1/rooms/p1/members', {})).status, 400);
    assert.equal((await s.req('GET', '/v1/rooms/p1/messages?limit=0')).status, 400);
    assert.equal((await s.req('GET', '/v1/rooms/p1/messages?after=x')).status, 400);
    assert.equal((await s.req('GET', '/v1/rooms/%7Er/messages')).status, 400, 'no route reaches a virtual user');
    const r = await s.req('POST', '/v1/rooms', 'not json', { 'Content-Type': 'application/json' });
    assert.equal(r.status, 400);
    // the longest room id (and the longest user): keys, the virtual user, the stream all fit
    const long = 'L'.repeat(255), lu = 'u'.repeat(255);
    let x = await s.req('POST', '/v1/rooms', { room_id: long, members: [lu, 'v'] });
    assert.equal(x.status, 201, x.text);
    x = await s.req('POST', `/v1/rooms/${long}/messages`, { from: lu, content: 'long' });
    assert.equal(x.status, 201, x.text);
    assert.equal(x.json.room_id, long);
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 'l', topic: 'room', room_id: long, after: '0' });
    const got = await frames(ws, (f) => f.type === 'replay_done');
    assert.equal(got.filter((f) => f.type === 'message').length, 1);
    ws.close();
    assert.equal((await s.req('POST', `/v1/rooms/${long}/read`, { user: lu, seq: 1 })).json.unread, 0);
    const ur = (await s.req('GET', `/v1/users/${lu}/rooms`)).json.rooms;
    assert.deepEqual(ur.map((q) => q.room_id), [long]);
    assert.equal((await s.req('GET', `/v1/rooms/${long}/members`)).json.members.length, 2);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('the long room flush', () => { try { return parquetFiles(path.join(s.dir, 'cold', 'shared', 'conversations', long)).length; } catch { return 0; } });
    assert.equal((await s.req('GET', `/v1/rooms/${long}`)).json.total_messages, 1);
  });
});

describe('rooms survive restart and kill -9', () => {
  test('acknowledged rooms, members, posts and markers are there after a restart and a kill -9', async () => {
    const dir = tempDir('rooms');
    let s = await startStrata({ dataDir: dir });
    await s.req('POST', '/v1/rooms', { room_id: 'k', members: ['a', 'b'] });
    const acked = [];
    for (let i = 0; i < 20; i++) acked.push((await s.req('POST', '/v1/rooms/k/messages', { from: 'a', content: `${i}` })).json);
    await s.req('POST', '/v1/rooms/k/read', { user: 'b', seq: 7 });
    await s.stop();
    s = await startStrata({ dataDir: dir });
    let room = (await s.req('GET', '/v1/rooms/k')).json;
    assert.equal(room.total_messages, 20);
    // writes in flight while killed: every acknowledged one survives. Every answer must be a 201
    // and only a connection error after the kill ends a writer (as crash.test.mjs's clients); the
    // kill waits for acknowledged writes and for one in flight, and a write it cut off (failed,
    // unacknowledged) proves it landed while one was: an answer already sent when it landed is
    // still read, so four writers, not one
    const inflight = [];
    let killed = false;
    const writers = Array.from({ length: 4 }, () => ({ pending: false, cut: false }));
    const writing = Promise.allSettled(writers.map(async (w, k) => {
      for (let i = 0; !killed; i++) {
        w.pending = true;
        let r;
        try {
          r = await s.req('POST', '/v1/rooms/k/messages', { from: 'b', content: `w${k}.${i}` });
        } catch (e) {
          if (!killed) throw e;
          w.cut = true; // the server died under it: unacknowledged
          return;
        }
        w.pending = false;
        assert.equal(r.status, 201, `post w${k}.${i}: ${r.text}`);
        inflight.push(r.json);
      }
    }));
    for (const end = Date.now() + 10000; (inflight.length < 5 || !writers.some((w) => w.pending)) && Date.now() < end;) await sleep(1);
    killed = true;
    await s.kill9();
    for (const r of await writing) if (r.status === 'rejected') throw r.reason;
    assert.ok(inflight.length >= 5, `writes were acknowledged before the kill (${inflight.length})`);
    assert.ok(writers.some((w) => w.cut), 'the kill landed while a write was in flight (it cut one off)');
    s = await startStrata({ dataDir: dir });
    const msgs = await allMessages(s, 'k', { limit: '1000' });
    const have = new Set(msgs.map((m) => m.msg_id));
    for (const p of [...acked, ...inflight]) assert.ok(have.has(p.msg_id), `acked ${p.msg_id} survived`);
    assert.deepEqual(msgs.map((m) => m.seq), msgs.map((_, i) => i + 1), 'seq gapless');
    room = (await s.req('GET', '/v1/rooms/k')).json;
    assert.equal(room.total_messages, msgs.length);
    assert.equal(room.members, 2);
    const b = (await s.req('GET', '/v1/rooms/k/members')).json.members.find((m) => m.user === 'b');
    // b's marker: where its newest durable post moved it (in the post's own batch)
    const bLast = Math.max(...msgs.filter((m) => m.from === 'b').map((m) => m.seq));
    assert.equal(b.last_read_seq, bLast);
    assert.equal(b.unread, msgs.filter((m) => m.seq > bLast && m.from !== 'b').length);
    const next = await s.req('POST', '/v1/rooms/k/messages', { from: 'a', content: 'after' });
    assert.equal(next.json.seq, msgs.length + 1, 'seq goes on, never reissued');
    await s.stop();
    s.cleanup();
  });
});

describe('rooms (auth on)', () => {
  let s;
  before(async () => { s = await startStrata({ env: { STRATA_JWT_SECRET: SECRET } }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test("the creator owns it; owners and admins change members; members read; from is the sub", async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'a1', members: [] })).status, 401);
    let r = await s.req('POST', '/v1/rooms', { room_id: 'a1', members: ['bob'] }, bearer('alice'));
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.members, 2);
    const ms = (await s.req('GET', '/v1/rooms/a1/members', undefined, bearer('alice'))).json.members;
    assert.deepEqual(ms.map((m) => [m.user, m.role]), [['alice', 'owner'], ['bob', 'member']]);
    // a member may not add; the owner and an admin may
    assert.equal((await s.req('POST', '/v1/rooms/a1/members', { add: ['carol'] }, bearer('bob'))).status, 403);
    assert.equal((await s.req('POST', '/v1/rooms/a1/members', { add: ['carol'] }, bearer('alice'))).status, 200);
    assert.equal((await s.req('POST', '/v1/rooms/a1/members', { add: ['dave'] }, bearer('root', { role: 'admin' }))).status, 200);
    // reads: members and admins
    assert.equal((await s.req('GET', '/v1/rooms/a1', undefined, bearer('carol'))).status, 200);
    assert.equal((await s.req('GET', '/v1/rooms/a1', undefined, bearer('eve'))).status, 403);
    assert.equal((await s.req('GET', '/v1/rooms/a1/messages', undefined, bearer('eve'))).status, 403);
    assert.equal((await s.req('GET', '/v1/rooms/a1/members', undefined, bearer('eve'))).status, 403);
    assert.equal((await s.req('GET', '/v1/rooms/a1/messages', undefined, bearer('root', { role: 'admin' }))).status, 200);
    // from must be the sub (admins excepted), and a member
    assert.equal((await s.req('POST', '/v1/rooms/a1/messages', { from: 'bob', content: 'x' }, bearer('carol'))).status, 403);
    assert.equal((await s.req('POST', '/v1/rooms/a1/messages', { from: 'eve', content: 'x' }, bearer('eve'))).status, 403);
    assert.equal((await s.req('POST', '/v1/rooms/a1/messages', { from: 'bob', content: 'x' }, bearer('bob'))).status, 201);
    assert.equal((await s.req('POST', '/v1/rooms/a1/messages', { from: 'carol', content: 'y' }, bearer('root', { role: 'admin' }))).status, 201);
    // read markers for oneself
    assert.equal((await s.req('POST', '/v1/rooms/a1/read', { user: 'bob', seq: 1 }, bearer('carol'))).status, 403);
    assert.equal((await s.req('POST', '/v1/rooms/a1/read', { user: 'bob', seq: 1 }, bearer('bob'))).json.unread, 1);
    // a user's rooms: that user or an admin
    assert.equal((await s.req('GET', '/v1/users/bob/rooms', undefined, bearer('carol'))).status, 403);
    assert.equal((await s.req('GET', '/v1/users/bob/rooms', undefined, bearer('bob'))).json.rooms[0].room_id, 'a1');
    assert.equal((await s.req('GET', '/v1/users/bob/rooms', undefined, bearer('root', { role: 'admin' }))).status, 200);
    // the stream: members only; removal ends the member's subscription with forbidden
    const tok = jwt({ sub: 'carol' });
    const ws = await wsConnect(s.port, `/v1/stream?access_token=${tok}`);
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 's', topic: 'room', room_id: 'a1', after: '0' });
    let got = await frames(ws, (f) => f.type === 'replay_done');
    assert.equal(got.filter((f) => f.type === 'message').length, 2);
    const evil = await wsConnect(s.port, `/v1/stream?access_token=${jwt({ sub: 'eve' })}`);
    evil.send({ type: 'subscribe', id: 'e', topic: 'room', room_id: 'a1' });
    got = await frames(evil, (f) => f.type === 'error');
    assert.equal(got.at(-1).code, 'forbidden');
    evil.close();
    // a member removes itself, but not another
    assert.equal((await s.req('POST', '/v1/rooms/a1/members', { remove: ['dave'] }, bearer('carol'))).status, 403);
    assert.equal((await s.req('POST', '/v1/rooms/a1/members', { remove: ['carol'] }, bearer('carol'))).status, 200);
    got = await frames(ws, (f) => f.type === 'error');
    assert.equal(got.at(-1).code, 'forbidden');
    assert.equal((await s.req('GET', '/v1/rooms/a1/messages', undefined, bearer('carol'))).status, 403, 'access lost at once');
    ws.close();
  });
});

describe('rooms: edits, deletes and an erased member (SPEC §2.1, §2.2)', () => {
  let s;
  before(async () => { s = await startStrata({ env: { STRATA_JWT_SECRET: SECRET } }); });
  after(async () => { await s.stop(); s.cleanup(); });
  const admin = bearer('root', { role: 'admin' });

  test('the author, an owner or an admin edits and deletes; tombstones keep seq; totals count live ones', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'e1', members: ['bob', 'carol'] }, bearer('alice'))).status, 201);
    const post = async (who, content) => {
      const r = await s.req('POST', '/v1/rooms/e1/messages', { from: who, content }, bearer(who));
      assert.equal(r.status, 201, r.text);
      return r.json.msg_id;
    };
    const m1 = await post('bob', 'one'), m2 = await post('carol', 'two'), m3 = await post('bob', 'three');
    // the author edits; another member may not; history kept, room_id in the answer
    assert.equal((await s.req('PATCH', `/v1/rooms/e1/messages/${m1}`, { content: 'x' }, bearer('carol'))).status, 403);
    let r = await s.req('PATCH', `/v1/rooms/e1/messages/${m1}`, { content: 'one!' }, bearer('bob'));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.room_id, 'e1');
    assert.equal(r.json.conversation_id, undefined);
    assert.equal(r.json.content, 'one!');
    assert.equal(r.json.edit_history[0].content, 'one');
    assert.equal(r.json.seq, 1);
    // the owner deletes carol's; an admin deletes bob's third; again: the same tombstone
    r = await s.req('DELETE', `/v1/rooms/e1/messages/${m2}`, undefined, bearer('alice'));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.content, null);
    assert.ok(r.json.deleted_at > 0);
    const again = await s.req('DELETE', `/v1/rooms/e1/messages/${m2}`, undefined, bearer('alice'));
    assert.deepEqual(again.json, r.json);
    assert.equal((await s.req('PATCH', `/v1/rooms/e1/messages/${m2}`, { content: 'y' }, bearer('carol'))).status, 409);
    assert.equal((await s.req('DELETE', `/v1/rooms/e1/messages/${m3}`, undefined, admin)).status, 200);
    assert.equal((await s.req('DELETE', '/v1/rooms/e1/messages/12345', undefined, admin)).status, 404);
    assert.equal((await s.req('DELETE', `/v1/rooms/nope/messages/${m3}`, undefined, admin)).status, 404);
    assert.equal((await s.req('PATCH', `/v1/rooms/e1/messages/${m1}`, { bye: 1 }, bearer('bob'))).status, 400);
    // listings: tombstones in place (seq gapless) or hidden; the room counts live messages
    const all = await allMessages(s, 'e1', {}, admin);
    assert.deepEqual(all.map((m) => [m.seq, m.content]), [[1, 'one!'], [2, null], [3, null]]);
    const live = await allMessages(s, 'e1', { include_deleted: 'false' }, admin);
    assert.deepEqual(live.map((m) => m.seq), [1]);
    assert.equal((await s.req('GET', '/v1/rooms/e1', undefined, admin)).json.total_messages, 1);
    assert.equal((await s.req('GET', '/v1/rooms/e1/messages?include_deleted=maybe', undefined, admin)).status, 400);
  });

  test('erasing a member: its room messages become tombstones and it leaves the room', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'e2', members: ['zoe', 'yan'] }, admin)).status, 201);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'e3', members: ['zoe'] }, admin)).status, 201);
    for (let i = 0; i < 5; i++) {
      assert.equal((await s.req('POST', '/v1/rooms/e2/messages', { from: i % 2 ? 'yan' : 'zoe', content: `m${i}` }, admin)).status, 201);
    }
    assert.equal((await s.req('POST', '/v1/rooms/e3/messages', { from: 'zoe', content: 'solo' }, admin)).status, 201);
    assert.equal((await s.req('POST', '/v1/admin/flush', undefined, admin)).status, 202); // some of them cold
    const er = await s.req('DELETE', '/v1/users/zoe', undefined, admin);
    assert.equal(er.status, 202, er.text);
    await waitFor('the erasure done', async () => (await s.req('GET', `/v1/admin/erasures/${er.json.erasure_id}`, undefined, admin)).json.status === 'done', 20000);
    const e2 = await allMessages(s, 'e2', {}, admin);
    // v5: an erased author's tombstones carry from null, so no row names it (SPEC §2.2)
    assert.deepEqual(e2.map((m) => [m.from, m.content === null]), [[null, true], ['yan', false], [null, true], ['yan', false], [null, true]]);
    assert.equal((await s.req('GET', '/v1/rooms/e2', undefined, admin)).json.total_messages, 2);
    assert.equal((await allMessages(s, 'e3', {}, admin))[0].content, null);
    const members = (await s.req('GET', '/v1/rooms/e2/members', undefined, admin)).json.members.map((m) => m.user);
    assert.deepEqual(members, ['root', 'yan']);
    assert.deepEqual((await s.req('GET', '/v1/users/zoe/rooms', undefined, admin)).json.rooms, []);
  });

  test('erasing a user reaches the rooms it left or was removed from before', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'l1', members: ['una', 'vic'] }, admin)).status, 201);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'l2', members: ['una', 'vic'] }, admin)).status, 201);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'l3', members: ['una', 'vic'] }, admin)).status, 201);
    const post = async (room, from, content) => {
      const r = await s.req('POST', `/v1/rooms/${room}/messages`, { from, content }, admin);
      assert.equal(r.status, 201, r.text);
    };
    await post('l1', 'una', 'cold secret');
    await post('l1', 'vic', 'keep 1');
    assert.equal((await s.req('POST', '/v1/admin/flush', undefined, admin)).status, 202);
    await waitFor('the l1 flush', () => { try { return parquetFiles(path.join(s.dir, 'cold', 'shared', 'conversations', 'l1')).length; } catch { return 0; } });
    await post('l1', 'una', 'hot secret');
    await post('l2', 'una', 'l2 secret');
    await post('l2', 'vic', 'keep 2');
    await post('l3', 'vic', 'keep 3');
    // una leaves l1 herself and is removed from l2 by an admin; she stays in l3, where she never
    // posted
    assert.equal((await s.req('POST', '/v1/rooms/l1/members', { remove: ['una'] }, bearer('una'))).status, 200);
    assert.equal((await s.req('POST', '/v1/rooms/l2/members', { remove: ['una'] }, admin)).status, 200);
    const er = await s.req('DELETE', '/v1/users/una', undefined, admin);
    assert.equal(er.status, 202, er.text);
    // at once: an erased user posts no more, not even where it is still a member
    assert.equal((await s.req('POST', '/v1/rooms/l3/messages', { from: 'una', content: 'late' }, admin)).status, 403);
    await waitFor('the erasure done', async () => (await s.req('GET', `/v1/admin/erasures/${er.json.erasure_id}`, undefined, admin)).json.status === 'done', 20000);
    const l1 = await allMessages(s, 'l1', {}, admin);
    assert.deepEqual(l1.map((m) => [m.from, m.content]), [[null, null], ['vic', 'keep 1'], [null, null]]);
    const l2 = await allMessages(s, 'l2', {}, admin);
    assert.deepEqual(l2.map((m) => [m.from, m.content]), [[null, null], ['vic', 'keep 2']]);
    assert.deepEqual((await allMessages(s, 'l3', {}, admin)).map((m) => m.content), ['keep 3']);
    assert.equal((await s.req('GET', '/v1/rooms/l1', undefined, admin)).json.total_messages, 1);
    const members = (await s.req('GET', '/v1/rooms/l3/members', undefined, admin)).json.members.map((m) => m.user);
    assert.deepEqual(members, ['root', 'vic']);
    assert.deepEqual((await s.req('GET', '/v1/users/una/rooms', undefined, admin)).json.rooms, []);
  });

  test('a member being erased is out of every room answer at once, before the slices remove it', async () => {
    // gil is in 80 rooms: the slices remove it from one room each, the room it posted in first
    // (pm00), then by name; pm79 last. pm00's objects are out of reach while the checks run, so
    // the slices cannot get past it: the erasure is pending throughout, however slow the machine
    const rooms = Array.from({ length: 80 }, (_, i) => `pm${String(i).padStart(2, '0')}`);
    for (let i = 0; i < rooms.length; i += 20) {
      const made = await Promise.all(rooms.slice(i, i + 20).map((room_id) => s.req('POST', '/v1/rooms', { room_id, members: ['gil', 'hal'] }, admin)));
      for (const r of made) assert.equal(r.status, 201, r.text);
    }
    assert.equal((await s.req('POST', '/v1/rooms/pm00/messages', { from: 'gil', content: 'bye' }, bearer('gil'))).status, 201);
    assert.equal((await s.req('POST', '/v1/rooms/pm79/read', { user: 'gil', seq: 0 }, bearer('gil'))).status, 200);
    // pm00 cooled, its objects moved away, the process restarted (nothing of them in memory)
    const pm00 = path.join(s.dir, 'cold', 'shared', 'conversations', 'pm00');
    assert.equal((await s.req('POST', '/v1/admin/flush', undefined, admin)).status, 202);
    await waitFor('pm00 cooled', async () => existsSync(pm00) && readdirSync(pm00).some((f) => f.endsWith('.parquet')) &&
      /^strata_flush_running 0$/m.test((await s.req('GET', '/metrics', undefined, admin)).text));
    await s.stop();
    renameSync(pm00, `${pm00}.away`);
    s = await startStrata({ dataDir: s.dir, env: { STRATA_JWT_SECRET: SECRET } });
    const users = async (room, q = '') => (await s.req('GET', `/v1/rooms/${room}/members${q}`, undefined, admin)).json;
    assert.deepEqual((await users('pm79')).members.map((m) => m.user), ['gil', 'hal', 'root']);
    assert.equal((await s.req('GET', '/v1/rooms/pm79', undefined, admin)).json.members, 3);
    // gil streams pm79 (removed from it last): the stream ends at the 202, not at the slice
    const gws = await wsConnect(s.port, `/v1/stream?access_token=${jwt({ sub: 'gil' })}`);
    assert.equal(gws.status, 101);
    gws.send({ type: 'subscribe', id: 'g', topic: 'room', room_id: 'pm79' });
    // a member: the subscription is taken (replay_done, nothing to replay), not refused
    const sub = await frames(gws, (f) => f.type === 'replay_done' || f.type === 'error');
    assert.equal(sub.at(-1).type, 'replay_done', `gil's subscribe to pm79: ${JSON.stringify(sub)}`);
    const er = await s.req('DELETE', '/v1/users/gil', undefined, bearer('gil'));
    assert.equal(er.status, 202, er.text);
    const ended = await frames(gws, (f) => f.type === 'error');
    assert.deepEqual([ended.at(-1).id, ended.at(-1).code], ['g', 'forbidden']);
    assert.match(ended.at(-1).message, /erased/, 'ended by the erasure, not by the later slice');
    gws.close();
    // at once: left out of the listing (and of its pages: gil's key sorts first), the count
    let m = await users('pm79');
    assert.deepEqual([m.members.map((x) => x.user), m.next], [['hal', 'root'], null]);
    m = await users('pm79', '?limit=1');
    assert.deepEqual([m.members.map((x) => x.user), m.next], [['hal'], 'hal']);
    m = await users('pm79', '?limit=1&cursor=hal');
    assert.deepEqual([m.members.map((x) => x.user), m.next], [['root'], null]);
    m = await users('pm79', '?limit=2');
    assert.deepEqual([m.members.map((x) => x.user), m.next], [['hal', 'root'], null]);
    assert.equal((await s.req('GET', '/v1/rooms/pm79', undefined, admin)).json.members, 2);
    // its read marker and its rooms are answers about it: 404; its token reads no room; it is
    // added nowhere; a change's answer counts without it
    let r = await s.req('POST', '/v1/rooms/pm79/read', { user: 'gil', seq: 1 }, admin);
    assert.equal(r.status, 404, r.text);
    assert.equal(r.json.error.code, 'not_found');
    assert.equal((await s.req('GET', '/v1/users/gil/rooms', undefined, admin)).status, 404);
    // (the token it had is refused outright: issued before its erasure, 401 token_revoked; one
    // issued since, iat at or after the erasure, is a token like any other: out of the room, 403)
    const old = await s.req('GET', '/v1/rooms/pm79', undefined, bearer('gil'));
    assert.deepEqual([old.status, old.json.error.code], [401, 'token_revoked']);
    const since = bearer('gil', { iat: Math.ceil(Date.now() / 1000) });
    assert.equal((await s.req('GET', '/v1/rooms/pm79/members', undefined, since)).status, 403);
    assert.equal((await s.req('GET', '/v1/rooms/pm79', undefined, since)).status, 403);
    r = await s.req('POST', '/v1/rooms/pm79/members', { add: ['gil'] }, admin);
    assert.equal(r.status, 404, r.text);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'pmx', members: ['gil'] }, admin)).status, 404);
    r = await s.req('POST', '/v1/rooms/pm79/members', { add: ['ivy'] }, admin);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.members, 3);
    // all of that while the erasure was still pending (gil is still in pm79 underneath)
    const st = await s.req('GET', `/v1/admin/erasures/${er.json.erasure_id}`, undefined, admin);
    assert.equal(st.json.status, 'pending', 'held at pm00');
    renameSync(`${pm00}.away`, pm00); // back: the slices go on
    await waitFor('the erasure done', async () => (await s.req('GET', `/v1/admin/erasures/${er.json.erasure_id}`, undefined, admin)).json.status === 'done', 30000);
    m = await users('pm79');
    assert.deepEqual([m.members.map((x) => x.user), m.next], [['hal', 'ivy', 'root'], null]);
    assert.equal((await s.req('GET', '/v1/rooms/pm79', undefined, admin)).json.members, 3);
    assert.equal((await s.req('GET', '/v1/rooms/pm00', undefined, admin)).json.members, 2);
    assert.deepEqual((await allMessages(s, 'pm00', {}, admin)).map((x) => [x.from, x.content]), [[null, null]]);
    assert.deepEqual((await s.req('GET', '/v1/users/gil/rooms', undefined, admin)).json.rooms, []);
  });
});

describe('key spaces stay apart', () => {
  test("a user's cold edits and deleted conversations never read as events or room members, across a restart", async () => {
    const s = await startStrata({ args: ['--flush-interval', '3600'] });
    try {
      // a user, a room and an event all named "lobby"
      assert.equal((await s.req('POST', '/v1/events', { event_id: 'lobby', sections: [{ name: 'A', rows: 1, cols: 2, price: 1 }] })).status, 201);
      assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'lobby', members: ['ann'] })).status, 201);
      const ids = [];
      for (const conv of ['c1', 'c2']) {
        const r = await s.req('POST', '/v1/users/lobby/messages', { conversation_id: conv, from: 'lobby', content: conv });
        ids.push(r.json.msg_id);
      }
      assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
      await waitFor('the messages cold', async () => (await s.req('GET', '/v1/users/lobby/stats')).json.cold_messages === 2);
      assert.equal((await s.req('PATCH', `/v1/users/lobby/messages/${ids[0]}`, { content: 'edited' })).status, 200);
      assert.equal((await s.req('DELETE', '/v1/users/lobby/conversations/c2')).status, 200);
      const check = async () => {
        const ev = (await s.req('GET', '/v1/events')).json.events.map((e) => e.event_id);
        assert.deepEqual(ev, ['lobby']);
        const ms = (await s.req('GET', '/v1/rooms/lobby/members')).json.members.map((m) => m.user);
        assert.deepEqual(ms, ['ann']);
        assert.equal((await s.req('GET', '/v1/users/lobby/messages')).json.messages[0].content, 'edited');
      };
      await check();
      await s.stop();
      const again = await startStrata({ dataDir: s.dir, args: ['--flush-interval', '3600'] });
      try {
        s.req = again.req;
        await check();
      } finally {
        await again.stop();
      }
    } finally {
      s.cleanup();
    }
  });
});
