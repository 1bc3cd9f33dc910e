// SPDX-License-Identifier: MIT
// --cold-cache bounds the cold cache's footers as well as its row groups (issue 48: parsed
// Parquet footers were kept up to 4,096 entries outside any flag, so memory grew with the number
// of cold objects read whatever the flag said). Many users are flushed, each into its own
// object, then every one is read back through a small cache: every read answers exactly what the
// hot store answered, and /metrics shows the footers and row groups held, in bytes and entries,
// their sum within the flag once no read is in progress (footers evicted to stay there), and a
// second pass over the evicted users still answers right.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startStrata } from './lib.mjs';
import { waitFor } from './cold-lib.mjs';

const USERS = 200;
const CONVS = 2;
const PER_CONV = 2;
const CACHE = 64 * 1024; // --cold-cache 64KiB: far less than USERS footers take

const gauge = (text, name, labels = '') => {
  const esc = labels.replace(/[{}"=]/g, (c) => `\\${c}`);
  const m = new RegExp(`^${name}${esc} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
};

async function cacheFigures(s) {
  const text = (await s.req('GET', '/metrics')).text;
  return {
    footerBytes: gauge(text, 'strata_cold_cache_bytes', '{part="footers"}'),
    groupBytes: gauge(text, 'strata_cold_cache_bytes', '{part="row_groups"}'),
    footers: gauge(text, 'strata_cold_cache_entries', '{part="footers"}'),
    groups: gauge(text, 'strata_cold_cache_entries', '{part="row_groups"}'),
    capacity: gauge(text, 'strata_cold_cache_capacity_bytes'),
    fetched: gauge(text, 'strata_cold_fetches_total', '{result="ok"}'),
  };
}

async function readAll(s, u) {
  const out = [];
  let cursor = null;
  for (;;) {
    const p = new URLSearchParams({ limit: '50', ...(cursor ? { cursor } : {}) });
    const r = await s.req('GET', `/v1/users/${u}/messages?${p}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.json.messages);
    if (!r.json.next) return out;
    cursor = r.json.next;
  }
}

// Runs fn over items, `width` at a time.
async function inBatches(items, width, fn) {
  for (let i = 0; i < items.length; i += width)
    await Promise.all(items.slice(i, i + width).map(fn));
}

test('--cold-cache bounds footers and row groups together, and /metrics shows both', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--cold-cache', `${CACHE}`] });
  try {
    const users = Array.from({ length: USERS }, (_, i) => `fc${i}`);
    await inBatches(users, 20, async (u) => {
      for (let c = 0; c < CONVS; c++)
        for (let i = 0; i < PER_CONV; i++) {
          const r = await s.req('POST', `/v1/users/${u}/messages`,
            { conversation_id: `${u}-conv-${c}`, from: 'x', content: `${u} ${c}/${i} ✓`, metadata: { i } });
          assert.equal(r.status, 201, r.text);
        }
    });
    const expected = {};
    await inBatches(users, 20, async (u) => {
      expected[u] = await readAll(s, u);
      assert.equal(expected[u].length, CONVS * PER_CONV);
    });
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    for (const u of users)
      await waitFor(`${u} flushed`, async () =>
        (await s.req('GET', `/v1/users/${u}/stats`)).json.cold_messages === CONVS * PER_CONV, 60000);

    // every user read from cold, one at a time: each read's wait is released when it answers
    let most = 0;
    for (const u of users) {
      assert.deepEqual(await readAll(s, u), expected[u], u);
      const f = await cacheFigures(s);
      most = Math.max(most, f.footers);
      assert.ok(f.footerBytes + f.groupBytes <= CACHE,
        `after ${u}: footers ${f.footerBytes} + row groups ${f.groupBytes} bytes > --cold-cache ${CACHE}`);
    }
    const f = await cacheFigures(s);
    assert.equal(f.capacity, CACHE);
    // the reads went through the cache: footers are held, each counted at more than its entry
    assert.ok(f.footers > 0 && f.footerBytes >= f.footers * 512, JSON.stringify(f));
    assert.ok(f.footerBytes / f.footers < 64 * 1024, JSON.stringify(f));
    // and the bytes, not a count, decided how many: most of the users' footers were let go
    assert.ok(most < USERS / 2, `${most} footers held at once of ${USERS}`);
    assert.ok(f.fetched >= USERS, JSON.stringify(f));

    // the first users' footers were evicted: read again, they are fetched again and still right
    for (const u of users.slice(0, 10))
      assert.deepEqual(await readAll(s, u), expected[u], u);
    const g = await cacheFigures(s);
    assert.ok(g.fetched >= f.fetched + 10, `${g.fetched} fetches after ${f.fetched}`);
    assert.ok(g.footerBytes + g.groupBytes <= CACHE, JSON.stringify(g));
  } finally {
    await s.stop();
    s.cleanup();
  }
});
