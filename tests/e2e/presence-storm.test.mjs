// SPDX-License-Identifier: MIT
// A room's presence storm (issue 48 (c)): N members open their room streams one after another,
// and each one coming online is a presence frame (SPEC §2.1 v5) to every subscriber already
// there — N²/2 frames, which grow every stream's outbound queue at once. Checks that each
// subscriber got every later member's `online: true`, once and in the order they came online,
// and that once the storm passed the queues hold nothing: strata_ws_queue_capacity_bytes (the
// bytes of every stream's ring, ws/ring.c) is back to at most the few entries an idle stream keeps,
// so what the burst grew was given back rather than kept for streams that now sit idle.
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
      const st = { i, ws, seen: got.filter((f) => f.type === 'presence'), closed: false, error: null };
      (async () => {
        for (;;) {
          const f = await ws.next(600000).catch((e) => ({ op: -1, error: e }));
          if (f.op === -1) { st.closed = true; return; }
          if (f.json?.type === 'presence') st.seen.push(f.json);
          else if (f.json?.type === 'error') st.error = new Error(`stream ${i}: ${f.text}`);
        }
      })();
      streams.push(st);
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
