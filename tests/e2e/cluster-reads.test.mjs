// SPDX-License-Identifier: MIT
// Linearizable reads in a group (SPEC §8 v3): a leader paused with SIGSTOP while another member
// takes over must not answer, once resumed, a read from its old state — not even the requests
// that reached its socket while it was paused and are read the moment it runs again. Each such
// read answers 503 no_leader: it is read in the resumed member's first I/O pass, while the member
// still counts itself the serving leader (its role is polled by a timer), so it waits for a fence
// past the lapsed lease, and the step-down that follows fails the fence. Reads on a healthy
// leader are answered at once (its lease is renewed by writes and by fences while only reads
// come).
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, describe, test } from 'node:test';
import { Group, call } from './cluster-lib.mjs';
import { parseResponses, sleep } from './lib.mjs';

// A connection the member has accepted and reads (a first request on it was answered); get()
// writes a GET on it later (the member may be paused then: the kernel takes it, and the member
// reads it in its very first loop turn once resumed) and resolves with the parsed response once
// the member answers or closes.
function openConn(port) {
  return new Promise((resolve) => {
    let text = '';
    let done;
    const closed = new Promise((r) => { done = r; });
    const conn = {
      get(p) {
        text = '';
        sock.write(`GET ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
        return closed.then(() => parseResponses(text)[0] || { status: 0 });
      },
    };
    const sock = net.connect(port, '127.0.0.1', () => sock.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
    sock.on('data', (d) => {
      text += d;
      if (conn.ready) return;
      const first = parseResponses(text);
      if (first.length) { conn.ready = true; text = ''; resolve(conn); }
    });
    sock.on('close', () => done());
    sock.on('error', () => {});
    sock.setTimeout(20000, () => sock.destroy());
  });
}

describe('reads in a group', () => {
  const g = new Group(3);
  after(() => { g.kill(); g.cleanup(); });

  test('a resumed old leader never answers from its old state', async () => {
    await g.init();
    for (let round = 0; round < 3; round++) {
      const old = await g.leader();
      for (let i = 0; i < 20; i++) assert.equal((await g.req('POST', '/v1/counters/k/incr', {}, { via: old })).status, 200);
      const s = g.members.get(old);
      const conns = await Promise.all(Array.from({ length: 16 }, () => openConn(g.port(old))));
      s.proc.kill('SIGSTOP');
      // another member leads and acknowledges increments the paused one never saw
      const others = g.live().filter((id) => id !== old);
      let acked = 0;
      const until = Date.now() + 15000;
      while (Date.now() < until) {
        const r = await call(g.port(others[0]), 'POST', '/v1/counters/k/incr', {}, 1000);
        const r2 = r.status === 307 ? await call(Number(new URL(r.headers.location).port), 'POST', '/v1/counters/k/incr', {}, 1000) : r;
        if (r2.status === 200) { acked = Math.max(acked, r2.json.value); if (acked >= 20 * (round + 1) + 10) break; }
        await sleep(20);
      }
      assert.ok(acked > 0, 'the others elected a leader and acknowledged increments');
      // reads queued on the paused leader's sockets, read the moment it resumes
      const pending = conns.map((c) => c.get('/v1/counters/k'));
      await sleep(200);
      s.proc.kill('SIGCONT');
      const answers = await Promise.all(pending);
      const seen = answers.map((a) => `${a.status}${a.status === 200 ? `:${a.json.value}` : ''}`);
      console.log(`round ${round}: acknowledged ${acked}; answers on the resumed leader: ${seen.join(' ')}`);
      for (const a of answers) {
        if (a.status === 200) assert.ok(a.json.value >= acked, `stale read on the resumed leader: ${a.json.value} < ${acked}`);
        assert.equal(a.status, 503, `a read queued on the paused leader: ${a.status} ${a.body}`);
        assert.equal(a.json?.error?.code, 'no_leader', a.body);
      }
      // and later reads anywhere see it too
      const r = await g.req('GET', '/v1/counters/k');
      assert.equal(r.status, 200);
      assert.ok(r.json.value >= acked);
    }
    await g.stopAll();
  });
});

// A write the leader could not get past a majority (both followers paused) fails with 503
// no_leader, but its entry may still commit under the next leader: the answer must not claim it
// was not applied, and a retry with the same Idempotency-Key applies it exactly once.
describe('a write of a lost term', () => {
  const g = new Group(3);
  after(() => { g.kill(); g.cleanup(); });

  test('answers 503 no_leader with an unknown outcome; a keyed retry applies it once', async () => {
    await g.init();
    const leader = await g.leader();
    const followers = g.live().filter((id) => id !== leader).map((id) => g.members.get(id));
    for (const f of followers) f.proc.kill('SIGSTOP');
    const key = { 'idempotency-key': 'lost-term-1' };
    const r = await call(g.port(leader), 'POST', '/v1/counters/lost/incr', {}, 8000, key);
    for (const f of followers) f.proc.kill('SIGCONT');
    assert.equal(r.status, 503, `a minority leader acknowledged a write: ${r.status}`);
    assert.equal(r.json.error.code, 'no_leader');
    assert.equal(r.headers['retry-after'], '1');
    assert.doesNotMatch(r.json.error.message, /not applied/);
    assert.match(r.json.error.message, /outcome is unknown/);
    let retry;
    for (let i = 0; i < 20 && retry?.status !== 200; i++) {
      retry = await g.req('POST', '/v1/counters/lost/incr', {}, { headers: key });
      if (retry.status !== 200) await sleep(200);
    }
    assert.equal(retry.status, 200);
    assert.equal(retry.json.value, 1, 'applied once');
    assert.equal((await g.req('GET', '/v1/counters/lost')).json.value, 1);
    await g.stopAll();
  });
});
