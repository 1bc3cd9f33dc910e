// SPDX-License-Identifier: MIT
// A compaction's fold prepared in slices across loop turns (src/chat/compact.c, issue 48): an
// object of 3,000 cold messages, 2,000 of them with a delta (edits, deletes, edited then deleted),
// is rewritten with its changes folded in while more deletes keep arriving. Each slice reads 256
// ids' records, so the note takes a dozen slices, and deletes land between them: a change read
// by a slice is folded in, one landing behind the slices stays marked and the next fold takes
// it. In the end DuckDB reads every message exactly once, each as the API shows it (SPEC §5.1).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { startStrata } from './lib.mjs';

const N = 3000;
const U = 'fay';

// Runs fn over items, `width` at a time.
async function each(items, width, fn) {
  let i = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (i < items.length) await fn(items[i++]);
  }));
}

async function readAll(s) {
  const out = [];
  let cursor = null;
  for (let pages = 0; pages < 1000; pages++) {
    const qs = new URLSearchParams({ limit: '200', ...(cursor ? { cursor } : {}) });
    const r = await s.req('GET', `/v1/users/${U}/messages?${qs}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.json.messages);
    if (!r.json.next) return out;
    cursor = r.json.next;
  }
  throw new Error('too many pages');
}

// A row's metadata (JSON text or null) against the API's (a value or null).
const sameMeta = (col, api) => (col === null ? api === null : api !== null && JSON.stringify(JSON.parse(col)) === JSON.stringify(api));

const batchFiles = (dir) => parquetFiles(path.join(dir, 'cold', U)).filter((f) => path.basename(f).startsWith('batch-'));
async function coldRows(dir) {
  try { return await duckRows(batchFiles(dir)); } catch { return null; } // the reaper deleting one
}

describe('a fold prepared in slices', () => {
  let s;
  // --table-keep 0: an object a fold replaced goes at once (no snapshot holds it)
  before(async () => { s = await startStrata({ args: ['--flush-interval', '3600', '--table-keep', '0'] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('deletes arriving while the fold is prepared: every message once, every change in', async () => {
    const ids = new Array(N);
    await each([...Array(N).keys()], 32, async (i) => {
      const r = await s.req('POST', `/v1/users/${U}/messages`, { conversation_id: `c${i % 3}`, from: U, content: `m${i}`, metadata: { i } });
      assert.equal(r.status, 201, r.text);
      ids[i] = r.json.msg_id;
    });
    let r = await s.req('POST', '/v1/admin/flush');
    assert.equal(r.status, 202, r.text);
    await waitFor('the flush', async () => (await s.req('GET', `/v1/users/${U}/stats`)).json.hot_messages === 0, 30000);
    assert.equal(batchFiles(s.dir).length, 1, 'one object holds them');

    // cold changes: every even message edited, every fifth deleted (some edited first)
    const edited = [...Array(N).keys()].filter((i) => i % 2 === 0);
    await each(edited, 32, async (i) => {
      const e = await s.req('PATCH', `/v1/users/${U}/messages/${ids[i]}`, { content: `e${i}`, metadata: { e: i } });
      assert.equal(e.status, 200, e.text);
    });
    const deleted = [...Array(N).keys()].filter((i) => i % 5 === 1);
    await each(deleted, 32, async (i) => {
      assert.equal((await s.req('DELETE', `/v1/users/${U}/messages/${ids[i]}`)).status, 200);
    });

    // the fold asked for while deletes go on, 8 at a time, across its slices and after them
    const late = [...Array(N).keys()].filter((i) => i % 7 === 3 && i % 5 !== 1);
    const deleting = each(late, 8, async (i) => {
      assert.equal((await s.req('DELETE', `/v1/users/${U}/messages/${ids[i]}`)).status, 200);
    });
    r = await s.req('POST', '/v1/admin/compact', { user: U });
    assert.equal(r.status, 202, r.text);
    await deleting;

    const gone = new Set([...deleted, ...late].map((i) => ids[i]));
    const want = await readAll(s);
    assert.equal(want.length, N);
    assert.equal(want.filter((m) => m.deleted_at).length, gone.size);
    for (const m of want) {
      const i = ids.indexOf(m.msg_id);
      if (gone.has(m.msg_id)) assert.equal(m.content, null, `${m.msg_id} a tombstone`);
      else assert.equal(m.content, i % 2 === 0 ? `e${i}` : `m${i}`);
    }
    // the folds (the first, and one for what landed behind its slices) leave the objects as the
    // API reads: each message once, content and metadata as they are now
    const byApi = new Map(want.map((m) => [m.msg_id, m]));
    const rows = await waitFor('the folds', async () => {
      const rs = await coldRows(s.dir);
      if (!rs || rs.length !== N) return null;
      for (const x of rs) {
        const m = byApi.get(x.msg_id);
        if (!m || x.content !== m.content) return null;
        if (!sameMeta(x.metadata, m.metadata ?? null)) return null;
      }
      return rs;
    }, 60000);
    assert.equal(new Set(rows.map((x) => x.msg_id)).size, N, 'every message once');
    assert.equal(rows.filter((x) => x.content === null).length, gone.size, 'every delete folded in');
    assert.equal(rows.filter((x) => x.content !== null && x.content.startsWith('e')).length,
      edited.filter((i) => !gone.has(ids[i])).length, 'every edit folded in');
    // and the reads did not change
    assert.deepEqual(await readAll(s), want);
    const st = (await s.req('GET', `/v1/users/${U}/stats`)).json;
    assert.deepEqual([st.total_messages, st.cold_messages], [N - gone.size, N - gone.size]);
  });
});
