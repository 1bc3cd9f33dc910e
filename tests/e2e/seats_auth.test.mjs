// SPDX-License-Identifier: MIT
// Hostile clients against seats (issue 12, items 3 and 4), with auth on:
// - creating events needs role admin, a section's rows and cols are capped, and a total seats
//   budget (--max-total-seats) answers 507 storage_full, also after a restart;
// - a booking belongs to the subject whose token made it: another subject gets 403 on read,
//   confirm and cancel, an admin may; the nested /v1/events/{id}/bookings/{bid} routes answer
//   404 for a booking of another event.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startStrata, tempDir } from './lib.mjs';

const SECRET = 'seats-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64(payload);
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const as = (sub, role) => ({ authorization: `Bearer ${jwt(role ? { sub, role } : { sub })}` });
const ADMIN = as('boss', 'admin'), ALICE = as('alice'), BOB = as('bob');
const sec = (name, rows, cols) => ({ name, rows, cols, price: 10 });

describe('seats with auth on', () => {
  let s;
  const dir = tempDir('seatsauth');
  const start = () => startStrata({ dataDir: dir, env: { STRATA_JWT_SECRET: SECRET, STRATA_MAX_TOTAL_SEATS: '2000000' } });
  before(async () => { s = await start(); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('creating an event needs role admin', async () => {
    const body = { event_id: 'show', sections: [sec('A', 2, 5)] };
    const r = await s.req('POST', '/v1/events', body, ALICE);
    assert.equal(r.status, 403);
    assert.equal(r.json.error.code, 'forbidden');
    assert.equal((await s.req('GET', '/v1/events/show', undefined, ALICE)).status, 404);
    assert.equal((await s.req('POST', '/v1/events', body, ADMIN)).status, 201);
    await s.req('POST', '/v1/events', { event_id: 'other', sections: [sec('A', 1, 5)] }, ADMIN);
  });

  test('event creation memory is bounded: row/col caps and a total seats budget (507)', async () => {
    // 100000 rows x 1 col took 400 KB of per-row arrays for 100000 seats
    let r = await s.req('POST', '/v1/events', { event_id: 'tall', sections: [sec('A', 100000, 1)] }, ADMIN);
    assert.equal(r.status, 400);
    r = await s.req('POST', '/v1/events', { event_id: 'wide', sections: [sec('A', 1, 100000)] }, ADMIN);
    assert.equal(r.status, 400);
    assert.equal((await s.req('POST', '/v1/events', { event_id: 'big1', sections: [sec('A', 1000, 1000)] }, ADMIN)).status, 201);
    r = await s.req('POST', '/v1/events', { event_id: 'big2', sections: [sec('A', 1000, 1000)] }, ADMIN);
    assert.equal(r.status, 507);
    assert.equal(r.json.error.code, 'storage_full');
    assert.equal((await s.req('GET', '/v1/events/big2', undefined, ADMIN)).status, 404);
    // the budget holds across a restart (start-up counts what it loaded)
    await s.stop();
    s = await start();
    r = await s.req('POST', '/v1/events', { event_id: 'big3', sections: [sec('A', 1000, 1000)] }, ADMIN);
    assert.equal(r.status, 507);
    assert.equal((await s.req('POST', '/v1/events', { event_id: 'small', sections: [sec('A', 10, 10)] }, ADMIN)).status, 201);
  });

  test("any valid token could read, confirm or cancel anyone's booking: now 403", async () => {
    const b = await s.req('POST', '/v1/events/show/bookings', { section: 'A', seats: ['1-1'] }, ALICE);
    assert.equal(b.status, 201);
    const id = b.json.booking_id;
    for (const path of [`/v1/bookings/${id}`, `/v1/events/show/bookings/${id}`]) {
      const g = await s.req('GET', path, undefined, BOB);
      assert.equal(g.status, 403, path);
      assert.equal(g.json.error.code, 'forbidden');
      assert.equal((await s.req('GET', path, undefined, ALICE)).json.status, 'reserved');
      assert.equal((await s.req('GET', path, undefined, ADMIN)).json.status, 'reserved');
    }
    for (const op of ['confirm', 'cancel']) {
      assert.equal((await s.req('POST', `/v1/bookings/${id}/${op}`, undefined, BOB)).status, 403);
      assert.equal((await s.req('POST', `/v1/events/show/bookings/${id}/${op}`, undefined, BOB)).status, 403);
    }
    assert.equal((await s.req('GET', `/v1/bookings/${id}`, undefined, ALICE)).json.status, 'reserved');
    const c = await s.req('POST', `/v1/events/show/bookings/${id}/confirm`, undefined, ALICE);
    assert.equal(c.status, 200);
    assert.equal(c.json.status, 'sold');
    // an admin may act on anyone's booking
    const b2 = await s.req('POST', '/v1/events/show/bookings', { section: 'A', quantity: 2 }, BOB);
    const x = await s.req('POST', `/v1/events/show/bookings/${b2.json.booking_id}/cancel`, undefined, ADMIN);
    assert.equal(x.status, 200);
    assert.equal(x.json.status, 'cancelled');
  });

  test('nested booking routes: 404 when the booking is not of that event', async () => {
    const b = await s.req('POST', '/v1/events/show/bookings', { section: 'A', seats: ['2-5'] }, ALICE);
    const id = b.json.booking_id;
    for (const [m, p] of [['GET', ''], ['POST', '/confirm'], ['POST', '/cancel']]) {
      const r = await s.req(m, `/v1/events/other/bookings/${id}${p}`, undefined, ALICE);
      assert.equal(r.status, 404, `${m} ${p}`);
      assert.equal(r.json.error.code, 'not_found');
      assert.equal((await s.req(m, `/v1/events/nope/bookings/${id}${p}`, undefined, ADMIN)).status, 404);
    }
    assert.equal((await s.req('GET', `/v1/events/show/bookings/${id}`, undefined, ALICE)).json.status, 'reserved');
    const c = await s.req('POST', `/v1/events/show/bookings/${id}/cancel`, undefined, ALICE);
    assert.equal(c.json.status, 'cancelled');
    const again = await s.req('POST', `/v1/events/show/bookings/${id}/cancel`, undefined, ALICE);
    assert.equal(again.status, 409);
    // ownership survives a restart
    await s.stop();
    s = await start();
    assert.equal((await s.req('GET', `/v1/bookings/${id}`, undefined, BOB)).status, 403);
    assert.equal((await s.req('GET', `/v1/bookings/${id}`, undefined, ALICE)).json.status, 'cancelled');
  });
});

describe('seats budget and many tiny sections', () => {
  test('1x1 sections were nearly free against --max-total-seats (~200 bytes each, counted as 16 seats)', async () => {
    // 1000 sections of one seat each: counted as 16,000 seats, 62 such events fit in 1,000,000,
    // although each section's struct, name and index weigh far more than 16 seats of bitmap.
    const s = await startStrata({ env: { STRATA_JWT_SECRET: SECRET, STRATA_MAX_TOTAL_SEATS: '1000000' } });
    try {
      const tiny = (id) => ({ event_id: id, sections: Array.from({ length: 1000 }, (_, i) => sec(`s${i}`, 1, 1)) });
      assert.equal((await s.req('POST', '/v1/events', tiny('t1'), ADMIN)).status, 201);
      const r = await s.req('POST', '/v1/events', tiny('t2'), ADMIN);
      assert.equal(r.status, 507, r.text);
      assert.equal(r.json.error.code, 'storage_full');
      assert.equal((await s.req('POST', '/v1/events', { event_id: 'one', sections: [sec('A', 10, 10)] }, ADMIN)).status, 201);
    } finally {
      await s.stop();
      s.cleanup();
    }
  });
});
