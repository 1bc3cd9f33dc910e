// SPDX-License-Identifier: MIT
// A replicated group's cold tier is one store every member reads (SPEC §8): a member refuses to
// start on a cold store only it can see (the embedded default inside its data dir); members that
// do not share one store say so (/healthz 503 cold_not_shared), flush nothing and delete nothing
// until they do; with one shared store, what the leader flushed reads back on the next leader
// after a kill -9. And every member knows every member's advertised URL within seconds.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { Group, allMessages, call, freePort } from './cluster-lib.mjs';
import { runStrata, sleep, tempDir } from './lib.mjs';

// Every object under dir (relative paths), markers left out.
function objects(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && !path.relative(dir, path.join(e.path ?? e.parentPath, e.name)).startsWith('.strata'))
    .map((e) => e.name);
}

describe('a group and its cold store', () => {
  const groups = [];
  after(() => { for (const g of groups) { g.kill(); g.cleanup(); } });

  test('a member refuses to start on the default cold store inside its own data dir', async () => {
    const dir = tempDir('cluster-default');
    const spec = `1=127.0.0.1:${await freePort()},2=127.0.0.1:${await freePort()},3=127.0.0.1:${await freePort()}`;
    try {
      // a start that fails: exit 1 (a refused start, not a usage error's 2, nor a crash), no
      // sanitizer report (runStrata checks both; a start that serves is ended by the timeout and
      // fails), and it says why, naming the store it refused
      const start = (...more) => {
        const r = runStrata(['--listen', '127.0.0.1:0', '--data-dir', dir, '--cluster', spec, '--cluster-self', '1', ...more],
          { expect: 1, timeout: 20000 });
        return `${r.stdout}${r.stderr}`;
      };
      let out = start();
      assert.ok(out.includes(`one cold store that every member reads, and file://${dir}/cold is inside this member's data dir`), out);
      assert.match(out, /--cold-url/, out);
      // the same for an explicit file:// URL inside the data dir
      out = start('--cold-url', `file://${dir}/mine`);
      assert.ok(out.includes(`one cold store that every member reads, and file://${dir}/mine is inside this member's data dir`), out);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('every member knows every member\'s advertised URL within seconds', async () => {
    const g = new Group(3);
    groups.push(g);
    await g.init();
    await g.leader();
    for (const id of [1, 2, 3]) {
      const st = await waitFor(`member ${id} to know every URL`, async () => {
        const s = await g.status(id);
        return s && s.members.every((m) => m.http) ? s : null;
      }, 30000);
      for (const m of st.members) assert.equal(m.http, `http://127.0.0.1:${g.port(m.id)}`, `member ${id} on ${m.id}`);
    }
    for (const id of [1, 2, 3]) { // and, a check later, that they share one cold store
      await waitFor(`member ${id} to be healthy`, async () => (await call(g.port(id), 'GET', '/healthz')).status === 200, 30000);
    }
    await g.stopAll();
  });

  test('a member restarted on the shared store is healthy again and flushes go on (its marker is rewritten)', async () => {
    const g = new Group(3, ['--flush-interval', '3600']);
    groups.push(g);
    await g.init();
    for (const id of [1, 2, 3]) {
      await waitFor(`member ${id} to be healthy`, async () => (await call(g.port(id), 'GET', '/healthz')).status === 200);
    }
    for (const id of [2, 3]) { // each restarts on the same data dir and store: a new nonce
      await g.members.get(id).stop();
      g.members.delete(id);
      await g.start(id);
    }
    for (const id of [1, 2, 3]) {
      await waitFor(`member ${id} to be healthy after the restarts`, async () => (await call(g.port(id), 'GET', '/healthz')).status === 200);
    }
    for (let i = 0; i < 5; i++) {
      assert.equal((await g.req('POST', '/v1/users/r/messages', { conversation_id: 'c', from: 'r', content: `m${i}` })).status, 201);
    }
    await waitFor('the flush', async () => {
      await g.req('POST', '/v1/admin/flush', {});
      return (await g.req('GET', '/v1/users/r/stats')).json.cold_messages === 5;
    });
    await g.stopAll();
  });

  test('members on different stores hold flushes and say cold_not_shared; one shared store survives a leader kill', async () => {
    const g = new Group(3, ['--flush-interval', '3600']);
    groups.push(g);
    const other = tempDir('cluster-other-cold');
    await g.init();
    // member 3 restarts on a store of its own (outside its data dir, so it may start)
    g.members.get(3).proc.kill('SIGKILL');
    await g.members.get(3).exited;
    g.members.delete(3);
    await g.start(3, { cold: `file://${other}` });
    for (const id of [1, 2, 3]) {
      await waitFor(`member ${id} to report cold_not_shared`, async () => {
        const h = await call(g.port(id), 'GET', '/healthz');
        return h.status === 503 && h.json.reasons.includes('cold_not_shared');
      });
    }
    for (let i = 0; i < 20; i++) {
      const r = await g.req('POST', '/v1/users/u/messages', { conversation_id: 'c', from: 'u', content: `m${i}` });
      assert.equal(r.status, 201);
    }
    assert.equal((await g.req('POST', '/v1/admin/flush', {})).status, 202);
    await sleep(1500);
    assert.deepEqual(objects(g.cold), [], 'nothing flushed into the shared store');
    assert.deepEqual(objects(other), [], 'nothing flushed into the other store');
    let stats = await g.req('GET', '/v1/users/u/stats');
    assert.equal(stats.json.hot_messages, 20);
    assert.equal(stats.json.cold_messages, 0);

    // member 3 back on the shared store: the group agrees, the flush goes through
    g.members.get(3).proc.kill('SIGKILL');
    await g.members.get(3).exited;
    g.members.delete(3);
    await g.start(3);
    for (const id of [1, 2, 3]) {
      await waitFor(`member ${id} to be healthy`, async () => (await call(g.port(id), 'GET', '/healthz')).status === 200);
    }
    await waitFor('the flush', async () => {
      await g.req('POST', '/v1/admin/flush', {});
      const s = await g.req('GET', '/v1/users/u/stats');
      return s.json.cold_messages === 20 && s.json.hot_messages === 0;
    });
    assert.ok(objects(g.cold).length >= 1, 'an object in the shared store');

    // the leader dies: the next one reads the flushed messages from the shared store
    const l1 = await g.leader();
    g.members.get(l1).proc.kill('SIGKILL');
    await g.members.get(l1).exited;
    g.members.delete(l1);
    const l2 = await g.leader();
    assert.notEqual(l2, l1);
    const msgs = await allMessages(g.port(l2), 'u');
    assert.deepEqual(msgs.map((m) => m.content), Array.from({ length: 20 }, (_, i) => `m${i}`));
    stats = await g.req('GET', '/v1/users/u/stats');
    assert.equal(stats.json.total_messages, 20);
    rmSync(other, { recursive: true, force: true });
    await g.stopAll();
  });
});
