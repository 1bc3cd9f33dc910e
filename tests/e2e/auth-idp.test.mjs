// SPDX-License-Identifier: MIT
// SPEC v4 §7, tokens from identity providers: RS256/384/512, PS256, ES256/384 and EdDSA tokens
// made with node:crypto (OpenSSL underneath) and checked against a JWKS from a file or from a URL
// the test serves (rotation, refresh on an unknown kid, the last good set kept while the URL is
// down); iss, aud, leeway, a roles claim at a dotted path and a subject claim; every refusal as
// its own case (401 + WWW-Authenticate: Bearer); streams with ?access_token=; protected mode;
// --cluster-secret for a group's internal calls.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { constants, createHmac, createPublicKey, generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { freePort } from './cluster-lib.mjs';
import { runStrata, sleep, startStrata, tempDir, wsConnect } from './lib.mjs';

const b64 = (o) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);
const ISS = 'https://idp.example/realms/shop';
const AUD = 'strata';

// A signing key of each kind the spec lists, with its public JWK.
function keyPair(kind, kid, extra = {}) {
  const k = kind === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 })
    : kind === 'p256' ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
      : kind === 'p384' ? generateKeyPairSync('ec', { namedCurve: 'P-384' })
        : generateKeyPairSync('ed25519');
  return { kind, kid, priv: k.privateKey, pub: k.publicKey, jwk: { ...k.publicKey.export({ format: 'jwk' }), kid, use: 'sig', ...extra } };
}

const SIGNERS = {
  RS256: (d, k) => sign('sha256', d, k), RS384: (d, k) => sign('sha384', d, k), RS512: (d, k) => sign('sha512', d, k),
  PS256: (d, k) => sign('sha256', d, { key: k, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }),
  ES256: (d, k) => sign('sha256', d, { key: k, dsaEncoding: 'ieee-p1363' }),
  ES384: (d, k) => sign('sha384', d, { key: k, dsaEncoding: 'ieee-p1363' }),
  EdDSA: (d, k) => sign(null, d, k),
};

// A compact JWS: header {alg, kid (unless kid === null), ...hdr}; signed by key (or by signWith).
function token(alg, key, payload, { kid = key?.kid, hdr = {}, signWith } = {}) {
  const h = b64({ alg, typ: 'JWT', ...(kid === null ? {} : { kid }), ...hdr });
  const p = b64({ iss: ISS, aud: AUD, exp: now() + 300, jti: randomUUID(), ...payload });
  const data = Buffer.from(`${h}.${p}`);
  const sig = signWith ? signWith(data) : alg === 'none' ? Buffer.alloc(0) : SIGNERS[alg](data, key.priv);
  return `${h}.${p}.${Buffer.from(sig).toString('base64url')}`;
}

const bearer = (t) => ({ authorization: `Bearer ${t}` });

function assert401(r, name) {
  assert.equal(r.status, 401, `${name}: ${r.text}`);
  assert.equal(r.json.error.code, 'unauthenticated', name);
  assert.match(r.headers['www-authenticate'] || '', /^Bearer/, name);
}

const rsa = keyPair('rsa', 'rsa-1');
const rsa3 = keyPair('rsa', 'rsa-384', { alg: 'RS384' });
const ps = keyPair('rsa', 'ps-1', { alg: 'PS256' });
const p256 = keyPair('p256', 'ec-1');
const p384 = keyPair('p384', 'ec-384');
const ed = keyPair('ed25519', 'ed-1');
const stranger = keyPair('p256', 'ec-1'); // same kid as p256, another key: a forgery

