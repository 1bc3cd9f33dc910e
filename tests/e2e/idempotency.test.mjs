// SPDX-License-Identifier: MIT
// Idempotency-Key (SPEC §0 v2, issue 11.5): a key is bound to its request (method, decoded path,
// body) — another body is 422 idempotency_key_reused; the scope is the decoded route, so an
// escaped path is the same key; a request refused as malformed is not remembered; domain
// outcomes (2xx, 404, 409) are, and a replay says Idempotent-Replayed: true.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startStrata } from './lib.mjs';

describe('idempotency keys', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });
  const k = (key) => ({ 'idempotency-key': key });

  test('the same key with another body is 422 idempotency_key_reused, and changes nothing', async () => {
    const a = await s.req('POST', '/v1/counters/reuse/incr', { by: 2 }, k('k1'));
    assert.equal(a.status, 200);
    assert.equal(a.json.value, 2);
    const b = await s.req('POST', '/v1/counters/reuse/incr', { by: 5 }, k('k1'));
    assert.equal(b.status, 422);
    assert.equal(b.json.error.code, 'idempotency_key_reused');
    const again = await s.req('POST', '/v1/counters/reuse/incr', { by: 2 }, k('k1'));
    assert.equal(again.status, 200);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.json, a.json);
    assert.equal((await s.req('GET', '/v1/counters/reuse')).json.value, 2);
  });

  test('a retried booking with other seats does not get the old booking', async () => {
    await s.req('POST', '/v1/events', { event_id: 'idem-ev', sections: [{ name: 'A', rows: 1, cols: 5, price: 1 }] });
    const first = await s.req('POST', '/v1/events/idem-ev/bookings', { section: 'A', seats: ['1-1'] }, k('bk'));
    assert.equal(first.status, 201);
    const other = await s.req('POST', '/v1/events/idem-ev/bookings', { section: 'A', seats: ['1-2'] }, k('bk'));
    assert.equal(other.status, 422);
    assert.equal(other.json.error.code, 'idempotency_key_reused');
    assert.equal((await s.req('GET', '/v1/events/idem-ev')).json.event_stats.reserved, 1);
  });

  test('the scope is the decoded route: an escaped path is the same key', async () => {
    const a = await s.req('POST', '/v1/counters/idp/incr', {}, k('esc'));
    assert.equal(a.json.value, 1);
    const b = await s.req('POST', '/v1/counters/%69dp/incr', {}, k('esc'));
    assert.equal(b.status, 200);
    assert.equal(b.headers['idempotent-replayed'], 'true');
    assert.equal(b.json.value, 1);
    assert.equal((await s.req('GET', '/v1/counters/idp')).json.value, 1);
  });

  test('a 400 is not remembered: the same key with a fixed body is applied', async () => {
    const bad = await s.req('POST', '/v1/counters/fixme/incr', { by: 'x' }, k('k400'));
    assert.equal(bad.status, 400);
    const good = await s.req('POST', '/v1/counters/fixme/incr', { by: 3 }, k('k400'));
    assert.equal(good.status, 200);
    assert.equal(good.headers['idempotent-replayed'], undefined);
    assert.equal(good.json.value, 3);
    const junk = await s.req('POST', '/v1/counters/fixme/incr', '{not json', k('kjson'));
    assert.equal(junk.status, 400);
    assert.equal((await s.req('POST', '/v1/counters/fixme/incr', { by: 1 }, k('kjson'))).json.value, 4);
  });

  test('domain outcomes are remembered: a 409 and a 404 replay as such', async () => {
    const body = { event_id: 'idem-ev', sections: [{ name: 'A', rows: 1, cols: 1, price: 1 }] };
    const c = await s.req('POST', '/v1/events', body, k('k409'));
    assert.equal(c.status, 409);
    const c2 = await s.req('POST', '/v1/events', body, k('k409'));
    assert.equal(c2.status, 409);
    assert.equal(c2.headers['idempotent-replayed'], 'true');
    const n = await s.req('POST', '/v1/bookings/123456/cancel', undefined, k('k404'));
    assert.equal(n.status, 404);
    const n2 = await s.req('POST', '/v1/bookings/123456/cancel', undefined, k('k404'));
    assert.equal(n2.status, 404);
    assert.equal(n2.headers['idempotent-replayed'], 'true');
  });
});
