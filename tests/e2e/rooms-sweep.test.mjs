// SPDX-License-Identifier: MIT
// The author index's entries of the posts retention dropped are swept (src/rooms/sweep.c, issue
// 48: the index grew without bound in a busy room with retention while its messages stayed
// bounded). Over real sockets: a room with retention, posts by several authors, retention drops
// them all; the drop counts them (strata_rooms_index_unswept), a sweep held after one slice
// (STRATA_TEST_ROOMS_SWEEP_SLICES=1) is resumed by the next process from its durable state, and
// strata_rooms_index_swept_total ends at one entry per dropped post; total_messages and every
// unread stay the same throughout; then an erasure of an author still un-names its kept posts
// and takes them out of the counts exactly.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { erasureDone, waitFor } from './cold-lib.mjs';
import { roomsApi } from './rooms-lib.mjs';
import { FLUSH_ON_ASK, parallel, sleep, startStrata, withServer } from './lib.mjs';

const SECRET = 'rooms-sweep-secret';
const { bearer, admin, ok, post, messages } = roomsApi(SECRET);
const ENV = { STRATA_JWT_SECRET: SECRET };
// --table-keep 0: nothing holds the dropped objects (cold.test.mjs's retention test)
const ARGS = [...FLUSH_ON_ASK, '--table-keep', '0'];
const AUTHORS = ['ann', 'bob', 'cat', 'vic'];
const OLD = 1000; // posts retention drops: more than one slice's (512) entries

async function metric(s, name) {
  const m = (await s.req('GET', '/metrics', undefined, admin)).text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : undefined;
}

// total_messages (the room, each member's list of rooms) and each member's unread (the members
// list, its rooms)
async function counts(s, room) {
  const out = { total: (await ok(s, 'GET', `/v1/rooms/${room}`)).total_messages, unread: {}, listed: {} };
  for (const m of (await ok(s, 'GET', `/v1/rooms/${room}/members?limit=100`)).members) out.unread[m.user] = [m.last_read_seq, m.unread];
  for (const u of Object.keys(out.unread).filter((x) => x !== 'root')) {
    const row = (await ok(s, 'GET', `/v1/users/${u}/rooms?limit=100`)).rooms.find((x) => x.room_id === room);
    out.listed[u] = [row.total_messages, row.unread];
  }
  return out;
}

