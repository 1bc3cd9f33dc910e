// SPDX-License-Identifier: MIT
// Holds that behave like a shopping cart (SPEC §4.1, issue 26): extend (up to
// --max-hold-seconds since creation; an extended hold expires at its new time, also after a
// kill -9), change seats all or nothing (removing every seat cancels), one booking over several
// sections, general admission sections booked by quantity, items on every booking, the seats
// stream, auth (403) and Idempotency-Key on the new routes, and a race of many clients changing
// overlapping holds: no seat or place is held twice and stats equal a recount, after kill -9 too.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sleep, startStrata, wsConnect } from './lib.mjs';

const MAX = ['--max-hold-seconds', '20'];
const B = (ev, bid, op = '') => `/v1/events/${ev}/bookings/${bid}${op}`;

// The seat map as a flat array of states (2-bit base64, SPEC §4).
async function states(s, ev, sec) {
  const m = (await s.req('GET', `/v1/events/${ev}/sections/${sec}/seats`)).json;
  const bytes = Buffer.from(m.seats, 'base64');
  return Array.from({ length: m.rows * m.cols }, (_, i) => (bytes[i >> 2] >> ((i & 3) * 2)) & 3);
}

describe('seats cart', () => {
  let s;
  before(async () => { s = await startStrata({ args: MAX }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('every booking carries items; section and seats describe the first', async () => {
    await s.req('POST', '/v1/events', { event_id: 'it', sections: [{ name: 'A', rows: 2, cols: 5, price: 10 }] });
    const r = await s.req('POST', '/v1/events/it/bookings', { section: 'A', seats: ['1-1', '1-2'] });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.json.items, [{ section: 'A', seats: ['1-1', '1-2'], quantity: 2 }]);
    assert.equal(r.json.section, 'A');
    assert.deepEqual(r.json.seats, ['1-1', '1-2']);
    const g = await s.req('GET', `/v1/bookings/${r.json.booking_id}`);
    assert.deepEqual(g.json.items, r.json.items);
  });

  test('extend: later expires_at; past --max-hold-seconds 400 and nothing changed; bad input', async () => {
    await s.req('POST', '/v1/events', { event_id: 'ex', hold_seconds: 5, sections: [{ name: 'A', rows: 1, cols: 5, price: 1 }] });
    const b = (await s.req('POST', '/v1/events/ex/bookings', { section: 'A', quantity: 1 })).json;
    let r = await s.req('POST', B('ex', b.booking_id, '/extend'), { seconds: 10 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.expires_at, b.expires_at + 10e6);
    assert.equal(r.json.status, 'reserved');
    assert.deepEqual(r.json.items, b.items);
    // 5 + 10 + 6 > 20 since creation
    r = await s.req('POST', B('ex', b.booking_id, '/extend'), { seconds: 6 });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.code, 'invalid_argument');
    assert.equal((await s.req('GET', B('ex', b.booking_id))).json.expires_at, b.expires_at + 10e6);
    r = await s.req('POST', B('ex', b.booking_id, '/extend'), { seconds: 5 }); // exactly 20
    assert.equal(r.status, 200, r.text);
    for (const body of [{}, { seconds: 0 }, { seconds: -1 }, { seconds: 1.5 }, { seconds: '3' }, { seconds: 21 }, null]) {
      const x = await s.req('POST', B('ex', b.booking_id, '/extend'), body === null ? undefined : body);
      assert.equal(x.status, 400, `${JSON.stringify(body)} ${x.text}`);
    }
    assert.equal((await s.req('POST', B('ex', '99999', '/extend'), { seconds: 1 })).status, 404);
    assert.equal((await s.req('POST', B('it', b.booking_id, '/extend'), { seconds: 1 })).status, 404);
    assert.equal((await s.req('POST', B('ex', b.booking_id, '/cancel'))).status, 200);
    r = await s.req('POST', B('ex', b.booking_id, '/extend'), { seconds: 1 });
    assert.equal(r.status, 409);
    assert.equal(r.json.error.booking.status, 'cancelled');
  });

  test('an extended hold expires at its new time, not the old one', async () => {
    await s.req('POST', '/v1/events', { event_id: 'exp', hold_seconds: 1, sections: [{ name: 'A', rows: 1, cols: 4, price: 1 }] });
    const b = (await s.req('POST', '/v1/events/exp/bookings', { section: 'A', quantity: 2 })).json;
    const t0 = Date.now();
    assert.equal((await s.req('POST', B('exp', b.booking_id, '/extend'), { seconds: 2 })).status, 200);
    await sleep(1600 - (Date.now() - t0));
    assert.equal((await s.req('GET', '/v1/events/exp')).json.event_stats.reserved, 2, 'the old time passed');
    assert.equal((await s.req('GET', B('exp', b.booking_id))).json.status, 'reserved');
    await sleep(3600 - (Date.now() - t0));
    assert.equal((await s.req('GET', B('exp', b.booking_id))).json.status, 'expired');
    await reservedNow(s, 'exp', 0);
  });

  test('change seats: add, remove, all or nothing, total_price, removing all cancels', async () => {
    await s.req('POST', '/v1/events', { event_id: 'ch', sections: [{ name: 'A', rows: 2, cols: 5, price: 7 }, { name: 'B', rows: 1, cols: 3, price: 100 }] });
    const other = (await s.req('POST', '/v1/events/ch/bookings', { section: 'A', seats: ['2-5'] })).json;
    const b = (await s.req('POST', '/v1/events/ch/bookings', { section: 'A', seats: ['1-1', '1-2'] })).json;
    let r = await s.req('POST', B('ch', b.booking_id, '/seats'), { add: ['1-3', '1-4'], remove: ['1-1'] });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.seats, ['1-2', '1-3', '1-4']);
    assert.equal(r.json.total_price, 21);
    assert.deepEqual(await states(s, 'ch', 'A'), [0, 1, 1, 1, 0, 0, 0, 0, 0, 1]);
    // a taken seat: 409 listing it, nothing changed (the removal neither)
    r = await s.req('POST', B('ch', b.booking_id, '/seats'), { add: ['1-5', '2-5'], remove: ['1-2'] });
    assert.equal(r.status, 409, r.text);
    assert.equal(r.json.error.code, 'seats_unavailable');
    assert.deepEqual(r.json.error.seats, ['2-5']);
    assert.deepEqual((await s.req('GET', B('ch', b.booking_id))).json.seats, ['1-2', '1-3', '1-4']);
    assert.deepEqual(await states(s, 'ch', 'A'), [0, 1, 1, 1, 0, 0, 0, 0, 0, 1]);
    // add_quantity (best available), another section
    r = await s.req('POST', B('ch', b.booking_id, '/seats'), { section: 'B', add_quantity: 2 });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.items, [{ section: 'A', seats: ['1-2', '1-3', '1-4'], quantity: 3 }, { section: 'B', seats: ['1-1', '1-2'], quantity: 2 }]);
    assert.equal(r.json.total_price, 3 * 7 + 2 * 100);
    r = await s.req('POST', B('ch', b.booking_id, '/seats'), { section: 'B', add_quantity: 2 });
    assert.equal(r.status, 409, r.text);
    // bad input
    for (const body of [{}, { add: [] }, { add: '1-5' }, { add: [5] }, { add: ['9-9'] }, { remove: ['1-5'] },
      { add: ['1-5'], add_quantity: 1 }, { add_quantity: 0 }, { add_quantity: 101 }, { remove: ['1-2', '1-2'] },
      { add: ['1-1'], remove: ['1-1', '1-2'], section: 'A' }, { section: 'bad name' }, { add: ['1-5'], allow_orphans: 1 }]) {
      const x = await s.req('POST', B('ch', b.booking_id, '/seats'), body);
      assert.equal(x.status, 400, `${JSON.stringify(body)} ${x.text}`);
      assert.equal(x.json.error.code, 'invalid_argument');
    }
    assert.equal((await s.req('POST', B('ch', b.booking_id, '/seats'), { section: 'Z', add: ['1-1'] })).status, 404);
    assert.equal((await s.req('POST', B('ch', '12345', '/seats'), { add: ['1-1'] })).status, 404);
    assert.equal((await s.req('POST', B('it', b.booking_id, '/seats'), { add: ['1-1'] })).status, 404);
    // removing every seat (of both sections) cancels it
    r = await s.req('POST', B('ch', b.booking_id, '/seats'), { section: 'B', remove: ['1-1', '1-2'] });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.section, 'A');
    r = await s.req('POST', B('ch', b.booking_id, '/seats'), { remove: ['1-2', '1-3', '1-4'] });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.status, 'cancelled');
    assert.deepEqual(await states(s, 'ch', 'A'), [0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    assert.equal((await s.req('POST', B('ch', b.booking_id, '/seats'), { add: ['1-1'] })).status, 409);
    // a sold booking cannot change either
    assert.equal((await s.req('POST', B('ch', other.booking_id, '/confirm'))).status, 200);
    assert.equal((await s.req('POST', B('ch', other.booking_id, '/seats'), { add: ['1-1'] })).status, 409);
    assert.equal((await s.req('POST', B('ch', other.booking_id, '/extend'), { seconds: 1 })).status, 409);
  });

  test('one booking over several sections, all or nothing', async () => {
    await s.req('POST', '/v1/events', { event_id: 'ms', sections: [{ name: 'A', rows: 1, cols: 4, price: 5 }, { name: 'B', rows: 1, cols: 4, price: 50 }, { name: 'F', capacity: 10, price: 1 }] });
    await s.req('POST', '/v1/events/ms/bookings', { section: 'B', seats: ['1-4'] });
    const before = (await s.req('GET', '/v1/events/ms')).json;
    let r = await s.req('POST', '/v1/events/ms/bookings', { items: [{ section: 'A', quantity: 2 }, { section: 'B', seats: ['1-3', '1-4'] }, { section: 'F', quantity: 3 }] });
    assert.equal(r.status, 409, r.text);
    assert.equal(r.json.error.code, 'seats_unavailable');
    assert.deepEqual(r.json.error.seats, ['1-4']);
    assert.deepEqual(r.json.error.items, [{ section: 'B', seats: ['1-4'] }]);
    assert.deepEqual((await s.req('GET', '/v1/events/ms')).json.event_stats, before.event_stats);
    r = await s.req('POST', '/v1/events/ms/bookings', { items: [{ section: 'A', quantity: 2 }, { section: 'B', seats: ['1-2', '1-3'] }, { section: 'F', quantity: 3 }] });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.section, 'A');
    assert.deepEqual(r.json.seats, ['1-1', '1-2']);
    assert.deepEqual(r.json.items, [{ section: 'A', seats: ['1-1', '1-2'], quantity: 2 }, { section: 'B', seats: ['1-2', '1-3'], quantity: 2 }, { section: 'F', seats: [], quantity: 3 }]);
    assert.equal(r.json.total_price, 2 * 5 + 2 * 50 + 3);
    const ev = (await s.req('GET', '/v1/events/ms')).json;
    assert.deepEqual(ev.event_stats, { ...ev.event_stats, available: 4 + 4 + 10 - 8, reserved: 8, total: 18 });
    for (const body of [{ items: [] }, { items: {} }, { items: [{ section: 'A', quantity: 1 }, { section: 'A', quantity: 1 }] },
      { items: [{ section: 'A' }] }, { items: [{ section: 'A', quantity: 1, seats: ['1-1'] }] }, { items: ['A'] },
      { section: 'A', items: [{ section: 'A', quantity: 1 }] }, { items: [{ section: 'A', quantity: 60 }, { section: 'B', quantity: 60 }] },
      { items: [{ section: 'F', seats: ['1-1'] }] }]) {
      const x = await s.req('POST', '/v1/events/ms/bookings', body);
      assert.equal(x.status, 400, `${JSON.stringify(body)} ${x.text}`);
    }
    assert.equal((await s.req('POST', '/v1/events/ms/bookings', { items: [{ section: 'Q', quantity: 1 }] })).status, 404);
    assert.equal((await s.req('POST', '/v1/events/nope/bookings', { items: [{ section: 'A', quantity: 1 }] })).status, 404);
    // confirm sells every item
    assert.equal((await s.req('POST', B('ms', r.json.booking_id, '/confirm'))).status, 200);
    assert.equal((await s.req('GET', '/v1/events/ms')).json.event_stats.sold, 7);
  });

  test('general admission: booked by quantity, stats, no seat map, sellout counts places', async () => {
    let r = await s.req('POST', '/v1/events', { event_id: 'ga', sections: [{ name: 'floor', capacity: 5, price: 30 }, { name: 'A', rows: 1, cols: 1, price: 1 }] });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.json.sections.floor, { capacity: 5, price: 30, stats: { available: 5, reserved: 0, sold: 0, total: 5 } });
    for (const sec of [{ name: 'f', capacity: 5, rows: 1, price: 1 }, { name: 'f', capacity: 0, price: 1 }, { name: 'f', capacity: -1, price: 1 }, { name: 'f', capacity: 2000001, price: 1 }, { name: 'f', price: 1 }]) {
      const x = await s.req('POST', '/v1/events', { event_id: 'gax', sections: [sec] });
      assert.equal(x.status, 400, `${JSON.stringify(sec)} ${x.text}`);
    }
    r = await s.req('GET', '/v1/events/ga/sections/floor/seats');
    assert.equal(r.status, 400);
    assert.equal(r.json.error.code, 'invalid_argument');
    assert.equal((await s.req('POST', '/v1/events/ga/bookings', { section: 'floor', seats: ['1-1'] })).status, 400);
    const b = await s.req('POST', '/v1/events/ga/bookings', { section: 'floor', quantity: 3 });
    assert.equal(b.status, 201, b.text);
    assert.deepEqual(b.json.seats, []);
    assert.deepEqual(b.json.items, [{ section: 'floor', seats: [], quantity: 3 }]);
    assert.equal(b.json.total_price, 90);
    r = await s.req('POST', '/v1/events/ga/bookings', { section: 'floor', quantity: 3 });
    assert.equal(r.status, 409);
    assert.equal(r.json.error.code, 'seats_unavailable');
    r = await s.req('POST', B('ga', b.json.booking_id, '/seats'), { section: 'floor', add_quantity: 2 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.items[0].quantity, 5);
    r = await s.req('POST', B('ga', b.json.booking_id, '/seats'), { remove_quantity: 1 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.items[0].quantity, 4);
    assert.equal(r.json.total_price, 120);
    assert.equal((await s.req('POST', B('ga', b.json.booking_id, '/seats'), { remove: ['1-1'] })).status, 400);
    let ev = (await s.req('GET', '/v1/events/ga')).json;
    assert.deepEqual(ev.sections.floor.stats, { available: 1, reserved: 4, sold: 0, total: 5 });
    assert.equal(ev.sellout.fully_reserved_at, null);
    await s.req('POST', '/v1/events/ga/bookings', { section: 'A', quantity: 1 });
    assert.equal((await s.req('GET', '/v1/events/ga')).json.sellout.fully_reserved_at, null, 'a standing place is left');
    await s.req('POST', '/v1/events/ga/bookings', { section: 'floor', quantity: 1 });
    ev = (await s.req('GET', '/v1/events/ga')).json;
    assert.equal(ev.event_stats.available, 0);
    assert.equal(typeof ev.sellout.fully_reserved_at, 'number');
    assert.equal((await s.req('POST', B('ga', b.json.booking_id, '/confirm'))).status, 200);
    assert.deepEqual((await s.req('GET', '/v1/events/ga')).json.sections.floor.stats, { available: 0, reserved: 1, sold: 4, total: 5 });
  });

  test('no orphan seats: the example of issue 26, allow_orphans, named seats may leave one', async () => {
    await s.req('POST', '/v1/events', { event_id: 'orph', sections: [{ name: 'A', rows: 1, cols: 7, price: 1 }, { name: 'B', rows: 1, cols: 7, price: 1 }] });
    for (const sec of ['A', 'B']) assert.equal((await s.req('POST', '/v1/events/orph/bookings', { section: sec, seats: ['1-1', '1-5'] })).status, 201);
    // [taken, free, free, free, taken, free, free]: 2 seats go to 6-7, not 2-3 (4 left alone)
    let r = await s.req('POST', '/v1/events/orph/bookings', { section: 'A', quantity: 2 });
    assert.deepEqual(r.json.seats, ['1-6', '1-7']);
    r = await s.req('POST', '/v1/events/orph/bookings', { section: 'B', quantity: 2, allow_orphans: true });
    assert.deepEqual(r.json.seats, ['1-2', '1-3']);
    r = await s.req('POST', '/v1/events/orph/bookings', { section: 'A', seats: ['1-2', '1-3'] });
    assert.equal(r.status, 201, 'a named booking may leave an orphan');
    // a run of exactly the quantity leaves nothing: the lone seat 4 is taken first
    r = await s.req('POST', '/v1/events/orph/bookings', { section: 'B', quantity: 1 });
    assert.deepEqual(r.json.seats, ['1-4']);
    assert.equal((await s.req('POST', '/v1/events/orph/bookings', { section: 'A', quantity: 1, allow_orphans: 'yes' })).status, 400);
  });

  test('the seats stream shows changes, extensions move nothing', async () => {
    await s.req('POST', '/v1/events', { event_id: 'st', hold_seconds: 5, sections: [{ name: 'A', rows: 1, cols: 6, price: 1 }, { name: 'F', capacity: 9, price: 1 }] });
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 's', topic: 'seats', event_id: 'st' });
    assert.equal((await ws.next()).json.type, 'subscribed');
    await ws.next(); // snapshot
    const b = (await s.req('POST', '/v1/events/st/bookings', { items: [{ section: 'A', seats: ['1-1', '1-2'] }, { section: 'F', quantity: 4 }] })).json;
    let f = (await ws.next()).json;
    assert.equal(f.section, 'A');
    assert.deepEqual(f.changes, [{ seat: '1-1', state: 'reserved' }, { seat: '1-2', state: 'reserved' }]);
    // one message per section, each with the event's stats after the whole booking: a subscriber
    // never sees a booking over two sections half made
    assert.deepEqual(f.event_stats, { available: 9, reserved: 6, sold: 0, total: 15 });
    f = (await ws.next()).json;
    assert.equal(f.section, 'F');
    assert.deepEqual(f.changes, [{ quantity: 4, state: 'reserved' }]);
    assert.deepEqual(f.stats, { available: 5, reserved: 4, sold: 0, total: 9 });
    await s.req('POST', B('st', b.booking_id, '/extend'), { seconds: 5 });
    await s.req('POST', B('st', b.booking_id, '/seats'), { add: ['1-5'], remove: ['1-1'] });
    // a change is one message: the seat given back and the seat taken, stats after both
    f = (await ws.next()).json;
    assert.deepEqual(f.changes, [{ seat: '1-1', state: 'available' }, { seat: '1-5', state: 'reserved' }]);
    assert.deepEqual(f.stats, { available: 4, reserved: 2, sold: 0, total: 6 });
    await s.req('POST', B('st', b.booking_id, '/seats'), { section: 'F', remove_quantity: 4 });
    f = (await ws.next()).json;
    assert.deepEqual(f.changes, [{ quantity: 4, state: 'available' }]);
    ws.close();
  });

  test('Idempotency-Key: a retried extend or change answers the first time, changes nothing', async () => {
    await s.req('POST', '/v1/events', { event_id: 'idk', hold_seconds: 5, sections: [{ name: 'A', rows: 1, cols: 9, price: 1 }] });
    const b = (await s.req('POST', '/v1/events/idk/bookings', { section: 'A', quantity: 1 })).json;
    const k = { 'idempotency-key': 'ext-1' };
    const r1 = await s.req('POST', B('idk', b.booking_id, '/extend'), { seconds: 10 }, k);
    const r2 = await s.req('POST', B('idk', b.booking_id, '/extend'), { seconds: 10 }, k);
    assert.equal(r1.status, 200);
    assert.equal(r2.text, r1.text);
    assert.equal((await s.req('GET', B('idk', b.booking_id))).json.expires_at, b.expires_at + 10e6);
    assert.equal((await s.req('POST', B('idk', b.booking_id, '/extend'), { seconds: 11 }, k)).status, 422);
    const c = { 'idempotency-key': 'chg-1' };
    const c1 = await s.req('POST', B('idk', b.booking_id, '/seats'), { add_quantity: 2 }, c);
    const c2 = await s.req('POST', B('idk', b.booking_id, '/seats'), { add_quantity: 2 }, c);
    assert.equal(c1.status, 200);
    assert.equal(c2.text, c1.text);
    assert.equal((await s.req('GET', '/v1/events/idk')).json.event_stats.reserved, 3);
  });
});

