// SPDX-License-Identifier: MIT
// Fan-out on a follower (issues 23, 24): a follower publishes what it applies, entry by entry,
// each durable already when its frames are queued. 600 streams on a follower follow one counter
// while 8 clients increment it through the leader; every stream must get every value once, in
// order, after the value it subscribed at: no gap, no duplicate, nobody cut off. 600 is more
// than one loop turn writes (ST__WS_TURN_STREAMS, src/ws/queue.c), so streams are written over
// several turns while more entries apply.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { converge, Group } from './cluster-lib.mjs';
import { waitStreams, wsConnect } from './lib.mjs';

const STREAMS = 600, INCRS = 400, CLIENTS = 8;

const g = new Group(3);
const open = [];
after(() => {
  for (const st of open) st.ws.close();
  g.kill();
  g.cleanup();
});

async function metric(port, name) {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  const m = (await r.text()).match(new RegExp(`^${name} (\\d+)`, 'm'));
  return m ? Number(m[1]) : 0;
}

function reader(st) {
  st.values = [];
  st.error = null;
  (async () => {
    for (;;) {
      const f = await st.ws.next(60000);
      if (f.op === -1 && st.closing) return;
      assert.equal(f.op, 1, `a text frame, not ${JSON.stringify({ op: f.op, code: f.code, reason: f.reason })}`);
      const j = f.json;
      if (j.type === 'subscribed') continue;
      assert.equal(j.type, 'counter', f.text.slice(0, 200));
      st.values.push(j.value);
    }
  })().catch((e) => { st.error = e; });
}

const waitFor = (streams, pred, what, ms = 60000) => waitStreams(streams, pred, what, ms);

test('streams on a follower get every applied change once, in order', { timeout: 180000 }, async () => {
  await g.init();
  const leader = await g.leader();
  const follower = g.live().find((id) => id !== leader);
  const fport = g.port(follower);
  assert.equal((await g.req('POST', '/v1/counters/hot/incr', {}, { via: leader })).status, 200);
  await converge(g);

  const streams = [];
  for (let i = 0; i < STREAMS; i++) {
    const ws = await wsConnect(fport);
    assert.equal(ws.status, 101);
    const st = { ws };
    open.push(st);
    streams.push(st);
    ws.send({ type: 'subscribe', id: `c${i}`, topic: 'counter', name: 'hot' });
    reader(st);
  }
  await waitFor(streams, (st) => st.values.length === 1, 'the value at subscription');
  for (const st of streams) assert.deepEqual(st.values, [1]);

  let sent = 0;
  const client = async () => {
    while (sent < INCRS) {
      sent++;
      const r = await g.req('POST', '/v1/counters/hot/incr', {}, { via: leader });
      assert.equal(r.status, 200, r.text);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  const last = 1 + INCRS;
  await waitFor(streams, (st) => st.values.at(-1) === last, 'the last value');
  for (const [i, st] of streams.entries())
    assert.deepEqual(st.values, Array.from({ length: last }, (_, k) => k + 1), `stream c${i}`);
  assert.equal(await metric(fport, 'strata_ws_slow_consumer_drops_total'), 0);
  for (const st of streams) st.closing = true;
});

// Review of the end-of-turn write (session 8): a member queues what it applies already durable,
// one frame at a time, and each counted toward the stream's 1 MiB backlog cap as a release of its
// own, before the stream was written at all (it waits for its turn, or before for its writable
// callback). Twenty 100 KB messages applied together cut off (1008 "slow consumer") a stream that
// had read everything it was sent. What a stream gets while it waits for its write is one release.
test('big messages applied together on a follower reach a reading stream', { timeout: 120000 }, async () => {
  const leader = await g.leader();
  const follower = g.live().find((id) => id !== leader);
  const fport = g.port(follower);
  const ws = await wsConnect(fport);
  const st = { ws };
  open.push(st);
  ws.send({ type: 'subscribe', id: 'big', topic: 'messages', user: 'bigfan' });
  for (let i = 0; i < 2; i++) assert.match((await ws.next(20000)).json.type, /^(subscribed|replay_done)$/);
  const N = 20;
  const posts = await Promise.all(Array.from({ length: N }, (_, i) => g.req('POST', '/v1/users/bigfan/messages',
    { conversation_id: 'c', from: 'b', content: String.fromCharCode(97 + (i % 26)).repeat(100000) }, { via: leader })));
  for (const r of posts) assert.equal(r.status, 201, r.text);
  const ids = [];
  while (ids.length < N) {
    const f = await ws.next(30000);
    assert.equal(f.op, 1, `the stream was closed after ${ids.length} messages: ${f.code} ${f.reason}`);
    assert.equal(f.json.type, 'message', f.text.slice(0, 200));
    ids.push(f.json.message.msg_id);
  }
  assert.deepEqual(ids, posts.map((r) => r.json.msg_id).sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)));
  assert.equal(await metric(fport, 'strata_ws_slow_consumer_drops_total'), 0);
  st.closing = true;
  for (const o of open) o.ws.close();
  await g.stopAll(); // every member stops cleanly (exit 0, no sanitizer report)
});
