// SPDX-License-Identifier: MIT
// SPEC §2.2, §7, §8: a user's erasure revokes the tokens issued to it before on every member of a
// replicated group. The erasure's time is recorded in the erasure's own batch, so each member
// applies it with the erasure: a follower's stream handshake refuses the old token (401
// token_revoked), a stream a follower serves on it ends (1008 token revoked), and a token issued
// since opens a stream there.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, test } from 'node:test';
import { call, converge, Group } from './cluster-lib.mjs';
import { sleep, wsConnect } from './lib.mjs';

const SECRET = 'cluster-erasure-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64({ exp: Math.floor(Date.now() / 1000) + 3600, ...payload });
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const ADMIN = { authorization: `Bearer ${jwt({ sub: 'ops', role: 'admin' })}` };

// cluster-lib's Group with auth on: its status and leader probes carry an admin token.
class AuthGroup extends Group {
  async status(id, timeoutMs = 1000) {
    const r = await call(this.port(id), 'GET', '/v1/cluster', undefined, timeoutMs, ADMIN);
    return r.status === 200 ? r.json : null;
  }

  async leader(deadlineMs = 30000) {
    for (const until = Date.now() + deadlineMs; Date.now() < until;) {
      for (const id of this.live()) {
        const st = await this.status(id, 500);
        if (st && st.leader === id) {
          const r = await call(this.port(id), 'GET', '/v1/counters/__probe', undefined, 2500, ADMIN);
          if (r.status === 404 || r.status === 200) return id;
        }
      }
      await sleep(50);
    }
    throw new Error('no leader');
  }
}

const g = new AuthGroup(3, ['--jwt-secret', SECRET, '--cluster-secret', 'cluster-erasure-members']);
after(() => {
  g.kill();
  g.cleanup();
});

test("an erasure revokes the user's older tokens on a follower too", { timeout: 120000 }, async () => {
  await g.init();
  const leader = await g.leader();
  const follower = g.live().find((id) => id !== leader);
  const old = jwt({ sub: 'ann', iat: Math.floor(Date.now() / 1000) - 5 });
  const r = await g.req('POST', '/v1/users/ann/messages', { conversation_id: 'c', from: 'ann', content: 'one' },
    { via: leader, headers: { authorization: `Bearer ${old}` } });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  await converge(g);
  // a stream on the follower with the old token, on a counter (not about the user)
  const ws = await wsConnect(g.port(follower), `/v1/stream?access_token=${old}`);
  assert.equal(ws.status, 101);
  ws.send({ type: 'subscribe', id: 'k', topic: 'counter', name: 'likes' });
  assert.equal((await ws.next(15000)).json.type, 'subscribed');
  assert.equal((await ws.next(15000)).json.type, 'counter');
  const er = await g.req('DELETE', '/v1/users/ann', undefined, { via: leader, headers: ADMIN });
  assert.equal(er.status, 202, JSON.stringify(er.json));
  // the follower applies the erasure and its record: the open stream ends, a new one is refused
  let f;
  do f = await ws.next(15000); while (f.op !== 8 && f.op !== -1);
  assert.deepEqual([f.op, f.code, f.reason], [8, 1008, 'token revoked']);
  const again = await wsConnect(g.port(follower), `/v1/stream?access_token=${old}`);
  assert.equal(again.status, 401);
  assert.equal(JSON.parse(again.body).error.code, 'token_revoked');
  // requests through the follower (307 to the leader) are refused the same way
  const p = await g.req('POST', '/v1/users/ann/messages', { conversation_id: 'c', from: 'ann', content: 'x' },
    { via: follower, headers: { authorization: `Bearer ${old}` } });
  assert.deepEqual([p.status, p.json?.error?.code], [401, 'token_revoked']);
  // a token issued since streams on the follower
  const fresh = jwt({ sub: 'ann', iat: Math.ceil(Date.now() / 1000) });
  const ok = await wsConnect(g.port(follower), `/v1/stream?access_token=${fresh}`);
  assert.equal(ok.status, 101);
  ok.close();
  await g.stopAll(); // each member exits 0 with no sanitizer report (lib.mjs)
});
