// SPDX-License-Identifier: MIT
// SPEC §2.2 erasure and §7 auth: a token issued to a user before that user's erasure is refused
// (401 token_revoked) by requests and stream handshakes, from the erasure on and across a restart;
// a token without iat for an erased subject is refused too (it cannot show it was issued after);
// a token issued after the erasure (iat at or after it) works, so the user can come back. The
// user that erased itself polls its own erasure (GET /v1/admin/erasures/{id}) with its own token.
// Regression: once the erasure was done, the old token posted again and re-created the user (seq
// from 1), and the user could not read its own erasure's status (admin only).
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { restore, shipped } from './backup-lib.mjs';
import { sleep, startStrata, tempDir, wsConnect } from './lib.mjs';

const SECRET = 'erasure-auth-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64({ exp: Math.floor(Date.now() / 1000) + 3600, ...payload });
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const hdr = (tok) => ({ authorization: `Bearer ${tok}` });
const nowS = () => Math.floor(Date.now() / 1000);
const ADMIN = jwt({ sub: 'ops', role: 'admin' });
const post = (s, user, tok, content = 'x') =>
  s.req('POST', `/v1/users/${user}/messages`, { conversation_id: 'c', from: user, content }, hdr(tok));

async function until(what, fn, ms = 30000) {
  for (const end = Date.now() + ms; Date.now() < end;) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function assertRevoked(r, what) {
  assert.equal(r.status, 401, `${what}: ${r.text}`);
  assert.deepEqual(Object.keys(r.json), ['error'], what);
  assert.equal(r.json.error.code, 'token_revoked', what);
  assert.match(r.json.error.message, /erasure/, what);
  assert.match(r.headers['www-authenticate'] || '', /Bearer/, what);
}

describe('tokens of an erased user', () => {
  let s;
  before(async () => { s = await startStrata({ env: { STRATA_JWT_SECRET: SECRET } }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('a pre-erasure token is refused once the user is erased (HTTP and stream), across a restart; a token issued since works', async () => {
    const old = jwt({ sub: 'ann', iat: nowS() - 5 });
    const noIat = jwt({ sub: 'ann' });
    assert.equal((await post(s, 'ann', old, 'one')).status, 201);
    assert.equal((await post(s, 'ann', noIat, 'two')).status, 201);
    const er = await s.req('DELETE', '/v1/users/ann', undefined, hdr(old));
    assert.equal(er.status, 202, er.text);
    const id = er.json.erasure_id;
    // at once: refused, not only 404 about the user (the erasure time is recorded in its batch)
    assertRevoked(await post(s, 'ann', old), 'at once');
    // the user polls its own erasure with the token that erased it, until it is done
    const done = await until('the erasure done', async () => {
      const r = await s.req('GET', `/v1/admin/erasures/${id}`, undefined, hdr(old));
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.user, 'ann');
      return r.json.status === 'done' ? r.json : null;
    });
    assert.equal(done.erasure_id, id);
    // done: the old token neither posts (which re-created the user) nor reads nor streams
    assertRevoked(await post(s, 'ann', old, 'back from the dead'), 'post after done');
    assertRevoked(await s.req('GET', '/v1/users/ann/messages', undefined, hdr(old)), 'read after done');
    assertRevoked(await s.req('POST', '/v1/counters/k/incr', {}, hdr(old)), 'any route');
    assertRevoked(await post(s, 'ann', noIat), 'a token without iat');
    assert.match((await post(s, 'ann', noIat)).json.error.message, /iat/);
    for (const tok of [old, noIat]) {
      const ws = await wsConnect(s.port, `/v1/stream?access_token=${tok}`);
      assert.equal(ws.status, 401, 'the stream handshake refuses it');
      assert.equal(JSON.parse(ws.body).error.code, 'token_revoked');
    }
    // the user comes back with a token issued after the erasure: a fresh user (seq 1)
    const fresh = jwt({ sub: 'ann', iat: Math.ceil(Date.now() / 1000) });
    const p = await post(s, 'ann', fresh, 'hello again');
    assert.equal(p.status, 201, p.text);
    assert.equal(p.json.seq, 1);
    const ws = await wsConnect(s.port, `/v1/stream?access_token=${fresh}`);
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 'a', topic: 'messages', user: 'ann', after: '0' });
    const frames = [];
    for (;;) {
      const f = (await ws.next()).json;
      frames.push(f);
      if (f.type === 'replay_done' || f.type === 'error') break;
    }
    assert.deepEqual(frames.filter((f) => f.type === 'message').map((f) => f.message.content), ['hello again']);
    ws.close();
    // durable: after kill -9 the old tokens are still refused, the fresh one still works
    await s.kill9();
    s = await startStrata({ dataDir: s.dir, env: { STRATA_JWT_SECRET: SECRET } });
    assertRevoked(await post(s, 'ann', old), 'after a restart');
    assertRevoked(await post(s, 'ann', noIat), 'without iat, after a restart');
    const ws2 = await wsConnect(s.port, `/v1/stream?access_token=${old}`);
    assert.equal(ws2.status, 401, 'the stream handshake refuses it after a restart');
    assert.equal((await post(s, 'ann', fresh, 'still here')).json.seq, 2);
    // its own erasure is still readable with the old token; an admin reads it too
    assert.equal((await s.req('GET', `/v1/admin/erasures/${id}`, undefined, hdr(old))).json.status, 'done');
    assert.equal((await s.req('GET', `/v1/admin/erasures/${id}`, undefined, hdr(ADMIN))).json.user, 'ann');
  });

  test('as reported: once the erasure is done, the old token does not re-create the user', async () => {
    const old = jwt({ sub: 'eli', iat: nowS() - 60 });
    assert.equal((await post(s, 'eli', old, 'before')).status, 201);
    const id = (await s.req('DELETE', '/v1/users/eli', undefined, hdr(ADMIN))).json.erasure_id;
    await until('the erasure done', async () => (await s.req('GET', `/v1/admin/erasures/${id}`, undefined, hdr(ADMIN))).json.status === 'done');
    assertRevoked(await post(s, 'eli', old, 'after'), 'the post that re-created the user');
    const fresh = jwt({ sub: 'eli', iat: Math.ceil(Date.now() / 1000) });
    const list = await s.req('GET', '/v1/users/eli/messages', undefined, hdr(fresh));
    assert.deepEqual(list.json.messages, [], `nothing re-created: ${list.text}`);
  });

  test("an open stream on a pre-erasure token ends: its subscriptions' error frames, then 1008 token revoked", async () => {
    const old = jwt({ sub: 'fay', iat: nowS() - 5 });
    assert.equal((await post(s, 'fay', old)).status, 201);
    const ws = await wsConnect(s.port, `/v1/stream?access_token=${old}`);
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 'm', topic: 'messages', user: 'fay' });
    ws.send({ type: 'subscribe', id: 'k', topic: 'counter', name: 'fay-likes' });
    const seen = new Set();
    while (seen.size < 2) {
      const f = (await ws.next()).json;
      if (f.type === 'replay_done' || f.type === 'counter') seen.add(f.id);
    }
    // an admin's stream on the same counter stays
    const other = await wsConnect(s.port, `/v1/stream?access_token=${ADMIN}`);
    other.send({ type: 'subscribe', id: 'k', topic: 'counter', name: 'fay-likes' });
    assert.equal((await other.next()).json.type, 'subscribed');
    assert.equal((await other.next()).json.type, 'counter');
    // the counter keeps changing: the stream always has a frame waiting for the next batch
    let busy = true, n = 0;
    const writes = (async () => {
      for (const until = Date.now() + 20000; busy && Date.now() < until;) {
        if ((await s.req('POST', '/v1/counters/fay-likes/incr', {}, hdr(ADMIN))).status === 200) n++;
        await sleep(5);
      }
    })();
    const frames = [];
    let cutAfter;
    try {
      await sleep(200);
      const erasedAt = Date.now();
      assert.equal((await s.req('DELETE', '/v1/users/fay', undefined, hdr(ADMIN))).status, 202);
      for (;;) {
        const f = await ws.next(10000);
        frames.push(f);
        if (f.op === 8 || f.op === -1) break;
      }
      cutAfter = Date.now() - erasedAt;
    } finally {
      busy = false;
      await writes;
    }
    const end = frames.at(-1);
    assert.deepEqual([end.op, end.code, end.reason], [8, 1008, 'token revoked']);
    assert.ok(cutAfter < 5000, `cut ${cutAfter} ms after the erasure, a busy stream too`);
    const shown = frames.slice(0, -1).map((f) => f.json);
    assert.deepEqual(shown.filter((f) => f.type !== 'counter').map((f) => [f.type, f.id, f.code]), [['error', 'm', 'not_found']],
      "the erasure's error frame came out ahead of the close");
    const last = await s.req('POST', '/v1/counters/fay-likes/incr', {}, hdr(ADMIN));
    for (;;) if ((await other.next()).json.value === last.json.value) break; // another principal's stream goes on
    assert.equal(last.json.value, n + 1);
    other.close();
    ws.close();
  });

  test('a user polls only its own erasure', async () => {
    const bo = jwt({ sub: 'bo', iat: nowS() - 5 });
    const cy = jwt({ sub: 'cy', iat: nowS() - 5 });
    assert.equal((await post(s, 'bo', bo)).status, 201);
    assert.equal((await post(s, 'cy', cy)).status, 201);
    const ebo = (await s.req('DELETE', '/v1/users/bo', undefined, hdr(bo))).json.erasure_id;
    const ecy = (await s.req('DELETE', '/v1/users/cy', undefined, hdr(ADMIN))).json.erasure_id;
    // bo (revoked by its erasure) reads its own, pending or done
    const mine = await s.req('GET', `/v1/admin/erasures/${ebo}`, undefined, hdr(bo));
    assert.equal(mine.status, 200, mine.text);
    assert.ok(['pending', 'done'].includes(mine.json.status));
    // but not cy's: its token is refused for everything else
    assertRevoked(await s.req('GET', `/v1/admin/erasures/${ecy}`, undefined, hdr(bo)), "another's erasure");
    // a user that was not erased reads no erasure (403, also for an id that is none)
    const dee = hdr(jwt({ sub: 'dee' }));
    assert.equal((await s.req('GET', `/v1/admin/erasures/${ebo}`, undefined, dee)).status, 403);
    assert.equal((await s.req('GET', '/v1/admin/erasures/7', undefined, dee)).status, 403);
    assert.equal((await s.req('GET', `/v1/admin/erasures/${ecy}`, undefined, hdr(ADMIN))).json.user, 'cy');
    assert.equal((await s.req('GET', '/v1/admin/erasures/7', undefined, hdr(ADMIN))).status, 404);
  });
});

