// SPDX-License-Identifier: MIT
// An erasure interrupted by kill -9 while the store's apply thread runs it at SCHED_IDLE (issue
// 48: src/store/yield.c, st_store_apply_background, st__hurry). A user with thousands of hot and
// cold messages is erased while writers post large messages to bystanders, so the redo log's
// halves fill and checkpoints wait for LMDB (they lift the apply thread from SCHED_IDLE); strata
// is killed in the middle. After the restart every acknowledged bystander message is there,
// nothing unacknowledged is shown, the erasure completes and nothing of the user remains: no
// message, no object, no row in any Parquet file.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { duckRows, erasureDone, parquetFiles, waitFor } from './cold-lib.mjs';
import { FLUSH_ON_ASK, parallel, readAll, startStrata, tempDir } from './lib.mjs';

const BYSTANDERS = ['by0', 'by1', 'by2'];
const BIG = 'b'.repeat(60000); // 560 posts fill a half of the 64 MiB redo log

test('kill -9 during an erasure under writers and checkpoints: acknowledged writes kept, the erasure completes after the restart, nothing of the user left', { timeout: 120000 }, async () => {
  const dataDir = tempDir();
  const args = FLUSH_ON_ASK;
  let s = await startStrata({ dataDir, args });
  try {
    await parallel(3000, (i) => s.ok('POST', '/v1/users/victim/messages', { conversation_id: `c${i % 7}`, from: 'victim', content: `victim-secret cold ${i}` }));
    await s.ok('POST', '/v1/admin/flush');
    await waitFor('victim cooled', async () => (await s.ok('GET', '/v1/users/victim/stats')).cold_messages === 3000, 60000);
    await parallel(6000, (i) => s.ok('POST', '/v1/users/victim/messages', { conversation_id: `c${i % 7}`, from: 'victim', content: `victim-secret hot ${i} ${'v'.repeat(200)}` }));

    // writers to bystanders: what is acknowledged, and what was sent (a post cut by the kill may
    // or may not have been written, never shown unless sent)
    const acked = new Map(BYSTANDERS.map((u) => [u, new Set()]));
    const sent = new Map(BYSTANDERS.map((u) => [u, new Set()]));
    let on = true;
    let k = 0;
    const writers = Array.from({ length: 6 }, async () => {
      while (on) {
        const u = BYSTANDERS[k % BYSTANDERS.length];
        const content = `${u} ${k++} ${BIG}`;
        sent.get(u).add(content.slice(0, 40));
        const r = await s.req('POST', `/v1/users/${u}/messages`, { conversation_id: 'side', from: u, content }).catch(() => null);
        if (!r) return; // killed
        assert.equal(r.status, 201, r.text);
        acked.get(u).add(r.json.msg_id);
      }
    });
    const count = () => [...acked.values()].reduce((a, x) => a + x.size, 0);
    await waitFor('writers going', async () => count() >= 200, 30000);
    const del = await s.ok('DELETE', '/v1/users/victim');
    const id = del.erasure_id;
    // in the middle: the writers have filled a half of the redo log since the erasure began
    // (a checkpoint ran under it), then kill -9
    const n0 = count();
    await waitFor('a checkpoint under the erasure', async () => count() >= n0 + 600, 60000);
    const before = (await s.ok('GET', `/v1/admin/erasures/${id}`)).status;
    await s.kill9();
    on = false;
    await Promise.all(writers);
    console.log(`killed with the erasure ${before}, ${count()} bystander posts acknowledged`);

    s = await startStrata({ dataDir, args });
    await erasureDone(s, id);
    for (const u of BYSTANDERS) {
      const got = await readAll(s, u);
      const ids = new Set(got.map((m) => m.msg_id));
      assert.equal(ids.size, got.length, `${u}: no message twice`);
      for (const a of acked.get(u)) assert.ok(ids.has(a), `${u}: acknowledged ${a} lost`);
      for (const m of got) assert.ok(sent.get(u).has(m.content.slice(0, 40)), `${u}: ${m.msg_id} was never sent`);
      const c = await s.ok('GET', `/v1/users/${u}/conversations/side`);
      assert.equal(c.total_messages, got.length, `${u}: the count matches the messages`);
    }
    const mine = await s.req('GET', '/v1/users/victim/messages?limit=1000');
    assert.ok(mine.status === 404 || mine.json.messages.length === 0, mine.text);
    const cold = path.join(dataDir, 'cold');
    assert.equal(existsSync(path.join(cold, 'victim')), false, 'the erased user\'s folder is gone');
    const files = parquetFiles(cold);
    if (files.length) {
      const rows = await duckRows(files);
      assert.equal(rows.filter((r) => r.from === 'victim' || String(r.content).includes('victim-secret')).length, 0);
    }
    // and once more after a clean restart: the erasure stays done
    await s.stop();
    s = await startStrata({ dataDir, args });
    const again = await s.req('GET', '/v1/users/victim/messages?limit=1000');
    assert.ok(again.status === 404 || again.json.messages.length === 0, again.text);
    for (const u of BYSTANDERS) {
      const ids = new Set((await readAll(s, u)).map((m) => m.msg_id));
      for (const a of acked.get(u)) assert.ok(ids.has(a), `${u}: acknowledged ${a} lost after a clean restart`);
    }
  } catch (e) {
    console.error(s.log().slice(-5000));
    throw e;
  } finally {
    if (s.proc.exitCode === null && s.proc.signalCode === null) await s.stop();
    s.cleanup();
  }
});
