// SPDX-License-Identifier: MIT
// Seat changes stream on every member of a group (SPEC §3, §8): the leader carries each change to
// the other members inside its Raft entry, and they publish what they apply — even when nobody
// on the leader follows the event (the leader must not skip a change because its own streams do
// not want it). A follower's subscriber gets a snapshot that includes changes made before it
// subscribed, then every booking, confirm and expiry live with the leader's stats.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Group } from './cluster-lib.mjs';
import { wsConnect } from './lib.mjs';

const stats = (available, reserved, sold, total) => ({ available, reserved, sold, total });

// The next seats frame of subscription id (skips nothing else: the stream carries only it).
async function nextSeats(ws, id, ms = 20000) {
  const f = (await ws.next(ms)).json;
  assert.equal(f.type, 'seats', JSON.stringify(f));
  assert.equal(f.id, id);
  return f;
}

describe('seats streams in a group', () => {
  const g = new Group(3);
  after(() => { g.kill(); g.cleanup(); });

  test('a follower streams seat changes nobody on the leader follows', async () => {
    await g.init();
    const leader = await g.leader();
    const via = { via: leader };
    // holds of 10 s: the first must not run out before the booking and confirm below are streamed
    // (5 s was little for a subscribe on a follower and three writes on a loaded machine)
    for (const ev of ['gev', 'other'])
      assert.equal((await g.req('POST', '/v1/events', { event_id: ev, hold_seconds: 10, sections: [{ name: 'A', rows: 1, cols: 8, price: 1 }] }, via)).status, 201);
    // made while nobody anywhere follows gev
    assert.equal((await g.req('POST', '/v1/events/gev/bookings', { section: 'A', seats: ['1-1'] }, via)).status, 201);
    const follower = g.live().find((id) => id !== leader);
    const ws = await wsConnect(g.port(follower));
    ws.send({ type: 'subscribe', id: 'g', topic: 'seats', event_id: 'gev' });
    assert.deepEqual((await ws.next(8000)).json, { type: 'subscribed', id: 'g' });
    const snap = await nextSeats(ws, 'g');
    const ev = snap.snapshot.event_stats;
    assert.deepEqual(stats(ev.available, ev.reserved, ev.sold, ev.total), stats(7, 1, 0, 8));
    // live: booked and confirmed on the leader, whose own streams follow nothing
    await g.req('POST', '/v1/events/other/bookings', { section: 'A', seats: ['1-1'] }, via);
    const b = (await g.req('POST', '/v1/events/gev/bookings', { section: 'A', seats: ['1-4', '1-5'] }, via)).json;
    let f = await nextSeats(ws, 'g');
    assert.equal(f.event_id, 'gev');
    assert.deepEqual(f.changes, [{ seat: '1-4', state: 'reserved' }, { seat: '1-5', state: 'reserved' }]);
    assert.deepEqual(f.stats, stats(5, 3, 0, 8));
    assert.equal((await g.req('POST', `/v1/bookings/${b.booking_id}/confirm`, undefined, via)).status, 200);
    f = await nextSeats(ws, 'g');
    assert.deepEqual(f.changes.map((x) => x.state), ['sold', 'sold']);
    assert.deepEqual(f.event_stats, stats(5, 1, 2, 8));
    // the first hold (made before anyone followed) runs out on the leader: streamed here too
    f = await nextSeats(ws, 'g');
    assert.deepEqual(f.changes, [{ seat: '1-1', state: 'available' }]);
    assert.deepEqual(f.event_stats, stats(6, 0, 2, 8));
    await assert.rejects(ws.next(500)); // nothing of the other event
    ws.close();
    await g.stopAll();
  });
});
