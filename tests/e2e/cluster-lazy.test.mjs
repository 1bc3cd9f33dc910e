// SPDX-License-Identifier: MIT
// Lazy applies (issues 22, 24): a member that nobody waits on lets LMDB take its entries in
// larger transactions (strata_store_apply_lazy 1) — the serving leader (its writes are answered
// and published at commit) and a follower without streams. A follower must stop as soon as
// someone waits for its applies: a stream opened on it (which shows a change only once applied,
// SPEC §8). Whatever the mode, a stream on a follower shows every change and the members
// converge, and a failover works.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { call, converge, Group } from './cluster-lib.mjs';
import { sleep, wsConnect } from './lib.mjs';

async function lazy(port) {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  const m = /^strata_store_apply_lazy (\S+)$/m.exec(await r.text());
  assert.ok(m, 'strata_store_apply_lazy is in /metrics');
  return Number(m[1]);
}

// Polls until member `id` shows `want`, at most 30 s (the group polls roles every 10 ms; a
// loaded machine may be slow to run those polls).
async function expectLazy(g, id, want, what) {
  let got;
  for (const end = Date.now() + 30000; Date.now() < end;) {
    got = await lazy(g.port(id));
    if (got === want) return;
    await sleep(50);
  }
  assert.equal(got, want, `member ${id}: ${what}`);
}

describe('lazy applies', () => {
  const g = new Group(3);
  after(() => { g.kill(); g.cleanup(); });

  test('the leader and a follower nobody waits on apply lazily; a follower with a stream does not', async () => {
    await g.init();
    const leader = await g.leader();
    const [f1, f2] = g.live().filter((id) => id !== leader);
    await expectLazy(g, leader, 1, 'the serving leader applies lazily');
    await expectLazy(g, f1, 1, 'a follower without streams applies lazily');
    await expectLazy(g, f2, 1, 'a follower without streams applies lazily');
    for (let i = 0; i < 20; i++) assert.equal((await g.req('POST', '/v1/counters/lz/incr', {})).status, 200);
    await converge(g);

    // a stream on f1: a connection alone changes nothing, a subscription makes its applies
    // waited for
    const ws = await wsConnect(g.port(f1));
    assert.equal(ws.status, 101);
    await sleep(100); // ten role polls
    await expectLazy(g, f1, 1, 'a stream with no subscription waits for nothing');
    ws.send({ type: 'subscribe', id: 'c', topic: 'counter', name: 'lz' });
    await expectLazy(g, f1, 0, 'a follower with a subscription applies at once');
    await expectLazy(g, f2, 1, 'the other follower still applies lazily');
    const values = [];
    const reader = (async () => {
      for (;;) {
        const f = await ws.next(10000).catch(() => ({ op: -1 }));
        if (f.op === -1 || f.op === 8) return;
        if (f.json?.type === 'counter') values.push(f.json.value);
        if (f.json?.value === 25) return;
      }
    })();
    for (const end = Date.now() + 30000; !values.length && Date.now() < end;) await sleep(50);
    assert.equal(values[0], 20, 'the snapshot shows every acknowledged increment');
    for (let i = 0; i < 5; i++) assert.equal((await g.req('POST', '/v1/counters/lz/incr', {})).status, 200);
    await reader;
    assert.deepEqual(values, [20, 21, 22, 23, 24, 25]);
    ws.close();
    await expectLazy(g, f1, 1, 'lazy again once its last subscription ended');

    // the leader dies: a follower takes over (eager while it catches up, lazy once it serves)
    await g.members.get(leader).kill9();
    g.members.delete(leader);
    const next = await g.leader(15000);
    assert.notEqual(next, leader);
    const other = next === f1 ? f2 : f1;
    await expectLazy(g, next, 1, 'the new leader, serving, applies lazily');
    await expectLazy(g, other, 1, 'the remaining follower applies lazily');
    const r = await g.req('POST', '/v1/counters/lz/incr', {});
    assert.equal(r.status, 200);
    assert.equal(r.json.value, 26);
    await converge(g);
    const v = await call(g.port(next), 'GET', '/v1/counters/lz');
    assert.equal(v.json.value, 26);
    await g.stopAll(); // the two left stop cleanly (exit 0, no sanitizer report)
  });
});
