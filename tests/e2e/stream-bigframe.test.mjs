// SPDX-License-Identifier: MIT
// Regression (review of 95a38c0): an empty stream queue takes one frame over the 1 MiB backlog
// cap, but any other frame queued while that big frame waits for its batch to be durable (a
// counter update, a small message, in the same batch) cut a reading subscriber off as a "slow
// consumer" — the big frame alone is past the cap. So did a big message queued behind one small
// frame still waiting for its batch.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { sleep, startStrata, wsConnect } from './lib.mjs';

let s;
before(async () => { s = await startStrata(); });
after(async () => { await s.stop(); s.cleanup(); });

test('a live 1 MiB message among counter updates reaches a reading subscriber', async () => {
  assert.equal((await s.req('POST', '/v1/counters/k/incr', { by: 1 })).status, 200);
  const ws = await wsConnect(s.port);
  ws.send({ type: 'subscribe', id: 'm', topic: 'messages', user: 'big', after: '0' });
  ws.send({ type: 'subscribe', id: 'k', topic: 'counter', name: 'k' });
  const frames = [];
  const drain = (async () => {
    for (;;) {
      const f = await ws.next(20000);
      frames.push(f);
      if (f.op !== 1 || f.json?.type === 'message') return f;
    }
  })();
  // counter updates flow on the same stream while the big message is posted
  let posting = true;
  const incr = async () => { while (posting) await s.req('POST', '/v1/counters/k/incr', { by: 1 }); };
  const workers = Array.from({ length: 16 }, incr);
  const r = await s.req('POST', '/v1/users/big/messages', { conversation_id: 'b', from: 'b', content: 'z'.repeat(1 << 20) });
  posting = false;
  await Promise.all(workers);
  assert.equal(r.status, 201, r.text);
  const last = await drain;
  const m = (await s.req('GET', '/metrics')).text.match(/strata_ws_slow_consumer_drops_total (\d+)/);
  assert.equal(Number(m[1]), 0, 'nobody was cut off');
  assert.equal(last.op, 1, `the stream was closed (${frames.length} frames)`);
  assert.equal(last.json.message.msg_id, r.json.msg_id);
  ws.close();
});

// A stream with two subscriptions that both take one message (its user, and its conversation: a
// chat client following the open room and everything else) holds that message's body once — the
// subscriptions share it — but it was counted once per subscription against the 1 MiB backlog
// cap: a reading subscriber was cut off as a "slow consumer" by a single 1 MiB message (three
// subscriptions: by one 600 KB message) and received none of it.
test('a 1 MiB message taken by several subscriptions of one reading stream reaches each of them', async () => {
  const ws = await wsConnect(s.port);
  const ids = ['all', 'room', 'room2', 'all2'];
  ws.send({ type: 'subscribe', id: 'all', topic: 'messages', user: 'shared' });
  ws.send({ type: 'subscribe', id: 'room', topic: 'messages', user: 'shared', conversation_id: 'room' });
  ws.send({ type: 'subscribe', id: 'room2', topic: 'messages', user: 'shared', conversation_id: 'room' });
  ws.send({ type: 'subscribe', id: 'all2', topic: 'messages', user: 'shared' });
  for (let i = 0; i < 2 * ids.length; i++) assert.match((await ws.next()).json.type, /^(subscribed|replay_done)$/);
  // one message at a time, each read in full before the next: this reader is never behind
  for (const content of ['z'.repeat(1 << 20), '\u0001'.repeat(1 << 20), 'small']) {
    const r = await s.req('POST', '/v1/users/shared/messages', { conversation_id: 'room', from: 'b', content });
    assert.equal(r.status, 201, r.text);
    const got = [];
    for (let i = 0; i < ids.length; i++) {
      const f = await ws.next(20000);
      assert.equal(f.op, 1, `the stream was closed: ${f.code} ${f.reason}`);
      assert.equal(f.json.type, 'message');
      assert.equal(f.json.message.msg_id, r.json.msg_id);
      got.push(f.json.id);
    }
    assert.deepEqual(got.sort(), [...ids].sort());
  }
  const m = (await s.req('GET', '/metrics')).text.match(/strata_ws_slow_consumer_drops_total (\d+)/);
  assert.equal(Number(m[1]), 0, 'nobody was cut off');
  ws.close();
});

// Regression: a stream's live frames counted against its 1 MiB backlog cap as soon as they were
// queued, while they still waited for their batch to be durable. Several big messages to one user
// acknowledged by one group commit cut off (1008 "slow consumer") a subscriber that reads as fast
// as it can: it could not have read frames that were not allowed to leave yet.
test('~0.9 MiB messages made durable together reach a reading subscriber, every one, in order', async () => {
  const ws = await wsConnect(s.port);
  ws.send({ type: 'subscribe', id: 'm', topic: 'messages', user: 'burst' });
  for (let f = await ws.next(); f.json?.type !== 'replay_done'; f = await ws.next()) assert.equal(f.op, 1);
  const drops = async () => Number((await s.req('GET', '/metrics')).text.match(/strata_ws_slow_consumer_drops_total (\d+)/)[1]);
  const drops0 = await drops();
  // Each post goes on its own connection with its last byte held back; once strata has read the
  // rest, the last bytes go out in one tick: the posts complete together, so their frames are
  // queued together and made durable by one group commit (at most two).
  const posts = Array.from({ length: 5 }, (_, i) => heldPost(s.port, '/v1/users/burst/messages',
    { conversation_id: 'b', from: 'b', content: `${i} ${'q'.repeat(900000)}` }));
  await sleep(500);
  for (const p of posts) p.release();
  const rs = await Promise.all(posts.map((p) => p.response));
  for (const r of rs) assert.equal(r.status, 201, r.text);
  const ids = rs.map((r) => r.json.msg_id).sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
  const got = [];
  while (got.length < ids.length) {
    const f = await ws.next(20000);
    assert.equal(f.op, 1, `the stream was closed after ${got.length} messages: ${f.code} ${f.reason}`);
    assert.equal(f.json.type, 'message');
    const i = rs.findIndex((r) => r.json.msg_id === f.json.message.msg_id);
    assert.equal(f.json.message.content, `${i} ${'q'.repeat(900000)}`);
    got.push(f.json.message.msg_id);
  }
  assert.deepEqual(got, ids, 'every message once, in msg_id order');
  assert.equal(await drops(), drops0, 'nobody was cut off');
  ws.close();
});

// A POST on its own connection, sent but for its last byte until release() sends that.
function heldPost(port, p, body) {
  const data = Buffer.from(JSON.stringify(body));
  const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: p, agent: false,
    headers: { 'content-type': 'application/json', 'content-length': data.length } });
  const response = new Promise((resolve, reject) => {
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode, text, json: res.statusCode === 201 ? JSON.parse(text) : undefined });
      });
    });
    req.on('error', reject);
  });
  req.write(data.subarray(0, -1));
  return { response, release: () => req.end(data.subarray(-1)) };
}
