// SPDX-License-Identifier: MIT
// Rooms in a replicated group (SPEC §2.1, §8): a room stream on a follower gets what the leader
// applied — the room's messages (with room_id), room_member frames, and the end of a removed
// member's subscription (error forbidden) — once the follower has applied each change.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { converge, Group } from './cluster-lib.mjs';
import { wsConnect } from './lib.mjs';

const g = new Group(3);
after(() => { g.kill(); g.cleanup(); });

async function until(ws, pred, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const f = await ws.next(Math.max(1, end - Date.now()));
    assert.notEqual(f.op, -1, 'the stream stayed open');
    if (f.json && pred(f.json)) return f.json;
  }
}

test('a room stream on a follower: messages, membership changes, a removed member ends forbidden', { timeout: 120000 }, async () => {
  await g.init();
  const leader = await g.leader();
  const follower = g.live().find((id) => id !== leader);
  let r = await g.req('POST', '/v1/rooms', { room_id: 'grp', members: ['ann', 'ben'] }, { via: leader });
  assert.equal(r.status, 201, r.text);
  const first = await g.req('POST', '/v1/rooms/grp/messages', { from: 'ann', content: 'one' }, { via: leader });
  assert.equal(first.status, 201, first.text);
  await converge(g);
  const ws = await wsConnect(g.port(follower));
  assert.equal(ws.status, 101);
  ws.send({ type: 'subscribe', id: 'b', topic: 'room', room_id: 'grp', user: 'ben', after: '0' });
  const replayed = await until(ws, (f) => f.type === 'message');
  assert.deepEqual([replayed.message.msg_id, replayed.message.room_id], [first.json.msg_id, 'grp']);
  await until(ws, (f) => f.type === 'replay_done');
  const live = await g.req('POST', '/v1/rooms/grp/messages', { from: 'ben', content: 'two' }, { via: leader });
  const got = await until(ws, (f) => f.type === 'message');
  assert.deepEqual([got.message.msg_id, got.message.seq, got.message.room_id], [live.json.msg_id, 2, 'grp']);
  assert.equal((await g.req('POST', '/v1/rooms/grp/members', { add: ['cat'] }, { via: leader })).status, 200);
  assert.deepEqual(await until(ws, (f) => f.type === 'room_member'),
    { type: 'room_member', id: 'b', room_id: 'grp', user: 'cat', change: 'added' });
  assert.equal((await g.req('POST', '/v1/rooms/grp/members', { remove: ['ben'] }, { via: leader })).status, 200);
  const end = await until(ws, (f) => f.type === 'error');
  assert.deepEqual([end.id, end.code], ['b', 'forbidden']);
  ws.close();
  await g.stopAll(); // each member exits 0 with no sanitizer report (lib.mjs)
});
