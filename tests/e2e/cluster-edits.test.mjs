// SPDX-License-Identifier: MIT
// SPEC §2.2 in a replicated group: an edit, a delete and an erasure made through the leader reach
// a follower's streams (message_edited, message_deleted frames; the erased user's subscription
// ends), and a follower answers as the leader does.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, test } from 'node:test';
import { converge, Group } from './cluster-lib.mjs';
import { wsConnect } from './lib.mjs';

const g = new Group(3);

// One GET, its body as the bytes that came (no redirect followed)
function get(port, p) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: p, agent: false, timeout: 10000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    }).on('timeout', function () { this.destroy(new Error(`GET ${p}: timeout`)); }).on('error', reject);
  });
}
after(() => {
  g.kill();
  g.cleanup();
});

test('edits, deletes and erasures reach a follower\'s streams', { timeout: 120000 }, async () => {
  await g.init();
  const leader = await g.leader();
  const follower = g.live().find((id) => id !== leader);
  const post = async (content) => {
    const r = await g.req('POST', '/v1/users/ann/messages', { conversation_id: 'c', from: 'ann', content }, { via: leader });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    return r.json;
  };
  const m1 = await post('one');
  await converge(g);
  const ws = await wsConnect(g.port(follower));
  ws.send({ type: 'subscribe', id: 's', topic: 'messages', user: 'ann', after: '0' });
  const frames = [];
  const until = async (pred) => { for (;;) { const f = (await ws.next(15000)).json; frames.push(f); if (pred(f)) return f; } };
  await until((f) => f.type === 'replay_done');
  const m2 = await post('two');
  let r = await g.req('PATCH', `/v1/users/ann/messages/${m1.msg_id}`, { content: 'one!' }, { via: leader });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  r = await g.req('DELETE', `/v1/users/ann/messages/${m2.msg_id}`, undefined, { via: leader });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  await until((f) => f.type === 'message_deleted');
  const live = frames.slice(frames.findIndex((f) => f.type === 'replay_done') + 1);
  assert.deepEqual(live.map((f) => f.type), ['message', 'message_edited', 'message_deleted']);
  assert.equal(live[1].message.content, 'one!');
  assert.equal(live[2].message.content, null);
  // a follower answers as the leader does: every follower's read is a 307 to the leader's URL with
  // the same path and query (SPEC §8), and what that gives is the leader's answer, byte for byte
  const leaderUrl = `http://127.0.0.1:${g.port(leader)}`;
  for (const p of ['/v1/users/ann/messages?conversation_id=c&limit=10', '/v1/users/ann/conversations/c']) {
    const want = await get(g.port(leader), p);
    assert.equal(want.status, 200, `leader ${p}: ${want.body}`);
    for (const id of g.live().filter((x) => x !== leader)) {
      const r = await get(g.port(id), p);
      assert.equal(r.status, 307, `member ${id} ${p}: ${r.body}`);
      assert.equal(r.headers.location, `${leaderUrl}${p}`, `member ${id} ${p}`);
      const to = new URL(r.headers.location);
      const got = await get(Number(to.port), `${to.pathname}${to.search}`);
      assert.equal(got.status, want.status, `member ${id} ${p}, followed: ${got.body}`);
      assert.ok(got.body.equals(want.body), `member ${id} ${p}, followed: ${got.body}\nleader: ${want.body}`);
    }
    if (p.includes('/messages')) {
      const msgs = JSON.parse(want.body).messages;
      assert.equal(msgs.find((m) => m.msg_id === m1.msg_id)?.content, 'one!', 'the edit');
      assert.ok(!msgs.some((m) => m.content === 'two'), 'the delete');
    }
  }
  r = await g.req('DELETE', '/v1/users/ann', undefined, { via: leader });
  assert.equal(r.status, 202, JSON.stringify(r.json));
  const end = await until((f) => f.type === 'error');
  assert.equal(end.code, 'not_found');
  ws.close();
  await g.stopAll(); // each member exits 0 with no sanitizer report (lib.mjs)
});
