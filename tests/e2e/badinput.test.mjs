// SPDX-License-Identifier: MIT
// Hostile and malformed input: every case gets the SPEC error, and the server keeps serving.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parseResponses, raw, sleep, startStrata } from './lib.mjs';

describe('bad input', () => {
  let s;
  before(async () => {
    s = await startStrata({ args: ['--max-body', '64KiB', '--max-header', '8KiB', '--request-timeout', '2'] });
  });
  after(async () => { await s.stop(); s.cleanup(); });

  const alive = async () => {
    const r = await s.req('POST', '/v1/counters/alive/incr');
    assert.equal(r.status, 200);
  };
  const errOf = async (bytes) => {
    const out = parseResponses(await raw(s.port, bytes, { idleMs: 800 }));
    assert.ok(out.length >= 1, `no response to ${JSON.stringify(bytes.slice(0, 60))}`);
    return out[0];
  };

  test('malformed request lines get 400 and a close', async () => {
    for (const bytes of ['GARBAGE\r\n\r\n', 'GET\r\n\r\n', 'GET / HTTP/9.9\r\n\r\n', '\x00\x01\x02\x03\r\n\r\n',
      'GET /v1/counters/x HTTP/1.1\r\nBad Header\r\n\r\n',
      'POST /v1/counters/x/incr HTTP/1.1\r\nContent-Length: abc\r\n\r\n',
      'POST /v1/counters/x/incr HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
      'POST /v1/counters/x/incr HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n']) {
      const r = await errOf(bytes);
      assert.equal(r.status, 400, JSON.stringify(bytes));
      assert.equal(r.json.error.code, 'invalid_argument');
      assert.equal(r.headers.connection, 'close');
    }
    await alive();
  });

  test('a known method on the wrong route is 405 with Allow; unknown paths 404', async () => {
    let r = await s.req('DELETE', '/v1/counters/x');
    assert.equal(r.status, 405);
    assert.equal(r.json.error.code, 'method_not_allowed');
    assert.equal(r.headers.allow, 'GET, HEAD');
    r = await s.req('PUT', '/v1/counters/x/incr', '{}');
    assert.equal(r.status, 405);
    // Allow names PATCH and DELETE too, never a method the path does not serve (SPEC §2.2 routes)
    for (const [m, p, allow] of [['GET', '/v1/users/u/messages/1', 'PATCH, DELETE'],
      ['POST', '/v1/rooms/r/messages/1', 'PATCH, DELETE'], ['PUT', '/v1/users/u', 'DELETE'],
      ['POST', '/v1/users/u/conversations/c', 'GET, HEAD, DELETE']]) {
      r = await s.req(m, p, m === 'GET' ? undefined : '{}');
      assert.equal(r.status, 405, `${m} ${p}`);
      assert.equal(r.json.error.code, 'method_not_allowed');
      assert.deepEqual(r.headers.allow.split(', ').sort(), allow.split(', ').sort(), `${m} ${p}`);
    }
    r = await s.req('GET', '/v1/nothing/here');
    assert.equal(r.status, 404);
    assert.equal(r.json.error.code, 'not_found');
  });

  test('huge headers get 431, huge bodies 413 (declared or chunked)', async () => {
    let r = await errOf(`GET /v1/counters/x HTTP/1.1\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`);
    assert.equal(r.status, 431);
    assert.equal(r.json.error.code, 'headers_too_large');
    r = await errOf(`GET /${'a'.repeat(10000)} HTTP/1.1\r\n\r\n`);
    assert.equal(r.status, 431);
    let many = 'GET /healthz HTTP/1.1\r\n';
    for (let i = 0; i < 2000; i++) many += `X-H${i}: v\r\n`;
    r = await errOf(many + '\r\n');
    assert.equal(r.status, 431);
    r = await errOf('POST /v1/counters/x/incr HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n');
    assert.equal(r.status, 413);
    assert.equal(r.json.error.code, 'payload_too_large');
    const chunk = 'x'.repeat(40000);
    r = await errOf(`POST /v1/counters/x/incr HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n${(40000).toString(16)}\r\n${chunk}\r\n${(40000).toString(16)}\r\n${chunk}\r\n0\r\n\r\n`);
    assert.equal(r.status, 413);
    // via a client too
    r = await s.req('POST', '/v1/counters/x/incr', 'x'.repeat(70000));
    assert.equal(r.status, 413);
    await alive();
  });

  test('broken and wrongly typed JSON, invalid names', async () => {
    const cases = [
      ['/v1/counters/x/incr', '{"by":', 'invalid_json'],
      ['/v1/counters/x/incr', '{"by":1}}', 'invalid_json'],
      ['/v1/counters/x/incr', 'nul', 'invalid_json'],
      ['/v1/counters/x/incr', '\xff\xfe', 'invalid_json'],
      ['/v1/counters/x/incr', '[1,2]', 'invalid_argument'],
      ['/v1/counters/x/incr', '"by"', 'invalid_argument'],
      ['/v1/counters/x/incr', 'null', 'invalid_argument'],
      ['/v1/counters/x/incr', '{"by":"1"}', 'invalid_argument'],
      ['/v1/counters/x/incr', '{"by":1.5}', 'invalid_argument'],
      ['/v1/counters/x/incr', '{"by":true}', 'invalid_argument'],
      ['/v1/counters/x/incr', '{"by":1e300}', 'invalid_argument'],
      ['/v1/counters/x/incr', '{"by":9007199254740993}', 'invalid_argument'],
      ['/v1/counters/x/incr', '{"by":[1]}', 'invalid_argument'],
      ['/v1/counters/x/distinct', '{}', 'invalid_argument'],
      ['/v1/counters/x/distinct', '{"member":5}', 'invalid_argument'],
      ['/v1/counters/x/distinct', '{"member":""}', 'invalid_argument'],
      ['/v1/counters/x/distinct', '{"member":"a b"}', 'invalid_argument'],
      ['/v1/counters/x/distinct', `{"member":"${'m'.repeat(256)}"}`, 'invalid_argument'],
      ['/v1/sequences/x/next', '{"count":"5"}', 'invalid_argument'],
      ['/v1/counters/x/incr', '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['.repeat(20), 'invalid_json'],
    ];
    for (const [p, body, code] of cases) {
      const r = await s.req('POST', p, body);
      assert.equal(r.status, 400, `${p} ${body.slice(0, 40)}`);
      assert.equal(r.json.error.code, code, `${p} ${body.slice(0, 40)}`);
    }
    for (const name of ['a%20b', 'a%2Fb', '%00', 'x'.repeat(256), '%zz', '%C3%A9', 'a+b']) {
      const r = await s.req('POST', `/v1/counters/${name}/incr`);
      assert.equal(r.status, 400, name);
      assert.equal(r.json.error.code, 'invalid_argument');
    }
    assert.equal((await s.req('GET', `/v1/counters/${'x'.repeat(255)}`)).status, 404);
    // nothing of the above was stored
    assert.equal((await s.req('GET', '/v1/counters/x')).status, 404);
    await alive();
  });

  test('overflowing a counter is refused and leaves it unchanged', async () => {
    await s.req('POST', '/v1/counters/big/incr', { by: 9007199254740991 });
    for (let i = 0; i < 1024; i++) {
      const r = await s.req('POST', '/v1/counters/big/incr', { by: 9007199254740991 });
      if (r.status !== 200) {
        assert.equal(r.status, 400);
        break;
      }
    }
    const v = (await s.req('GET', '/v1/counters/big')).text;
    assert.match(v, /"value":\d+/);
  });

  test('pipelined garbage after good requests: good ones answered, then 400 and close', async () => {
    const bytes = 'GET /healthz HTTP/1.1\r\n\r\nPOST /v1/counters/pg/incr HTTP/1.1\r\nContent-Length: 0\r\n\r\n' +
      'NONSENSE\x01\x02\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n';
    const out = parseResponses(await raw(s.port, bytes, { idleMs: 800 }));
    assert.deepEqual(out.map((r) => r.status), [200, 200, 400]);
    assert.equal(out[1].json.value, 1);
    await alive();
  });

  test('slowloris: a request trickled too slowly is cut off with 408', async () => {
    const writes = ['POST /v1/counters/slow/incr HTTP/1.1\r\n'];
    for (let i = 0; i < 8; i++) writes.push(500, `X-Slow-${i}: y\r\n`);
    const out = parseResponses(await raw(s.port, null, { writes, idleMs: 3000 }));
    assert.equal(out.length, 1);
    assert.equal(out[0].status, 408);
    await alive();
  });

  test('a torrent of random bytes never crashes the server', async () => {
    let seed = 12345;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
    const conns = [];
    for (let c = 0; c < 30; c++) {
      const len = 1 + (rnd() % 4000);
      let b = c % 2 ? 'POST /v1/counters/r/incr HTTP/1.1\r\nContent-Length: 20\r\n\r\n' : '';
      for (let i = 0; i < len; i++) b += String.fromCharCode(rnd() % 256);
      conns.push(raw(s.port, Buffer.from(b, 'latin1'), { idleMs: 300 }));
    }
    await Promise.all(conns);
    await sleep(50);
    await alive();
  });
});
