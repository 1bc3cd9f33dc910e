// SPDX-License-Identifier: MIT
// A restore to a point before a compaction reads its cold data (issue 45, SPEC v5 §5.1 "Snapshot
// expiry", §9): the objects a compaction replaced stay in storage while a kept backup point (or a
// kept Iceberg snapshot) may name them, and /metrics counts them (strata_cold_objects_held).
// Restarting keeps the hold. Before the fix the reaper deleted them at once, and every cold read
// of the restored store answered 503 cold_unavailable.
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { metric, ok, restore, shipped } from './backup-lib.mjs';
import { parquetFiles, waitFor } from './cold-lib.mjs';
import { sleep, startStrata, tempDir } from './lib.mjs';

const filesOf = (d) => (existsSync(d) ? parquetFiles(d) : []);

async function flushes(s, u, n, k) {
  const sent = [];
  for (let f = 0; f < n; f++) {
    for (let i = 0; i < k; i++) {
      const content = `flush ${f} message ${i}`;
      const r = await ok(s, 'POST', `/v1/users/${u}/messages`, { conversation_id: `c${i % 2}`, from: 'a', content }, {}, 201);
      sent.push({ msg_id: r.json.msg_id, content });
    }
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor(`flush ${f}`, async () => (await ok(s, 'GET', `/v1/users/${u}/stats`)).json.hot_messages === 0);
  }
  return sent;
}

test('a restore to a point before a compaction reads every message of the objects it replaced; a restart keeps the hold', async () => {
  const dir = tempDir('rc');
  const cold = `file://${dir}/cold`;
  const url = `file://${dir}/b`;
  const args = ['--cold-url', cold, '--flush-interval', '3600', '--compact-objects', '1000'];
  const udir = path.join(dir, 'cold', 'rita');
  let s = await startStrata({ dataDir: path.join(dir, 'data'), args: [...args, '--backup-url', url, '--backup-interval', '100'] });
  let r;
  try {
    await waitFor('the first snapshot', async () => (await metric(s, 'strata_backup_snapshots_total')) >= 1);
    const sent = await flushes(s, 'rita', 3, 4);
    const before = filesOf(udir);
    assert.equal(before.length, 3, 'three flushes, three objects');
    await shipped(s);
    await sleep(50);
    const point = Date.now() * 1000; // a restore point before the compaction
    await sleep(50);
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'rita' })).status, 202);
    await waitFor('compacted', async () => /^strata_compactions_total\{result="ok"\} [1-9]/m.test((await s.req('GET', '/metrics')).text)
      && filesOf(udir).some((f) => !before.includes(f)));
    await shipped(s);
    await sleep(3000); // several reaper passes (one a second)
    for (const f of before) assert.ok(existsSync(f), `${path.basename(f)}: a kept backup point names it`);
    assert.ok((await metric(s, 'strata_cold_objects_held')) >= 3, 'the held objects are counted');
    // a restart does not lose the hold
    await s.stop();
    s = await startStrata({ dataDir: path.join(dir, 'data'), args: [...args, '--backup-url', url, '--backup-interval', '100'] });
    await sleep(3000);
    for (const f of before) assert.ok(existsSync(f), `${path.basename(f)}: still held after a restart`);
    assert.ok((await metric(s, 'strata_cold_objects_held')) >= 3);
    await s.kill9();

    const res = await restore(path.join(dir, 'restored'), url, ['--to-time', String(point)]);
    assert.equal(res.code, 0, res.err);
    r = await startStrata({ dataDir: path.join(dir, 'restored'), args });
    const got = await r.req('GET', '/v1/users/rita/messages?limit=100');
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.json.messages.map((m) => ({ msg_id: m.msg_id, content: m.content })), sent);
    assert.equal((await ok(r, 'GET', '/v1/users/rita/stats')).json.cold_messages, sent.length);
    const h = await r.req('GET', '/healthz');
    assert.equal(h.status, 200, h.text);
    assert.equal(h.json.status, 'ok', h.text);
  } finally {
    await s.kill9();
    if (r) await r.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('with the default --table-keep and no backup, replaced objects stay in storage; an erasure takes them at once', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--compact-objects', '1000'] });
  const udir = path.join(s.dir, 'cold', 'hal');
  try {
    await flushes(s, 'hal', 3, 2);
    const before = filesOf(udir);
    assert.equal(before.length, 3);
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'hal' })).status, 202);
    await waitFor('compacted', async () => /^strata_compactions_total\{result="ok"\} [1-9]/m.test((await s.req('GET', '/metrics')).text)
      && filesOf(udir).some((f) => !before.includes(f)));
    await sleep(3000); // several reaper passes (one a second)
    for (const f of before) assert.ok(existsSync(f), `${path.basename(f)}: a kept snapshot (--table-keep) may name it`);
    assert.equal(filesOf(udir).length, 4);
    assert.equal(await metric(s, 'strata_cold_objects_held'), 3);
    const r = await s.req('DELETE', '/v1/users/hal');
    assert.equal(r.status, 202, r.text);
    await waitFor('the erasure done', async () => (await s.req('GET', `/v1/admin/erasures/${r.json.erasure_id}`)).json.status === 'done', 60000);
    // the moment it says done, no object of the user is left, held or not
    assert.deepEqual(filesOf(udir), []);
    assert.equal(await metric(s, 'strata_cold_objects_held'), 0);
  } finally {
    await s.stop();
    s.cleanup();
  }
});
