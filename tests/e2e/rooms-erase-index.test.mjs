// SPDX-License-Identifier: MIT
// SPEC §2.1 v5 and §2.2 over real sockets: a room's posts by author (src/rooms/authors.c). From
// the 202 of an erasure on, a room's total_messages and every member's unread leave the erased
// user's live posts out, exactly, in every answer that shows them (the room, its members, a read,
// a user's rooms), while the erasure's slices are still held back; the same numbers once it is
// done; a post the user deleted before is not taken off twice; a room of the same id made after
// a deleted one starts clean. A room made without the index (as an older binary made it:
// STRATA_TEST_ROOMS_NO_INDEX=1) is still erased by the walk of all its messages, and the entries
// a newer binary wrote for its later posts go with them.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, renameSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { roomsApi } from './rooms-lib.mjs';
import { FLUSH_ON_ASK, parallel, startStrata } from './lib.mjs';

const SECRET = 'rooms-erase-index-secret';
const { bearer, admin, ok, post, messages } = roomsApi(SECRET);
const ARGS = FLUSH_ON_ASK;


// Every count of room the members' answers show: total_messages (the room, and each member's
// list of rooms) and each member's unread (the members list, a read at its own marker, its rooms)
async function counts(s, room, users) {
  const out = { total: (await ok(s, 'GET', `/v1/rooms/${room}`)).total_messages, unread: {}, read: {}, listed: {} };
  const members = (await ok(s, 'GET', `/v1/rooms/${room}/members?limit=100`)).members;
  for (const m of members) out.unread[m.user] = [m.last_read_seq, m.unread];
  for (const u of users) {
    const r = await ok(s, 'POST', `/v1/rooms/${room}/read`, { user: u, seq: 0 }, bearer(u));
    out.read[u] = r.unread;
    const row = (await ok(s, 'GET', `/v1/users/${u}/rooms?limit=100`)).rooms.find((x) => x.room_id === room);
    out.listed[u] = [row.total_messages, row.unread];
  }
  return out;
}

async function erasureStatus(s, id) {
  return (await ok(s, 'GET', `/v1/admin/erasures/${id}`)).status;
}