describe("a room's author index loses the entries of the posts retention dropped", () => {
  test('swept in slices after the drop, resumed after a restart; counts and an erasure exact', async () => {
    // retention on, the sweep held: nothing swept yet
    let s = await startStrata({ args: [...ARGS, '--retention-seconds', '2'], env: { ...ENV, STRATA_TEST_ROOMS_SWEEP_SLICES: '0' } });
    await withServer(() => s, async () => {
      await ok(s, 'POST', '/v1/rooms', { room_id: 'busy', members: AUTHORS });
      await parallel(OLD, (i) => post(s, 'busy', AUTHORS[i % AUTHORS.length], `old ${i}`));
      await ok(s, 'POST', '/v1/rooms/busy/read', { user: 'cat', seq: 300 }, bearer('cat'));
      assert.equal(await metric(s, 'strata_rooms_index_unswept'), 0);
      await ok(s, 'POST', '/v1/admin/flush');
      const cold = path.join(s.dir, 'cold', 'shared', 'conversations', 'busy');
      await waitFor('the room cooled', async () => existsSync(cold) && readdirSync(cold).some((f) => f.endsWith('.parquet')) &&
        (await metric(s, 'strata_flush_running')) === 0, 60000);
      // the object expires 2 s after its newest post; each pass asked for drops what expired
      await waitFor('retention dropped the room\'s object', async () => {
        await s.req('POST', '/v1/admin/flush', undefined, admin);
        return (await metric(s, 'strata_retention_deleted_messages_total')) >= OLD;
      }, 60000);
      assert.equal((await ok(s, 'GET', '/v1/rooms/busy')).total_messages, 0);
      assert.equal(await metric(s, 'strata_rooms_index_unswept'), OLD, 'every dropped post counted');
      assert.equal(await metric(s, 'strata_rooms_index_swept_total'), 0, 'held');
      const dropped = await counts(s, 'busy');
      await s.stop();

      // one slice, then held: part swept, the rest left in the durable state
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: { ...ENV, STRATA_TEST_ROOMS_SWEEP_SLICES: '1' } });
      await waitFor('one slice', async () => (await metric(s, 'strata_rooms_index_swept_total')) > 0, 30000);
      const first = await metric(s, 'strata_rooms_index_swept_total');
      assert.ok(first < OLD, `one slice took part of them (${first})`);
      assert.equal(await metric(s, 'strata_rooms_index_unswept'), OLD, 'not done: still counted');
      assert.deepEqual(await counts(s, 'busy'), dropped, 'mid-sweep');
      await s.stop();

      // a restart resumes it (no drop since: only the durable queue can start it)
      s = await startStrata({ dataDir: s.dir, args: ARGS, env: ENV });
      await waitFor('the sweep done', async () => (await metric(s, 'strata_rooms_index_unswept')) === 0, 30000);
      assert.equal(await metric(s, 'strata_rooms_index_swept_total'), OLD - first, 'the rest, each once');
      assert.deepEqual(await counts(s, 'busy'), dropped, 'once swept');

      // kept posts after the drop; an erasure of vic still finds its kept posts
      const vic = [];
      for (let i = 0; i < 5; i++) {
        await parallel(20, (j) => post(s, 'busy', AUTHORS[j % 3], `young ${i} ${j}`));
        vic.push((await post(s, 'busy', 'vic', `vic young ${i}`)).seq);
      }
      await ok(s, 'POST', '/v1/rooms/busy/read', { user: 'bob', seq: vic[2] }, bearer('bob'));
      const before = await counts(s, 'busy');
      assert.equal(before.total, 105);
      const after = (mark) => vic.filter((q) => q > mark).length;
      const listed = Object.keys(before.unread).filter((u) => u !== 'vic');
      const want = {
        total: before.total - vic.length,
        unread: Object.fromEntries(listed.map((u) => [u, [before.unread[u][0], before.unread[u][1] - after(before.unread[u][0])]])),
        listed: Object.fromEntries(listed.filter((u) => u !== 'root').map((u) => [u, [before.total - vic.length, before.listed[u][1] - after(before.unread[u][0])]])),
      };
      const er = await s.req('DELETE', '/v1/users/vic', undefined, admin);
      assert.equal(er.status, 202, er.text);
      assert.deepEqual(await counts(s, 'busy'), want, 'right after the 202');
      await erasureDone(s, er.json.erasure_id, { headers: admin });
      assert.deepEqual(await counts(s, 'busy'), want, 'once the erasure is done');
      const msgs = await messages(s, 'busy');
      assert.equal(msgs.length, 105);
      assert.equal(msgs.filter((m) => JSON.stringify(m).includes('vic')).length, 0, 'no row names vic');
      assert.equal(msgs.filter((m) => m.deleted_at != null).length, vic.length);
    });
  });

  test('expired rows compaction leaves out of an object mixing them with younger ones are swept too', async () => {
    const s = await startStrata({ args: [...ARGS, '--retention-seconds', '2'], env: ENV });
    await withServer(s, async () => {
      await ok(s, 'POST', '/v1/rooms', { room_id: 'mixed', members: AUTHORS });
      await parallel(300, (i) => post(s, 'mixed', AUTHORS[i % AUTHORS.length], `old ${i}`));
      await sleep(2500);
      await parallel(20, (i) => post(s, 'mixed', AUTHORS[i % AUTHORS.length], `young ${i}`));
      // one object of old and young rows: the pass queues its compaction, which leaves the
      // expired ones out (the young ones may expire too on a slow machine: every dropped row
      // counts the same)
      await waitFor('expired rows dropped', async () => {
        await s.req('POST', '/v1/admin/flush', undefined, admin);
        return (await metric(s, 'strata_retention_deleted_messages_total')) >= 300;
      }, 60000);
      await waitFor('the sweep done', async () => (await metric(s, 'strata_rooms_index_unswept')) === 0, 30000);
      assert.equal(await metric(s, 'strata_rooms_index_swept_total'), await metric(s, 'strata_retention_deleted_messages_total'),
        'an entry swept for every dropped post');
      const kept = (await ok(s, 'GET', '/v1/rooms/mixed')).total_messages;
      assert.equal(kept, 320 - (await metric(s, 'strata_retention_deleted_messages_total')));
    });
  });
});
