// SPDX-License-Identifier: MIT
// SPEC §1 over real sockets: counters, distinct counters, sequences, Idempotency-Key,
// pipelining and keep-alive, restart persistence, healthz and metrics.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parseResponses, raw, startStrata } from './lib.mjs';

describe('counters and sequences', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('incr defaults to 1, takes by (also negative), GET reads it', async () => {
    let r = await s.req('POST', '/v1/counters/views/incr');
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { name: 'views', value: 1 });
    r = await s.req('POST', '/v1/counters/views/incr', { by: 41 });
    assert.deepEqual(r.json, { name: 'views', value: 42 });
    r = await s.req('POST', '/v1/counters/views/incr', { by: -50 });
    assert.deepEqual(r.json, { name: 'views', value: -8 });
    r = await s.req('GET', '/v1/counters/views');
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { name: 'views', value: -8 });
    assert.match(r.headers['content-type'], /application\/json/);
  });

  test('a never-written counter is 404 with the error shape', async () => {
    const r = await s.req('GET', '/v1/counters/never');
    assert.equal(r.status, 404);
    assert.equal(r.json.error.code, 'not_found');
    assert.equal(typeof r.json.error.message, 'string');
  });

  test('distinct counts each member once', async () => {
    const a = await s.req('POST', '/v1/counters/participants/distinct', { member: 'alice' });
    assert.deepEqual(a.json, { name: 'participants', value: 1, added: true });
    const again = await s.req('POST', '/v1/counters/participants/distinct', { member: 'alice' });
    assert.deepEqual(again.json, { name: 'participants', value: 1, added: false });
    const b = await s.req('POST', '/v1/counters/participants/distinct', { member: 'bob' });
    assert.deepEqual(b.json, { name: 'participants', value: 2, added: true });
    const g = await s.req('GET', '/v1/counters/participants');
    assert.deepEqual(g.json, { name: 'participants', value: 2 });
    // concurrent adds of one member count it once
    const rs = await Promise.all(Array.from({ length: 20 }, () =>
      s.req('POST', '/v1/counters/participants/distinct', { member: 'carol' })));
    assert.equal(rs.filter((r) => r.json.added).length, 1);
    assert.equal((await s.req('GET', '/v1/counters/participants')).json.value, 3);
    // kinds do not mix
    assert.equal((await s.req('POST', '/v1/counters/participants/incr')).status, 409);
    assert.equal((await s.req('POST', '/v1/counters/views/distinct', { member: 'x' })).status, 409);
  });

  test('sequences start at 1, take count, never overlap under concurrency', async () => {
    let r = await s.req('GET', '/v1/sequences/orders');
    assert.deepEqual(r.json, { name: 'orders', last: 0 });
    r = await s.req('POST', '/v1/sequences/orders/next');
    assert.deepEqual(r.json, { name: 'orders', first: 1, last: 1 });
    r = await s.req('POST', '/v1/sequences/orders/next', { count: 10 });
    assert.deepEqual(r.json, { name: 'orders', first: 2, last: 11 });
    const rs = await Promise.all(Array.from({ length: 200 }, (_, i) =>
      s.req('POST', '/v1/sequences/orders/next', { count: 1 + (i % 5) })));
    const taken = new Set();
    for (const x of rs) {
      assert.equal(x.status, 200);
      for (let n = x.json.first; n <= x.json.last; n++) {
        assert.ok(!taken.has(n), `number ${n} issued twice`);
        taken.add(n);
      }
    }
    const total = rs.reduce((a, x) => a + x.json.last - x.json.first + 1, 0);
    assert.equal(Math.max(...taken), 11 + total); // gapless
    r = await s.req('GET', '/v1/sequences/orders');
    assert.equal(r.json.last, 11 + total);
    for (const count of [0, 10001, -1, 1.5, '3', null]) {
      const bad = await s.req('POST', '/v1/sequences/orders/next', { count });
      if (count === null) { assert.equal(bad.status, 200); continue; }
      assert.equal(bad.status, 400, `count ${JSON.stringify(count)}`);
      assert.equal(bad.json.error.code, 'invalid_argument');
    }
  });

  test('Idempotency-Key: a retry returns the first response and changes nothing', async () => {
    const h = { 'idempotency-key': 'pay-123' };
    const first = await s.req('POST', '/v1/counters/idem/incr', { by: 5 }, h);
    assert.deepEqual(first.json, { name: 'idem', value: 5 });
    const retry = await s.req('POST', '/v1/counters/idem/incr', { by: 5 }, h);
    assert.equal(retry.status, 200);
    assert.deepEqual(retry.json, first.json);
    assert.equal((await s.req('GET', '/v1/counters/idem')).json.value, 5);
    // concurrent retries of one new key apply once
    const k = { 'idempotency-key': 'seq-abc' };
    const rs = await Promise.all(Array.from({ length: 10 }, () =>
      s.req('POST', '/v1/sequences/idem/next', { count: 3 }, k)));
    for (const x of rs) assert.deepEqual(x.json, rs[0].json);
    assert.equal((await s.req('GET', '/v1/sequences/idem')).json.last, 3);
    // another path is another scope
    const other = await s.req('POST', '/v1/counters/idem2/incr', { by: 1 }, h);
    assert.deepEqual(other.json, { name: 'idem2', value: 1 });
    const bad = await s.req('POST', '/v1/counters/idem/incr', {}, { 'idempotency-key': 'x'.repeat(300) });
    assert.equal(bad.status, 400);
  });

  test('pipelined requests are answered in order on one connection', async () => {
    let bytes = '';
    for (let i = 0; i < 16; i++) {
      bytes += 'POST /v1/counters/pipe/incr HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{"by":1}';
      bytes += 'GET /v1/counters/pipe HTTP/1.1\r\nHost: x\r\n\r\n';
    }
    const out = parseResponses(await raw(s.port, bytes, { idleMs: 500 }));
    assert.equal(out.length, 32);
    for (let i = 0; i < 16; i++) {
      assert.equal(out[2 * i].json.value, i + 1);
      assert.equal(out[2 * i + 1].json.value, i + 1); // a read after a write sees it
    }
  });

  test('HEAD answers like GET without a body, also pipelined', async () => {
    const h = await s.req('HEAD', '/healthz');
    assert.equal(h.status, 200);
    assert.equal(h.text, '');
    assert.ok(Number(h.headers['content-length']) > 0);
    const bytes = await raw(s.port, 'HEAD /v1/counters/views HTTP/1.1\r\n\r\nGET /v1/counters/views HTTP/1.1\r\n\r\n', { idleMs: 400 });
    const [head, get] = bytes.split(/(?=HTTP\/1\.1 )/);
    assert.match(head, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n$/);
    assert.match(get, /"name":"views"/);
    assert.equal((await s.req('DELETE', '/healthz')).headers.allow, 'GET, HEAD');
  });

  test('healthz and Prometheus metrics', async () => {
    const h = await s.req('GET', '/healthz');
    assert.equal(h.status, 200);
    assert.equal(h.json.status, 'ok');
    const m = await s.req('GET', '/metrics');
    assert.equal(m.status, 200);
    assert.match(m.headers['content-type'], /text\/plain/);
    assert.match(m.text, /strata_http_requests_total\{route="POST \/v1\/counters\/\{name\}\/incr",status="200"\} \d+/);
    assert.match(m.text, /strata_http_request_seconds_bucket\{route="GET \/v1\/counters\/\{name\}",le="\+Inf"\} \d+/);
    assert.match(m.text, /strata_commit_batch_ops_count \d+/);
    assert.match(m.text, /strata_commit_seconds_bucket/);
    assert.match(m.text, /strata_hot_bytes \d+/);
    assert.match(m.text, /strata_http_connections \d+/);
  });
});

describe('persistence', () => {
  test('values survive a graceful restart and the data dir is reused', async () => {
    let s = await startStrata();
    await s.req('POST', '/v1/counters/p/incr', { by: 7 });
    await s.req('POST', '/v1/sequences/p/next', { count: 5 });
    await s.req('POST', '/v1/counters/pd/distinct', { member: 'm1' });
    const ex = await s.stop();
    assert.equal(ex.code, 0, s.log());
    assert.match(s.log(), /stopped cleanly/);
    assert.doesNotMatch(s.log(), /did not finish in time/);
    s = await startStrata({ dataDir: s.dir });
    assert.equal((await s.req('GET', '/v1/counters/p')).json.value, 7);
    assert.deepEqual((await s.req('POST', '/v1/sequences/p/next')).json, { name: 'p', first: 6, last: 6 });
    assert.equal((await s.req('POST', '/v1/counters/pd/distinct', { member: 'm1' })).json.added, false);
    await s.stop();
    s.cleanup();
  });
});