describe("an erased user's posts leave a room's counts at the 202 (the author index)", () => {
  test('total_messages and every unread exact from the 202 on, held erasure and done', async () => {
    let s = await startStrata({ args: ARGS, env: { STRATA_JWT_SECRET: SECRET } });
    try {
      // a room of the same id as the one below, deleted first: none of its entries may count
      await ok(s, 'POST', '/v1/rooms', { room_id: 'big', members: ['vic', 'ann'] });
      for (let i = 0; i < 3; i++) await post(s, 'big', 'vic', `old ${i}`);
      const del = await ok(s, 'DELETE', '/v1/rooms/big');
      await waitFor('the old room deleted', async () => (await erasureStatus(s, del.erasure_id)) === 'done', 60000);

      // the room that holds the erasure: vic's first room by name, its objects moved away below
      await ok(s, 'POST', '/v1/rooms', { room_id: 'aa-hold', members: ['vic', 'ann'] });
      await post(s, 'aa-hold', 'vic', 'held');
      await ok(s, 'POST', '/v1/rooms', { room_id: 'big', members: ['vic', 'ann', 'bob', 'cat'] });
      // others post a few thousand in parallel, vic a few among them (early, middle, late)
      const vic = [];
      vic.push((await post(s, 'big', 'vic', 'vic 0')).seq);
      await parallel(1500, (i) => post(s, 'big', i % 2 ? 'ann' : 'bob', `m ${i}`));
      vic.push((await post(s, 'big', 'vic', 'vic 1')).seq);
      const vicDeleted = await post(s, 'big', 'vic', 'vic deleted');
      // cat has read up to here: vic's posts before its marker are not in its unread
      const catMark = vicDeleted.seq;
      await ok(s, 'POST', '/v1/rooms/big/read', { user: 'cat', seq: catMark }, bearer('cat'));
      await parallel(1500, (i) => post(s, 'big', i % 2 ? 'bob' : 'ann', `n ${i}`));
      vic.push((await post(s, 'big', 'vic', 'vic 2')).seq);
      await post(s, 'big', 'ann', 'after the third');
      vic.push((await post(s, 'big', 'vic', 'vic 3')).seq);
      // one of vic's posts deleted before the erasure: already out of the counts
      await ok(s, 'DELETE', `/v1/rooms/big/messages/${vicDeleted.msg_id}`);

      // aa-hold cooled, its objects moved away, the process restarted: the erasure's slices
      // cannot get past vic's post there, so the erasure stays pending while the checks run
      const hold = path.join(s.dir, 'cold', 'shared', 'conversations', 'aa-hold');
      await ok(s, 'POST', '/v1/admin/flush');
      await waitFor('aa-hold cooled', async () => existsSync(hold) && readdirSync(hold).some((f) => f.endsWith('.parquet')) &&
        /^strata_flush_running 0$/m.test((await s.req('GET', '/metrics', undefined, admin)).text), 60000);
      await s.stop();
      renameSync(hold, `${hold}.away`);
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: { STRATA_JWT_SECRET: SECRET } });

      const users = ['ann', 'bob', 'cat'];
      const before = await counts(s, 'big', users);
      // what the counts must be without vic's live posts (the deleted one is out already)
      const after = (mark) => vic.filter((q) => q > mark).length;
      // every member listed but vic (out of every answer from the 202 on: SPEC §2.2)
      const listed = Object.keys(before.unread).filter((u) => u !== 'vic');
      assert.deepEqual(listed, ['ann', 'bob', 'cat', 'root']);
      const want = {
        total: before.total - vic.length,
        unread: Object.fromEntries(listed.map((u) => [u, [before.unread[u][0], before.unread[u][1] - after(before.unread[u][0])]])),
        read: Object.fromEntries(users.map((u) => [u, before.read[u] - after(before.unread[u][0])])),
        listed: Object.fromEntries(users.map((u) => [u, [before.total - vic.length, before.listed[u][1] - after(before.unread[u][0])]])),
      };
      assert.equal(before.total, 3000 + 1 + vic.length, 'the room before: everyone\'s live posts');
      assert.equal(before.unread.cat[0], catMark);
      assert.ok(after(catMark) > 0 && after(catMark) < vic.length, 'cat has some of vic\'s posts unread, not all');

      const er = await s.req('DELETE', '/v1/users/vic', undefined, admin);
      assert.equal(er.status, 202, er.text);
      const now = await counts(s, 'big', users);
      assert.equal(await erasureStatus(s, er.json.erasure_id), 'pending', 'held at aa-hold');
      assert.deepEqual(now, want, 'right after the 202');

      renameSync(`${hold}.away`, hold); // back: the slices go on
      await waitFor('the erasure done', async () => (await erasureStatus(s, er.json.erasure_id)) === 'done', 60000);
      assert.deepEqual(await counts(s, 'big', users), want, 'once the erasure is done');
      // and the posts are tombstones naming no one
      const msgs = await messages(s, 'big');
      assert.equal(msgs.filter((m) => JSON.stringify(m).includes('vic')).length, 0);
      assert.equal(msgs.filter((m) => m.deleted_at != null).length, vic.length + 1);
    } finally {
      await s.stop();
      s.cleanup();
    }
  });

  test('a room made without the index is still erased by the walk, and entries written later go too', async () => {
    // the room as an older binary made it: no mark
    let s = await startStrata({ args: ARGS, env: { STRATA_JWT_SECRET: SECRET, STRATA_TEST_ROOMS_NO_INDEX: '1' } });
    try {
      await ok(s, 'POST', '/v1/rooms', { room_id: 'old', members: ['vic', 'ann', 'bob'] });
      await parallel(300, (i) => post(s, 'old', i % 10 ? 'ann' : 'vic', `m ${i}`));
      await s.stop();
      // the newer binary: its posts in the old room have entries, the room still no mark
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: { STRATA_JWT_SECRET: SECRET } });
      await parallel(100, (i) => post(s, 'old', i % 10 ? 'ann' : 'vic', `n ${i}`));
      const vics = (await messages(s, 'old')).filter((m) => m.from === 'vic');
      assert.equal(vics.length, 40);
      await ok(s, 'DELETE', `/v1/rooms/old/messages/${vics[0].msg_id}`);
      await ok(s, 'DELETE', `/v1/rooms/old/messages/${vics.at(-1).msg_id}`);
      const bobBefore = (await ok(s, 'GET', '/v1/rooms/old/members')).members.find((m) => m.user === 'bob');
      assert.deepEqual([bobBefore.last_read_seq, bobBefore.unread], [0, 398]);

      const er = await s.req('DELETE', '/v1/users/vic', undefined, admin);
      assert.equal(er.status, 202, er.text);
      await waitFor('the erasure done', async () => (await erasureStatus(s, er.json.erasure_id)) === 'done', 60000);
      const msgs = await messages(s, 'old');
      assert.equal(msgs.length, 400);
      assert.equal(msgs.filter((m) => JSON.stringify(m).includes('vic')).length, 0, 'no row names vic');
      assert.equal(msgs.filter((m) => m.deleted_at != null).length, 40);
      // the counts: ann's 360 posts; not one of vic's taken off twice (no entry left behind)
      assert.equal((await ok(s, 'GET', '/v1/rooms/old')).total_messages, 360);
      const bob = (await ok(s, 'GET', '/v1/rooms/old/members')).members.find((m) => m.user === 'bob');
      assert.deepEqual([bob.last_read_seq, bob.unread], [0, 360]);
      const row = (await ok(s, 'GET', '/v1/users/bob/rooms')).rooms.find((x) => x.room_id === 'old');
      assert.deepEqual([row.total_messages, row.unread], [360, 360]);
    } finally {
      await s.stop();
      s.cleanup();
    }
  });
});
