// SPDX-License-Identifier: MIT
// A room's presence storm (issue 48 (c)): N members open their room streams one after another,
// and each one coming online is a presence frame (SPEC §2.1 v5) to every subscriber already
// there — N²/2 frames, which grow every stream's outbound queue at once. Checks that each
// subscriber got every later member's `online: true`, once and in the order they came online,
// and that once the storm passed the queues hold nothing: strata_ws_queue_capacity_bytes (the
// bytes of every stream's ring, ws/ring.c) is back to at most the few entries an idle stream keeps,
// so what the burst grew was given back rather than kept for streams that now sit idle.
// The second test makes the storm go out over many loop turns (--ws-presence-budget, ws/presout.c:
// a turn queues at most that many presence frames) while members open streams at once and others
// close theirs, and checks that slicing loses, repeats and reorders nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sleep, startStrata, waitStreams, withServer, wsConnect, wsUntil } from './lib.mjs';

const N = 400;
const ENTRY = 32; // bytes of one queue entry (st_wsent_t on 64-bit)
const KEEP = 8; // entries an idle stream's ring may keep (ST__WS_RING_KEEP)

async function metric(s, name) {
  const r = await s.req('GET', '/metrics');
  assert.equal(r.status, 200);
  const line = r.text.split('\n').find((l) => l.startsWith(`${name} `));
  assert.ok(line, `${name} in /metrics`);
  return Number(line.split(' ')[1]);
}

test('a presence storm: every change reaches every subscriber in order, the queues give their memory back', async () => {
  const s = await startStrata();
  await withServer(s, async () => {
    const users = Array.from({ length: N }, (_, i) => `u${i}`);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'storm', members: users })).status, 201);

    // open the N member streams one after another, each reading everything it gets from then on
    const streams = [];
    for (let i = 0; i < N; i++) {
      const ws = await wsConnect(s.port);
      assert.equal(ws.status, 101);
      ws.send({ type: 'subscribe', id: 's', topic: 'room', room_id: 'storm', user: users[i] });
      const got = await wsUntil(ws, (f) => f.type === 'replay_done' || f.type === 'error');
      assert.equal(got.at(-1).type, 'replay_done', JSON.stringify(got));
      streams.push(reader(i, ws, got));
    }

    // every member online, to every subscriber: the users after it, at least
    await waitStreams(streams, (st) => st.seen.some((f) => f.user === users[N - 1]), 'the last member online at every stream', 120000);
    for (const st of streams) {
      assert.equal(st.closed, false, `stream ${st.i} stayed open`);
      for (const f of st.seen) assert.deepEqual(f, { type: 'presence', id: 's', room_id: 'storm', user: f.user, online: true });
      const idx = st.seen.map((f) => Number(f.user.slice(1)));
      // a subscriber may also see members that came online just before it (their frame was not
      // out yet): a run of consecutive members, in the order they came online, up to the last
      const first = idx[0];
      assert.ok(first <= st.i, `stream ${st.i} missed members after it: first seen u${first}`);
      assert.deepEqual(idx, Array.from({ length: N - first }, (_, k) => first + k),
        `stream ${st.i}: every change once, in order`);
    }
    const r = await s.req('GET', '/v1/rooms/storm/presence');
    assert.equal(r.json.online.length, N);

    // the storm is over: the rings went back to what idle streams keep
    let cap;
    for (let t = 0; t < 50; t++) {
      cap = await metric(s, 'strata_ws_queue_capacity_bytes');
      if (cap <= N * KEEP * ENTRY) break;
      await sleep(100);
    }
    assert.ok(cap <= N * KEEP * ENTRY, `queues hold ${cap} bytes after the storm (at most ${N * KEEP * ENTRY})`);
    assert.ok((await metric(s, 'strata_ws_heap_trims_total')) >= 0);
    for (const st of streams) st.ws.close();
  });
});

// One stream's reader: the presence frames it gets (after `got`, what its subscribe brought).
function reader(i, ws, got) {
  const st = { i, ws, seen: got.filter((f) => f.type === 'presence'), closed: false, error: null };
  (async () => {
    for (;;) {
      const f = await ws.next(600000).catch((e) => ({ op: -1, error: e }));
      if (f.op === -1) { st.closed = true; return; }
      if (f.json?.type === 'presence') st.seen.push(f.json);
      else if (f.json?.type === 'error') st.error = new Error(`stream ${i}: ${f.text}`);
    }
  })();
  return st;
}

