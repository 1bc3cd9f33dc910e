// SPDX-License-Identifier: MIT
// SPEC §6 across a failover (issue 14's leftover): the keys a leader marks for recounting live in
// its memory only, so a drift written just before it dies was never repaired by the next leader.
// The new leader now recounts everything in the background when it starts serving.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { Group } from './cluster-lib.mjs';
import { sleep } from './lib.mjs';

const g = new Group(3, ['--test-hooks', '1', '--reconcile-interval', '3600']);
after(async () => { g.kill(); await sleep(100); g.cleanup(); });

test('a drift marked on a leader that dies is repaired by the next leader', async () => {
  await g.init();
  const first = await g.leader();
  for (const m of ['a', 'b', 'c', 'd'])
    assert.equal((await g.req('POST', '/v1/counters/people/distinct', { member: m })).status, 200);
  for (let i = 0; i < 6; i++)
    assert.equal((await g.req('POST', '/v1/users/u/messages', { conversation_id: 'c', from: 'a', content: `m${i}` })).status, 201);
  assert.equal((await g.req('POST', '/v1/admin/test/drift', { counter: 'people', by: -3 })).status, 200);
  assert.equal((await g.req('POST', '/v1/admin/test/drift', { user: 'u', conversation_id: 'c', by: 4 })).status, 200);
  assert.equal((await g.req('GET', '/v1/counters/people')).json.value, 1, 'the drift is visible');
  // the leader dies with the marks (its hourly recount would not have come for an hour anyway)
  g.members.get(first).proc.kill('SIGKILL');
  g.members.delete(first);
  const next = await g.leader(20000);
  assert.notEqual(next, first);
  await waitFor('the distinct counter repaired', async () => (await g.req('GET', '/v1/counters/people')).json?.value === 4, 10000);
  await waitFor('the conversation repaired', async () => (await g.req('GET', '/v1/users/u/conversations/c')).json?.total_messages === 6, 10000);
  // the next message continues the gapless seq from the true count
  assert.equal((await g.req('POST', '/v1/users/u/messages', { conversation_id: 'c', from: 'a', content: 'next' })).json.seq, 7);
  await g.stopAll(); // the two left stop cleanly (exit 0, no sanitizer report)
});
