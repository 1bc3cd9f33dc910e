// SPDX-License-Identifier: MIT
// Idempotency-Key answers across a crash (SPEC §0, issue 48): answers are stored in time order and
// found through an index in memory that a start rebuilds from them, so after kill -9 and a restart
// a retry still gets its first answer byte for byte (and changes nothing), the same key with
// another body is still 422, and /metrics' strata_idempotency_answers counts every answer kept
// once the index is whole.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { sleep, startStrata } from './lib.mjs';

const metric = async (s, name) => {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec((await s.req('GET', '/metrics')).text);
  return m ? Number(m[1]) : undefined;
};

describe('idempotency keys after kill -9 and a restart', () => {
  let s;
  after(async () => { if (s) { await s.stop(); s.cleanup(); } });

  test('a retry gets its first answer byte for byte, another body is 422, nothing changes', async () => {
    s = await startStrata();
    const posts = [];
    for (let i = 0; i < 40; i++) {
      const body = { conversation_id: `c${i % 4}`, from: 'ida', content: `message ${i}` };
      const key = `restart-${i}`;
      const r = await s.req('POST', '/v1/users/ida/messages', body, { 'idempotency-key': key });
      assert.equal(r.status, 201);
      posts.push({ body, key, text: r.text });
    }
    const incr = await s.req('POST', '/v1/counters/restart/incr', { by: 3 }, { 'idempotency-key': 'c1' });
    assert.equal(incr.status, 200);
    assert.equal(await metric(s, 'strata_idempotency_answers'), 41);
    const dir = s.dir;
    await s.kill9();
    s = await startStrata({ dataDir: dir });
    let kept;
    for (let i = 0; i < 100 && (kept = await metric(s, 'strata_idempotency_answers')) !== 41; i++)
      await sleep(50);
    assert.equal(kept, 41, 'the rebuilt index holds every answer');
    for (const p of posts) {
      const r = await s.req('POST', '/v1/users/ida/messages', p.body, { 'idempotency-key': p.key });
      assert.equal(r.status, 201);
      assert.equal(r.headers['idempotent-replayed'], 'true');
      assert.equal(r.text, p.text);
    }
    const other = await s.req('POST', '/v1/users/ida/messages',
      { ...posts[7].body, content: 'another' }, { 'idempotency-key': posts[7].key });
    assert.equal(other.status, 422);
    assert.equal(other.json.error.code, 'idempotency_key_reused');
    const again = await s.req('POST', '/v1/counters/restart/incr', { by: 3 }, { 'idempotency-key': 'c1' });
    assert.equal(again.status, 200);
    assert.equal(again.text, incr.text);
    assert.equal((await s.req('GET', '/v1/counters/restart')).json.value, 3);
    let n = 0;
    for (let c = 0; c < 4; c++)
      n += (await s.req('GET', `/v1/users/ida/messages?conversation_id=c${c}&limit=100`)).json.messages.length;
    assert.equal(n, 40);
    // a new key after the restart is remembered too
    const fresh = await s.req('POST', '/v1/counters/restart/incr', { by: 1 }, { 'idempotency-key': 'c2' });
    assert.equal(fresh.json.value, 4);
    assert.equal(await metric(s, 'strata_idempotency_answers'), 42);
  });
});
