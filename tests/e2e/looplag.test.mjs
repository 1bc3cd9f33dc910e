// SPDX-License-Identifier: MIT
// The loop-lag probe (SPEC §7): strata_loop_lag_seconds is a histogram fed by a probe timer
// while the server runs, and strata_loop_stall_max_seconds records the longest iteration.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sleep, startStrata } from './lib.mjs';

function metric(text, name) {
  const m = new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

test('loop lag histogram and max stall are exported and move with the loop', async () => {
  const s = await startStrata();
  try {
    const first = (await s.req('GET', '/metrics')).text;
    assert.match(first, /^# TYPE strata_loop_lag_seconds histogram$/m);
    assert.match(first, /^strata_loop_lag_seconds_bucket\{le="\+Inf"\} \d+$/m);
    assert.match(first, /^# TYPE strata_loop_stall_max_seconds gauge$/m);
    const c0 = metric(first, 'strata_loop_lag_seconds_count');
    // Some work on the loop: a large event's bitmap is built in one callback.
    const ev = await s.req('POST', '/v1/events', {
      event_id: 'lag', sections: [{ name: 'A', rows: 1000, cols: 1000, price: 1 }],
    });
    assert.equal(ev.status, 201);
    await sleep(300);
    const later = (await s.req('GET', '/metrics')).text;
    assert.ok(metric(later, 'strata_loop_lag_seconds_count') > c0, 'the probe keeps sampling');
    const stall = metric(later, 'strata_loop_stall_max_seconds');
    assert.ok(stall > 0, `an iteration that ran callbacks was measured (${stall})`);
    // The histogram is cumulative and consistent.
    const inf = Number(/strata_loop_lag_seconds_bucket\{le="\+Inf"\} (\d+)/.exec(later)[1]);
    assert.equal(inf, metric(later, 'strata_loop_lag_seconds_count'));
  } finally {
    await s.stop();
    s.cleanup();
  }
});
