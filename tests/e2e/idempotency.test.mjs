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

// SPEC §2.2: an erased user's stored answers (they hold its messages) go with it. A retry with
// the same key is not a replay — at once (404) nor after the erasure is done (a fresh request).
describe('idempotency keys and erasure', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });
  const k = (key) => ({ 'idempotency-key': key });
  const erasureDone = async (id) => {
    for (const until = Date.now() + 20000; Date.now() < until;) {
      if ((await s.req('GET', `/v1/admin/erasures/${id}`)).json.status === 'done') return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the erasure did not finish');
  };

  test("an erased user's answers are not replayed, and a retry after the erasure runs afresh", async () => {
    const post = { conversation_id: 'c', from: 'ida', content: 'secret one' };
    const p = await s.req('POST', '/v1/users/ida/messages', post, k('e-post'));
    assert.equal(p.status, 201, p.text);
    const patch = await s.req('PATCH', `/v1/users/ida/messages/${p.json.msg_id}`, { content: 'secret two' }, k('e-patch'));
    assert.equal(patch.status, 200, patch.text);
    assert.equal(patch.json.content, 'secret two');
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'idem-r', members: ['vic', 'ida'] })).status, 201);
    const rp = await s.req('POST', '/v1/rooms/idem-r/messages', { from: 'ida', content: 'secret three' }, k('e-room'));
    assert.equal(rp.status, 201, rp.text);
    const redit = await s.req('PATCH', `/v1/rooms/idem-r/messages/${rp.json.msg_id}`, { content: 'secret four' }, k('e-redit'));
    assert.equal(redit.status, 200, redit.text);
    // before: a retry is a replay
    const again = await s.req('POST', '/v1/users/ida/messages', post, k('e-post'));
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.json.msg_id, p.json.msg_id);
    // another user's answer is left alone
    const other = await s.req('POST', '/v1/users/ola/messages', { conversation_id: 'c', from: 'ola', content: 'kept' }, k('e-other'));
    assert.equal(other.status, 201);

    const er = await s.req('DELETE', '/v1/users/ida', undefined, k('e-erase'));
    assert.equal(er.status, 202, er.text);
    // at once: no replay of what the user wrote
    const now = await s.req('PATCH', `/v1/users/ida/messages/${p.json.msg_id}`, { content: 'secret two' }, k('e-patch'));
    assert.equal(now.status, 404, now.text);
    assert.equal(now.headers['idempotent-replayed'], undefined);
    assert.ok(!now.text.includes('secret'), now.text);
    await erasureDone(er.json.erasure_id);

    // after: each retry runs as a fresh request
    const post2 = await s.req('POST', '/v1/users/ida/messages', post, k('e-post'));
    assert.equal(post2.status, 201, post2.text);
    assert.equal(post2.headers['idempotent-replayed'], undefined);
    assert.notEqual(post2.json.msg_id, p.json.msg_id);
    // the 404 answered during the erasure is remembered (SPEC §0; it holds nothing of hers)
    const patch2 = await s.req('PATCH', `/v1/users/ida/messages/${p.json.msg_id}`, { content: 'secret two' }, k('e-patch'));
    assert.equal(patch2.status, 404, patch2.text);
    assert.equal(patch2.headers['idempotent-replayed'], 'true');
    assert.ok(!patch2.text.includes('secret'), patch2.text);
    // the room answers about her messages too: she left the room (403), her message is a
    // tombstone (409)
    const rp2 = await s.req('POST', '/v1/rooms/idem-r/messages', { from: 'ida', content: 'secret three' }, k('e-room'));
    assert.equal(rp2.status, 403, rp2.text);
    assert.equal(rp2.headers['idempotent-replayed'], undefined);
    const redit2 = await s.req('PATCH', `/v1/rooms/idem-r/messages/${rp.json.msg_id}`, { content: 'secret four' }, k('e-redit'));
    assert.equal(redit2.status, 409, redit2.text);
    assert.equal(redit2.headers['idempotent-replayed'], undefined);
    // the erasure's own answer stays: a retry finds the same erasure
    const er2 = await s.req('DELETE', '/v1/users/ida', undefined, k('e-erase'));
    assert.equal(er2.headers['idempotent-replayed'], 'true');
    assert.equal(er2.json.erasure_id, er.json.erasure_id);
    const kept = await s.req('POST', '/v1/users/ola/messages', { conversation_id: 'c', from: 'ola', content: 'kept' }, k('e-other'));
    assert.equal(kept.headers['idempotent-replayed'], 'true');
    assert.equal(kept.json.msg_id, other.json.msg_id);
  });
});
