// SPDX-License-Identifier: MIT
// Reconcile-all used to recount every conversation and distinct counter (every member at once)
// in one callback before answering. It now answers 202 with a pass number and works in bounded
// slices: a read during the pass sees it in part, adds to a distinct counter whose members are
// being counted meanwhile are neither missed nor counted twice (no false repair), and drift
// injected before the pass is repaired exactly.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { request, startStrata } from './lib.mjs';

const metric = async (s, name) => Number((await s.req('GET', '/metrics')).text.match(new RegExp(`^${name.replace(/[{}"=]/g, '\\$&')} (\\d+)`, 'm'))?.[1] ?? 0);

async function parallel(n, total, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    for (let i; (i = next++) < total;) await fn(i);
  }));
}

test('reconcile-all answers 202 and proceeds in slices, exact under concurrent adds', async () => {
  const s = await startStrata({ args: ['--test-hooks', '1', '--reconcile-interval', '3600', '--flush-interval', '3600'] });
  try {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    const post = (p, body) => request(s.port, 'POST', p, body, {}, agent);
    const USERS = 100, CONVS = 10, MEMBERS = 30000;
    await parallel(32, USERS * CONVS, async (i) => {
      const r = await post(`/v1/users/u${i % USERS}/messages`, { conversation_id: `c${Math.floor(i / USERS)}`, from: 'a', content: 'x' });
      assert.equal(r.status, 201, r.text);
    });
    const members = new Set();
    await parallel(32, MEMBERS, async (i) => {
      const m = `m${(i * 7919) % MEMBERS}`;
      const r = await post('/v1/counters/big/distinct', { member: m });
      assert.equal(r.status, 200, r.text);
      members.add(m);
    });
    for (let i = 0; i < 20; i++) await post(`/v1/counters/small${i}/distinct`, { member: 'x' });

    // drift, as a write gone wrong would leave it
    assert.equal((await post('/v1/admin/test/drift', { user: 'u7', conversation_id: 'c3', by: 5 })).status, 200);
    assert.equal((await post('/v1/admin/test/drift', { counter: 'big', by: -7 })).status, 200);
    assert.equal((await post('/v1/admin/test/drift', { counter: 'small3', by: 2 })).status, 200);
    const drift0 = (await metric(s, 'strata_reconcile_drift_total{kind="conversation"}')) + (await metric(s, 'strata_reconcile_drift_total{kind="distinct"}'));
    const keys0 = (await metric(s, 'strata_reconcile_keys_total{kind="conversation"}')) + (await metric(s, 'strata_reconcile_keys_total{kind="distinct"}'));

    const r = await post('/v1/admin/reconcile');
    assert.equal(r.status, 202, r.text);
    const pass = r.json.pass;
    assert.ok(pass >= 1, r.text);
    // the pass has not run yet when it answers, and is seen in part while it runs
    const seen = [];
    let adds = 0;
    while ((await metric(s, 'strata_reconcile_all_passes_total')) < pass) {
      const k = (await metric(s, 'strata_reconcile_keys_total{kind="conversation"}')) + (await metric(s, 'strata_reconcile_keys_total{kind="distinct"}'));
      seen.push(k - keys0);
      // members added while big is being counted: below and above wherever its cursor is
      for (let j = 0; j < 8; j++) {
        const m = `new${adds++}-${j % 2 ? 'a' : 'z'}`;
        assert.equal((await post('/v1/counters/big/distinct', { member: m })).json.added, true);
        members.add(m);
      }
    }
    // (the queue recounts the keys the writes marked as well: compare with the final count)
    const kEnd = (await metric(s, 'strata_reconcile_keys_total{kind="conversation"}')) + (await metric(s, 'strata_reconcile_keys_total{kind="distinct"}')) - keys0;
    assert.ok(kEnd >= USERS * CONVS + 21, `every key was recounted (${kEnd})`);
    assert.ok(seen.length && seen.some((k) => k < kEnd), `a read during the pass sees it in part (${seen.slice(0, 20)} of ${kEnd})`);
    assert.ok(adds > 0);

    assert.equal((await s.req('GET', '/v1/counters/big')).json.value, members.size);
    assert.equal((await s.req('GET', '/v1/counters/small3')).json.value, 1);
    assert.equal((await s.req('GET', '/v1/users/u7/conversations/c3')).json.total_messages, 1);
    const drift1 = (await metric(s, 'strata_reconcile_drift_total{kind="conversation"}')) + (await metric(s, 'strata_reconcile_drift_total{kind="distinct"}'));
    assert.equal(drift1 - drift0, 5 + 7 + 2, 'exactly the injected drift was repaired, nothing else');
    assert.match(s.log(), /reconcile: pass \d+ over every key done/);

    // asked twice while running: the second answer names the pass after
    const a = await post('/v1/admin/reconcile');
    const b = await post('/v1/admin/reconcile');
    assert.equal(a.json.pass, pass + 1);
    assert.equal(b.json.pass, pass + 2);
    await waitFor('both passes', async () => (await metric(s, 'strata_reconcile_all_passes_total')) >= pass + 2);
    assert.equal((await s.req('GET', '/v1/counters/big')).json.value, members.size);
    agent.destroy();
  } finally {
    await s.stop();
    s.cleanup();
  }
});
