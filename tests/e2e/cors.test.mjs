// SPDX-License-Identifier: MIT
// SPEC §7 browsers: with --cors-origins, a preflight OPTIONS on any /v1 route from an allowed
// Origin is 204 (no auth needed), and every answer to that Origin — errors and replays too —
// carries Access-Control-Allow-Origin (that origin), Vary: Origin and the exposed headers. Other
// origins get no CORS headers, and no stream. Streams take the token from ?access_token=.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { parseResponses, raw, runStrata, startStrata, tempDir, wsConnect } from './lib.mjs';
import { waitFor } from './cold-lib.mjs';

const SECRET = 'cors-test-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64(payload);
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const A = 'http://127.0.0.1:5173';
const B = 'https://app.example.com';
const EVIL = 'http://evil.example';
const alice = () => jwt({ sub: 'alice', exp: Math.floor(Date.now() / 1000) + 300 });

function assertCors(r, origin) {
  assert.equal(r.headers['access-control-allow-origin'], origin);
  assert.match(r.headers.vary || '', /Origin/);
  const exposed = (r.headers['access-control-expose-headers'] || '').toLowerCase();
  for (const h of ['location', 'retry-after', 'idempotent-replayed']) assert.ok(exposed.includes(h), exposed);
}
function assertNoCors(r) {
  for (const k of Object.keys(r.headers)) assert.ok(!k.startsWith('access-control-'), `${k} must not be sent`);
}

