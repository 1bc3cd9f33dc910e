// A cold object the manifest names goes missing from storage (a lost disk, a bucket
// lifecycle rule, a hand that deleted it): reads that need it answer 503 cold_unavailable,
// /healthz is degraded naming the object (SPEC v5 §5.1), a reader retrying it does not flood
// the log, and once the object is back everything is whole again.
import assert from 'node:assert/strict';
import { renameSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { parquetFiles, waitFor } from './cold-lib.mjs';
import { startStrata, tempDir } from './lib.mjs';

describe('a missing cold object', () => {
  const dir = tempDir();
  let s;
  after(async () => { if (s) await s.stop(); s?.cleanup(); });

  test('503 on the reads that need it, /healthz names it, one log line a minute; whole again once it is back', async () => {
    s = await startStrata({ dataDir: dir, args: ['--flush-interval', '3600'] });
    for (let i = 0; i < 6; i++) {
      const r = await s.req('POST', '/v1/users/mia/messages', { conversation_id: 'c', from: 'mia', content: `m${i}` });
      assert.equal(r.status, 201, r.text);
    }
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('the flush', async () => (await s.req('GET', '/v1/users/mia/stats')).json.hot_messages === 0);
    let h = await s.req('GET', '/healthz');
    assert.equal(h.status, 200, h.text);
    const [obj] = parquetFiles(path.join(dir, 'cold', 'mia'));
    assert.ok(obj, 'the flush wrote an object');
    // restart so that nothing of it is in memory, with the object gone
    await s.stop();
    renameSync(obj, `${obj}.away`);
    s = await startStrata({ dataDir: dir, args: ['--flush-interval', '3600'] });
    for (let i = 0; i < 15; i++) {
      const r = await s.req('GET', '/v1/users/mia/messages');
      assert.equal(r.status, 503, r.text);
      assert.equal(r.json.error.code, 'cold_unavailable');
    }
    h = await s.req('GET', '/healthz');
    assert.equal(h.status, 503, h.text);
    assert.equal(h.json.status, 'degraded');
    assert.ok(h.json.reasons.includes('cold_object_missing'), h.text);
    assert.equal(h.json.missing_object, path.relative(path.join(dir, 'cold'), obj));
    const lines = s.log().split('\n').filter((l) => l.includes('cannot be read (missing)'));
    assert.equal(lines.length, 1, `one line for fifteen reads of one missing object:\n${lines.join('\n')}`);
    // hot writes are not refused for it
    assert.equal((await s.req('POST', '/v1/users/mia/messages', { conversation_id: 'c', from: 'mia', content: 'new' })).status, 201);
    // back: reads and /healthz are whole again
    renameSync(`${obj}.away`, obj);
    await waitFor('the object read again', async () => (await s.req('GET', '/v1/users/mia/messages?limit=100')).status === 200);
    const r = await s.req('GET', '/v1/users/mia/messages?limit=100');
    assert.deepEqual(r.json.messages.map((m) => m.content), ['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'new']);
    h = await s.req('GET', '/healthz');
    assert.equal(h.status, 200, h.text);
    assert.equal(h.json.missing_object, undefined);
  });
});
