// SPDX-License-Identifier: MIT
// The allocator (src/core/alloc.c, issue 48): release builds run on jemalloc, whose background
// thread gives freed memory back to the system about a second after a burst, with the loop
// idle (no malloc_trim on the loop). /metrics says which allocator runs (strata_malloc_jemalloc)
// and, with jemalloc, what it holds. A burst: large request bodies read at once (each read
// buffer grows to its body, then is freed); then, with nothing more than scrapes, the dirty pages
// it left must go back within a few seconds — jemalloc's default decay (10 s) would not.
// A sanitizer build (glibc's malloc) shows strata_malloc_jemalloc 0 and no jemalloc figures.
// Under ctest, STRATA_JEMALLOC says which one the build chose (ST_JEMALLOC, CMakeLists.txt): the
// binary must run on it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { sleep, startStrata, withServer } from './lib.mjs';

const MiB = 1 << 20;
const BODIES = 8;
const BODY = 4 * MiB;

async function metrics(s) {
  const r = await s.req('GET', '/metrics');
  assert.equal(r.status, 200);
  const m = new Map();
  for (const l of r.text.split('\n')) {
    if (l.startsWith('strata_malloc_')) m.set(l.split(' ')[0], Number(l.split(' ')[1]));
  }
  return m;
}

function rssBytes(pid) {
  const kib = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(kib[1]) * 1024;
}

test('the allocator is named in /metrics, and jemalloc gives a burst back off the loop', async () => {
  const s = await startStrata();
  await withServer(s, async () => {
    const m0 = await metrics(s);
    assert.ok(m0.has('strata_malloc_jemalloc'), 'strata_malloc_jemalloc in /metrics');
    if (process.env.STRATA_JEMALLOC !== undefined)
      assert.equal(m0.get('strata_malloc_jemalloc'), Number(process.env.STRATA_JEMALLOC),
        'the allocator the build chose (ST_JEMALLOC)');
    if (m0.get('strata_malloc_jemalloc') === 0) {
      assert.equal(m0.size, 1, `glibc's malloc: no jemalloc figures (${[...m0.keys()]})`);
      return;
    }
    assert.equal(m0.get('strata_malloc_jemalloc'), 1);
    assert.ok(m0.get('strata_malloc_background_threads') >= 1, 'a purging thread runs');
    const alloc = m0.get('strata_malloc_allocated_bytes');
    assert.ok(alloc > 0 && m0.get('strata_malloc_active_bytes') >= alloc, JSON.stringify([...m0]));
    assert.ok(m0.get('strata_malloc_resident_bytes') >= m0.get('strata_malloc_active_bytes'));
    assert.ok(m0.get('strata_malloc_retained_bytes') >= 0 && m0.get('strata_malloc_dirty_bytes') >= 0);
    const rss0 = rssBytes(s.proc.pid);

    // the burst: BODIES bodies of BODY bytes (valid JSON: an increment and trailing blanks)
    const body = '{"by":1}' + ' '.repeat(BODY);
    const res = await Promise.all(Array.from({ length: BODIES }, () =>
      s.req('POST', '/v1/counters/burst/incr', body, { 'content-type': 'application/json' })));
    for (const r of res) assert.equal(r.status, 200, r.text);
    assert.equal((await s.req('GET', '/v1/counters/burst')).json.value, BODIES);
    const peak = rssBytes(s.proc.pid);
    assert.ok(peak - rss0 >= BODY, `the burst grew the process (${rss0} -> ${peak} bytes)`);

    // nothing more than scrapes: the pages come back from jemalloc's own thread
    let m = await metrics(s);
    let rss = rssBytes(s.proc.pid);
    for (let t = 0; t < 60 && !(m.get('strata_malloc_dirty_bytes') <= 2 * MiB && rss <= rss0 + 4 * MiB); t++) {
      await sleep(100);
      m = await metrics(s);
      rss = rssBytes(s.proc.pid);
    }
    assert.ok(m.get('strata_malloc_dirty_bytes') <= 2 * MiB,
      `dirty pages given back within 6 s: ${m.get('strata_malloc_dirty_bytes')} bytes left`);
    assert.ok(rss <= rss0 + 4 * MiB, `VmRSS back near ${rss0} bytes within 6 s: ${rss} (peak ${peak})`);
    assert.ok(m.get('strata_malloc_resident_bytes') <= m0.get('strata_malloc_resident_bytes') + 4 * MiB,
      `jemalloc's resident bytes back near ${m0.get('strata_malloc_resident_bytes')}: ${m.get('strata_malloc_resident_bytes')}`);
  });
});
