// SPDX-License-Identifier: MIT
// A compaction that fails is asked for again (issue 48 follow-up, src/cold/compact.c): it was
// logged and counted, then forgotten until the owner's manifest changed, so a user who went quiet
// kept its small objects for good. The S3 cold tier is s3rver behind a TCP proxy (s3-lib.mjs)
// that refuses every connection while a major compaction of a user's six objects is asked for:
// the compaction fails, and is asked for again while the store is down (counted); once it is back
// the compaction completes with no new write to that user: strata_compactions_total{result="ok"}
// rises, the user's objects are one, and its messages read back exactly once.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { parquetFiles, waitFor } from './cold-lib.mjs';
import { readAll, startStrata, tempDir, withServer } from './lib.mjs';
import { frontProxy, s3Process } from './s3-lib.mjs';

test('a compaction refused by the object store is asked for again and completes once the store is back, with no new write', { timeout: 120000 }, async () => {
  const bucketDir = tempDir('s3compact');
  const s3 = await s3Process(bucketDir);
  const front = await frontProxy(s3.port);
  // no flush and no commit but asked for; replaced objects go at once; six small objects are
  // left alone by background compaction (--compact-objects 100)
  const s = await startStrata({
    args: ['--cold-url', 's3://bk/cold', '--s3-endpoint', `http://127.0.0.1:${front.port}`, '--s3-access-key', 'S3RVER',
      '--s3-secret-key', 'S3RVER', '--flush-interval', '3600', '--flush-rows', '100000000', '--table-commit-interval', '0',
      '--table-keep', '0', '--compact-objects', '100', '--cold-retries', '0', '--cold-timeout-ms', '1500'],
  });
  const metric = async (name) => Number((await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\S+)`, 'm'))?.[1] ?? 0);
  const compacted = 'strata_compactions_total\\{result="ok"\\}';
  const failed = 'strata_compactions_total\\{result="error"\\}';
  try {
    await withServer(s, async () => {
      const ids = [];
      for (let f = 0; f < 6; f++) {
        for (let i = 0; i < 5; i++) ids.push((await s.ok('POST', '/v1/users/cr/messages', { conversation_id: 'c', from: 'a', content: `x${f}-${i}` })).msg_id);
        await s.ok('POST', '/v1/admin/flush');
        await waitFor('flushed', async () => (await s.ok('GET', '/v1/users/cr/stats')).hot_messages === 0, 30000);
      }
      const dir = path.join(bucketDir, 'bk', 'cold', 'cr');
      assert.equal(parquetFiles(dir).length, 6);
      const ok0 = await metric(compacted);

      front.set('refuse');
      assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'cr' })).status, 202);
      await waitFor('the compaction failed', async () => (await metric(failed)) >= 1, 30000);
      // asked for again while the store is still down (and failed again), counted
      await waitFor('a retry', async () => (await metric('strata_compaction_retries_total')) >= 1 && (await metric(failed)) >= 2, 30000);
      assert.equal(await metric(compacted), ok0, 'nothing compacted while the store refuses');
      assert.equal(await metric('strata_compactions_retrying'), 1);
      assert.equal(parquetFiles(dir).length, 6);

      front.set('pass'); // no write to cr from here on: only the retry can compact it
      await waitFor('the compaction after the store is back', async () => (await metric(compacted)) > ok0, 60000);
      await waitFor('one object left', async () => parquetFiles(dir).length === 1, 30000);
      assert.equal(await metric('strata_compactions_retrying'), 0);
      const got = (await readAll(s, 'cr')).map((m) => m.msg_id);
      assert.deepEqual(got, ids, 'every message read back exactly once');
    });
  } finally {
    await front.close();
    await s3.stop();
  }
});