// A read sees a hold expired at once; the seats go back when the expiry timer's write is
// durable, which a loaded machine may run a little later: polls until the event shows `n`
// reserved (deadline 15 s) and returns its state.
async function reservedNow(s, id, n) {
  let ev;
  for (const end = Date.now() + 15000; Date.now() < end; await sleep(50)) {
    ev = (await s.req('GET', `/v1/events/${id}`)).json;
    if (ev.event_stats.reserved === n) return ev;
  }
  assert.equal(ev.event_stats.reserved, n, `${id}: seats reserved`);
  return ev;
}

test('an extended hold keeps its new time across kill -9 and restart', async () => {
  let s = await startStrata({ args: MAX });
  await s.req('POST', '/v1/events', { event_id: 'k', hold_seconds: 1, sections: [{ name: 'A', rows: 1, cols: 4, price: 1 }, { name: 'F', capacity: 4, price: 1 }] });
  const b = (await s.req('POST', '/v1/events/k/bookings', { items: [{ section: 'A', quantity: 2 }, { section: 'F', quantity: 3 }] })).json;
  const t0 = Date.now();
  assert.equal((await s.req('POST', B('k', b.booking_id, '/extend'), { seconds: 3 })).status, 200);
  await s.kill9();
  s = await startStrata({ dataDir: s.dir, args: MAX });
  await sleep(Math.max(0, 1800 - (Date.now() - t0)));
  let ev = (await s.req('GET', '/v1/events/k')).json;
  assert.equal(ev.event_stats.reserved, 5, 'not expired at the old time');
  assert.deepEqual((await s.req('GET', B('k', b.booking_id))).json.items, b.items);
  await sleep(4600 - (Date.now() - t0));
  ev = await reservedNow(s, 'k', 0);
  assert.deepEqual(ev.sections.F.stats, { available: 4, reserved: 0, sold: 0, total: 4 });
  await s.stop();
  s.cleanup();
});