describe('a JWKS file with issuer, audience and a Keycloak-style roles claim', () => {
  let s;
  before(async () => {
    const dir = tempDir('jwks');
    const file = path.join(dir, 'jwks.json');
    // an encryption key and an HMAC ("oct") key in the set are skipped, not used
    const enc = { ...keyPair('rsa', 'enc-1').jwk, use: 'enc' };
    writeFileSync(file, JSON.stringify({ keys: [rsa.jwk, rsa3.jwk, ps.jwk, p256.jwk, p384.jwk, ed.jwk, enc, { kty: 'oct', kid: 'hs', k: b64('secret') }] }));
    s = await startStrata({ args: ['--jwt-jwks-file', file, '--jwt-issuer', ISS, '--jwt-audience', AUD, '--jwt-roles-claim', 'realm_access.roles'] });
  });
  after(async () => { await s.stop(); s.cleanup(); });
  const incr = (t) => s.req('POST', '/v1/counters/idp/incr', {}, t === undefined ? {} : bearer(t));

  test('start-up names the keys and does not claim to be open', () => {
    assert.match(s.log(), /jwks: 6 key\(s\) from .*jwks\.json/);
    assert.doesNotMatch(s.log(), /auth is OFF/);
  });

  for (const [alg, key] of [['RS256', rsa], ['RS384', rsa3], ['RS512', rsa], ['PS256', ps], ['ES256', p256], ['ES384', p384], ['EdDSA', ed]]) {
    test(`an ${alg} token is accepted`, async () => {
      const r = await incr(token(alg, key, { sub: 'alice' }));
      assert.equal(r.status, 200, r.text);
    });
  }

  test('a token without kid is checked against the keys that fit its algorithm', async () => {
    assert.equal((await incr(token('ES256', p256, { sub: 'alice' }, { kid: null }))).status, 200);
    assert401(await incr(token('ES256', stranger, { sub: 'alice' }, { kid: null })), 'no kid, unknown key');
  });

  test('the same token again (keep-alive) is served from the cache and still scoped', async () => {
    const t = token('ES256', p256, { sub: 'alice' });
    for (let i = 0; i < 20; i++) assert.equal((await incr(t)).status, 200);
    const u = await s.req('GET', '/v1/users/bob/stats', undefined, bearer(t));
    assert.equal(u.status, 403, 'a cached token keeps its subject');
  });

  test('refused: no token', async () => assert401(await incr(undefined), 'missing'));
  test('refused: alg none', async () => {
    assert401(await incr(token('none', p256, { sub: 'alice' })), 'none');
    assert401(await incr(token('none', p256, { sub: 'alice' }, { hdr: { alg: 'NONE' } })), 'NONE');
  });
  test('refused: HMAC key confusion (HS256 "signed" with the public key)', async () => {
    for (const key of [rsa, p256]) {
      const pem = key.pub.export({ format: 'pem', type: 'spki' });
      const t = token('HS256', key, { sub: 'alice' }, { signWith: (d) => createHmac('sha256', pem).update(d).digest() });
      const r = await incr(t);
      assert401(r, `HS256 with ${key.kid}`);
      assert.match(r.json.error.message, /HMAC.*only public keys/);
    }
  });
  test('refused: a kid whose key type does not fit the alg (RSA kid, ES256 token)', async () => {
    const t = token('ES256', p256, { sub: 'alice' }, { kid: rsa.kid });
    const r = await incr(t);
    assert401(r, 'kty');
    assert.match(r.json.error.message, /does not fit/);
  });
  test('refused: a key pinned to PS256 used for RS256', async () => {
    assert401(await incr(token('RS256', ps, { sub: 'alice' })), 'key alg');
  });
  test('refused: an ES384 token naming the P-256 key', async () => {
    assert401(await incr(token('ES384', p384, { sub: 'alice' }, { kid: p256.kid })), 'curve');
  });
  test('refused: a bad signature (another key under a known kid)', async () => {
    const r = await incr(token('ES256', stranger, { sub: 'alice' }));
    assert401(r, 'forged');
    assert.match(r.json.error.message, /bad token signature/);
  });
  test('refused: a tampered payload', async () => {
    const t = token('RS256', rsa, { sub: 'alice' }).split('.');
    t[1] = b64({ iss: ISS, aud: AUD, sub: 'mallory', exp: now() + 300 });
    assert401(await incr(t.join('.')), 'tampered');
  });
  test('refused: an unknown kid', async () => {
    assert401(await incr(token('ES256', p256, { sub: 'alice' }, { kid: 'nope' })), 'unknown kid');
  });
  test('refused: a wrong or missing issuer', async () => {
    assert401(await incr(token('ES256', p256, { sub: 'alice', iss: 'https://evil.example' })), 'wrong iss');
    const r = await incr(token('ES256', p256, { sub: 'alice', iss: undefined }));
    assert401(r, 'no iss');
    assert.match(r.json.error.message, /issuer/);
  });
  test('refused: a wrong or missing audience; an array holding it is accepted', async () => {
    assert401(await incr(token('ES256', p256, { sub: 'alice', aud: 'other-app' })), 'wrong aud');
    assert401(await incr(token('ES256', p256, { sub: 'alice', aud: ['a', 'b'] })), 'aud array without');
    assert401(await incr(token('ES256', p256, { sub: 'alice', aud: undefined })), 'no aud');
    assert.equal((await incr(token('ES256', p256, { sub: 'alice', aud: ['account', AUD] }))).status, 200);
  });
  test('exp and nbf: within the 30 s default leeway accepted, beyond it refused', async () => {
    assert.equal((await incr(token('EdDSA', ed, { sub: 'alice', exp: now() - 10 }))).status, 200);
    assert401(await incr(token('EdDSA', ed, { sub: 'alice', exp: now() - 45 })), 'expired');
    assert.equal((await incr(token('EdDSA', ed, { sub: 'alice', nbf: now() + 10 }))).status, 200);
    assert401(await incr(token('EdDSA', ed, { sub: 'alice', nbf: now() + 60 })), 'not yet valid');
  });
  test('refused: no subject', async () => {
    assert401(await incr(token('ES256', p256, { role: 'x' })), 'no sub');
  });
  test('refused: no exp (an identity provider\'s token that would never expire)', async () => {
    for (const [alg, key] of [['RS256', rsa], ['ES256', p256], ['EdDSA', ed]]) {
      const r = await incr(token(alg, key, { sub: 'alice', exp: undefined }));
      assert401(r, `no exp, ${alg}`);
      assert.match(r.json.error.message, /no expiry \(exp\)/);
    }
  });

  test('roles come from realm_access.roles: admin among them opens admin routes', async () => {
    const admin = token('RS256', rsa, { sub: 'ops', realm_access: { roles: ['offline_access', 'admin'] } });
    assert.equal((await s.req('POST', '/v1/admin/reconcile', {}, bearer(admin))).status < 300, true);
    const plain = token('RS256', rsa, { sub: 'ops', realm_access: { roles: ['user'] } });
    assert.equal((await s.req('POST', '/v1/admin/reconcile', {}, bearer(plain))).status, 403);
    // a top-level "role" is not the configured claim
    const top = token('RS256', rsa, { sub: 'ops', role: 'admin' });
    assert.equal((await s.req('POST', '/v1/admin/reconcile', {}, bearer(top))).status, 403);
  });

  test('streams take the same checks through ?access_token=', async () => {
    const good = await wsConnect(s.port, `/v1/stream?access_token=${token('ES256', p256, { sub: 'alice' })}&route=user:alice`);
    assert.equal(good.status, 101);
    good.close();
    const pem = rsa.pub.export({ format: 'pem', type: 'spki' });
    for (const [name, t] of [['none', token('none', p256, { sub: 'alice' })],
      ['HMAC key confusion', token('HS256', rsa, { sub: 'alice' }, { signWith: (d) => createHmac('sha256', pem).update(d).digest() })],
      ['kid of another kty', token('ES256', p256, { sub: 'alice' }, { kid: rsa.kid })],
      ['key pinned to another alg', token('RS256', ps, { sub: 'alice' })],
      ['unknown kid', token('ES256', p256, { sub: 'alice' }, { kid: 'nope' })],
      ['forged', token('ES256', stranger, { sub: 'alice' })],
      ['wrong iss', token('ES256', p256, { sub: 'alice', iss: 'https://evil.example' })],
      ['wrong aud', token('ES256', p256, { sub: 'alice', aud: 'x' })],
      ['expired', token('ES256', p256, { sub: 'alice', exp: now() - 120 })],
      ['not yet valid', token('ES256', p256, { sub: 'alice', nbf: now() + 120 })],
      ['no exp', token('ES256', p256, { sub: 'alice', exp: undefined })]]) {
      const r = await wsConnect(s.port, `/v1/stream?access_token=${t}&route=user:alice`);
      assert.equal(r.status, 401, name);
      assert.match(r.head, /WWW-Authenticate: Bearer/i, name);
    }
  });
});

