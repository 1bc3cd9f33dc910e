// SPDX-License-Identifier: MIT
// Issue 48: the reconciliation queue is bounded by --reconcile-queue. Marks past the bound are
// not kept; they fall back to a pass over every key (strata_reconcile_overflows_total), and no
// drift is left behind: neither of keys whose marks were dropped, nor of a key the running
// pass had already passed when it was marked (one more pass is asked for). The queue's gauge
// never goes past the bound. The interval is an hour, so only the fallback's passes recount.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { request, startStrata } from './lib.mjs';

const BOUND = 8;
const value = (text, name) => Number(text.match(new RegExp(`^${name.replace(/[{}"=]/g, '\\$&')} (\\d+)`, 'm'))?.[1] ?? 0);
const CONV_KEYS = 'strata_reconcile_keys_total{kind="conversation"}';

async function parallel(n, total, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    for (let i; (i = next++) < total;) await fn(i);
  }));
}

describe('a bounded reconciliation queue', () => {
  let s, agent, polling, poller;
  let maxQueue = 0, scrapes = 0;
  const post = (p, body) => request(s.port, 'POST', p, body, {}, agent);
  const scrape = async () => (await s.req('GET', '/metrics')).text;
  const total = async (u) => (await s.req('GET', `/v1/users/${u}/conversations/c`)).json.total_messages;

  before(async () => {
    s = await startStrata({ args: ['--test-hooks', '1', '--reconcile-queue', String(BOUND), '--reconcile-interval', '3600', '--flush-interval', '3600'] });
    agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    polling = true;
    const pollAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    poller = (async () => { // the queue's gauge, read all along both tests
      while (polling) {
        const r = await request(s.port, 'GET', '/metrics', undefined, {}, pollAgent);
        maxQueue = Math.max(maxQueue, value(r.text, 'strata_reconcile_queue'));
        scrapes++;
      }
      pollAgent.destroy();
    })();
  });
  after(async () => {
    polling = false;
    await poller;
    agent.destroy();
    await s.stop();
    s.cleanup();
  });

  test('marks past the bound fall back to a pass: every drifted conversation is repaired', async () => {
    const m0 = await scrape();
    assert.equal(value(m0, 'strata_reconcile_queue_capacity'), BOUND);
    const over0 = value(m0, 'strata_reconcile_overflows_total');
    for (let i = 0; i < 40; i++) {
      for (let j = 0; j < 2; j++) assert.equal((await post(`/v1/users/o${i}/messages`, { conversation_id: 'c', from: 'a', content: `m${j}` })).status, 201);
    }
    await waitFor('the posts\' passes', async () => (await total('o39')) === 2);
    const drift0 = value(await scrape(), 'strata_reconcile_drift_total{kind="conversation"}');
    // drift on more conversations than the queue holds (each drift marks its key)
    let injected = 0;
    for (let i = 0; i < 20; i++) {
      const by = 3 + (i % 3);
      assert.equal((await post('/v1/admin/test/drift', { user: `o${i}`, conversation_id: 'c', by })).status, 200);
      injected += by;
    }
    // and writes to many conversations after it: the queue overflows again
    for (let i = 0; i < 40; i++) assert.equal((await post(`/v1/users/p${i}/messages`, { conversation_id: 'c', from: 'a', content: 'x' })).status, 201);
    for (let i = 0; i < 20; i++) await waitFor(`o${i}'s repair`, async () => (await total(`o${i}`)) === 2, 30000);
    const m1 = await scrape();
    assert.ok(value(m1, 'strata_reconcile_overflows_total') > over0, 'the queue overflowed');
    assert.equal(value(m1, 'strata_reconcile_drift_total{kind="conversation"}') - drift0, injected, 'exactly the injected drift was repaired');
    assert.ok(value(m1, 'strata_reconcile_all_passes_total') >= 1);
    assert.match(s.log(), /reconcile: queue full \(8 keys\): its keys are left to pass \d+ over every key/);
    assert.equal((await s.req('GET', '/v1/users/o3/stats')).json.total_messages, 2);
    assert.ok(scrapes > 0 && maxQueue <= BOUND, `the queue's gauge stayed within the bound (max ${maxQueue})`);
  });

  test('a key marked after the running pass passed it is recounted by one more pass', async () => {
    // many conversations after o* and p* in the pass's order (users z*): while the pass is on
    // them, every o* conversation is behind its cursor
    await parallel(32, 10000, async (i) => {
      assert.equal((await post(`/v1/users/z${i}/messages`, { conversation_id: 'c', from: 'a', content: 'x' })).status, 201);
    });
    // o0..o39 and p0..p39 are passed once this many conversations were recounted (the queue's
    // entries, BOUND at most, are recounted in the pass's steps too)
    const passed = 80 + BOUND;
    const again = () => (s.log().match(/after the one under way/g) ?? []).length;
    let exercised = false;
    for (let attempt = 0; attempt < 8 && !exercised; attempt++) {
      const idle = (await post('/v1/admin/reconcile')).json.pass;
      await waitFor('the reconciler idle', async () => value(await scrape(), 'strata_reconcile_all_passes_total') >= idle, 60000);
      const k0 = value(await scrape(), CONV_KEYS);
      const pass = (await post('/v1/admin/reconcile')).json.pass;
      let behind = false, over0 = 0;
      for (;;) { // until every conversation is passed, or the pass is over
        const m = await scrape();
        if (value(m, 'strata_reconcile_all_passes_total') >= pass) break;
        over0 = value(m, 'strata_reconcile_overflows_total');
        if (value(m, CONV_KEYS) - k0 >= passed) { behind = true; break; }
      }
      if (!behind) continue;
      const n0 = again();
      // drift on 12 conversations at once (more than the queue holds), all behind the cursor
      const r = await Promise.all(Array.from({ length: 12 }, (_, i) => post('/v1/admin/test/drift', { user: `o${i}`, conversation_id: 'c', by: 4 })));
      for (const x of r) assert.equal(x.status, 200, x.text);
      // no overflow (a step took the first marks before the rest came): the queue recounts them,
      // or the next attempt's pass does
      if (value(await scrape(), 'strata_reconcile_overflows_total') === over0) continue;
      // marks were dropped: whether the pass was still under way or not, each key is recounted
      for (let i = 0; i < 12; i++) await waitFor(`o${i}'s repair`, async () => (await total(`o${i}`)) === 2, 30000);
      // the burst found the pass under way (past o*) and the queue full: it asked for one more
      exercised = again() > n0;
      if (exercised) await waitFor('the pass after', async () => value(await scrape(), 'strata_reconcile_all_passes_total') >= pass + 1, 60000);
    }
    assert.ok(exercised, 'a burst of marks met the queue full while the pass was past its keys');
    assert.equal((await s.req('GET', '/v1/users/z9999/conversations/c')).json.total_messages, 1);
    assert.ok(maxQueue <= BOUND, `the queue's gauge stayed within the bound (max ${maxQueue})`);
  });
});
