// SPDX-License-Identifier: MIT
// Issue 23: fan-out at full speed. strata frames what it sends itself and writes every frame a
// stream may send as one write, so one durable batch of many changes leaves as many frames in
// one send. With 64 increments in flight (several per batch), messages posted alongside (frames
// of every header size: 7-bit, 16-bit and 64-bit lengths) and streams that join mid-flight with
// `after`, every stream must still get every change once, in order (SPEC §3: no gap, no
// duplicate, replay then live), each frame whole.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startStrata, wsConnect } from './lib.mjs';

const LIVE = 80, LATE = 20, INCRS = 1500, IN_FLIGHT = 64;

let s;
const open = []; // closed at the end, so a failure does not leave the process waiting on them
before(async () => { s = await startStrata(); });
after(async () => {
  for (const ws of open) ws.close();
  await s.stop();
  s.cleanup();
});

const post = async (content) => {
  const r = await s.req('POST', '/v1/users/fan/messages', { conversation_id: 'room', from: 'f', content });
  assert.equal(r.status, 201, r.text);
  return r.json.msg_id;
};

// Subscribes to the counter and the conversation; returns the stream with what it has read.
async function subscribe(i, after) {
  const ws = await wsConnect(s.port);
  assert.equal(ws.status, 101);
  open.push(ws);
  // half the streams share their ids, half have their own: prefixes are built per id
  const cid = i % 2 ? `c${i}` : 'c', mid = i % 2 ? `m${i}` : 'm';
  ws.send({ type: 'subscribe', id: cid, topic: 'counter', name: 'hot' });
  ws.send({ type: 'subscribe', id: mid, topic: 'messages', user: 'fan', conversation_id: 'room', after });
  return { ws, cid, mid, values: [], ids: [], sizes: new Map(), replayDone: 0, subscribed: 0 };
}

// Reads st's frames until it has seen counter value `last` and message `lastId`.
async function drain(st, last, lastId) {
  while (st.values.at(-1) !== last || st.ids.at(-1) !== lastId) {
    const f = await st.ws.next(20000);
    assert.equal(f.op, 1, `a text frame, not ${JSON.stringify({ op: f.op, code: f.code, reason: f.reason })}`);
    assert.ok(f.json, `a whole JSON frame: ${f.text.slice(0, 80)}`);
    const j = f.json;
    if (j.type === 'subscribed') st.subscribed++;
    else if (j.type === 'counter') { assert.equal(j.id, st.cid); st.values.push(j.value); }
    else if (j.type === 'replay_done') { assert.equal(j.id, st.mid); st.replayDone++; }
    else if (j.type === 'message') {
      assert.equal(j.id, st.mid);
      if (!st.late) assert.equal(st.replayDone, 1, 'a live stream had an empty replay');
      st.ids.push(j.message.msg_id);
      st.sizes.set(j.message.msg_id, j.message.content.length);
    } else assert.fail(`unexpected frame ${f.text.slice(0, 200)}`);
  }
}

test('every stream gets every change once, in order, at full fan-out speed', { timeout: 180000 }, async () => {
  const before = [];
  for (let k = 0; k < 50; k++) before.push(await post(`before ${k}`));
  const live = await Promise.all(Array.from({ length: LIVE }, (_, i) => subscribe(i, before.at(-1))));
  // every live stream is subscribed (value 0, empty replay) before the load starts
  await Promise.all(live.map(async (st) => {
    while (st.subscribed < 2 || st.values.length < 1 || st.replayDone < 1) {
      const j = (await st.ws.next(10000)).json;
      if (j.type === 'subscribed') st.subscribed++;
      else if (j.type === 'counter') st.values.push(j.value);
      else if (j.type === 'replay_done') st.replayDone++;
      else assert.fail(`unexpected frame before the load: ${JSON.stringify(j)}`);
    }
    assert.deepEqual(st.values, [0]);
  }));

  // the load: increments, IN_FLIGHT at a time, and messages of every frame header size
  let done = 0;
  const incr = async () => {
    while (done < INCRS) {
      done++;
      const r = await s.req('POST', '/v1/counters/hot/incr', {});
      assert.equal(r.status, 200, r.text);
    }
  };
  const sizes = [1, 50, 100, 200, 1000, 4000];
  for (let c = 65200; c <= 65500; c += 50) sizes.push(c); // frames of 2^16 - 1 bytes and more
  const posted = [];
  const messages = (async () => {
    for (let k = 0; k < 3; k++)
      for (const n of sizes) posted.push({ id: await post('x'.repeat(n)), n });
  })();
  const load = Promise.all([...Array.from({ length: IN_FLIGHT }, incr), messages]);
  let failed = null;
  load.catch((e) => { failed = e; });

  // late streams join mid-flight, resuming after the 11th message posted before
  while (done < INCRS / 4 && !failed) await new Promise((r) => setTimeout(r, 5));
  const late = await Promise.all(Array.from({ length: LATE }, (_, i) => subscribe(LIVE + i, before[10])));
  for (const st of late) st.late = true;
  await load;

  const lastId = posted.at(-1).id;
  const want = posted.map((p) => p.id);
  await Promise.all([...live, ...late].map(async (st) => {
    await drain(st, INCRS, lastId);
    // the counter: the value at subscription, then every change once, in order
    const first = st.values[0];
    assert.deepEqual(st.values, Array.from({ length: INCRS - first + 1 }, (_, k) => first + k));
    // messages: the replay, then live ones, with no gap and no duplicate between them
    assert.equal(st.replayDone, 1);
    const expect = st.late ? [...before.slice(11), ...want] : want;
    assert.deepEqual(st.ids, expect);
    for (const p of posted) assert.equal(st.sizes.get(p.id), p.n);
    st.ws.close();
  }));
  const sent = Number((await s.req('GET', '/metrics')).text.match(/^strata_ws_frames_sent_total (\d+)/m)[1]);
  assert.ok(sent >= (LIVE + LATE) * (INCRS / 2), `frames counted as sent: ${sent}`);
});
