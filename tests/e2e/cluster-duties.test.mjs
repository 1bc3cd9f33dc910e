// SPDX-License-Identifier: MIT
// The leader's background duties move with the lead (SPEC §8): after the leader is killed, or
// paused until another member leads, the new leader expires holds on time, flushes to the shared
// cold store and recounts — what it changes replicates like any write.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { Group } from './cluster-lib.mjs';
import { sleep } from './lib.mjs';

const g = new Group(3, ['--flush-interval', '3600']);
after(async () => { g.kill(); await sleep(100); g.cleanup(); });

const event = (id) => ({ event_id: id, hold_seconds: 2, sections: [{ name: 'A', rows: 1, cols: 10, price: 5 }] });

async function duties(tag, nemesis) {
  assert.equal((await g.req('POST', '/v1/events', event(tag))).status, 201);
  const b = await g.req('POST', `/v1/events/${tag}/bookings`, { section: 'A', seats: ['1-1', '1-2'] });
  assert.equal(b.status, 201);
  for (let i = 0; i < 5; i++)
    assert.equal((await g.req('POST', `/v1/users/${tag}/messages`, { conversation_id: 'c', from: 'a', content: `m${i}` })).status, 201);
  const first = await g.leader();
  await nemesis(first);
  const next = await g.leader(20000);
  assert.notEqual(next, first, `${tag}: another member leads`);
  // the hold made under the old leader expires on time under the new one
  await waitFor(`${tag}: the hold expired`, async () =>
    (await g.req('GET', `/v1/events/${tag}/bookings/${b.json.booking_id}`)).json?.status === 'expired', 10000);
  const ev = await g.req('GET', `/v1/events/${tag}`);
  assert.equal(ev.json.event_stats.available, 10);
  assert.equal(ev.json.event_stats.reserved, 0);
  // and it flushes into the shared store
  await waitFor(`${tag}: flushed by the new leader`, async () => {
    await g.req('POST', '/v1/admin/flush', {});
    return (await g.req('GET', `/v1/users/${tag}/stats`)).json?.cold_messages === 5;
  }, 15000);
  return first;
}

test('after a kill -9 of the leader, the next one expires holds and flushes', async () => {
  await g.init();
  const first = await duties('killed', async (id) => {
    g.members.get(id).proc.kill('SIGKILL');
    await g.members.get(id).exited;
    g.members.delete(id);
  });
  await g.start(first);
});

test('while the leader is paused, the next one expires holds and flushes; the old one then follows', async () => {
  let held;
  const paused = await duties('paused', async (id) => {
    held = g.members.get(id);
    held.proc.kill('SIGSTOP');
    g.members.delete(id); // clients do not pick it meanwhile
  });
  held.proc.kill('SIGCONT');
  g.members.set(paused, held);
  // it learns of the new term from the next heartbeat it gets, whenever a loaded machine runs it
  await waitFor('the resumed member to follow', async () => {
    const st = await g.status(paused, 2000);
    return st && st.leader && st.leader !== paused;
  }, 30000);
  await g.stopAll();
});
