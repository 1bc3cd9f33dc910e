// SPDX-License-Identifier: MIT
// The cold tier on S3: strata flushes to a real S3-protocol server on loopback (s3rver), signed
// by libcurl's SigV4; DuckDB reads the stored objects; the service going away mid-way makes
// flushes fail and retry with backoff (nothing lost, hot reads unaffected) until it is back.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { S3rver } from './sigv4-proxy.mjs';
import { test } from 'node:test';
import { freePort, startStrata } from './lib.mjs';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';

async function s3(dir, port) {
  // from freePort, outside the ephemeral range: a test restarts it on this port, and meanwhile
  // strata's connections to it could be given that port as their own (lib.mjs's freePort)
  port ??= await freePort();
  const server = new S3rver({ address: '127.0.0.1', port, directory: dir, silent: true, configureBuckets: [{ name: 'cold' }] });
  const addr = await server.run();
  return { server, port: addr.port };
}

async function readAll(s, u, q = {}) {
  const out = [];
  let cursor = null;
  for (;;) {
    const r = await s.req('GET', `/v1/users/${u}/messages?${new URLSearchParams({ limit: '17', ...q, ...(cursor ? { cursor } : {}) })}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.json.messages);
    if (!r.json.next) return out;
    cursor = r.json.next;
  }
}

const flushErrors = async (s) => Number((await s.req('GET', '/metrics')).text.match(/strata_flush_total\{result="error"\} (\d+)/)?.[1] ?? 0);

test('flushes go to S3, survive the service going away, and read back exactly', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'strata-s3-'));
  let { server, port } = await s3(dir);
  const s = await startStrata({
    args: ['--cold-url', 's3://cold/strata/prefix', '--s3-endpoint', `http://127.0.0.1:${port}`,
      '--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER', '--flush-interval', '3600'],
  });
  try {
    const posted = [];
    const post = async (i) => {
      const r = await s.req('POST', '/v1/users/s3user/messages', { conversation_id: `c${i % 4}`, from: 'a', content: `hello ${i}`, ...(i % 2 ? { metadata: { i } } : {}) });
      assert.equal(r.status, 201, r.text);
      posted.push(r.json.msg_id);
    };
    for (let i = 0; i < 50; i++) await post(i);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('the S3 flush', async () => (await s.req('GET', '/v1/users/s3user/stats')).json.cold_messages === 50);
    assert.deepEqual((await readAll(s, 's3user')).map((m) => m.msg_id), posted);
    const objects = parquetFiles(path.join(dir, 'cold'));
    assert.equal(objects.length, 1);
    assert.match(objects[0], /strata\/prefix\/s3user\/batch-\d+-w[0-9a-f]{16}-1\.parquet/);
    assert.deepEqual((await duckRows(objects)).map((r) => r.msg_id), posted);

    // the service goes away: flushes fail and back off, hot reads and writes carry on
    await server.close();
    for (let i = 50; i < 80; i++) await post(i);
    await s.req('POST', '/v1/admin/flush');
    await waitFor('a failed flush', async () => (await flushErrors(s)) >= 1);
    const hot = await readAll(s, 's3user', { after: posted[49] });
    assert.deepEqual(hot.map((m) => m.msg_id), posted.slice(50));
    const st = (await s.req('GET', '/v1/users/s3user/stats')).json;
    assert.deepEqual([st.cold_messages, st.hot_messages], [50, 30]);

    // ... and comes back: the retry lands and nothing was lost or doubled
    ({ server } = await s3(dir, port));
    await waitFor('the retried flush', async () => (await s.req('GET', '/v1/users/s3user/stats')).json.cold_messages === 80, 30000);
    assert.deepEqual((await readAll(s, 's3user')).map((m) => m.msg_id), posted);
    assert.deepEqual((await readAll(s, 's3user', { order: 'desc' })).map((m) => m.msg_id), [...posted].reverse());
    const all = parquetFiles(path.join(dir, 'cold'));
    assert.equal(all.length, 2);
    assert.deepEqual((await duckRows(all)).map((r) => r.msg_id), posted);
  } finally {
    await s.stop();
    s.cleanup();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
