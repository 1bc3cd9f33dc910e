// SPDX-License-Identifier: MIT
// Issue 23: a durable batch that releases frames for many streams (64 or more) has its sends
// shared by the loop and a sender thread: the loop frames every stream's bytes into one arena,
// both threads send() them, and what a socket did not take goes to libwebsockets, which keeps it
// and writes it first. 300 streams follow one counter under 32 increments in flight, so nearly
// every batch takes that path. 75 of them also follow a conversation of 40 KB messages and stop
// reading until the kernel holds all it will for them, so their sends come back partial (or
// EAGAIN) and the rest must go through lws, in order, ahead of what comes next; then they read
// again, and the cycle repeats. Every stream must get every change once, in order, each frame
// whole: no gap, no duplicate, no torn frame, nobody cut off.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startStrata, waitStreams, wsConnect } from './lib.mjs';

// SLOW >= 64: a big message alone releases frames for 64+ streams, so it takes the parallel path
// itself and a full socket shows as a short fan-out send at once (with 8, only a counter batch that
// met a socket just short of full did, a race ASan's timing lost: CI, 400 posts, 9 cut off).
const STREAMS = 300, SLOW = 75, MIN_INCRS = 1000, IN_FLIGHT = 16, CYCLES = 3, BIG_SIZE = 40000;

let s;
const open = []; // closed at the end, so a failure does not leave the process waiting on them
before(async () => { s = await startStrata(); });
after(async () => {
  for (const st of open) st.ws.close();
  await s.stop();
  s.cleanup();
});

const big = (idx) => `${idx} `.padEnd(BIG_SIZE, 'y');

