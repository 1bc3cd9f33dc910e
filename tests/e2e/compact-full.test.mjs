// SPDX-License-Identifier: MIT
// A compaction asked for while the hot store is full (issue 48: failures are tested, not hoped
// for). A compaction's swap is a store batch, so it cannot be taken while the store refuses
// writes: POST /v1/admin/compact answers 507 storage_full then (not a 202 for a compaction that
// would fail or be dropped) and nothing acknowledged is lost; the store flushes itself, and the
// compaction asked for again runs without an error: one object, every message once. (No fault
// injection reaches an LMDB error inside the swap itself: none exists in src/.)
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { readAll, startStrata, withServer } from './lib.mjs';

test('a compaction asked for on a full store is refused 507, then runs once the store has room; nothing acknowledged lost', { timeout: 60000 }, async () => {
  const s = await startStrata({ args: ['--map-size', '4MiB', '--flush-interval', '3600', '--compact-objects', '100', '--table-keep', '0'] }); // replaced objects go at once
  const metric = async (re) => Number((await s.req('GET', '/metrics')).text.match(re)?.[1] ?? 0);
  await withServer(s, async () => {
    const cmp = [];
    for (let f = 0; f < 6; f++) { // six small objects, left alone by background compaction
      for (let i = 0; i < 5; i++) {
        const r = await s.req('POST', '/v1/users/cmp/messages', { conversation_id: 'c', from: 'a', content: `x${f}-${i}` });
        assert.equal(r.status, 201, r.text);
        cmp.push(r.json.msg_id);
      }
      assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
      await waitFor('flushed', async () => (await s.req('GET', '/v1/users/cmp/stats')).json.hot_messages === 0);
    }
    const dir = path.join(s.dir, 'cold', 'cmp');
    assert.equal(parquetFiles(dir).length, 6);
    const filler = [];
    let full = null;
    for (let i = 0; i < 20000 && !full; i++) {
      const r = await s.req('POST', '/v1/users/filler/messages', { conversation_id: `c${i % 5}`, from: 'a', content: 'y'.repeat(1500) });
      if (r.status === 201) filler.push(r.json.msg_id);
      else full = r;
    }
    assert.ok(full, 'the hot store filled up');
    assert.equal(full.status, 507, full.text);
    const c = await s.req('POST', '/v1/admin/compact', { user: 'cmp' });
    console.log(`compaction asked for on the full store: ${c.status}`);
    if (c.status === 507) { // still full (the store may have flushed itself already: then 202)
      assert.equal(c.json.error.code, 'storage_full');
      await waitFor('room again', async () => (await s.req('GET', '/healthz')).status === 200, 30000);
      assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'cmp' })).status, 202);
    } else {
      assert.equal(c.status, 202, c.text);
    }
    await waitFor('the compaction', async () => parquetFiles(dir).length === 1, 30000);
    assert.equal(await metric(/^strata_compactions_total\{result="error"\} (\d+)/m), 0);
    assert.deepEqual((await readAll(s, 'cmp')).map((m) => m.msg_id), cmp);
    assert.deepEqual((await duckRows(parquetFiles(dir))).map((r) => r.msg_id), cmp);
    const got = (await readAll(s, 'filler')).map((m) => m.msg_id);
    assert.deepEqual(got.slice(0, filler.length), filler, 'every acknowledged filler message is there');
  });
});
