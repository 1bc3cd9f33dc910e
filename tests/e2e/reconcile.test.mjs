// SPDX-License-Identifier: MIT
// SPEC §6 reconciliation: drift injected on purpose (the --test-hooks route) is found and
// repaired within one interval, for conversations (hot and cold) and distinct counters; under
// concurrent writes no count is "repaired" that was right; the admin route recounts on demand.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { request, startStrata, wsConnect } from './lib.mjs';

const metric = async (s, name) => Number((await s.req('GET', '/metrics')).text.match(new RegExp(`^${name.replace(/[{}"=]/g, '\\$&')} (\\d+)`, 'm'))?.[1] ?? 0);
const drift = (kind) => `strata_reconcile_drift_total{kind="${kind}"}`;

describe('reconciliation', () => {
  let s;
  before(async () => { s = await startStrata({ args: ['--test-hooks', '1', '--reconcile-interval', '1', '--flush-interval', '3600'] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('a drifted conversation count is repaired within one interval, hot and cold', async () => {
    for (let i = 0; i < 12; i++) await s.req('POST', '/v1/users/r1/messages', { conversation_id: 'c', from: 'a', content: `m${i}` });
    await s.req('POST', '/v1/admin/flush');
    await waitFor('the flush', async () => (await s.req('GET', '/v1/users/r1/stats')).json.cold_messages === 12);
    for (let i = 12; i < 15; i++) await s.req('POST', '/v1/users/r1/messages', { conversation_id: 'c', from: 'a', content: `m${i}` });
    const before = await metric(s, drift('conversation'));
    const r = await s.req('POST', '/v1/admin/test/drift', { user: 'r1', conversation_id: 'c', by: 5 });
    assert.equal(r.status, 200, r.text);
    assert.equal((await s.req('GET', '/v1/users/r1/conversations/c')).json.total_messages, 20, 'the drift is visible');
    await waitFor('the repair', async () => (await s.req('GET', '/v1/users/r1/conversations/c')).json.total_messages === 15, 30000);
    assert.equal(await metric(s, drift('conversation')) - before, 5);
    assert.match(s.log(), /reconcile: conversation r1\/c was off by -5; repaired/);
    assert.equal((await s.req('GET', '/v1/users/r1/stats')).json.total_messages, 15);
    // the next message continues the gapless seq from the true count
    assert.equal((await s.req('POST', '/v1/users/r1/messages', { conversation_id: 'c', from: 'a', content: 'next' })).json.seq, 16);
  });

  test('a drifted distinct counter is repaired from its members, and its stream sees the repair', async () => {
    for (const m of ['a', 'b', 'c', 'd']) await s.req('POST', '/v1/counters/people/distinct', { member: m });
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 'p', topic: 'counter', name: 'people' });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'p' });
    assert.equal((await ws.next()).json.value, 4);
    await s.req('POST', '/v1/admin/test/drift', { counter: 'people', by: -3 });
    assert.equal((await s.req('GET', '/v1/counters/people')).json.value, 1);
    await waitFor('the repair', async () => (await s.req('GET', '/v1/counters/people')).json.value === 4, 30000);
    // every change is published by the counters module itself (one publish path), the repair too:
    // a subscriber is never left showing the drifted value
    assert.deepEqual((await ws.next()).json, { type: 'counter', id: 'p', name: 'people', value: 1 });
    assert.deepEqual((await ws.next()).json, { type: 'counter', id: 'p', name: 'people', value: 4 });
    ws.close();
  });

  test('no false repairs under concurrent writes', async () => {
    const before = (await metric(s, drift('conversation'))) + (await metric(s, drift('distinct')));
    const until = Date.now() + 3500;
    let posts = 0;
    await Promise.all(Array.from({ length: 8 }, async (_, w) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; Date.now() < until; i++) {
        const r = i % 2
          ? await request(s.port, 'POST', '/v1/users/busy/messages', { conversation_id: `c${i % 5}`, from: 'a', content: `w${w} ${i}` }, {}, agent)
          : await request(s.port, 'POST', '/v1/counters/visitors/distinct', { member: `w${w}-${i}` }, {}, agent);
        assert.ok(r.status === 201 || r.status === 200, r.text);
        if (i % 2) posts++;
        if (i === 40 && w === 0) await s.req('POST', '/v1/admin/flush'); // a flush racing too
      }
      agent.destroy();
    }));
    const runs = await metric(s, 'strata_reconcile_runs_total');
    await waitFor('two more passes', async () => (await metric(s, 'strata_reconcile_runs_total')) >= runs + 2, 30000);
    const after = (await metric(s, drift('conversation'))) + (await metric(s, drift('distinct')));
    assert.equal(after - before, 0, 'nothing was repaired: every count was right');
    let total = 0;
    for (let c = 0; c < 5; c++) total += (await s.req('GET', `/v1/users/busy/conversations/c${c}`)).json.total_messages;
    assert.equal(total, posts);
    assert.ok(await metric(s, 'strata_reconcile_keys_total{kind="conversation"}') > 0);
  });

  test('POST /v1/admin/reconcile recounts everything or one key on demand', async () => {
    await s.req('POST', '/v1/admin/test/drift', { user: 'r1', conversation_id: 'c', by: 2 });
    const one = await s.req('POST', '/v1/admin/reconcile', { user: 'r1', conversation_id: 'c' });
    assert.deepEqual(one.json, { reconciled: 1, drift: -2 });
    const keys = async () => (await metric(s, 'strata_reconcile_keys_total{kind="conversation"}')) + (await metric(s, 'strata_reconcile_keys_total{kind="distinct"}'));
    const k0 = await keys();
    const all = await s.req('POST', '/v1/admin/reconcile');
    assert.equal(all.status, 202, all.text); // proceeds in slices (reconcile_slices.test.mjs)
    await waitFor('the pass', async () => (await metric(s, 'strata_reconcile_all_passes_total')) >= all.json.pass, 30000);
    assert.ok((await keys()) - k0 >= 8);
    assert.equal((await s.req('POST', '/v1/admin/reconcile', { counter: 'nope' })).status, 404);
    assert.equal((await s.req('POST', '/v1/admin/reconcile', { user: 'bad name', conversation_id: 'c' })).status, 400);
    // half a key is a 400 naming the missing half, not a pass over everything
    for (const [body, field] of [[{ conversation_id: 'c' }, 'user'], [{ user: 'r1' }, 'conversation_id']]) {
      const r = await s.req('POST', '/v1/admin/reconcile', body);
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.error.code, 'invalid_argument');
      assert.match(r.json.error.message, new RegExp(field));
    }
  });
});

test('the drift hook does not exist without --test-hooks', async () => {
  const s = await startStrata();
  const r = await s.req('POST', '/v1/admin/test/drift', { counter: 'x', by: 1 });
  assert.equal(r.status, 404);
  await s.stop();
  s.cleanup();
});