describe('a token that expires is not kept alive by the cache', () => {
  test('with --jwt-leeway 0, a cached token stops working at its exp', async () => {
    const dir = tempDir('jwks-exp');
    const file = path.join(dir, 'jwks.json');
    writeFileSync(file, JSON.stringify({ keys: [p256.jwk] }));
    const s = await startStrata({ env: { STRATA_JWT_JWKS_FILE: file, STRATA_JWT_LEEWAY: '0' } });
    try {
      // exp a few seconds ahead (now() + 2 left as little as 1 s for two requests on a loaded
      // machine), then past it by a whole second whatever the time is now
      const exp = now() + 5;
      const t = token('ES256', p256, { sub: 'alice', exp, iss: undefined, aud: undefined });
      assert.equal((await s.req('POST', '/v1/counters/e/incr', {}, bearer(t))).status, 200);
      assert.equal((await s.req('POST', '/v1/counters/e/incr', {}, bearer(t))).status, 200);
      await sleep((exp + 1) * 1000 + 100 - Date.now());
      assert401(await s.req('POST', '/v1/counters/e/incr', {}, bearer(t)), 'expired while cached');
    } finally { await s.stop(); s.cleanup(); }
  });
});

describe('a JWKS URL: rotation, refresh on an unknown kid, the last good set kept', () => {
  const k1 = keyPair('p256', 'k1'), k2 = keyPair('rsa', 'k2'), k3 = keyPair('ed25519', 'k3');
  let keys = [k1.jwk], down = false, hits = 0, idp, s;
  const SECRET = 'hs-secret-alongside';
  before(async () => {
    idp = http.createServer((req, res) => {
      hits++;
      if (down) { res.writeHead(503); res.end('down'); return; }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys }));
    });
    await new Promise((r) => idp.listen(0, '127.0.0.1', r));
    s = await startStrata({ args: ['--jwt-jwks-url', `http://127.0.0.1:${idp.address().port}/certs`, '--jwt-subject-claim', 'uid', '--jwt-secret', SECRET] });
  });
  after(async () => { await s.stop(); s.cleanup(); idp.close(); });
  const get = (t) => s.req('GET', '/v1/users/alice/stats', undefined, bearer(t));
  const until = async (what, fn, ms = 20000) => {
    const end = Date.now() + ms;
    for (;;) {
      if (await fn()) return;
      if (Date.now() > end) throw new Error(`timed out: ${what}`);
      await sleep(200);
    }
  };

  test('the first key set arrives off the loop; the subject comes from --jwt-subject-claim', async () => {
    await until('k1 accepted', async () => (await get(token('ES256', k1, { sub: 'x', uid: 'alice' }))).status === 200);
    // the log comes through a pipe, not in step with the HTTP answers
    await until('the key set logged', async () => /jwks: 1 key\(s\) from http:/.test(s.log()));
    // "sub" is not the subject here
    assert.equal((await s.req('GET', '/v1/users/x/stats', undefined, bearer(token('ES256', k1, { sub: 'x', uid: 'alice' })))).status, 403);
    assert401(await get(token('ES256', k1, { sub: 'alice' })), 'no uid');
  });

  test('HS256 with --jwt-secret keeps working next to the key set', async () => {
    const h = b64({ alg: 'HS256', typ: 'JWT' }), p = b64({ uid: 'alice', exp: now() + 60 });
    const t = `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
    assert.equal((await get(t)).status, 200);
  });

  test('a new kid at the provider is fetched when a token names it', async () => {
    keys = [k1.jwk, k2.jwk];
    const before = hits;
    await until('k2 accepted', async () => (await get(token('RS256', k2, { uid: 'alice' }))).status === 200);
    assert.ok(hits > before, 'the URL was fetched again');
    assert.equal((await get(token('ES256', k1, { uid: 'alice' }))).status, 200, 'k1 still there');
  });

  test('while the URL is down the last good set is kept', async () => {
    down = true;
    const before = hits;
    // k3 is unknown: each such token asks for a refresh (at most every 10 s), which fails
    await until('a failed fetch', async () => {
      assert401(await get(token('EdDSA', k3, { uid: 'alice' })), 'unknown kid');
      return hits > before;
    });
    // the provider answered 503: strata logs it when it has read the answer, whenever that is
    await until('the failure logged', async () => /jwks: fetching .* failed: HTTP status 503; keeping the last good key set/.test(s.log()));
    assert.equal((await get(token('ES256', k1, { uid: 'alice' }))).status, 200, 'k1 (fresh token) kept');
    assert.equal((await get(token('RS256', k2, { uid: 'alice' }))).status, 200, 'k2 (fresh token) kept');
    down = false;
  });
});

describe('an Auth0-style namespaced roles claim, a string or an array; --jwt-leeway 5; HS256 alongside', () => {
  const ROLES = 'https://strata.example/roles'; // dots inside the member's name
  const SECRET = 'hs-secret-for-self-minted-tokens';
  let s;
  before(async () => {
    const file = path.join(tempDir('jwks-auth0'), 'jwks.json');
    writeFileSync(file, JSON.stringify({ keys: [rsa.jwk, p256.jwk] }));
    s = await startStrata({ args: ['--jwt-jwks-file', file, '--jwt-audience', AUD, '--jwt-roles-claim', ROLES, '--jwt-leeway', '5', '--jwt-secret', SECRET] });
  });
  after(async () => { await s.stop(); s.cleanup(); });
  const reconcile = (t) => s.req('POST', '/v1/admin/reconcile', {}, bearer(t));
  const incr = (t) => s.req('POST', '/v1/counters/auth0/incr', {}, bearer(t));
  const hs = (payload) => {
    const h = b64({ alg: 'HS256', typ: 'JWT' }), p = b64(payload);
    return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
  };

  test('admin as a string or among an array at a claim whose name holds dots', async () => {
    assert.ok((await reconcile(token('RS256', rsa, { sub: 'ops', [ROLES]: 'admin' }))).status < 300, 'string');
    assert.ok((await reconcile(token('RS256', rsa, { sub: 'ops', [ROLES]: ['reader', 'admin'] }))).status < 300, 'array');
    assert.equal((await reconcile(token('RS256', rsa, { sub: 'ops', [ROLES]: 'reader' }))).status, 403, 'another string');
    assert.equal((await reconcile(token('RS256', rsa, { sub: 'ops', [ROLES]: ['administrator'] }))).status, 403, 'no exact admin');
    assert.equal((await reconcile(token('RS256', rsa, { sub: 'ops', [ROLES]: { admin: true } }))).status, 403, 'an object');
    assert.equal((await reconcile(token('RS256', rsa, { sub: 'ops', role: 'admin' }))).status, 403, 'top-level role');
  });

  test('--jwt-leeway 5: exp and nbf within 5 s accepted, beyond refused', async () => {
    assert.equal((await incr(token('ES256', p256, { sub: 'alice', exp: now() - 2 }))).status, 200);
    assert401(await incr(token('ES256', p256, { sub: 'alice', exp: now() - 12 })), 'expired 12 s ago');
    assert.equal((await incr(token('ES256', p256, { sub: 'alice', nbf: now() + 2 }))).status, 200);
    assert401(await incr(token('ES256', p256, { sub: 'alice', nbf: now() + 12 })), 'valid in 12 s');
  });

  test('no --jwt-issuer: iss is not checked', async () => {
    assert.equal((await incr(token('ES256', p256, { sub: 'alice', iss: 'https://any.example' }))).status, 200);
    assert.equal((await incr(token('ES256', p256, { sub: 'alice', iss: undefined }))).status, 200);
  });

  test('a public-key token needs exp; a self-minted HS256 token may go without (SPEC §7: a passed exp is refused)', async () => {
    assert401(await incr(token('ES256', p256, { sub: 'alice', exp: undefined })), 'ES256 without exp');
    assert.equal((await incr(hs({ sub: 'alice', aud: AUD }))).status, 200, 'HS256 without exp');
    assert401(await incr(hs({ sub: 'alice', aud: AUD, exp: now() - 60 })), 'HS256 expired');
    assert401(await incr(hs({ sub: 'alice', aud: 'other' })), 'HS256 with another aud');
  });
});

describe('a JWKS URL: periodic refresh; a flood of unknown kids fetches at most every 10 s', () => {
  const k1 = keyPair('p256', 'p1'), k2 = keyPair('ed25519', 'p2');
  let keys = [k1.jwk], idp, s;
  const fetches = [];
  before(async () => {
    idp = http.createServer((req, res) => {
      fetches.push(Date.now());
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys }));
    });
    await new Promise((r) => idp.listen(0, '127.0.0.1', r));
    s = await startStrata({ args: ['--jwt-jwks-url', `http://127.0.0.1:${idp.address().port}/certs`, '--jwt-jwks-refresh', '10'] });
  });
  after(async () => { await s.stop(); s.cleanup(); idp.close(); });
  const get = (t) => s.req('GET', '/v1/users/alice/stats', undefined, bearer(t));

  test('unknown kids right after a fetch fetch nothing; the timer fetches again after 10 s, rotating keys', async () => {
    const end = Date.now() + 10000;
    while ((await get(token('ES256', k1, { sub: 'alice' }))).status !== 200) {
      if (Date.now() > end) throw new Error('the first key set never arrived');
      await sleep(100);
    }
    assert.equal(fetches.length, 1);
    for (let i = 0; i < 40; i++) assert401(await get(token('ES256', k1, { sub: 'alice' }, { kid: `made-up-${i}` })), 'made-up kid');
    await sleep(300);
    assert.equal(fetches.length, 1, 'made-up kids within 10 s of a fetch do not reach the provider');
    keys = [k2.jwk]; // rotation at the provider: k1 retired, k2 new (no token names k2 yet)
    const until = Date.now() + 15000;
    while (fetches.length < 2) {
      if (Date.now() > until) throw new Error('no periodic fetch within 15 s');
      await sleep(100);
    }
    const gap = fetches[1] - fetches[0];
    assert.ok(gap >= 9500 && gap < 14000, `periodic refresh after ${gap} ms`);
    // the provider has answered; strata installs the set when it has read it (k2 is not fetched
    // on demand: the last fetch was just now)
    while ((await get(token('EdDSA', k2, { sub: 'alice' }))).status !== 200) {
      if (Date.now() > until + 15000) throw new Error('the rotated key set was never installed');
      await sleep(100);
    }
    assert401(await get(token('ES256', k1, { sub: 'alice' })), 'retired key');
    assert.equal((await get(token('EdDSA', k2, { sub: 'alice' }))).status, 200, 'new key');
    assert.equal(fetches.length, 2, 'the new key came with the periodic fetch');
  });
});

