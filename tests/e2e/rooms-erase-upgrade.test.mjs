// SPDX-License-Identifier: MIT
// SPEC §2.2 over real sockets, in a cluster mid-upgrade: an erasure is complete in a room that
// an older binary posted to. A room's mark says up to which seq every post has its author index
// entry (src/rooms/authors.c); a post an older leader made (STRATA_TEST_ROOMS_POST_AS_OLD=1: no
// entry, the mark not moved) leaves a gap for good, and an erasure then walks every message of
// the room instead of trusting the index. And in a room that is walked, the posts a newer binary
// indexed leave the counts once, not twice, while the walk is under way (held at a cold object
// moved away): the walk drops each one's entry in the batch that un-names it.
import assert from 'node:assert/strict';
import { readdirSync, renameSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { erasureDone, waitFor } from './cold-lib.mjs';
import { roomsApi } from './rooms-lib.mjs';
import { FLUSH_ON_ASK, startStrata, wsConnect, wsUntil } from './lib.mjs';

const SECRET = 'rooms-erase-upgrade-secret';
const { bearer, admin, ok, post, messages } = roomsApi(SECRET);
const ARGS = FLUSH_ON_ASK;
const ENV = { STRATA_JWT_SECRET: SECRET };
const AS_OLD = { ...ENV, STRATA_TEST_ROOMS_POST_AS_OLD: '1' };

// The room's total_messages, and bob's unread in the members list and in its list of rooms
async function counts(s, room) {
  const total = (await ok(s, 'GET', `/v1/rooms/${room}`)).total_messages;
  const bob = (await ok(s, 'GET', `/v1/rooms/${room}/members?limit=100`)).members.find((m) => m.user === 'bob');
  const row = (await ok(s, 'GET', '/v1/users/bob/rooms?limit=100')).rooms.find((x) => x.room_id === room);
  return { total, unread: bob.unread, listed: [row.total_messages, row.unread] };
}

describe('an erasure in a room an older binary posted to (rolling upgrade)', () => {
  test("every one of the user's posts is un-named, those an older leader made without entries too", async () => {
    let s = await startStrata({ args: ARGS, env: ENV });
    try {
      // 'mix': made and posted to by this binary, then by an older one, then by this one again;
      // 'kept': only ever posted to by this binary (its erasure takes the index's entries)
      await ok(s, 'POST', '/v1/rooms', { room_id: 'mix', members: ['vic', 'ann', 'bob'] });
      await ok(s, 'POST', '/v1/rooms', { room_id: 'kept', members: ['vic', 'ann', 'bob'] });
      const vic = { mix: [], kept: [] };
      const ann = { mix: [], kept: [] };
      const round = async (label, rooms) => {
        for (const room of rooms) {
          for (let i = 0; i < 4; i++) {
            vic[room].push((await post(s, room, 'vic', `vic ${label} ${i}`)).msg_id);
            ann[room].push((await post(s, room, 'ann', `ann ${label} ${i}`)).msg_id);
          }
        }
      };
      await round('before', ['mix', 'kept']);
      await s.stop();
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: AS_OLD }); // an older leader
      await round('older', ['mix']);
      await s.stop();
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: ENV }); // upgraded again
      await round('after', ['mix', 'kept']);
      assert.deepEqual(await counts(s, 'mix'), { total: 24, unread: 24, listed: [24, 24] });

      const er = await ok(s, 'DELETE', '/v1/users/vic');
      await erasureDone(s, er.erasure_id, { headers: admin });
      for (const room of ['mix', 'kept']) {
        const msgs = await messages(s, room);
        const byId = new Map(msgs.map((m) => [m.msg_id, m]));
        assert.equal(msgs.length, vic[room].length + ann[room].length, room);
        for (const id of vic[room]) {
          const m = byId.get(id);
          assert.equal(m.from, null, `${room}: vic's ${m.seq} un-named`);
          assert.notEqual(m.deleted_at, null, `${room}: vic's ${m.seq} a tombstone`);
          assert.equal(m.content, null, `${room}: vic's ${m.seq} without its text`);
        }
        for (const id of ann[room]) assert.deepEqual([byId.get(id).from, byId.get(id).deleted_at ?? null], ['ann', null]);
        assert.equal(msgs.filter((m) => JSON.stringify(m).includes('vic')).length, 0, `${room}: no row names vic`);
        const n = ann[room].length;
        assert.deepEqual(await counts(s, room), { total: n, unread: n, listed: [n, n] }, room);
      }
    } finally {
      await s.stop();
      s.cleanup();
    }
  });

  test("a walked room's indexed posts leave the counts once while the walk is held", async () => {
    // a room made without the mark (as a binary from before the index made it), posted to by
    // this binary: every post has its entry, the room is still walked
    let s = await startStrata({ args: ARGS, env: { ...ENV, STRATA_TEST_ROOMS_NO_INDEX: '1' } });
    try {
      await ok(s, 'POST', '/v1/rooms', { room_id: 'old', members: ['vic', 'ann', 'bob'] });
      const flushed = async (label) => {
        await ok(s, 'POST', '/v1/admin/flush');
        await waitFor(label, async () => /^strata_flush_running 0$/m.test((await s.req('GET', '/metrics', undefined, admin)).text), 60000);
      };
      // two cold objects of 20 messages each, vic's every other one
      for (const part of ['a', 'b']) {
        for (let i = 0; i < 20; i++) await post(s, 'old', i % 2 ? 'ann' : 'vic', `${part} ${i}`);
        await flushed(`object ${part} written`);
      }
      const dir = path.join(s.dir, 'cold', 'shared', 'conversations', 'old');
      const objects = () => readdirSync(dir).filter((f) => f.endsWith('.parquet')).sort();
      await waitFor('two objects', async () => objects().length === 2, 60000);
      await s.stop();
      // the second object moved away: the walk un-names vic's posts in the first, then stops
      const second = path.join(dir, objects()[1]);
      renameSync(second, `${second}.away`);
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: ENV });
      const want = { total: 20, unread: 20, listed: [20, 20] }; // ann's posts
      assert.deepEqual(await counts(s, 'old'), { total: 40, unread: 40, listed: [40, 40] });
      // the room's stream tells when the walk has un-named posts (a message_deleted each)
      const last = (await ok(s, 'GET', '/v1/rooms/old')).last_msg_id;
      const ws = await wsConnect(s.port, '/v1/stream', bearer('bob'));
      ws.send({ type: 'subscribe', id: 'r', topic: 'room', room_id: 'old', after: last });
      await wsUntil(ws, (f) => f.type === 'replay_done', 60000);

      const er = await ok(s, 'DELETE', '/v1/users/vic');
      assert.deepEqual(await counts(s, 'old'), want, 'right after the 202');
      // the walk's first slice un-names vic's posts in the first object (one batch), the next
      // ones wait for the second object
      await wsUntil(ws, (f) => f.type === 'message_deleted', 60000);
      await waitFor('the walk held at the second object', async () => /cannot be read \(missing\)/.test(s.log()), 60000);
      assert.equal((await ok(s, 'GET', `/v1/admin/erasures/${er.erasure_id}`)).status, 'pending');
      assert.deepEqual(await counts(s, 'old'), want, 'the walk held half way');
      ws.close();

      renameSync(`${second}.away`, second);
      await erasureDone(s, er.erasure_id, { headers: admin });
      assert.deepEqual(await counts(s, 'old'), want, 'once done');
      const msgs = await messages(s, 'old');
      assert.equal(msgs.filter((m) => JSON.stringify(m).includes('vic')).length, 0, 'no row names vic');
      assert.equal(msgs.filter((m) => m.deleted_at != null).length, 20);
    } finally {
      await s.stop();
      s.cleanup();
    }
  });
});