const metric = async (name) => {
  const m = (await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\d+)`, 'm'));
  return m ? Number(m[1]) : 0;
};

// Reads every frame of a stream as it comes (big messages are checked and dropped, not kept):
// counter values into st.values, messages ({id, idx}) into st.msgs. The first broken expectation is kept in
// st.error and ends the reading; waitFor rethrows it.
function reader(st) {
  st.values = []; st.msgs = []; st.error = null;
  (async () => {
    for (;;) {
      const f = await st.ws.next(120000);
      if (f.op === -1 && st.closing) return;
      assert.equal(f.op, 1, `a text frame, not ${JSON.stringify({ op: f.op, code: f.code, reason: f.reason })}`);
      assert.ok(f.json, `a whole JSON frame: ${f.text.slice(0, 80)}`);
      const j = f.json;
      if (j.type === 'subscribed') continue;
      if (j.type === 'replay_done') { st.live = true; continue; }
      if (j.type === 'counter') {
        assert.equal(j.id, st.cid);
        st.values.push(j.value);
      } else if (j.type === 'message') {
        assert.equal(j.id, 'big');
        const idx = parseInt(j.message.content, 10);
        assert.equal(j.message.content, big(idx), 'a whole message');
        st.msgs.push({ id: j.message.msg_id, idx });
      } else assert.fail(`unexpected frame ${f.text.slice(0, 200)}`);
    }
  })().catch((e) => { st.error = e; });
}

const waitFor = (streams, pred, what, ms = 120000) => waitStreams(streams, pred, what, ms);

test('a parallel fan-out with partial sends: every stream gets every frame once, in order', { timeout: 300000 }, async (t) => {
  const writes = async () => await metric('strata_ws_fanout_writes_total\\{thread="loop"\\}') +
    await metric('strata_ws_fanout_writes_total\\{thread="sender"\\}');
  const writes0 = await writes();
  const calls0 = await metric('strata_ws_fanout_syscalls_total');
  const streams = [];
  for (let i = 0; i < STREAMS; i++) {
    const ws = await wsConnect(s.port);
    assert.equal(ws.status, 101);
    const st = { ws, cid: `c${i}`, slow: i % Math.floor(STREAMS / SLOW) === 0 };
    open.push(st);
    streams.push(st);
    ws.send({ type: 'subscribe', id: st.cid, topic: 'counter', name: 'hot' });
    if (st.slow) ws.send({ type: 'subscribe', id: 'big', topic: 'messages', user: 'big', conversation_id: 'slow' });
    else st.live = true;
    reader(st);
  }
  const slow = streams.filter((st) => st.slow);
  // every stream is subscribed (its first value, 0, or its empty replay) before the load starts
  await waitFor(streams, (st) => st.live && st.values.length === 1, 'the first value');
  for (const st of streams) assert.deepEqual(st.values, [0]);

  // the counter's load, IN_FLIGHT increments at a time, until the slow streams' cycles are over
  let done = 0, cycling = true;
  const incr = async () => {
    while (cycling || done < MIN_INCRS) {
      done++;
      const r = await s.req('POST', '/v1/counters/hot/incr', {});
      assert.equal(r.status, 200, r.text);
    }
  };
  const load = Promise.all(Array.from({ length: IN_FLIGHT }, incr));
  load.catch(() => {}); // awaited below

  // The slow streams stop reading; big messages go out to them until the kernel holds what it
  // will and sends come back short (the metric moves), two more follow (queued behind what lws
  // holds), and then they read again and must get all of it, whole and in order.
  let bigs = 0;
  const posted = [];
  const short0 = await metric('strata_ws_fanout_short_writes_total');
  try {
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      for (const st of slow) st.ws.sock.pause();
      const short = await metric('strata_ws_fanout_short_writes_total');
      let extra = -1;
      for (let k = 0; extra < 2 && k < 400; k++) {
        const r = await s.req('POST', '/v1/users/big/messages', { conversation_id: 'slow', from: 'b', content: big(bigs) });
        assert.equal(r.status, 201, r.text);
        posted.push({ id: r.json.msg_id, idx: bigs++ });
        if (extra >= 0) extra++;
        else if (await metric('strata_ws_fanout_short_writes_total') > short) extra = 0;
      }
      assert.ok(extra >= 0, `some fan-out send came back short (${bigs} posted, ${await metric('strata_ws_slow_consumer_drops_total')} cut off)`);
      for (const st of slow) st.ws.sock.resume();
      await waitFor(slow, (st) => st.msgs.length === bigs, `the slow streams caught up (cycle ${cycle})`);
    }
  } finally {
    cycling = false;
    for (const st of slow) st.ws.sock.resume();
  }
  await load;

  await waitFor(streams, (st) => st.values.at(-1) === done, 'the last value');
  for (const st of streams) {
    // the counter: every change once, in order, after the value at subscription (0)
    assert.deepEqual(st.values, Array.from({ length: done + 1 }, (_, k) => k), `stream ${st.cid}`);
  }
  // the messages: every one once, whole, in order
  for (const st of slow) assert.deepEqual(st.msgs, posted, `stream ${st.cid}`);
  assert.equal(await metric('strata_ws_slow_consumer_drops_total'), 0, 'nobody was cut off');
  const shorts = await metric('strata_ws_fanout_short_writes_total') - short0;
  const n = await writes() - writes0;
  t.diagnostic(`parallel writes ${n} (sender thread ${await metric('strata_ws_fanout_writes_total\\{thread="sender"\\}')}), short ${shorts}, increments ${done}, big messages ${bigs}`);
  assert.ok(n >= STREAMS * 10, `the parallel path was taken: ${n} writes`);
  // Session 19: where the kernel allows io_uring, a thread's sends go in batches of up to 16 per
  // system call; where it does not, one send() each, as before.
  const calls = await metric('strata_ws_fanout_syscalls_total') - calls0;
  const batched = await metric('strata_ws_fanout_io_uring');
  t.diagnostic(`io_uring ${batched}: ${calls} system calls for ${n} writes`);
  if (batched === 1) assert.ok(calls > 0 && calls * 4 <= n, `batched: ${calls} system calls for ${n} writes`);
  else assert.equal(calls, n, 'one send() per write');
  for (const st of streams) st.closing = true;
});