// The issue asks for tokens from a well-kept library: besides node:crypto above, every algorithm
// signed by the openssl command-line tool, its keys made by `openssl genpkey`.
describe('tokens signed by the openssl command-line tool', () => {
  const dir = tempDir('jwks-openssl');
  const ossl = (...args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'buffer' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  // ECDSA: openssl writes DER (SEQUENCE of INTEGER r, s); JWS wants r || s, each of the curve's size.
  const p1363 = (der, size) => {
    let off = 2 + (der[1] & 0x80 ? der[1] & 0x7f : 0);
    const int = () => {
      assert.equal(der[off], 0x02);
      const len = der[off + 1];
      const v = der.subarray(off + 2, off + 2 + len);
      off += 2 + len;
      const t = v.subarray(Math.max(0, v.length - size));
      return Buffer.concat([Buffer.alloc(size - t.length), t]);
    };
    return Buffer.concat([int(), int()]);
  };
  const ALGS = {
    RS256: ['rsa', ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'], (d) => ossl('dgst', '-sha256', '-sign', 'rsa.pem', d)],
    RS384: ['rsa', null, (d) => ossl('dgst', '-sha384', '-sign', 'rsa.pem', d)],
    RS512: ['rsa', null, (d) => ossl('dgst', '-sha512', '-sign', 'rsa.pem', d)],
    PS256: ['rsa', null, (d) => ossl('dgst', '-sha256', '-sign', 'rsa.pem', '-sigopt', 'rsa_padding_mode:pss', '-sigopt', 'rsa_pss_saltlen:digest', d)],
    ES256: ['p256', ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'], (d) => p1363(ossl('dgst', '-sha256', '-sign', 'p256.pem', d), 32)],
    ES384: ['p384', ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384'], (d) => p1363(ossl('dgst', '-sha384', '-sign', 'p384.pem', d), 48)],
    EdDSA: ['ed', ['-algorithm', 'ED25519'], (d) => ossl('pkeyutl', '-sign', '-rawin', '-inkey', 'ed.pem', '-in', d)],
  };
  let s;
  before(async () => {
    const jwks = [];
    for (const [, [name, gen]] of Object.entries(ALGS)) {
      if (!gen) continue;
      ossl('genpkey', ...gen, '-out', `${name}.pem`);
      const pub = ossl('pkey', '-in', `${name}.pem`, '-pubout');
      jwks.push({ ...createPublicKey(pub).export({ format: 'jwk' }), kid: name, use: 'sig' });
    }
    writeFileSync(path.join(dir, 'jwks.json'), JSON.stringify({ keys: jwks }));
    s = await startStrata({ args: ['--jwt-jwks-file', path.join(dir, 'jwks.json'), '--jwt-issuer', ISS, '--jwt-audience', AUD] });
  });
  after(async () => { await s.stop(); s.cleanup(); });

  for (const [alg, [name, , signer]] of Object.entries(ALGS)) {
    test(`${alg} from openssl is accepted; its signature over other claims is not`, async () => {
      const h = b64({ alg, kid: name, typ: 'JWT' });
      const p = b64({ iss: ISS, aud: AUD, sub: 'alice', exp: now() + 300 });
      const data = path.join(dir, `${alg}.in`);
      writeFileSync(data, `${h}.${p}`);
      const sig = Buffer.from(signer(data)).toString('base64url');
      const r = await s.req('POST', '/v1/counters/ossl/incr', {}, bearer(`${h}.${p}.${sig}`));
      assert.equal(r.status, 200, `${alg}: ${r.text}`);
      const other = b64({ iss: ISS, aud: AUD, sub: 'mallory', exp: now() + 300 });
      assert401(await s.req('POST', '/v1/counters/ossl/incr', {}, bearer(`${h}.${other}.${sig}`)), `${alg} moved`);
    });
  }
});

describe('protected mode', () => {
  // a start that must fail: exit code `expect` and no sanitizer report (lib.mjs's runStrata)
  const run = (args, env = {}, expect = 2) => runStrata(['--data-dir', tempDir('pm'), ...args], { expect, env: { ...process.env, ...env }, timeout: 1500 });

  test('no auth on a non-loopback address: refused at start, naming --insecure', () => {
    const r = run(['--listen', '0.0.0.0:0']);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /protected mode/);
    assert.match(r.stderr, /--insecure \(STRATA_INSECURE=1\)/);
    assert.doesNotMatch(r.stderr, /listening on/);
  });

  for (const [name, args, env] of [['--insecure', ['--listen', '0.0.0.0:0', '--insecure'], {}],
    ['STRATA_INSECURE=1', ['--listen', '0.0.0.0:0'], { STRATA_INSECURE: '1' }],
    ['auth on', ['--listen', '0.0.0.0:0'], { STRATA_JWT_SECRET: 'x'.repeat(32) }]]) {
    test(`starts with ${name}`, async () => {
      const s = await startStrata({ args, env });
      assert.equal((await s.req('GET', '/healthz')).status, 200);
      assert.match(s.log(), /listening on/);
      await s.stop();
      s.cleanup();
    });
  }

  // All of 127/8 is loopback, so protected mode lets 127.0.0.2 through. Some sandboxes give lo
  // only 127.0.0.1 (CI's did): there strata must fail on the bind, never on protected mode.
  test('127.0.0.2 counts as loopback: it starts, or fails only on the bind', async () => {
    const bindable = await new Promise((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => resolve(false));
      srv.listen(0, '127.0.0.2', () => srv.close(() => resolve(true)));
    });
    if (bindable) {
      const s = await startStrata({ args: ['--listen', '127.0.0.2:0'] });
      assert.match(s.log(), /listening on 127\.0\.0\.2:/);
      await s.stop();
      s.cleanup();
    } else {
      const r = run(['--listen', '127.0.0.2:0'], {}, 1);
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /cannot listen on 127\.0\.0\.2:0/);
      assert.doesNotMatch(r.stderr, /protected mode/);
    }
  });
});

describe('--cluster-secret', () => {
  const SECRET = 'client-secret-0123456789';
  const CLUSTER = 'cluster-secret-9876543210';
  const hs = (secret, payload) => {
    const h = b64({ alg: 'HS256', typ: 'JWT' }), p = b64({ exp: now() + 60, ...payload });
    return `${h}.${p}.${createHmac('sha256', secret).update(`${h}.${p}`).digest('base64url')}`;
  };

  test('a group with auth on refuses to start without it, or with the client secret', () => {
    const spec = '1=127.0.0.1:1';
    let r = runStrata(['--data-dir', tempDir('cs'), '--cluster', spec, '--cluster-self', '1', '--jwt-secret', SECRET], { expect: 2, timeout: 1500 });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /needs --cluster-secret/);
    r = runStrata(['--data-dir', tempDir('cs'), '--jwt-secret', SECRET, '--cluster-secret', SECRET], { expect: 2, timeout: 1500 });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /must differ/);
  });

  test('internal routes take only the cluster secret; client routes never take it', async () => {
    const s = await startStrata({ args: ['--jwt-secret', SECRET, '--cluster-secret', CLUSTER] });
    try {
      const clientAdmin = hs(SECRET, { sub: 'ops', role: 'admin' });
      const member = hs(CLUSTER, { sub: 'strata-member', role: 'admin' });
      for (const p of ['/v1/cluster/read-index', '/v1/cluster/announce', '/v1/cluster/snapshot']) {
        assert401(await s.req('POST', p, {}, bearer(clientAdmin)), `client admin on ${p}`);
        assert401(await s.req('POST', p, {}), `no token on ${p}`);
        // past auth: a single node is no member of a group
        assert.equal((await s.req('POST', p, {}, bearer(member))).status, 404, p);
      }
      assert401(await s.req('POST', '/v1/counters/c/incr', {}, bearer(member)), 'member token on a client route');
      assert.equal((await s.req('POST', '/v1/counters/c/incr', {}, bearer(clientAdmin))).status, 200);
    } finally { await s.stop(); s.cleanup(); }
  });
});