test('auth: only the owner or an admin may extend or change a booking (403)', async () => {
  const SECRET = 'cart-secret';
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const jwt = (p) => {
    const h = b64({ alg: 'HS256', typ: 'JWT' });
    const q = b64(p);
    return `${h}.${q}.${createHmac('sha256', SECRET).update(`${h}.${q}`).digest('base64url')}`;
  };
  const as = (sub, role) => ({ authorization: `Bearer ${jwt(role ? { sub, role } : { sub })}` });
  const s = await startStrata({ env: { STRATA_JWT_SECRET: SECRET } });
  try {
    await s.req('POST', '/v1/events', { event_id: 'au', sections: [{ name: 'A', rows: 1, cols: 9, price: 1 }] }, as('boss', 'admin'));
    const b = (await s.req('POST', '/v1/events/au/bookings', { section: 'A', quantity: 1 }, as('alice'))).json;
    assert.equal((await s.req('POST', B('au', b.booking_id, '/extend'), { seconds: 5 })).status, 401);
    let r = await s.req('POST', B('au', b.booking_id, '/extend'), { seconds: 5 }, as('bob'));
    assert.equal(r.status, 403);
    assert.equal(r.json.error.code, 'forbidden');
    r = await s.req('POST', B('au', b.booking_id, '/seats'), { add_quantity: 1 }, as('bob'));
    assert.equal(r.status, 403);
    assert.equal((await s.req('GET', '/v1/events/au', undefined, as('bob'))).json.event_stats.reserved, 1);
    assert.equal((await s.req('POST', B('au', b.booking_id, '/extend'), { seconds: 5 }, as('alice'))).status, 200);
    assert.equal((await s.req('POST', B('au', b.booking_id, '/seats'), { add_quantity: 1 }, as('alice'))).status, 200);
    assert.equal((await s.req('POST', B('au', b.booking_id, '/seats'), { add_quantity: 1 }, as('boss', 'admin'))).status, 200);
  } finally {
    await s.stop();
    s.cleanup();
  }
});

