// SPDX-License-Identifier: MIT
// SPEC §2.2 over real sockets: an erasure that switches, mid-way, from a room's author index to
// the walk of every message (src/rooms/erase.c, authors.c). It starts on an indexed room (every
// post by this binary: the index's entries of the user are taken), is held at a cold object moved
// away after the user's posts in the objects before it were un-named; an older leader
// (STRATA_TEST_ROOMS_POST_AS_OLD=1) then takes another member's posts without entries, so the
// room is indexed no more and the next slices walk every message; the walk is held again at a
// later object, after it un-named the user's posts in the one put back. At each of these points,
// and once done, the room's total_messages and every other member's unread are what we count by
// hand from what was posted and deleted: a post un-named through the index or by the walk, or
// still only subtracted by the reads (its entry there), leaves the counts once, never twice. Once
// done no message read back names the user (hot and cold), and no Parquet object holds its name.
import assert from 'node:assert/strict';
import { renameSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { duckQuery, parquetFiles, waitFor } from './cold-lib.mjs';
import { roomsApi } from './rooms-lib.mjs';
import { FLUSH_ON_ASK, startStrata, wsConnect, wsUntil } from './lib.mjs';

const SECRET = 'rooms-erase-switch-secret';
const { bearer, admin, ok, post, messages } = roomsApi(SECRET);
const ARGS = FLUSH_ON_ASK;
const ENV = { STRATA_JWT_SECRET: SECRET };
const AS_OLD = { ...ENV, STRATA_TEST_ROOMS_POST_AS_OLD: '1' };
const ROOM = 'sw';
// posts per cold object, vic's every other one. A walking slice takes 16 messages (erase.c) and
// looks one past them: c holds more than two slices, so however the slices fall the walk
// un-names some of vic's posts there before it reaches d
const SIZES = { a: 16, b: 16, c: 40, d: 16 };

const status = async (s, id) => (await ok(s, 'GET', `/v1/admin/erasures/${id}`)).status;

// The room's counts as strata answers them: total_messages (the room, and each member's list of
// rooms) and each member's [last_read_seq, unread] (the members list, and its list of rooms)
async function counts(s) {
  const total = (await ok(s, 'GET', `/v1/rooms/${ROOM}`)).total_messages;
  const unread = {};
  const listed = {};
  for (const m of (await ok(s, 'GET', `/v1/rooms/${ROOM}/members?limit=100`)).members) {
    unread[m.user] = [m.last_read_seq, m.unread];
    const row = (await ok(s, 'GET', `/v1/users/${m.user}/rooms?limit=100`)).rooms.find((x) => x.room_id === ROOM);
    listed[m.user] = [row.total_messages, row.unread];
  }
  return { total, unread, listed };
}

// The same counts from what the test posted and deleted: vic's posts out of every count (from the
// 202 on), as its deleted ones and the other deleted ones; vic out of the members
function byHand(posts, marks) {
  const live = posts.filter((p) => !p.deleted && p.from !== 'vic');
  const unread = {};
  const listed = {};
  for (const [u, mark] of Object.entries(marks)) {
    if (u === 'vic') continue;
    const n = live.filter((p) => p.seq > mark).length;
    unread[u] = [mark, n];
    listed[u] = [live.length, n];
  }
  return { total: live.length, unread, listed };
}

describe('an erasure that switches from the author index to the walk mid-way', () => {
  test("every post of the user un-named once, the counts exact at every step", async () => {
    let s = await startStrata({ args: ARGS, env: ENV });
    try {
      await ok(s, 'POST', '/v1/rooms', { room_id: ROOM, members: ['vic', 'ann', 'bob', 'cat'] });
      const posts = []; // { seq, msg_id, from, part, deleted }
      const say = async (from, part, i) => {
        const r = await post(s, ROOM, from, `${from}-${part}-${i}`);
        posts.push({ seq: r.seq, msg_id: r.msg_id, from, part, deleted: false });
        return r;
      };
      const dir = path.join(s.dir, 'cold', 'shared', 'conversations', ROOM);
      const objects = () => parquetFiles(dir).filter((f) => !path.basename(f).startsWith('delta-'));
      // four cold objects a..d, one flush each, then hot posts
      const object = {};
      for (const part of ['a', 'b', 'c', 'd']) {
        const had = new Set(objects());
        for (let i = 0; i < SIZES[part]; i++) await say(i % 2 ? 'ann' : 'vic', part, i);
        await ok(s, 'POST', '/v1/admin/flush');
        object[part] = await waitFor(`object ${part} written`, async () => {
          const fresh = objects().filter((f) => !had.has(f));
          return fresh.length === 1 && /^strata_flush_running 0$/m.test((await s.req('GET', '/metrics', undefined, admin)).text) && fresh[0];
        }, 60000);
      }
      for (let i = 0; i < 6; i++) await say(i % 2 ? 'ann' : 'vic', 'hot', i);
      // a hot post of vic's and one of ann's deleted before the erasure: out of the counts already
      for (const p of [posts.at(-2), posts.at(-1)]) {
        await ok(s, 'DELETE', `/v1/rooms/${ROOM}/messages/${p.msg_id}`);
        p.deleted = true;
      }
      assert.deepEqual([posts.at(-2).from, posts.at(-1).from], ['vic', 'ann']);
      // cat has read up to the middle of object b, so its unread is not the total
      const catMark = posts.find((p) => p.part === 'b' && p.from === 'ann').seq;
      await ok(s, 'POST', `/v1/rooms/${ROOM}/read`, { user: 'cat', seq: catMark }, bearer('cat'));
      const marks = Object.fromEntries(Object.entries((await counts(s)).unread).map(([u, [m]]) => [u, m]));
      assert.equal(marks.cat, catMark);
      assert.deepEqual(Object.keys(marks).sort(), ['ann', 'bob', 'cat', 'root', 'vic']);
      // before the erasure: vic's live posts count too
      const all = posts.filter((p) => !p.deleted);
      assert.equal((await counts(s)).total, all.length);
      await s.stop();

      // object c away: the index's slices un-name vic's posts in a and b, then wait for c
      renameSync(object.c, `${object.c}.away`);
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: ENV });
      // reads show vic's posts as tombstones from the 202 on (chat's mask), whatever the slices
      // did: the room's stream tells which ones a slice un-named (a message_deleted each)
      const vicOf = (part) => new Set(posts.filter((p) => p.part === part && p.from === 'vic' && !p.deleted).map((p) => p.msg_id));
      const subscribe = async () => {
        const ws = await wsConnect(s.port, '/v1/stream', bearer('bob'));
        const last = (await ok(s, 'GET', `/v1/rooms/${ROOM}`)).last_msg_id;
        ws.send({ type: 'subscribe', id: 'r', topic: 'room', room_id: ROOM, after: last });
        await wsUntil(ws, (f) => f.type === 'replay_done', 60000);
        return ws;
      };
      const deleted = new Set();
      const unnamed = (ws, part, n) => wsUntil(ws, (f) => {
        if (f.type === 'message_deleted') {
          assert.equal(f.message.from, null, `message_deleted ${f.message.msg_id} un-named`);
          deleted.add(f.message.msg_id);
        }
        return [...vicOf(part)].filter((id) => deleted.has(id)).length >= n;
      }, 60000);
      let ws = await subscribe();
      const er = await ok(s, 'DELETE', '/v1/users/vic');
      const want = () => byHand(posts, marks);
      assert.deepEqual(await counts(s), want(), 'right after the 202');
      // the index takes vic's entries in seq order: every one in a and b, then it waits for c
      await unnamed(ws, 'a', SIZES.a / 2);
      await unnamed(ws, 'b', SIZES.b / 2);
      const cName = path.basename(object.c);
      await waitFor('the index held at object c', async () => s.log().includes(`${cName} cannot be read (missing)`), 60000);
      assert.equal(await status(s, er.erasure_id), 'pending');
      assert.deepEqual(await counts(s), want(), 'held at c on the index');
      ws.close();
      await s.stop();

      // an older leader: ann posts without entries, the room is indexed no more (c still away:
      // whichever way its slices go, they cannot pass c)
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: AS_OLD });
      for (let i = 0; i < 2; i++) marks.ann = (await say('ann', 'old', i)).seq; // a post reads up to it
      assert.equal(await status(s, er.erasure_id), 'pending');
      assert.deepEqual(await counts(s), want(), 'after the older binary\'s posts, held at c');
      await s.stop();

      // this binary again, d away too; c back while it runs: the walk un-names vic's posts in c
      // (at least those of the slices that end before d), then waits for d
      renameSync(object.d, `${object.d}.away`);
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: ENV });
      ws = await subscribe();
      assert.deepEqual(await counts(s), want(), 'this binary again, held at c');
      renameSync(`${object.c}.away`, object.c);
      await unnamed(ws, 'c', 1);
      const dName = path.basename(object.d);
      await waitFor('the walk held at object d', async () => s.log().includes(`${dName} cannot be read (missing)`), 60000);
      assert.equal(await status(s, er.erasure_id), 'pending');
      assert.deepEqual(await counts(s), want(), 'the walk held at d');
      ws.close();
      // d back: the erasure goes on to its end
      renameSync(`${object.d}.away`, object.d);
      await waitFor('the erasure done', async () => (await status(s, er.erasure_id)) === 'done', 60000);
      assert.deepEqual(await counts(s), want(), 'once done');

      // every message read back: vic's tombstones naming no one, the others' as posted
      const msgs = await messages(s, ROOM);
      assert.deepEqual(msgs.map((m) => m.msg_id), posts.map((p) => p.msg_id));
      for (const [i, m] of msgs.entries()) {
        const p = posts[i];
        if (p.from === 'vic') {
          assert.deepEqual([m.from, m.content], [null, null], `vic's ${p.part} post ${m.seq} un-named`);
          assert.notEqual(m.deleted_at, null, `vic's ${p.part} post ${m.seq} a tombstone`);
        } else {
          assert.equal(m.from, p.from, `${p.from}'s ${m.seq}`);
          assert.equal(m.deleted_at != null, p.deleted, `${p.from}'s ${m.seq} deleted or not`);
        }
      }
      assert.equal(msgs.filter((m) => JSON.stringify(m).includes('vic')).length, 0, 'no row names vic');
      // and no cold object holds vic's name (its objects rewritten before done)
      const files = parquetFiles(path.join(s.dir, 'cold'));
      assert.ok(files.length > 0);
      let ann = 0;
      for (const f of files) {
        const rows = await duckQuery(`SELECT * FROM read_parquet('${f}')`);
        const text = JSON.stringify(rows);
        assert.doesNotMatch(text, /vic/, `${path.relative(s.dir, f)} names vic: ${text.slice(0, 400)}`);
        ann += rows.filter((x) => x.from === 'ann').length;
      }
      assert.ok(ann > 0, "ann's cold posts are still there");
    } finally {
      await s.stop();
      s.cleanup();
    }
  });
});
