// SPDX-License-Identifier: MIT
// SPEC §8: a member that lost its disk catches up even when the leader no longer has the log
// from the start (Raft snapshots every 32 entries here). It gets a copy of the store streamed from
// the leader (never through either loop), applies the entries that arrived meanwhile on top, and
// ends with the same state as the others; writes go on throughout.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { allMessages, call, converge, Group } from './cluster-lib.mjs';
import { sleep, startStrata } from './lib.mjs';

describe('snapshot install', () => {
  const g = new Group(3, ['--raft-snapshot-entries', '32']);
  after(async () => { g.kill(); await sleep(100); g.cleanup(); });

  test('a member with an empty data dir behind the snapshot copies the store and catches up', async () => {
    await g.init();
    const leader = await g.leader();
    let acked = 0;
    const write = async (i) => {
      const r = await g.req('POST', '/v1/counters/snap/incr', {});
      if (r.status === 200) acked++;
      const m = await g.req('POST', '/v1/users/su/messages', { conversation_id: 'c', from: 'x', content: `m${i}` });
      assert.equal(m.status, 201);
    };
    for (let i = 0; i < 150; i++) await write(i); // one entry each: several snapshots, log trimmed
    const victim = g.live().find((id) => id !== leader);
    await g.members.get(victim).kill9();
    g.members.delete(victim);
    for (let i = 150; i < 250; i++) await write(i);
    rmSync(g.conf[victim].dir, { recursive: true, force: true });
    const back = await g.start(victim);
    // writes while it installs the copy
    let i = 250;
    for (const until = Date.now() + 1500; Date.now() < until; i++) await write(i);
    await converge(g);
    assert.match(back.log(), /store installed from a copy/);
    assert.equal(acked, i);
    const l = await g.leader();
    const value = (await call(g.port(l), 'GET', '/v1/counters/snap')).json.value;
    assert.equal(value, i);

    // the victim's store, opened alone, equals the leader's
    await g.stopAll();
    const views = [];
    for (const id of [l, victim]) {
      const s = await startStrata({ dataDir: g.conf[id].dir });
      views.push({
        counter: (await call(s.port, 'GET', '/v1/counters/snap')).json,
        msgs: (await allMessages(s.port, 'su')).map((m) => [m.msg_id, m.seq]),
      });
      await s.stop();
    }
    assert.equal(views[0].msgs.length, i);
    assert.deepEqual(views[1], views[0]);
  });
});