describe('a group with auth on signs its internal calls with --cluster-secret', () => {
  const SECRET = 'client-secret-0123456789';
  const hs = (payload) => {
    const h = b64({ alg: 'HS256', typ: 'JWT' }), p = b64({ exp: now() + 60, ...payload });
    return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
  };
  test('members with the secret announce themselves; one with another secret is refused', async () => {
    const conf = [];
    for (let id = 1; id <= 3; id++) conf[id] = { http: await freePort(), raft: await freePort() };
    const spec = [1, 2, 3].map((id) => `${id}=127.0.0.1:${conf[id].raft}`).join(',');
    const cold = tempDir('cs-cold');
    const members = [];
    try {
      const start = async (id) => members.push(await startStrata({
        args: ['--listen', `127.0.0.1:${conf[id].http}`, '--cluster', spec, '--cluster-self', String(id),
          '--cold-url', `file://${cold}`, '--election-timeout', '1000'],
        env: { STRATA_JWT_SECRET: SECRET, STRATA_CLUSTER_SECRET: id === 3 ? 'not-the-groups-secret' : 'the-groups-secret' },
      }));
      await start(1);
      await start(2); // a quorum: one of these two leads, member 3 joins later as a follower
      const admin = bearer(hs({ sub: 'ops', role: 'admin' }));
      let st = null;
      const end = Date.now() + 20000;
      // a member's status, or null while it cannot answer (a connection refused is a member
      // down: its stop() below then reports how it ended)
      const status = (m) => m.req('GET', '/v1/cluster', undefined, admin)
        .then((r) => (r.status === 200 ? r.json : null), () => null);
      for (;;) {
        for (const m of members) {
          const leader = (await status(m))?.leader;
          if (leader && members[leader - 1]) st = (await status(members[leader - 1])) || st;
        }
        const http1 = st?.members?.find((x) => x.id === 1)?.http, http2 = st?.members?.find((x) => x.id === 2)?.http;
        if (http1 && http2) break;
        if (Date.now() > end) throw new Error(`members 1 and 2 never announced: ${JSON.stringify(st)}\n${members.map((m) => m.log()).join('\n---\n')}`);
        await sleep(200);
      }
      await start(3);
      await sleep(3000); // member 3 has had time to announce itself
      const lead = members[st.leader - 1];
      st = (await lead.req('GET', '/v1/cluster', undefined, admin)).json;
      assert.equal(st.members.find((x) => x.id === 3).http, null, 'the wrong secret announced nothing');
      assert.equal((await lead.req('GET', '/v1/cluster')).status, 401, 'GET /v1/cluster needs a token');
    } finally {
      for (const m of members) { await m.stop(); m.cleanup(); }
    }
  });
});