// Every live booking's seats, per section; places of general admission counted.
async function audit(s, ev, ids) {
  const held = new Map();
  const count = new Map();
  for (const id of ids) {
    const b = (await s.req('GET', B(ev, id))).json;
    if (b.status !== 'reserved' && b.status !== 'sold') continue;
    for (const it of b.items) {
      count.set(it.section, (count.get(it.section) || 0) + it.quantity);
      for (const seat of it.seats) {
        const k = `${it.section}/${seat}`;
        assert.ok(!held.has(k), `${k} is held by ${held.get(k)} and ${id}`);
        held.set(k, id);
      }
    }
  }
  const e = (await s.req('GET', `/v1/events/${ev}`)).json;
  let reservedSold = 0;
  for (const [name, sec] of Object.entries(e.sections)) {
    const st = sec.stats;
    assert.equal(st.reserved + st.sold, count.get(name) || 0, `${name}: stats equal the bookings`);
    assert.equal(st.available + st.reserved + st.sold, st.total);
    if (!sec.capacity) {
      const map = await states(s, ev, name);
      assert.equal(map.filter((x) => x !== 0).length, st.reserved + st.sold, `${name}: stats equal a recount`);
      for (let i = 0; i < map.length; i++) {
        const seat = `${Math.floor(i / sec.cols) + 1}-${(i % sec.cols) + 1}`;
        assert.equal(map[i] !== 0, held.has(`${name}/${seat}`), `${name} ${seat}`);
      }
    }
    reservedSold += st.reserved + st.sold;
  }
  assert.equal(e.event_stats.reserved + e.event_stats.sold, reservedSold);
}

