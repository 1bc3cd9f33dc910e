// SPDX-License-Identifier: MIT
// SPEC §7 auth: with a JWT secret every /v1 route needs a valid HS256 Bearer token; health and
// metrics stay open; a bad signature, a wrong algorithm, an expired token or garbage is 401.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startStrata } from './lib.mjs';

const SECRET = 'test-secret-please-change';
const b64 = (o) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o)).toString('base64url');
export function jwt(payload, { secret = SECRET, alg = 'HS256', header } = {}) {
  const h = b64(header || { alg, typ: 'JWT' });
  const p = b64(payload);
  const sig = alg === 'none' ? '' : createHmac('sha256', secret).update(`${h}.${p}`).digest('base64url');
  return `${h}.${p}.${sig}`;
}
const now = () => Math.floor(Date.now() / 1000);

describe('auth on', () => {
  let s;
  before(async () => { s = await startStrata({ env: { STRATA_JWT_SECRET: SECRET } }); });
  after(async () => { await s.stop(); s.cleanup(); });
  const incr = (token) => s.req('POST', '/v1/counters/a/incr', {}, token === undefined ? {} : { authorization: `Bearer ${token}` });

  test('start-up does not claim to be open', () => {
    assert.doesNotMatch(s.log(), /auth is OFF/);
  });

  test('a valid token works; health and metrics need none', async () => {
    const r = await incr(jwt({ sub: 'alice', exp: now() + 60 }));
    assert.equal(r.status, 200);
    assert.equal((await s.req('GET', '/healthz')).status, 200);
    assert.equal((await s.req('GET', '/metrics')).status, 200);
    const g = await s.req('GET', '/v1/counters/a', undefined, { authorization: `Bearer ${jwt({ sub: 'bob' })}` });
    assert.equal(g.status, 200);
  });

  test('missing, malformed, forged, wrong-algorithm, expired and not-yet-valid tokens are 401', async () => {
    const cases = {
      missing: undefined,
      empty: '',
      garbage: 'not-a-token',
      twoParts: 'a.b',
      badBase64: 'a$.b$.c$',
      forged: jwt({ sub: 'alice' }, { secret: 'wrong' }),
      algNone: jwt({ sub: 'alice' }, { alg: 'none' }),
      algHS512: jwt({ sub: 'alice' }, { header: { alg: 'HS512' } }),
      algRS256: jwt({ sub: 'alice' }, { header: { alg: 'RS256' } }),
      expired: jwt({ sub: 'alice', exp: now() - 60 }), // past the 30 s leeway
      notYet: jwt({ sub: 'alice', nbf: now() + 600 }),
      noSub: jwt({ exp: now() + 60 }),
      payloadNotObject: jwt('"x"'),
      tampered: jwt({ sub: 'alice' }).replace(/\.([^.]+)\./, (m, p) => `.${b64({ sub: 'mallory' })}.`),
    };
    for (const [name, tok] of Object.entries(cases)) {
      const r = await incr(tok);
      assert.equal(r.status, 401, name);
      assert.equal(r.json.error.code, 'unauthenticated', name);
      assert.match(r.headers['www-authenticate'] || '', /Bearer/, name);
    }
    // nothing was applied by the refused requests
    const g = await s.req('GET', '/v1/counters/a', undefined, { authorization: `Bearer ${jwt({ sub: 'x' })}` });
    assert.equal(g.json.value, 1);
  });

  test('Idempotency-Key is scoped per principal', async () => {
    const a = { authorization: `Bearer ${jwt({ sub: 'alice' })}`, 'idempotency-key': 'same' };
    const b = { authorization: `Bearer ${jwt({ sub: 'bob' })}`, 'idempotency-key': 'same' };
    const r1 = await s.req('POST', '/v1/counters/scoped/incr', {}, a);
    const r2 = await s.req('POST', '/v1/counters/scoped/incr', {}, b);
    const r3 = await s.req('POST', '/v1/counters/scoped/incr', {}, a);
    assert.equal(r1.json.value, 1);
    assert.equal(r2.json.value, 2);
    assert.equal(r3.json.value, 1);
  });

  test('admin routes need role admin', async () => {
    const flush = (t) => s.req('POST', '/v1/admin/flush', {}, t === undefined ? {} : { authorization: `Bearer ${t}` });
    assert.equal((await flush()).status, 401);
    const user = await flush(jwt({ sub: 'alice' }));
    assert.equal(user.status, 403, user.text);
    assert.equal(user.json.error.code, 'forbidden');
    assert.equal((await flush(jwt({ sub: 'ops', role: 'admin' }))).status, 202);
  });
});
