// SPDX-License-Identifier: MIT
// Every booking answer carries `owner` and `finished_at` (SPEC §4, §4.2: the names of the cold
// tier's Parquet columns): create, get (both routes), confirm, cancel, extend, seat changes, an
// expiry, the event's listing, and cold reads of bookings merged into it; `finished_at` is null
// while reserved and, once finished, the same time hot and cold. An admin's listing tells whose
// bookings it lists.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { sleep, startStrata } from './lib.mjs';

const SECRET = 'bookowner-secret-bookowner-secret-32';
function token(sub, role) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub, ...(role ? { role } : {}), exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
}
const as = (sub, role) => ({ Authorization: `Bearer ${token(sub, role)}` });
const ok = async (s, method, p, body, headers, status = 200) => {
  const r = await s.req(method, p, body, headers);
  assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
  return r.json;
};
const metric = async (s, name, h) => Number((await s.req('GET', '/metrics', undefined, h)).text.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1] ?? 0);

const reserved = (b, owner, what) => {
  assert.equal(b.owner, owner, `${what}: owner`);
  assert.ok('finished_at' in b, `${what}: finished_at present`);
  assert.equal(b.finished_at, null, `${what}: finished_at null while reserved`);
};
const finished = (b, owner, after, what) => {
  assert.equal(b.owner, owner, `${what}: owner`);
  assert.equal(typeof b.finished_at, 'number', `${what}: finished_at a number (${JSON.stringify(b)})`);
  assert.ok(b.finished_at >= after && b.finished_at <= Date.now() * 1000 + 1e6, `${what}: finished_at ${b.finished_at} after ${after}`);
  assert.ok(b.finished_at >= b.created_at, `${what}: finished after created`);
};

test('booking answers carry owner and finished_at, hot and cold, on every route and in the listing', async () => {
  const s = await startStrata({ args: ['--jwt-secret', SECRET, '--booking-hot-seconds', '0'] });
  const admin = as('root', 'admin');
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', hold_seconds: 600, sections: [{ name: 'A', rows: 2, cols: 10, price: 5 }, { name: 'floor', capacity: 50, price: 2 }] }, admin, 201);
    await ok(s, 'POST', '/v1/events', { event_id: 'short', hold_seconds: 1, sections: [{ name: 'A', rows: 1, cols: 5, price: 1 }] }, admin, 201);
    const t0 = Date.now() * 1000;
    const a1 = await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', seats: ['1-1'] }, as('ann'), 201);
    reserved(a1, 'ann', 'create');
    reserved(await ok(s, 'GET', `/v1/bookings/${a1.booking_id}`, undefined, as('ann')), 'ann', 'get');
    reserved(await ok(s, 'GET', `/v1/events/gig/bookings/${a1.booking_id}`, undefined, admin), 'ann', 'nested get by an admin');
    reserved(await ok(s, 'POST', `/v1/events/gig/bookings/${a1.booking_id}/extend`, { seconds: 60 }, as('ann')), 'ann', 'extend');
    reserved(await ok(s, 'POST', `/v1/events/gig/bookings/${a1.booking_id}/seats`, { add: ['1-2'] }, as('ann')), 'ann', 'seats');
    const c1 = await ok(s, 'POST', `/v1/bookings/${a1.booking_id}/confirm`, undefined, as('ann'));
    assert.equal(c1.status, 'sold');
    finished(c1, 'ann', t0, 'confirm');
    const b1 = await ok(s, 'POST', '/v1/events/gig/bookings', { items: [{ section: 'A', seats: ['2-1'] }, { section: 'floor', quantity: 2 }] }, as('bob'), 201);
    reserved(b1, 'bob', 'create (items)');
    const x1 = await ok(s, 'POST', `/v1/events/gig/bookings/${b1.booking_id}/cancel`, undefined, as('bob'));
    assert.equal(x1.status, 'cancelled');
    finished(x1, 'bob', c1.finished_at, 'cancel');
    // a final state's 409 shows the booking too
    const again = await s.req('POST', `/v1/bookings/${a1.booking_id}/cancel`, undefined, as('ann'));
    assert.equal(again.status, 409);
    finished(again.json.error.booking, 'ann', t0, '409 booking');
    assert.equal(again.json.error.booking.finished_at, c1.finished_at);
    // an expiry
    const e1 = await ok(s, 'POST', '/v1/events/short/bookings', { section: 'A', seats: ['1-1'] }, as('cy'), 201);
    reserved(e1, 'cy', 'create (short hold)');
    await sleep(1500);
    const e1x = await ok(s, 'GET', `/v1/bookings/${e1.booking_id}`, undefined, as('cy'));
    assert.equal(e1x.status, 'expired');
    finished(e1x, 'cy', e1.created_at, 'expired');
    assert.ok(e1x.finished_at >= e1.expires_at, 'expired at or after its expires_at');
    const live = await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'floor', quantity: 1 }, as('bob'), 201);

    // an admin's listing tells whose bookings it lists
    const hot = (await ok(s, 'GET', '/v1/events/gig/bookings?limit=10', undefined, admin)).bookings;
    assert.deepEqual(hot.map((b) => [b.booking_id, b.owner, b.finished_at]), [
      [live.booking_id, 'bob', null],
      [b1.booking_id, 'bob', x1.finished_at],
      [a1.booking_id, 'ann', c1.finished_at],
    ]);

    // cold: the finished ones leave the hot store; every read answers as before
    const before = await metric(s, 'strata_flush_rows_total', admin);
    assert.equal((await s.req('POST', '/v1/admin/flush', undefined, admin)).status, 202);
    await waitFor('3 bookings flushed', async () => (await metric(s, 'strata_flush_rows_total', admin)) >= before + 3);
    const cold = (await ok(s, 'GET', '/v1/events/gig/bookings?limit=10', undefined, admin)).bookings;
    assert.deepEqual(cold, hot, 'the listing answers the same once the finished bookings are cold');
    assert.deepEqual(await ok(s, 'GET', `/v1/bookings/${a1.booking_id}`, undefined, admin), c1, 'cold get');
    assert.deepEqual(await ok(s, 'GET', `/v1/events/gig/bookings/${b1.booking_id}`, undefined, as('bob')), x1, 'cold nested get');
    assert.deepEqual(await ok(s, 'GET', `/v1/bookings/${e1.booking_id}`, undefined, as('cy')), e1x, 'cold expired');
    const annOnly = (await ok(s, 'GET', '/v1/events/gig/bookings?owner=ann', undefined, admin)).bookings;
    assert.deepEqual(annOnly.map((b) => b.owner), ['ann']);
  } finally {
    await s.stop();
  }
});

test('with auth off a booking\'s owner is "" and finished_at follows it', async () => {
  const s = await startStrata();
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'e', sections: [{ name: 'A', rows: 1, cols: 5, price: 1 }] }, {}, 201);
    const b = await ok(s, 'POST', '/v1/events/e/bookings', { section: 'A', quantity: 2 }, {}, 201);
    reserved(b, '', 'create');
    const x = await ok(s, 'POST', `/v1/bookings/${b.booking_id}/cancel`);
    finished(x, '', b.created_at, 'cancel');
  } finally {
    await s.stop();
  }
});