test('race: many clients changing overlapping holds across sections; no seat sold twice', async () => {
  let s = await startStrata({ args: MAX });
  const ev = 'race';
  await s.req('POST', '/v1/events', { event_id: ev, sections: [{ name: 'A', rows: 3, cols: 8, price: 3 }, { name: 'B', rows: 2, cols: 6, price: 7 }, { name: 'F', capacity: 30, price: 1 }] });
  const ids = new Set();
  let x = 7;
  const rnd = () => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const seat = (rows, cols) => `${1 + Math.floor(rnd() * rows)}-${1 + Math.floor(rnd() * cols)}`;
  const client = async () => {
    const mine = [];
    for (let i = 0; i < 25; i++) {
      const p = rnd();
      if (p < 0.35 || !mine.length) {
        const r = await s.req('POST', `/v1/events/${ev}/bookings`, { items: [{ section: 'A', seats: [seat(3, 8), seat(3, 8)].filter((v, k, a) => a.indexOf(v) === k) }, { section: 'B', quantity: 1 + Math.floor(rnd() * 2) }, { section: 'F', quantity: 1 + Math.floor(rnd() * 4) }] });
        assert.ok([201, 409].includes(r.status), r.text);
        if (r.status === 201) { ids.add(r.json.booking_id); mine.push(r.json.booking_id); }
      } else {
        const id = mine[Math.floor(rnd() * mine.length)];
        const q = rnd();
        const body = q < 0.3 ? { add: [seat(3, 8)] } : q < 0.5 ? { section: 'B', add_quantity: 1 } : q < 0.65 ? { section: 'F', add_quantity: 2 }
          : q < 0.8 ? { section: 'F', remove_quantity: 1 } : q < 0.9 ? null : { confirm: true };
        let r;
        if (body === null) r = await s.req('POST', B(ev, id, '/extend'), { seconds: 1 });
        else if (body.confirm) r = await s.req('POST', B(ev, id, '/confirm'));
        else r = await s.req('POST', B(ev, id, '/seats'), body);
        assert.ok([200, 400, 409].includes(r.status), r.text);
      }
    }
  };
  await Promise.all(Array.from({ length: 16 }, client));
  await audit(s, ev, ids);
  await s.kill9();
  s = await startStrata({ dataDir: s.dir, args: MAX });
  await audit(s, ev, ids);
  await s.stop();
  s.cleanup();
});
