// SPDX-License-Identifier: MIT
// --idempotency-index bounds the memory of the Idempotency-Key answers' index (issue 48: every
// index that grows with users must be bounded by a flag and shown in /metrics). With a 1 KiB
// budget (64 slots, at most 44 answers) and 200 keyed posts, the index stays under the flag
// (strata_idempotency_index_bytes) and the answers past it are found through the store
// (strata_idempotency_spilled_total): every retry gets its first answer byte for byte and changes
// nothing, another body is 422 — before and after a restart, which rebuilds the index.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sleep, startStrata, withServer } from './lib.mjs';

const BUDGET = 1024;
const N = 200;

const metric = async (s, name) => {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec((await s.req('GET', '/metrics')).text);
  return m ? Number(m[1]) : undefined;
};

async function replayAll(s, posts) {
  for (const p of posts) {
    const r = await s.req('POST', '/v1/users/ivy/messages', p.body, { 'idempotency-key': p.key });
    assert.equal(r.status, 201, `replay of ${p.key}: ${r.text}`);
    assert.equal(r.headers['idempotent-replayed'], 'true', p.key);
    assert.equal(r.text, p.text, `replay of ${p.key} is byte for byte the first answer`);
  }
  for (const i of [0, 77, N - 1]) {
    const other = await s.req('POST', '/v1/users/ivy/messages',
      { ...posts[i].body, content: 'another body' }, { 'idempotency-key': posts[i].key });
    assert.equal(other.status, 422, `another body for ${posts[i].key}`);
    assert.equal(other.json.error.code, 'idempotency_key_reused');
  }
  let n = 0;
  for (let c = 0; c < 4; c++)
    n += (await s.req('GET', `/v1/users/ivy/messages?conversation_id=c${c}&limit=100`)).json.messages.length;
  assert.equal(n, N, 'no retry posted again');
}

test('a tiny --idempotency-index: the index stays under it, every answer is still replayed', async () => {
  const args = ['--idempotency-index', `${BUDGET}`];
  const first = await startStrata({ args });
  const posts = [];
  let held;
  await withServer(first, async () => {
    for (let i = 0; i < N; i++) {
      const body = { conversation_id: `c${i % 4}`, from: 'ivy', content: `message ${i}` };
      const key = `budget-${i}`;
      const r = await first.req('POST', '/v1/users/ivy/messages', body, { 'idempotency-key': key });
      assert.equal(r.status, 201);
      posts.push({ body, key, text: r.text });
      const bytes = await metric(first, 'strata_idempotency_index_bytes');
      assert.ok(bytes <= BUDGET, `index ${bytes} bytes > --idempotency-index ${BUDGET}`);
    }
    held = await metric(first, 'strata_idempotency_answers');
    const spilled = await metric(first, 'strata_idempotency_spilled_total');
    assert.ok(held > 0 && held < 64, `the index holds ${held} answers`);
    assert.equal(held + spilled, N, 'each answer is in the index or has a store entry');
    await replayAll(first, posts);
    await first.kill9();
  }, { keepDir: true });
  const s = await startStrata({ dataDir: first.dir, args });
  await withServer(s, async () => {
    let kept;
    for (let i = 0; i < 100 && (kept = await metric(s, 'strata_idempotency_answers')) < 0; i++)
      await sleep(50);
    assert.equal(kept, held, 'the rebuilt index holds the same answers');
    assert.ok(await metric(s, 'strata_idempotency_index_bytes') <= BUDGET);
    await replayAll(s, posts);
    assert.ok(await metric(s, 'strata_idempotency_index_bytes') <= BUDGET);
  });
});