describe('CORS on (--cors-origins with two origins, auth on)', () => {
  let s;
  before(async () => {
    s = await startStrata({ args: ['--cors-origins', `${A}, ${B}`], env: { STRATA_JWT_SECRET: SECRET } });
  });
  after(async () => { await s.stop(); s.cleanup(); });

  test('a preflight from an allowed origin is 204 with methods, headers and max-age, and needs no token', async () => {
    for (const path of ['/v1/users/alice/messages', '/v1/counters/c/incr', '/v1/events/e1/bookings', '/v1/no/such/route']) {
      const r = await s.req('OPTIONS', path, undefined, {
        origin: A, 'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type,idempotency-key',
      });
      assert.equal(r.status, 204, path);
      assert.equal(r.text, '');
      assert.equal(r.headers['content-length'], undefined, 'a 204 has no Content-Length');
      assertCors(r, A);
      assert.match(r.headers['access-control-allow-methods'], /POST/);
      assert.match(r.headers['access-control-allow-methods'], /GET/);
      const allowed = r.headers['access-control-allow-headers'].toLowerCase();
      for (const h of ['authorization', 'content-type', 'idempotency-key']) assert.ok(allowed.includes(h), allowed);
      assert.ok(Number(r.headers['access-control-max-age']) > 0);
    }
    // The edit and delete routes (PATCH, DELETE) must pass a browser's preflight too.
    for (const [method, path] of [['PATCH', '/v1/users/alice/messages/1'], ['DELETE', '/v1/users/alice/conversations/c1'],
      ['DELETE', '/v1/users/alice']]) {
      const r = await s.req('OPTIONS', path, undefined, { origin: A, 'access-control-request-method': method });
      assert.equal(r.status, 204, path);
      assert.ok(r.headers['access-control-allow-methods'].split(/,\s*/).includes(method), r.headers['access-control-allow-methods']);
    }
  });

  test('a preflight from another origin gets no CORS headers', async () => {
    const r = await s.req('OPTIONS', '/v1/counters/c/incr', undefined, { origin: EVIL, 'access-control-request-method': 'POST' });
    assert.notEqual(r.status, 204);
    assertNoCors(r);
    const none = await s.req('OPTIONS', '/v1/counters/c/incr');
    assert.notEqual(none.status, 204);
    assertNoCors(none);
  });

  test('answers to an allowed origin carry the CORS headers: success, 401, 403, 404, 405, replay', async () => {
    const hdr = { origin: B, authorization: `Bearer ${alice()}` };
    const post = await s.req('POST', '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: 'hi' },
      { ...hdr, 'idempotency-key': 'k-1' });
    assert.equal(post.status, 201);
    assertCors(post, B);
    const again = await s.req('POST', '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: 'hi' },
      { ...hdr, 'idempotency-key': 'k-1' });
    assert.equal(again.status, 201);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.json.msg_id, post.json.msg_id);
    assertCors(again, B);
    const read = await s.req('GET', '/v1/users/alice/messages?conversation_id=c1', undefined, hdr);
    assert.equal(read.json.messages.length, 1);
    assertCors(read, B);
    const unauth = await s.req('GET', '/v1/counters/c', undefined, { origin: B });
    assert.equal(unauth.status, 401);
    assertCors(unauth, B);
    const forbidden = await s.req('GET', '/v1/users/bob/stats', undefined, hdr);
    assert.equal(forbidden.status, 403);
    assertCors(forbidden, B);
    const missing = await s.req('GET', '/v1/nothing', undefined, hdr);
    assert.equal(missing.status, 404);
    assertCors(missing, B);
    const method = await s.req('GET', '/v1/counters/c/incr', undefined, hdr);
    assert.equal(method.status, 405);
    assertCors(method, B);
    const health = await s.req('GET', '/healthz', undefined, { origin: A });
    assertCors(health, A);
  });

  test('other origins, and requests without Origin, get no CORS headers (but Vary: Origin)', async () => {
    const r = await s.req('GET', '/v1/counters/c', undefined, { origin: EVIL, authorization: `Bearer ${alice()}` });
    assertNoCors(r);
    assert.match(r.headers.vary, /Origin/);
    const plain = await s.req('GET', '/v1/counters/c', undefined, { authorization: `Bearer ${alice()}` });
    assertNoCors(plain);
    // An origin is matched exactly: no prefix, suffix or case games.
    for (const o of [`${A}0`, A.slice(0, -1), 'HTTP://127.0.0.1:5173', `${B}.evil.example`, 'null']) {
      assertNoCors(await s.req('GET', '/healthz', undefined, { origin: o }));
    }
  });

  test('a 413 (body over --max-body) reached a browser without CORS headers, as a network error', async () => {
    // Refused by the parser from its Content-Length, before dispatch: the connection answers.
    const head = (origin) => `POST /v1/users/alice/messages HTTP/1.1\r\nHost: x\r\nOrigin: ${origin}\r\n` +
      `Authorization: Bearer ${alice()}\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\n\r\n`;
    const [r] = parseResponses(await raw(s.port, head(A), { idleMs: 500 }));
    assert.equal(r.status, 413);
    assert.equal(r.json.error.code, 'payload_too_large');
    assertCors(r, A);
    const [e] = parseResponses(await raw(s.port, head(EVIL), { idleMs: 500 }));
    assert.equal(e.status, 413);
    assertNoCors(e);
    assert.match(e.headers.vary, /Origin/);
  });

  test('a 431 (headers over --max-header) after the Origin header carries the CORS headers', async () => {
    const head = (origin) => `GET /v1/counters/c HTTP/1.1\r\nHost: x\r\nOrigin: ${origin}\r\n` +
      `X-Big: ${'a'.repeat(20000)}\r\n\r\n`;
    const [r] = parseResponses(await raw(s.port, head(A), { idleMs: 500 }));
    assert.equal(r.status, 431);
    assert.equal(r.json.error.code, 'headers_too_large');
    assertCors(r, A);
    const [e] = parseResponses(await raw(s.port, head(EVIL), { idleMs: 500 }));
    assert.equal(e.status, 431);
    assertNoCors(e);
    // an Origin value cut off by the limit is not echoed: its first part (the allowed origin
    // itself) arrives alone, the rest of the value overflows the limit later
    const [cut] = parseResponses(await raw(s.port, '', { idleMs: 500,
      writes: [`GET /v1/counters/c HTTP/1.1\r\nHost: x\r\nOrigin: ${A}`, 50, `${'a'.repeat(20000)}\r\n\r\n`] }));
    assert.equal(cut.status, 431);
    assertNoCors(cut);
    // a whole Origin followed by a header whose name overflows: the Origin is known
    const [name] = parseResponses(await raw(s.port, `GET /v1/counters/c HTTP/1.1\r\nHost: x\r\nOrigin: ${A}\r\n` +
      `X-${'a'.repeat(20000)}: v\r\n\r\n`, { idleMs: 500 }));
    assert.equal(name.status, 431);
    assertCors(name, A);
  });

  test('a preflight and the request it announces, pipelined on one connection, are answered in order', async () => {
    const body = '{"by":2}';
    const text = await raw(s.port,
      `OPTIONS /v1/counters/pipe/incr HTTP/1.1\r\nHost: x\r\nOrigin: ${A}\r\nAccess-Control-Request-Method: POST\r\n\r\n` +
      `POST /v1/counters/pipe/incr HTTP/1.1\r\nHost: x\r\nOrigin: ${A}\r\nAuthorization: Bearer ${alice()}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, { idleMs: 500 });
    const [pre, post] = parseResponses(text);
    assert.equal(pre.status, 204);
    assert.equal(pre.headers['access-control-allow-origin'], A);
    assert.equal(post.status, 200);
    assert.deepEqual(post.json, { name: 'pipe', value: 2 });
    assert.equal(post.headers['access-control-allow-origin'], A);
  });

  test('a stream takes its token from ?access_token= and is open to allowed origins only', async () => {
    const ok = await wsConnect(s.port, `/v1/stream?access_token=${alice()}&route=user:alice`, { origin: A });
    assert.equal(ok.status, 101);
    ok.send({ type: 'subscribe', id: 's1', topic: 'messages', user: 'alice', after: '0' });
    const frames = [];
    for (;;) {
      const f = await ok.next();
      frames.push(f.json);
      if (f.json.type === 'replay_done') break;
    }
    assert.equal(frames.filter((f) => f.type === 'message').length, 1);
    ok.close();
    const bad = await wsConnect(s.port, `/v1/stream?access_token=${alice()}`, { origin: EVIL });
    assert.equal(bad.status, 403);
    const m = (await s.req('GET', '/metrics')).text;
    assert.match(m, /strata_http_requests_total\{route="ANY unmatched",status="403"\} [1-9]/, 'counted as the 403 it is');
    const noToken = await wsConnect(s.port, '/v1/stream', { origin: A });
    assert.equal(noToken.status, 401);
    const cli = await wsConnect(s.port, `/v1/stream?access_token=${alice()}`); // no Origin: not a browser
    assert.equal(cli.status, 101);
    cli.close();
  });
});

describe('CORS and cold reads', () => {
  test('a read parked for cold data lost its Origin, so its answer had no CORS headers', async () => {
    const dir = tempDir('corscold');
    const args = ['--cors-origins', A];
    let s = await startStrata({ dataDir: dir, args });
    try {
      for (let i = 0; i < 5; i++) {
        const r = await s.req('POST', '/v1/users/carol/messages', { conversation_id: 'c', from: 'carol', content: `m${i}` });
        assert.equal(r.status, 201, r.text);
      }
      assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
      await waitFor('the flush', async () => (await s.req('GET', '/v1/users/carol/stats')).json.hot_messages === 0);
      await s.stop();
      s = await startStrata({ dataDir: dir, args }); // empty caches: the read waits for the file
      const r = await s.req('GET', '/v1/users/carol/messages?conversation_id=c', undefined, { origin: A });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.messages.length, 5);
      assertCors(r, A);
    } finally {
      await s.stop();
      s.cleanup();
    }
  });
});

describe('CORS with STRATA_CORS_ORIGINS=*', () => {
  let s;
  before(async () => { s = await startStrata({ env: { STRATA_CORS_ORIGINS: '*' } }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('any origin is echoed (not *), and an origin that could split headers is not', async () => {
    const r = await s.req('OPTIONS', '/v1/counters/x/incr', undefined, { origin: EVIL });
    assert.equal(r.status, 204);
    assertCors(r, EVIL);
    const g = await s.req('POST', '/v1/counters/x/incr', {}, { origin: 'http://localhost:3000' });
    assert.equal(g.status, 200);
    assertCors(g, 'http://localhost:3000');
    const text = await raw(s.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nOrigin: http://a b\r\nConnection: close\r\n\r\n', { idleMs: 500 });
    assert.doesNotMatch(text, /access-control/i);
  });
});

describe('CORS off (the default)', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('no CORS headers, no Vary, and a preflight is not answered as one', async () => {
    const r = await s.req('OPTIONS', '/v1/counters/x/incr', undefined, { origin: A, 'access-control-request-method': 'POST' });
    assert.equal(r.status, 405);
    assertNoCors(r);
    const g = await s.req('POST', '/v1/counters/x/incr', {}, { origin: A });
    assert.equal(g.status, 200);
    assertNoCors(g);
    assert.equal(g.headers.vary, undefined);
    const ws = await wsConnect(s.port, '/v1/stream', { origin: EVIL }); // unchanged without CORS
    assert.equal(ws.status, 101);
    ws.close();
  });

  test('--help lists --cors-origins and its environment twin', () => {
    const h = runStrata(['--help']);
    assert.match(h.stdout, /--cors-origins\s+STRATA_CORS_ORIGINS/);
  });
});
