// SPDX-License-Identifier: MIT
// SPEC §2.1 (v5) over real sockets: unread as people count it — messages after a member's
// last_read_seq that others posted and that are not deleted, exact at every moment, hot and cold,
// through deletes, erasures, a poster leaving and coming back, restarts and kill -9. The listing,
// the read answer, PATCH's member, and the user's room list all agree with a count taken from
// the messages themselves.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { startStrata } from './lib.mjs';

async function allMessages(s, room) {
  const out = [];
  let cursor = null;
  for (let pages = 0; pages < 1000; pages++) {
    const qs = new URLSearchParams({ limit: '1000', ...(cursor ? { cursor } : {}) });
    const r = await s.req('GET', `/v1/rooms/${room}/messages?${qs}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.json.messages);
    cursor = r.json.next;
    if (cursor === null) return out;
  }
  throw new Error('paging did not end');
}

// What a person counts: others' live messages after the marker.
function expected(msgs, user, lastRead) {
  return msgs.filter((m) => m.seq > lastRead && m.from !== user && m.content !== null).length;
}

// Every view of unread for every member of the room matches the messages.
async function checkRoom(s, room) {
  const msgs = await allMessages(s, room);
  const members = (await s.req('GET', `/v1/rooms/${room}/members?limit=1000`)).json.members;
  for (const m of members) {
    assert.equal(m.unread, expected(msgs, m.user, m.last_read_seq), `${room}: ${m.user}'s unread in the listing`);
    const list = (await s.req('GET', `/v1/users/${m.user}/rooms?limit=1000`)).json.rooms;
    const row = list.find((x) => x.room_id === room);
    assert.equal(row.unread, m.unread, `${room}: ${m.user}'s unread in its room list`);
    const r = await s.req('POST', `/v1/rooms/${room}/read`, { user: m.user, seq: 0 }); // moves nothing
    assert.equal(r.json.unread, m.unread, `${room}: ${m.user}'s unread in the read answer`);
  }
  return { msgs, members };
}

describe('unread as people count it', () => {
  let s;
  before(async () => { s = await startStrata({ args: ['--flush-interval', '3600'] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('own posts are not unread: a post moves its author\'s marker', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'own', members: ['bob', 'ann'] })).status, 201);
    for (let i = 0; i < 5; i++) assert.equal((await s.req('POST', '/v1/rooms/own/messages', { from: 'bob', content: `b${i}` })).status, 201);
    const { members } = await checkRoom(s, 'own');
    const by = Object.fromEntries(members.map((m) => [m.user, m]));
    assert.equal(by.bob.unread, 0);
    assert.equal(by.bob.last_read_seq, 5);
    assert.equal(by.ann.unread, 5);
    // ann answers: bob's marker stays, he has one unread; ann's own post marks the room read
    assert.equal((await s.req('POST', '/v1/rooms/own/messages', { from: 'ann', content: 'hi bob' })).status, 201);
    const after = Object.fromEntries((await checkRoom(s, 'own')).members.map((m) => [m.user, m]));
    assert.equal(after.bob.unread, 1);
    assert.equal(after.ann.unread, 0);
    assert.equal(after.ann.last_read_seq, 6);
  });

  test('deleted messages are not unread: 9 messages, 7 tombstones, 2 unread', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'tomb', members: ['ed', 'fay'] })).status, 201);
    const ids = [];
    for (let i = 0; i < 9; i++) ids.push((await s.req('POST', '/v1/rooms/tomb/messages', { from: 'ed', content: `e${i}` })).json.msg_id);
    for (const i of [0, 1, 2, 4, 5, 7, 8]) assert.equal((await s.req('DELETE', `/v1/rooms/tomb/messages/${ids[i]}`)).status, 200);
    // deleting again is the same tombstone: counted once
    assert.equal((await s.req('DELETE', `/v1/rooms/tomb/messages/${ids[0]}`)).status, 200);
    const { members } = await checkRoom(s, 'tomb');
    assert.equal(members.find((m) => m.user === 'fay').unread, 2);
    // read up to seq 4: one live message of ed's after it (seq 7)
    const r = await s.req('POST', '/v1/rooms/tomb/read', { user: 'fay', seq: 4 });
    assert.equal(r.json.unread, 1);
    await checkRoom(s, 'tomb');
  });

  test('cold messages: deletes after a flush count the same', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'chill', members: ['gus', 'hal'] })).status, 201);
    const ids = [];
    for (let i = 0; i < 20; i++) ids.push((await s.req('POST', '/v1/rooms/chill/messages', { from: i % 3 ? 'gus' : 'hal', content: `c${i}` })).json.msg_id);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('the room cooled', async () => (await s.req('GET', '/metrics')).text.match(/strata_flush_rows_total\S* [1-9]/));
    // cold tombstones: seqs 2, 3, 6 and 18, before hal's marker; then one after it, hot
    for (const i of [1, 2, 5, 17]) assert.equal((await s.req('DELETE', `/v1/rooms/chill/messages/${ids[i]}`)).status, 200);
    for (let i = 20; i < 25; i++) ids.push((await s.req('POST', '/v1/rooms/chill/messages', { from: 'gus', content: `c${i}` })).json.msg_id);
    assert.equal((await s.req('POST', '/v1/rooms/chill/read', { user: 'hal', seq: 0 })).json.unread, 6);
    assert.equal((await s.req('DELETE', `/v1/rooms/chill/messages/${ids[19]}`)).status, 200); // seq 20, cold
    const { members } = await checkRoom(s, 'chill');
    const by = Object.fromEntries(members.map((m) => [m.user, m]));
    assert.equal(by.gus.unread, 0, 'gus posted last');
    assert.equal(by.hal.unread, 5, "hal's marker is at its own last post (seq 19): gus's 21..25 follow (20 deleted)");
  });

  test('an erased user\'s messages become tombstones: not unread for the others', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'gone', members: ['ivy', 'jon', 'kim'] })).status, 201);
    for (let i = 0; i < 6; i++) await s.req('POST', '/v1/rooms/gone/messages', { from: i % 2 ? 'jon' : 'kim', content: `g${i}` });
    const er = await s.req('DELETE', '/v1/users/jon');
    assert.equal(er.status, 202, er.text);
    await waitFor('the erasure done', async () => (await s.req('GET', `/v1/admin/erasures/${er.json.erasure_id}`)).json.status === 'done', 20000);
    const { members } = await checkRoom(s, 'gone');
    assert.equal(members.find((m) => m.user === 'ivy').unread, 3, 'kim\'s three messages');
  });

  test('a poster that leaves and comes back: its own posts are still not unread', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'back', members: ['nia', 'lou', 'mo'] })).status, 201);
    const post = (from) => s.req('POST', '/v1/rooms/back/messages', { from, content: `${from} says hi` });
    for (const from of ['lou', 'lou', 'mo']) assert.equal((await post(from)).status, 201); // seqs 1-3
    // lou leaves, mo is removed by the owner; the room goes on; both come back
    assert.equal((await s.req('POST', '/v1/rooms/back/members', { remove: ['lou', 'mo'] })).status, 200);
    for (const from of ['nia', 'nia']) assert.equal((await post(from)).status, 201); // seqs 4-5
    assert.equal((await s.req('POST', '/v1/rooms/back/members', { add: ['lou', 'mo'] })).status, 200);
    const by = Object.fromEntries((await checkRoom(s, 'back')).members.map((m) => [m.user, m]));
    assert.deepEqual([by.lou.last_read_seq, by.lou.unread], [2, 3], 'lou is back where it left (its own seqs 1-2 read): mo\'s and nia\'s');
    assert.deepEqual([by.mo.last_read_seq, by.mo.unread], [3, 2], 'mo is back where it was removed: nia\'s two');

    // a new room of the same id keeps nothing of the old one's markers
    const del = await s.req('DELETE', '/v1/rooms/back');
    assert.equal(del.status, 202, del.text);
    await waitFor('the room deleted', async () => (await s.req('GET', `/v1/admin/erasures/${del.json.erasure_id}`)).json.status === 'done', 20000);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'back', members: ['nia', 'mo'] })).status, 201);
    for (const from of ['nia', 'nia', 'nia']) assert.equal((await post(from)).status, 201);
    assert.equal((await s.req('POST', '/v1/rooms/back/members', { add: ['lou'] })).status, 200);
    const again = Object.fromEntries((await checkRoom(s, 'back')).members.map((m) => [m.user, m]));
    assert.deepEqual([again.lou.last_read_seq, again.lou.unread], [0, 3], 'the new room: lou has all of it to read');
    assert.deepEqual([again.mo.last_read_seq, again.mo.unread], [0, 3]);

    // an erasure still finds a room its user posted in and left (the marker kept there)
    assert.equal((await post('lou')).status, 201);
    assert.equal((await s.req('POST', '/v1/rooms/back/members', { remove: ['lou'] })).status, 200);
    const er = await s.req('DELETE', '/v1/users/lou');
    assert.equal(er.status, 202, er.text);
    await waitFor('lou erased', async () => (await s.req('GET', `/v1/admin/erasures/${er.json.erasure_id}`)).json.status === 'done', 20000);
    const msgs = await allMessages(s, 'back');
    assert.deepEqual(msgs.map((m) => [m.seq, m.from, m.content === null]), [[1, 'nia', false], [2, 'nia', false], [3, 'nia', false], [4, null, true]]);
    await checkRoom(s, 'back');
  });

  test('exact after a kill -9', async () => {
    const want = {};
    for (const room of ['own', 'tomb', 'chill', 'gone', 'back']) want[room] = (await checkRoom(s, room)).members;
    await s.kill9();
    s = await startStrata({ dataDir: s.dir, args: ['--flush-interval', '3600'] });
    for (const room of Object.keys(want)) assert.deepEqual((await checkRoom(s, room)).members, want[room], room);
  });
});
