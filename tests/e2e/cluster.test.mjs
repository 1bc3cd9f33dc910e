// SPDX-License-Identifier: MIT
// SPEC §8, Jepsen-style: a group of 3 on loopback takes counter increments, sequence
// allocations, message posts and seat bookings through any member (following 307) while the
// leader is killed (-9), paused past the election timeout (SIGSTOP/SIGCONT) and a follower loses
// its data dir. Afterwards every member holds the same state, every acknowledged write is there,
// no number or seq was issued twice, no seat is in two bookings, and a stream held on a follower
// throughout saw every message once, in order.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { allMessages as messagesOf, call, ELECTION_MS, Group } from './cluster-lib.mjs';
import { sleep, startStrata, wsConnect } from './lib.mjs';

// What the clients saw acknowledged.
const acked = { incr: 0, attempts: 0, seqs: [], msgs: [], bookings: [] };

async function worker(g, w, stop) {
  let n = 0;
  while (!stop.done) {
    const op = n++ % 4;
    if (op === 0) {
      acked.attempts++;
      const r = await g.req('POST', '/v1/counters/jc/incr', {});
      if (r.status === 200) acked.incr++;
    } else if (op === 1) {
      const r = await g.req('POST', '/v1/sequences/js/next', { count: 2 });
      if (r.status === 200) acked.seqs.push([r.json.first, r.json.last]);
    } else if (op === 2) {
      const r = await g.req('POST', '/v1/users/ju/messages', { conversation_id: `c${w % 2}`, from: `w${w}`, content: `m${w}-${n}` });
      if (r.status === 201) acked.msgs.push(r.json);
    } else {
      const seat = `${1 + Math.floor(Math.random() * 10)}-${1 + Math.floor(Math.random() * 10)}`;
      const r = await g.req('POST', '/v1/events/jev/bookings', { section: 'A', seats: [seat] });
      if (r.status === 201) acked.bookings.push(r.json);
    }
    await sleep(8);
  }
}

// The first write acknowledged after a leader loss, in ms.
async function firstWrite(g) {
  const t0 = Date.now();
  for (;;) {
    // a request redirected to the paused leader times out: ask again
    const r = await g.req('POST', '/v1/counters/failover/incr', {}, { deadlineMs: 20000 });
    if (r.status === 200) return Date.now() - t0;
    assert.ok(Date.now() - t0 < 20000, `no write acknowledged: ${r.status} ${r.error}`);
  }
}

const allMessages = (port) => messagesOf(port, 'ju');

