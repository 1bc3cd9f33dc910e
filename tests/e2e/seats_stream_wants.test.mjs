// SPDX-License-Identifier: MIT
// The seats stream skips building a change's message when no stream follows its event (SPEC §3:
// a snapshot, then every seat change). These tests catch a skip in the dangerous direction: a
// change made while nobody followed the event must show in a later subscriber's snapshot, and
// every change after the subscription must reach it live with the right stats — for bookings,
// confirms, cancels, seat changes and expiries, on the one event followed among several, and for
// a subscription that arrives in the middle of a burst of bookings.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { request, startStrata, wsConnect } from './lib.mjs';

const stats = (available, reserved, sold, total) => ({ available, reserved, sold, total });
// A snapshot's counts (its event_stats also carry updated_at).
const counts = (c) => stats(c.available, c.reserved, c.sold, c.total);

// Subscribes ws to an event's seats: returns the snapshot frame.
async function follow(ws, id, ev) {
  ws.send({ type: 'subscribe', id, topic: 'seats', event_id: ev });
  assert.deepEqual((await ws.next()).json, { type: 'subscribed', id });
  const snap = (await ws.next()).json;
  assert.equal(snap.type, 'seats');
  assert.equal(snap.event_id, ev);
  return snap;
}

describe('seats stream: messages only where someone follows', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  const book = async (ev, body) => {
    const r = await s.req('POST', `/v1/events/${ev}/bookings`, body);
    assert.equal(r.status, 201, r.text);
    return r.json;
  };

  test('changes made while nobody followed are in the snapshot; the next ones arrive live', async () => {
    // holds of 4 s: b5's below must not run out before the three requests after it are answered
    await s.req('POST', '/v1/events', { event_id: 'w1', hold_seconds: 4, sections: [{ name: 'A', rows: 2, cols: 5, price: 1 }, { name: 'B', rows: 1, cols: 4, price: 2 }] });
    // nobody follows w1 yet (a stream is open, following nothing)
    const ws = await wsConnect(s.port);
    const b4 = await book('w1', { section: 'B', seats: ['1-4'] }); // expires with nobody following
    const b1 = await book('w1', { section: 'A', seats: ['1-1', '1-2'] });
    assert.equal((await s.req('POST', `/v1/bookings/${b1.booking_id}/confirm`)).status, 200);
    const b2 = await book('w1', { items: [{ section: 'A', seats: ['2-1'] }, { section: 'B', quantity: 2 }] });
    assert.equal((await s.req('POST', `/v1/events/w1/bookings/${b2.booking_id}/extend`, { seconds: 120 })).status, 200);
    const b3 = await book('w1', { section: 'A', seats: ['2-5'] });
    assert.equal((await s.req('POST', `/v1/bookings/${b3.booking_id}/cancel`)).status, 200);
    const until = Date.now() + 15000;
    while ((await s.req('GET', `/v1/bookings/${b4.booking_id}`)).json.status !== 'expired')
      assert.ok(Date.now() < until, 'the hold did not expire');
    await assert.rejects(ws.next(300)); // nothing was sent for any of it

    const snap = await follow(ws, 'f', 'w1');
    assert.deepEqual(counts(snap.snapshot.event_stats), stats(9, 3, 2, 14));
    assert.deepEqual(snap.snapshot.sections.A.stats, stats(7, 1, 2, 10));
    assert.deepEqual(snap.snapshot.sections.B.stats, stats(2, 2, 0, 4));

    // live: a booking, a change, a confirm, an expiry — each with the stats after it
    const b5 = await book('w1', { section: 'A', seats: ['1-3'] });
    let f = (await ws.next()).json;
    assert.deepEqual([f.id, f.event_id, f.section], ['f', 'w1', 'A']);
    assert.deepEqual(f.changes, [{ seat: '1-3', state: 'reserved' }]);
    assert.deepEqual(f.stats, stats(6, 2, 2, 10));
    assert.deepEqual(f.event_stats, stats(8, 4, 2, 14));
    const ch = await s.req('POST', `/v1/events/w1/bookings/${b5.booking_id}/seats`, { add: ['1-4'], remove: ['1-3'] });
    assert.equal(ch.status, 200, ch.text);
    f = (await ws.next()).json;
    assert.deepEqual(f.changes, [{ seat: '1-3', state: 'available' }, { seat: '1-4', state: 'reserved' }]);
    assert.deepEqual(f.stats, stats(6, 2, 2, 10));
    await s.req('POST', `/v1/bookings/${b2.booking_id}/confirm`);
    const sold = [(await ws.next()).json, (await ws.next()).json];
    assert.deepEqual(sold.map((x) => x.section), ['A', 'B']);
    assert.deepEqual(sold[0].changes, [{ seat: '2-1', state: 'sold' }]);
    assert.deepEqual(sold[1].changes.map((x) => x.state), ['sold', 'sold']);
    assert.deepEqual(sold[1].event_stats, stats(8, 1, 5, 14));
    // the hold of b5 was made while followed: its expiry arrives live
    f = (await ws.next(15000)).json;
    assert.deepEqual(f.changes, [{ seat: '1-4', state: 'available' }]);
    assert.deepEqual(f.event_stats, stats(9, 0, 5, 14));
    ws.close();
  });

  test('a hold made while nobody followed still streams its expiry to a later subscriber', async () => {
    await s.req('POST', '/v1/events', { event_id: 'w2', hold_seconds: 2, sections: [{ name: 'A', rows: 1, cols: 3, price: 1 }] });
    await book('w2', { section: 'A', seats: ['1-2'] });
    const ws = await wsConnect(s.port);
    const snap = await follow(ws, 'x', 'w2');
    assert.deepEqual(counts(snap.snapshot.event_stats), stats(2, 1, 0, 3));
    const f = (await ws.next(15000)).json;
    assert.deepEqual(f.changes, [{ seat: '1-2', state: 'available' }]);
    assert.deepEqual(f.stats, stats(3, 0, 0, 3));
    ws.close();
  });

  test('of two events, each stream gets its own event and nothing of the other', async () => {
    for (const ev of ['p', 'q', 'r'])
      await s.req('POST', '/v1/events', { event_id: ev, sections: [{ name: 'A', rows: 1, cols: 10, price: 1 }] });
    const wp = await wsConnect(s.port), wq = await wsConnect(s.port);
    await follow(wp, 'sp', 'p');
    await book('q', { section: 'A', seats: ['1-1'] }); // q followed by nobody yet
    await book('r', { section: 'A', seats: ['1-1'] }); // r is never followed
    await book('p', { section: 'A', seats: ['1-5'] });
    let f = (await wp.next()).json;
    assert.deepEqual([f.id, f.event_id, f.changes], ['sp', 'p', [{ seat: '1-5', state: 'reserved' }]]);
    assert.deepEqual(f.stats, stats(9, 1, 0, 10));
    const snap = await follow(wq, 'sq', 'q');
    assert.deepEqual(counts(snap.snapshot.event_stats), stats(9, 1, 0, 10));
    await book('r', { section: 'A', seats: ['1-2'] });
    await book('q', { section: 'A', seats: ['1-2', '1-3'] });
    await book('p', { section: 'A', seats: ['1-6'] });
    f = (await wq.next()).json;
    assert.deepEqual([f.id, f.event_id], ['sq', 'q']);
    assert.deepEqual(f.changes.map((x) => x.seat), ['1-2', '1-3']);
    assert.deepEqual(f.stats, stats(7, 3, 0, 10));
    f = (await wp.next()).json;
    assert.deepEqual([f.event_id, f.changes], ['p', [{ seat: '1-6', state: 'reserved' }]]);
    assert.deepEqual(f.stats, stats(8, 2, 0, 10));
    await assert.rejects(wp.next(500)); // nothing of q or r
    await assert.rejects(wq.next(200));
    // unsubscribed, then followed again: the snapshot covers what happened in between
    wp.send({ type: 'unsubscribe', id: 'sp' });
    await book('p', { section: 'A', seats: ['1-7'] });
    await assert.rejects(wp.next(300));
    const again = await follow(wp, 'sp2', 'p');
    assert.deepEqual(counts(again.snapshot.event_stats), stats(7, 3, 0, 10));
    await book('p', { section: 'A', seats: ['1-8'] });
    f = (await wp.next()).json;
    assert.deepEqual([f.id, f.changes], ['sp2', [{ seat: '1-8', state: 'reserved' }]]);
    assert.deepEqual(f.stats, stats(6, 4, 0, 10));
    wp.close();
    wq.close();
  });

  test('a subscription amid a burst of bookings: snapshot plus live frames add up, no gap', async () => {
    const N = 40;
    for (let round = 0; round < 3; round++) {
      const ev = `burst${round}`;
      await s.req('POST', '/v1/events', { event_id: ev, sections: [{ name: 'A', rows: 1, cols: N, price: 1 }] });
      const ws = await wsConnect(s.port);
      const agents = Array.from({ length: 8 }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
      let next = 0, done = 0, subscribed = false;
      const worker = async (agent) => {
        while (next < N) {
          const seat = `1-${++next}`;
          const r = await request(s.port, 'POST', `/v1/events/${ev}/bookings`, { section: 'A', seats: [seat] }, {}, agent);
          assert.equal(r.status, 201, r.text);
          // subscribe once some bookings are done, while others are in flight
          if (++done >= N / 2 + round * 4 && !subscribed) {
            subscribed = true;
            ws.send({ type: 'subscribe', id: 'b', topic: 'seats', event_id: ev });
          }
        }
      };
      await Promise.all(agents.map(worker));
      agents.forEach((a) => a.destroy());
      assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'b' });
      const snap = (await ws.next()).json;
      let reserved = snap.snapshot.event_stats.reserved;
      assert.ok(reserved < N, `the snapshot came before the last booking (${reserved})`);
      const seen = new Set();
      while (reserved < N) {
        const f = (await ws.next()).json;
        assert.equal(f.type, 'seats');
        for (const c of f.changes) {
          assert.equal(c.state, 'reserved');
          assert.ok(!seen.has(c.seat), `${c.seat} twice`);
          seen.add(c.seat);
        }
        reserved += f.changes.length;
        // every frame's stats equal the snapshot plus every change since: none was skipped
        assert.deepEqual(f.event_stats, stats(N - reserved, reserved, 0, N));
      }
      await assert.rejects(ws.next(300));
      ws.close();
    }
  });
});
