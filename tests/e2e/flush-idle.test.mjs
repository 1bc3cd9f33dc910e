// SPDX-License-Identifier: MIT
// The flush gauges say when flushing is over (issue 48, Session 20): a user with more hot rows
// than one object takes is flushed in several capped flushes, one after the other, paced; in
// between, the user waits in the queue and strata_flush_pending must say so. It did not: the
// gauge was set only by the pump, which waits for the pace, so `strata_flush_running 0` and
// `strata_flush_pending 0` were read between two of the user's flushes and a bench that waited
// for them (bench/loopstall.sh's flush_idle) went on with half the user still hot.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseResponses, raw, startStrata } from './lib.mjs';

const metrics = async (s) => {
  const text = (await s.req('GET', '/metrics')).text;
  const get = (name) => Number(text.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1] ?? NaN);
  return { passes: get('strata_flush_passes_total'), running: get('strata_flush_running'), pending: get('strata_flush_pending') };
};

test('regression: between two capped flushes of one user the gauges show it queued, so no flush running or pending means the user is cold', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--flush-rows', '100000000'] });
  try {
    const N = 10000; // three objects of 4,096 rows at most: three flushes, paced
    let load = '';
    for (let i = 0; i < N; i++) {
      const body = JSON.stringify({ conversation_id: `c${i % 4}`, from: 'a', content: `m${i}` });
      load += `POST /v1/users/heavy/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    }
    const made = parseResponses(await raw(s.port, load, { idleMs: 3000 }));
    assert.equal(made.length, N);
    assert.ok(made.every((r) => r.status === 201), 'every post answered 201');
    const stats = async () => (await s.req('GET', '/v1/users/heavy/stats')).json;
    assert.equal((await stats()).hot_messages, N);
    const before = (await metrics(s)).passes;
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    // as often as the server answers: the first moment nothing runs or waits
    const until = Date.now() + 60000;
    let m;
    do {
      assert.ok(Date.now() < until, 'the flush ends within a minute');
      m = await metrics(s);
    } while (!(m.passes > before && m.running === 0 && m.pending === 0));
    const st = await stats();
    assert.equal(st.hot_messages, 0, `nothing flushing or pending, yet ${st.hot_messages} of ${N} messages are hot`);
    assert.equal(st.total_messages, N);
  } finally {
    await s.stop();
    s.cleanup();
  }
});