// RFC 7517 §5 (hostile test): a key strata cannot use (a 1024-bit RSA modulus, a point off its
// curve) is skipped with a warning, not the whole set; a set with no usable key is refused.
test('an unusable key in a JWKS is skipped, not the whole set', async () => {
  const dir = tempDir('idp-weak');
  const weak = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' });
  const good = keyPair('p256', 'good');
  const off = { ...keyPair('p256', 'off').jwk, y: good.jwk.x }; // not on the curve
  const file = path.join(dir, 'jwks.json');
  writeFileSync(file, JSON.stringify({ keys: [{ ...weak, kid: 'legacy', use: 'sig' }, off, good.jwk] }));
  const s = await startStrata({ args: ['--jwt-jwks-file', file] });
  try {
    assert.match(s.log(), /jwks: a key \(kid "legacy"\) is skipped: an RSA key's modulus must have 2048/);
    const r = await s.req('POST', '/v1/counters/weak/incr', {}, bearer(token('ES256', good, { sub: 'u' })));
    assert.equal(r.status, 200, r.text);
  } finally {
    await s.stop();
  }
  const only = path.join(dir, 'only.json');
  writeFileSync(only, JSON.stringify({ keys: [{ ...weak, kid: 'legacy', use: 'sig' }] }));
  await assert.rejects(startStrata({ args: ['--jwt-jwks-file', only] }), /modulus must have 2048/);
});
