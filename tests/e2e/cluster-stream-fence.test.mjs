// SPDX-License-Identifier: MIT
// What a stream on a member shows is linearizable too (SPEC §8 v3): a subscription's snapshot
// (a counter's current value) reflects every write acknowledged before the subscribe began, on
// whichever member it reaches. Two members are put behind: the leader, paused with SIGSTOP while
// another member takes over and acknowledges increments, and a follower paused the same way while
// the leader goes on. Once resumed, each is sent subscribes — on streams opened before the pause
// (their frames read in the member's first loop turn) and on new ones, at once and a little later.
// Every snapshot must be at least the value acknowledged before; a member that cannot prove that
// answers the subscription with an error frame `no_leader` instead.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Group, call } from './cluster-lib.mjs';
import { sleep, wsConnect } from './lib.mjs';

// The subscription's first answer after "subscribed": {value} or {error}.
async function firstAnswer(ws, id) {
  const until = Date.now() + 15000;
  while (Date.now() < until) {
    const f = await ws.next(Math.max(1, until - Date.now())).catch(() => ({ op: -1 }));
    if (f.op === -1) return { closed: true };
    if (f.op === 8) return { closed: true, code: f.code };
    const j = f.json;
    if (!j || j.id !== id) continue;
    if (j.type === 'counter') return { value: j.value };
    if (j.type === 'error') return { error: j.code };
  }
  return { timeout: true };
}

// Increments through whichever member leads (not `paused`) until `target` is acknowledged.
async function incrElsewhere(g, paused, target) {
  const others = g.live().filter((id) => id !== paused);
  let acked = 0;
  const until = Date.now() + 15000;
  while (Date.now() < until && acked < target) {
    const r = await call(g.port(others[acked % others.length]), 'POST', '/v1/counters/k/incr', {}, 1000);
    const r2 = r.status === 307 ? await call(Number(new URL(r.headers.location).port), 'POST', '/v1/counters/k/incr', {}, 1000) : r;
    if (r2.status === 200) acked = Math.max(acked, r2.json.value);
    else await sleep(20);
  }
  return acked;
}

describe('streams in a group', () => {
  const g = new Group(3);
  after(() => { g.kill(); g.cleanup(); });

  test('a resumed member never streams a snapshot older than an acknowledged write', async () => {
    await g.init();
    let acked = 0;
    for (let round = 0; round < 4; round++) {
      const leader = await g.leader();
      acked = await incrElsewhere(g, 0, acked + 20);
      // rounds 0, 2: the leader is paused (another member takes over); 1, 3: a follower
      const victim = round % 2 === 0 ? leader : g.live().find((id) => id !== leader);
      const s = g.members.get(victim);
      const early = await Promise.all(Array.from({ length: 8 }, () => wsConnect(g.port(victim))));
      for (const ws of early) assert.equal(ws.status, 101);
      await sleep(100);
      s.proc.kill('SIGSTOP');
      if (victim === leader) await sleep(1500); // its lease runs out; another member leads
      acked = await incrElsewhere(g, victim, acked + 30);
      assert.ok(acked > 0, 'the others acknowledged increments');
      early.forEach((ws, i) => ws.send({ type: 'subscribe', id: `e${i}`, topic: 'counter', name: 'k' }));
      await sleep(100);
      s.proc.kill('SIGCONT');
      const answers = early.map((ws, i) => firstAnswer(ws, `e${i}`));
      // new streams, at once and over the next half second
      for (let i = 0; i < 8; i++) {
        const ws = await wsConnect(g.port(victim));
        assert.equal(ws.status, 101);
        ws.send({ type: 'subscribe', id: `n${i}`, topic: 'counter', name: 'k' });
        answers.push(firstAnswer(ws, `n${i}`).finally(() => ws.close()));
        await sleep(i * 10);
      }
      const got = await Promise.all(answers);
      early.forEach((ws) => ws.close());
      // a loaded machine may run the resumed member's first rounds with the leader later than
      // these: go on subscribing (every answer checked the same) until one gets its snapshot
      for (let i = 0, end = Date.now() + 15000; !got.some((a) => a.value !== undefined) && Date.now() < end; i++) {
        const ws = await wsConnect(g.port(victim));
        assert.equal(ws.status, 101);
        ws.send({ type: 'subscribe', id: `l${i}`, topic: 'counter', name: 'k' });
        got.push(await firstAnswer(ws, `l${i}`).finally(() => ws.close()));
        await sleep(200);
      }
      const seen = got.map((a) => (a.value !== undefined ? a.value : a.error || (a.closed ? `closed${a.code || ''}` : 'timeout')));
      console.log(`round ${round} (${victim === leader ? 'old leader' : 'follower'}): acknowledged ${acked}; snapshots: ${seen.join(' ')}`);
      for (const a of got) {
        assert.ok(a.value !== undefined || a.error === 'no_leader', `no snapshot and no no_leader error: ${JSON.stringify(a)}`);
        if (a.value !== undefined) assert.ok(a.value >= acked, `stale snapshot: ${a.value} < ${acked}`);
      }
      assert.ok(got.some((a) => a.value !== undefined), 'some subscription got its snapshot');
    }
    await g.stopAll();
  });
});