async function open(s, room, user, i) {
  const ws = await s.ws();
  ws.send({ type: 'subscribe', id: `s${i % 3}`, topic: 'room', room_id: room, user });
  const got = await wsUntil(ws, (f) => f.type === 'replay_done' || f.type === 'error', 60000);
  assert.equal(got.at(-1).type, 'replay_done', JSON.stringify(got));
  return reader(i, ws, got);
}

test('a storm over many loop turns (--ws-presence-budget 50): every frame once, in the same order for every subscriber', { timeout: 300000 }, async () => {
  const BUDGET = 50, FIRST = 30, MORE = 90, GONE = 10;
  const s = await startStrata({ args: ['--ws-presence-budget', String(BUDGET)] });
  s.ws = async () => { const ws = await wsConnect(s.port); assert.equal(ws.status, 101); return ws; };
  await withServer(s, async () => {
    const users = Array.from({ length: FIRST + MORE }, (_, i) => `u${i}`);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'slice', members: users })).status, 201);
    // FIRST streams one after another, then MORE at once (many changes to each flush, each
    // flush's frames ~100 turns of BUDGET), while the first GONE streams close: struck from
    // the jobs they wait in, and an offline frame each for the others
    const first = [];
    for (let i = 0; i < FIRST; i++) first.push(await open(s, 'slice', users[i], i));
    const opening = Promise.all(users.slice(FIRST).map((u, k) => open(s, 'slice', u, FIRST + k)));
    await sleep(50);
    for (const st of first.slice(0, GONE)) st.ws.close();
    const streams = [...first.slice(GONE), ...(await opening)];
    const last = (st, u) => st.seen.filter((f) => f.user === u).at(-1);
    // every stream hears of every member that came online (a member coming online after it at
    // least), and of the GONE going offline
    await waitStreams(streams, (st) => users.slice(GONE).every((u, k) => k + GONE < st.i || last(st, u)?.online === true) &&
      users.slice(0, GONE).every((u) => !last(st, u) || last(st, u).online === false),
    'every change at every stream', 240000);
    await sleep(1500); // nothing more may come: a repeated frame would show up here
    // the order the changes happened in, as the oldest stream that stayed saw them
    const order = (st) => st.seen.filter((f) => f.online).map((f) => f.user);
    const ref = order(streams[0]);
    assert.equal(new Set(ref).size, ref.length, 'one frame per member online');
    for (const st of streams) {
      assert.equal(st.closed, false, `stream ${st.i} stayed open`);
      for (const f of st.seen) assert.deepEqual(Object.keys(f), ['type', 'id', 'room_id', 'user', 'online']);
      assert.ok(st.seen.every((f) => f.id === `s${st.i % 3}` && f.room_id === 'slice'), `stream ${st.i}: its own id`);
      // what a stream saw of members coming online is the end of that order, from one before it
      // came online on: none missed, none repeated, none reordered
      const got = order(st);
      assert.ok(got.includes(users[st.i]), `stream ${st.i} saw itself come online`);
      assert.deepEqual(got, ref.slice(ref.length - got.length), `stream ${st.i}: the changes once, in order`);
      for (const u of users.slice(0, GONE)) {
        const about = st.seen.filter((f) => f.user === u).map((f) => f.online);
        assert.ok(about.length === 0 || (about.length <= 2 && about.at(-1) === false), `stream ${st.i} about ${u}: ${about}`);
      }
    }
    // sliced: more frames than one turn's budget went out, and no turn queued more than it
    const total = await metric(s, 'strata_ws_presence_frames_total');
    const most = await metric(s, 'strata_ws_presence_turn_frames_max');
    const seen = streams.reduce((n, st) => n + st.seen.length, 0);
    assert.ok(total >= seen, `frames queued ${total} >= frames the streams that stayed read ${seen}`);
    assert.ok(seen > 20 * BUDGET, `a storm of ${seen} frames`);
    assert.ok(most > 0 && most <= BUDGET, `the most presence frames one loop turn queued: ${most} (budget ${BUDGET})`);
    const r = await s.req('GET', '/v1/rooms/slice/presence');
    assert.deepEqual(r.json.online, users.slice(GONE).sort());
    for (const st of streams) st.ws.close();
  });
});