describe('replicated group of 3', () => {
  const g = new Group(3);
  after(async () => { g.kill(); await sleep(100); g.cleanup(); });

  test('writes through any member survive kill -9, a paused leader and a lost disk', async () => {
    await g.init();
    const first = await g.leader();
    // /v1/cluster on every member, 307 from a follower, 201 through it
    const st = await g.status(first);
    assert.equal(st.self, first);
    assert.equal(st.members.length, 3);
    assert.deepEqual(st.members.map((m) => m.role).sort(), ['follower', 'follower', 'leader']);
    const followers = g.live().filter((id) => id !== first);
    // (503 no_leader until the follower has applied the leader's advertised URL)
    let red;
    for (const end = Date.now() + 30000; Date.now() < end;) {
      red = await call(g.port(followers[0]), 'POST', '/v1/counters/jc/incr?x=1', {});
      if (red.status !== 503) break;
      assert.equal(red.json.error.code, 'no_leader');
      assert.equal(red.headers['retry-after'], '1');
      await sleep(20);
    }
    assert.equal(red.status, 307);
    assert.equal(red.headers.location, `http://127.0.0.1:${g.port(first)}/v1/counters/jc/incr?x=1`);
    const ev = await g.req('POST', '/v1/events', { event_id: 'jev', hold_seconds: 3600, sections: [{ name: 'A', rows: 10, cols: 10, price: 5 }, { name: 'F', capacity: 50, price: 1 }] });
    assert.equal(ev.status, 201);
    // a cart (SPEC §4.1) changed through the group: it replicates like any booking
    const cart0 = await g.req('POST', '/v1/events/jev/bookings', { items: [{ section: 'F', quantity: 5 }] });
    assert.equal(cart0.status, 201, cart0.text);
    assert.equal((await g.req('POST', `/v1/events/jev/bookings/${cart0.json.booking_id}/extend`, { seconds: 60 })).status, 200);
    const cart = (await g.req('POST', `/v1/events/jev/bookings/${cart0.json.booking_id}/seats`, { section: 'F', remove_quantity: 2 })).json;
    assert.deepEqual(cart.items, [{ section: 'F', seats: [], quantity: 3 }]);

    // a stream held on a follower throughout (never killed, never wiped)
    const streamId = followers[0];
    const ws = await wsConnect(g.port(streamId));
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 'm', topic: 'messages', user: 'ju' });
    ws.send({ type: 'subscribe', id: 'c', topic: 'counter', name: 'jc' });
    const streamed = [], values = [];
    let streamClosed = false;
    (async () => {
      for (;;) {
        const f = await ws.next(120000).catch(() => ({ op: -1 }));
        if (f.op === -1) { streamClosed = true; return; }
        if (f.json?.type === 'message') streamed.push(f.json.message);
        if (f.json?.type === 'counter') values.push(f.json.value);
      }
    })();

    // the counter's snapshot first (a follower shows it once a read index round with the leader
    // proved it current), so every increment after it streams live: 0, 1, 2, …
    for (const end = Date.now() + 30000; !values.length && Date.now() < end;) await sleep(50);
    assert.equal(values[0], 0);
    const stop = { done: false };
    const workers = Array.from({ length: 4 }, (_, w) => worker(g, w, stop));
    await sleep(1500);

    // 1. kill -9 of the leader: a new one takes writes within 5 s; the old one comes back
    const l1 = await g.leader();
    await g.members.get(l1).kill9();
    g.members.delete(l1);
    const t1 = await firstWrite(g);
    assert.ok(t1 < 5000, `writes resumed ${t1} ms after kill -9`);
    await g.start(l1);
    await sleep(1500);

    // 2. the leader paused past the election timeout, then resumed
    const l2 = await g.leader();
    const paused = g.members.get(l2);
    paused.proc.kill('SIGSTOP');
    g.members.delete(l2); // clients do not pick it meanwhile
    const t2 = await firstWrite(g);
    assert.ok(t2 < 5000, `writes resumed ${t2} ms after SIGSTOP`);
    await sleep(ELECTION_MS * 2);
    paused.proc.kill('SIGCONT');
    g.members.set(l2, paused);
    await sleep(1500);

    // 3. a follower (not the stream's member) loses its data dir and comes back empty
    const l3 = await g.leader();
    const victim = g.live().find((id) => id !== l3 && id !== streamId);
    await g.members.get(victim).kill9();
    g.members.delete(victim);
    rmSync(g.conf[victim].dir, { recursive: true, force: true });
    await g.start(victim);
    await sleep(1500);
    stop.done = true;
    await Promise.all(workers);

    // every member applies everything the leader committed
    const leaderId = await g.leader();
    const fin = await g.req('POST', '/v1/counters/final/incr', {});
    assert.equal(fin.status, 200);
    const target = (await g.status(leaderId)).commit_index;
    for (const id of g.live()) {
      for (let i = 0; ; i++) {
        const s = await g.status(id);
        if (s && s.applied_index >= target) break;
        assert.ok(i < 200, `member ${id} did not catch up to ${target}`);
        await sleep(50);
      }
    }

    // the leader's view: every acknowledged write is there, nothing issued twice
    const port = g.port(leaderId);
    const counter = (await call(port, 'GET', '/v1/counters/jc')).json.value;
    assert.ok(counter >= acked.incr && counter <= acked.attempts, `counter ${counter}, acked ${acked.incr}`);
    const seqLast = (await call(port, 'GET', '/v1/sequences/js')).json.last;
    const nums = acked.seqs.flatMap(([a, b]) => [a, b]);
    assert.equal(new Set(nums).size, nums.length, 'a sequence number was issued twice');
    assert.ok(Math.max(...nums) <= seqLast);
    const msgs = await allMessages(port);
    const ids = new Set(msgs.map((m) => m.msg_id));
    assert.equal(ids.size, msgs.length, 'a msg_id appears twice');
    for (const m of acked.msgs) assert.ok(ids.has(m.msg_id), `acknowledged message ${m.msg_id} lost`);
    for (const conv of ['c0', 'c1']) {
      const seqs = msgs.filter((m) => m.conversation_id === conv).map((m) => m.seq);
      assert.deepEqual(seqs, seqs.map((_, i) => i + 1), `seq of ${conv} not 1..n once each`);
    }
    const seats = acked.bookings.flatMap((b) => b.seats);
    assert.equal(new Set(seats).size, seats.length, 'a seat is in two acknowledged bookings');
    for (const b of acked.bookings) {
      const r = await call(port, 'GET', `/v1/bookings/${b.booking_id}`);
      assert.equal(r.status, 200, `acknowledged booking ${b.booking_id} lost`);
      assert.equal(r.json.status, 'reserved');
    }
    const evState = (await call(port, 'GET', '/v1/events/jev')).json;
    assert.ok(evState.event_stats.reserved >= seats.length);
    assert.deepEqual((await call(port, 'GET', `/v1/bookings/${cart.booking_id}`)).json, cart, 'the cart replicated');
    assert.deepEqual(evState.sections.F.stats, { available: 47, reserved: 3, sold: 0, total: 50 });
    assert.ok(acked.incr > 0 && acked.seqs.length > 0 && acked.msgs.length > 0 && acked.bookings.length > 0);

    // the stream on the follower: every message once, in order
    for (const end = Date.now() + 30000; streamed.length < msgs.length && Date.now() < end;) await sleep(50);
    assert.equal(streamClosed, false, 'the follower closed the stream');
    assert.deepEqual(streamed.map((m) => m.msg_id), msgs.map((m) => m.msg_id));
    // ... and every increment once, in order: the current value, then +1 at a time
    for (const end = Date.now() + 30000; values.at(-1) !== counter && Date.now() < end;) await sleep(50);
    assert.equal(values[0], 0);
    assert.deepEqual(values, values.map((_, i) => i));
    assert.equal(values.at(-1), counter);
    ws.close();
    // a seat-map snapshot from the follower is what it applied, not what it had at start-up
    const ws2 = await wsConnect(g.port(streamId));
    ws2.send({ type: 'subscribe', id: 's', topic: 'seats', event_id: 'jev' });
    let snap;
    for (let i = 0; i < 5 && !snap; i++) {
      const f = await ws2.next();
      if (f.json?.type === 'seats') snap = f.json.snapshot;
    }
    ws2.close();
    assert.deepEqual(snap.event_stats, evState.event_stats);

    // convergence: each member's store, opened alone, holds the same state
    await g.stopAll();
    const views = [];
    for (let id = 1; id <= 3; id++) {
      const s = await startStrata({ dataDir: g.conf[id].dir });
      const v = {
        counter: (await call(s.port, 'GET', '/v1/counters/jc')).json,
        seq: (await call(s.port, 'GET', '/v1/sequences/js')).json,
        msgs: (await allMessages(s.port)).map((m) => m.msg_id),
        seats: (await call(s.port, 'GET', '/v1/events/jev/sections/A/seats')).json,
      };
      await s.stop();
      views.push(v);
    }
    assert.deepEqual(views[1], views[0]);
    assert.deepEqual(views[2], views[0]);
    assert.equal(views[0].counter.value, counter);
  });
});
