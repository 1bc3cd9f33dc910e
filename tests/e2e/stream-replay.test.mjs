// SPDX-License-Identifier: MIT
// Regression: a replay bigger than the socket buffers stalled after its first page. A flush that
// ended on a partly buffered write with the queue empty never fetched the next replay page, so a
// stream resuming with `after` behind a few hundred KB of messages (e.g. after a slow-consumer
// cut-off) got 256 messages and then nothing — no replay_done, no live messages.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startStrata, wsConnect } from './lib.mjs';

let s;
const ids = [];
before(async () => {
  s = await startStrata();
  const pad = 'x'.repeat(2000);
  for (let i = 0; i < 700; i++)
    ids.push((await s.req('POST', '/v1/users/bob/messages', { conversation_id: 'f', from: 'b', content: `${i} ${pad}` })).json.msg_id);
});
after(async () => { await s.stop(); s.cleanup(); });

test('a replay of many pages of 2 KB messages arrives whole, then goes live', async () => {
  for (const idx of [-1, 99]) {
    const after = idx < 0 ? '0' : ids[idx];
    const want = ids.slice(idx + 1);
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 's', topic: 'messages', user: 'bob', after });
    const seen = [];
    for (;;) {
      const f = (await ws.next(5000)).json;
      if (f.type === 'replay_done') break;
      if (f.type === 'message') seen.push(f.message.msg_id);
    }
    assert.equal(seen.length, want.length);
    assert.deepEqual(seen, want);
    await s.req('POST', '/v1/users/bob/messages', { conversation_id: 'f', from: 'b', content: 'live' });
    let f;
    do f = (await ws.next(5000)).json; while (f.type !== 'message');
    assert.equal(f.message.content, 'live');
    ids.push(f.message.msg_id);
    ws.close();
  }
});

// Regression: the stream backlog cap (1 MiB) was checked against whole pages of 256 messages, so
// a replay of big messages cut its subscriber off as a "slow consumer" in the first page, and a
// single live message near --max-content (1 MiB) cut off a subscriber whose queue was empty.
test('a replay of 300 KB messages and a live 1 MiB message reach a reading subscriber whole', async () => {
  const big = [];
  for (let i = 0; i < 24; i++)
    big.push((await s.req('POST', '/v1/users/big/messages', { conversation_id: 'b', from: 'b', content: `${i} ${'y'.repeat(300000)}` })).json.msg_id);
  const ws = await wsConnect(s.port);
  ws.send({ type: 'subscribe', id: 'b', topic: 'messages', user: 'big', after: '0' });
  const seen = [];
  for (;;) {
    const f = (await ws.next(10000)).json;
    assert.notEqual(f.type, 'error', JSON.stringify(f));
    if (f.type === 'replay_done') break;
    if (f.type === 'message') {
      assert.equal(f.message.content.length, String(seen.length).length + 1 + 300000);
      seen.push(f.message.msg_id);
    }
  }
  assert.deepEqual(seen, big);
  const content = 'z'.repeat(1 << 20); // exactly --max-content: its frame is over the 1 MiB cap
  const r = await s.req('POST', '/v1/users/big/messages', { conversation_id: 'b', from: 'b', content });
  assert.equal(r.status, 201, r.text);
  let f;
  do f = (await ws.next(10000)).json; while (f.type !== 'message');
  assert.equal(f.message.msg_id, r.json.msg_id);
  assert.equal(f.message.content, content);
  const m = (await s.req('GET', '/metrics')).text.match(/strata_ws_slow_consumer_drops_total (\d+)/);
  assert.equal(Number(m[1]), 0, 'nobody was cut off');
  ws.close();
});
