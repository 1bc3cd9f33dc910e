// SPDX-License-Identifier: MIT
// Retry-After on the 503s that pass by themselves (SPEC §0, §8): too many connections, and a
// deposed leader's pending writes (the no_leader answer of a follower is in cluster.test.mjs;
// a reservation the backup target cannot take yet in backup-edges.test.mjs).
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { parseResponses, raw, startStrata } from './lib.mjs';
import { call, Group } from './cluster-lib.mjs';

test('a 503 for too many connections carries Retry-After', async () => {
  const s = await startStrata({ args: ['--max-connections', '1'] });
  const first = net.connect(s.port, '127.0.0.1');
  try {
    await new Promise((r) => first.on('connect', r));
    // the server has accepted it once it answered on it (a fixed 100 ms may be too short on a
    // loaded machine: the next connection would then be taken first)
    first.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((r) => first.once('data', r));
    const [res] = parseResponses(await raw(s.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
    assert.equal(res.status, 503, JSON.stringify(res));
    assert.equal(res.headers['retry-after'], '1');
  } finally {
    first.destroy();
    await s.stop();
    s.cleanup();
  }
});

test('a write pending on a leader that loses its majority gets 503 no_leader with Retry-After', async () => {
  const g = new Group(3);
  try {
    await g.init();
    const l = await g.leader();
    assert.equal((await g.req('POST', '/v1/counters/k/incr', { by: 1 }, { via: l })).status, 200);
    const followers = g.live().filter((id) => id !== l);
    for (const id of followers) g.members.get(id).proc.kill('SIGSTOP');
    const r = await call(g.port(l), 'POST', '/v1/counters/k/incr', { by: 1 }, 15000);
    for (const id of followers) g.members.get(id).proc.kill('SIGCONT');
    assert.equal(r.status, 503, JSON.stringify(r.json));
    assert.equal(r.json.error.code, 'no_leader');
    assert.equal(r.headers['retry-after'], '1');
    await g.stopAll();
  } finally {
    g.kill();
    g.cleanup();
  }
});