// SPEC §9: a restore to a time before the erasure applies the erasure again (its record ships
// with the backup); the erasure's time for the user comes back with it, so the old token stays
// refused on the restored server.
test('a restore to before the erasure keeps the old token refused', async () => {
  const dir = tempDir('auth-erase-bk');
  const url = `file://${dir}/b`;
  const env = { STRATA_JWT_SECRET: SECRET };
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100'], env });
  try {
    await shipped(s);
    const old = jwt({ sub: 'kit', iat: nowS() - 5 });
    assert.equal((await post(s, 'kit', old, 'kept?')).status, 201);
    await sleep(20);
    const mid = Date.now() * 1000;
    await sleep(20);
    const id = (await s.req('DELETE', '/v1/users/kit', undefined, hdr(ADMIN))).json.erasure_id;
    await until('the erasure done', async () => (await s.req('GET', `/v1/admin/erasures/${id}`, undefined, hdr(ADMIN))).json.status === 'done');
    await shipped(s);
    await s.kill9();
    const res = await restore(path.join(dir, 'mid'), url, ['--to-time', String(mid)]);
    assert.equal(res.code, 0, res.err);
    const m = await startStrata({ dataDir: path.join(dir, 'mid'), env });
    try {
      assertRevoked(await post(m, 'kit', old), 'on the restored server');
      await until('the erasure again', async () => (await m.req('GET', `/v1/admin/erasures/${id}`, undefined, hdr(old))).json?.status === 'done');
      assertRevoked(await post(m, 'kit', old), 'once the erasure is done again');
      const fresh = jwt({ sub: 'kit', iat: Math.ceil(Date.now() / 1000) });
      assert.equal((await post(m, 'kit', fresh, 'back')).status, 201);
    } finally {
      await m.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
