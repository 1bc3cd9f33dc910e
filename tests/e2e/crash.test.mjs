// SPDX-License-Identifier: MIT
// kill -9 under load. Concurrent clients increment a counter, allocate sequence numbers and read
// both while the server is SIGKILLed; after restart every acknowledged write is there, no number
// is issued twice, gaps can only come from requests cut off by the kill, and no value any client
// ever saw is higher than what survived (nothing was shown before it was durable).
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { request, sleep, startStrata, tempDir } from './lib.mjs';

const CLIENTS = 24;

// One client: until stopAt, increments, allocates and reads. Every answer must be right (a 5xx or
// a wrong range fails the test); only a connection error after the kill (stats.killed) ends the
// client, with its in-flight request unacknowledged.
async function hammer(port, stopAt, stats) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const client = { inflight: null };
  stats.clients.push(client);
  const send = async (method, p, body) => {
    try {
      return await request(port, method, p, body, {}, agent);
    } catch (e) {
      if (stats.killed) return null; // the server died under us
      throw e;
    }
  };
  try {
    for (let i = 0; Date.now() < stopAt; i++) {
      const kind = i % 3;
      if (kind === 0) {
        client.inflight = 'incr';
        const r = await send('POST', '/v1/counters/crash/incr', { by: 1 });
        if (!r) return;
        client.inflight = null;
        assert.equal(r.status, 200, `incr: ${r.text}`);
        assert.equal(typeof r.json.value, 'number', r.text);
        stats.acked += 1;
        stats.maxSeen = Math.max(stats.maxSeen, r.json.value);
      } else if (kind === 1) {
        const count = 1 + (i % 4);
        client.inflight = 'seq';
        const r = await send('POST', '/v1/sequences/crash/next', { count });
        if (!r) return;
        client.inflight = null;
        assert.equal(r.status, 200, `next: ${r.text}`);
        assert.equal(r.json.last - r.json.first + 1, count, r.text);
        stats.ranges.push([r.json.first, r.json.last]);
      } else {
        const [c, q] = await Promise.all([
          send('GET', '/v1/counters/crash'),
          send('GET', '/v1/sequences/crash'),
        ]);
        if (!c || !q) return;
        assert.equal(c.status, 200, `counter: ${c.text}`);
        assert.equal(q.status, 200, `sequence: ${q.text}`);
        stats.maxSeen = Math.max(stats.maxSeen, c.json.value);
        stats.maxSeqSeen = Math.max(stats.maxSeqSeen, q.json.last);
      }
    }
  } finally {
    agent.destroy();
  }
}

test('acknowledged increments and sequence numbers survive kill -9', async () => {
  const dir = tempDir('crash');
  const stats = { acked: 0, maxSeen: 0, maxSeqSeen: 0, ranges: [], clients: [], killed: false };
  for (let round = 0; round < 3; round++) {
    const s = await startStrata({ dataDir: dir });
    // before anything else: the previous round's state must all be here
    const c = await s.req('GET', '/v1/counters/crash');
    const q = await s.req('GET', '/v1/sequences/crash');
    if (round > 0) {
      assert.equal(c.status, 200, c.text);
      assert.equal(q.status, 200, q.text);
      const value = c.json.value;
      const unackedIncr = stats.clients.filter((x) => x.inflight === 'incr').length;
      assert.ok(value >= stats.acked, `lost increments: ${value} < ${stats.acked} acknowledged`);
      assert.ok(value <= stats.acked + unackedIncr, `phantom increments: ${value} > ${stats.acked}+${unackedIncr}`);
      assert.ok(stats.maxSeen <= value, `a client saw ${stats.maxSeen}, but only ${value} survived`);
      const last = q.json.last;
      const maxAcked = Math.max(0, ...stats.ranges.map((r) => r[1]));
      assert.ok(last >= maxAcked, `sequence went back: ${last} < acknowledged ${maxAcked}`);
      assert.ok(stats.maxSeqSeen <= last, `a client saw last=${stats.maxSeqSeen}, only ${last} survived`);
      // the counter only moves by acknowledged requests + ones cut off in flight
      stats.acked = value; // resync: unacknowledged-but-applied increments are now known
      stats.maxSeen = value;
    }
    // gaps among acknowledged numbers can only be numbers handed to requests cut off by a kill
    const sorted = [...stats.ranges].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < sorted.length; i++)
      assert.ok(sorted[i][0] > sorted[i - 1][1], `number ${sorted[i][0]} issued twice`);
    let gaps = 0;
    for (let i = 1; i < sorted.length; i++) if (sorted[i][0] !== sorted[i - 1][1] + 1) gaps++;
    assert.ok(gaps <= round * CLIENTS, `${gaps} gaps after ${round} kills`);

    if (round === 0) {
      // both exist before the clients read them (a read answers 200 from then on)
      const i = await s.req('POST', '/v1/counters/crash/incr', { by: 1 });
      assert.equal(i.status, 200, i.text);
      stats.acked = stats.maxSeen = i.json.value;
      const n = await s.req('POST', '/v1/sequences/crash/next');
      assert.equal(n.status, 200, n.text);
      stats.ranges.push([n.json.first, n.json.last]);
    }

    const rangesBefore = stats.ranges.length;
    stats.clients = [];
    stats.killed = false;
    const stopAt = Date.now() + 5000;
    const workers = Promise.allSettled(Array.from({ length: CLIENTS }, () => hammer(s.port, stopAt, stats)));
    await sleep(700 + round * 300);
    // kill once this round allocated numbers (a loaded machine may not have yet) and while a
    // write is in flight: the clients run in step (one group commit answers them together), so
    // a kill at a fixed time could land while every one of them reads
    for (const end = Date.now() + 4000; (stats.ranges.length <= rangesBefore || !stats.clients.some((x) => x.inflight)) && Date.now() < end;) await sleep(1);
    stats.killed = true;
    await s.kill9();
    for (const w of await workers) if (w.status === 'rejected') throw w.reason;
    assert.ok(stats.ranges.length > rangesBefore, 'numbers were allocated in this round');
    assert.ok(stats.clients.some((x) => x.inflight), 'the kill landed while writes were in flight');
  }
  const s = await startStrata({ dataDir: dir });
  const maxAcked = Math.max(...stats.ranges.map((r) => r[1]));
  const next = await s.req('POST', '/v1/sequences/crash/next');
  assert.equal(next.status, 200, next.text);
  assert.ok(next.json.first > maxAcked, `reissued ${next.json.first} <= ${maxAcked}`);
  const c = await s.req('GET', '/v1/counters/crash');
  assert.ok(c.json.value >= stats.acked);
  await s.stop();
  s.cleanup();
});
