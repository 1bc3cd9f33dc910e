// SPDX-License-Identifier: MIT
// Strict requests for query strings (SPEC v4 §7, issue "Trust"): `POST /v1/counters/x/incr?by=100`
// added 1 and `GET /v1/events?limt=1` listed 50 — an unknown query parameter was ignored. Now
// every route takes the parameters it declares (src/http/router.c's table; docs/openapi.yaml says
// the same) and any other is 400 naming it, before anything runs: on every operation of the
// document, the state read back afterwards is unchanged. The declared ones still work, a
// parameter given twice or with a bad escape is 400 naming it too, and the stream upgrade takes
// ?route= and ?access_token= (SPEC §3, §10) and nothing else.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseResponses, raw, sleep, startStrata, wsConnect } from './lib.mjs';

const ROOT = path.resolve('../..');
const doc = JSON.parse(readFileSync(path.join(ROOT, 'docs/openapi.json'), 'utf8'));
const deref = (p) => (p.$ref ? p.$ref.split('/').slice(1).reduce((o, k) => o[k], doc) : p);
const norm = (p) => p.replace(/\{[^}]+\}/g, '{}');

// Every operation of the document with the query parameters it declares.
const ops = Object.entries(doc.paths).flatMap(([template, item]) => Object.entries(item)
  .filter(([m]) => m !== 'parameters')
  .map(([m, op]) => ({
    method: m.toUpperCase(),
    template,
    op,
    query: [...(item.parameters ?? []), ...(op.parameters ?? [])].map(deref)
      .filter((p) => p.in === 'query').map((p) => p.name).sort(),
  })));

// The route table's declarations: {ST_HTTP_X, "pattern", fn, flags, query} and its arrays.
function routerQueries() {
  const src = readFileSync(path.join(ROOT, 'src/http/router.c'), 'utf8');
  const arrays = new Map([...src.matchAll(/const char \*const (\w+)\[\] = \{([^}]*)\}/g)]
    .map((m) => [m[1], [...m[2].matchAll(/"([^"]+)"/g)].map((x) => x[1]).sort()]));
  const table = src.slice(src.indexOf('const st_route_t st_routes[]'));
  return [...table.matchAll(/\{ST_HTTP_(\w+),\s*"([^"]+)",[^{}]*?,\s*(\w+)\}/g)]
    .map((m) => ({ method: m[1], pattern: m[2], query: m[3] === 'NULL' ? [] : arrays.get(m[3]) }));
}

// Valid bodies for the operations that take one (strict.test.mjs checks them against the
// document); here each is sent with ?bye=1, so none should ever apply.
const BODY = {
  incrCounter: { by: 2 },
  addDistinct: { member: 'm9' },
  nextSequence: { count: 3 },
  postMessage: { conversation_id: 'c1', from: 'alice', content: 'hi' },
  editMessage: { content: 'edited' },
  createEvent: { event_id: 'ev2', sections: [{ name: 'A', rows: 2, cols: 2 }] },
  book: { section: 'A', seats: ['2-2'] },
  extendEventBooking: { seconds: 30 },
  changeEventBookingSeats: { add: ['3-3'] },
  adminCompact: { user: 'alice' },
  adminReconcile: { counter: 'dd' },
  adminTestDrift: { counter: 'dd', by: 5 },
  clusterAnnounce: { id: 1, http: 'http://127.0.0.1:1', cold: '' },
  clusterReadIndex: {},
  createRoom: { room_id: 'rm2', members: ['alice'] },
  changeRoomMembers: { add: ['carol'] },
  postRoomMessage: { from: 'alice', content: 'hi' },
  editRoomMessage: { content: 'edited' },
  markRoomRead: { user: 'alice', seq: 2 },
  userRoomsRemote: { room_id: 'far', name: null, joined_at: 1, change: 'added' },
  roomUserErasure: { user: 'bob' },
};

describe('strict query strings', () => {
  let s;
  const ids = {};
  const P = { name: 'dc', user: 'alice', event_id: 'ev', section: 'A', room: 'rm', conversation_id: 'c1', id: '1', namespace: 'strata', table: 'messages' };
  // A path of the document with real ids: each {msg_id} is a message of that path's owner.
  const fill = (t) => t.replace(/\{([^}]+)\}/g, (_, k) => {
    if (k === 'msg_id') return t.startsWith('/v1/rooms/') ? ids.roomMsg : ids.userMsg;
    if (k === 'booking_id') return ids.booking;
    if (k === 'name' && t.endsWith('/distinct')) return 'dd'; // a counter has one kind
    return P[k];
  });
  // What any applied request would change, read back; metrics of the admin routes' background
  // work too (their intervals are an hour here, so only a request moves them).
  const READS = ['/v1/counters/dc', '/v1/counters/dd', '/v1/sequences/dc', '/v1/users/alice/messages',
    '/v1/users/alice/conversations', '/v1/users/alice/conversations/c1', '/v1/users/alice/stats',
    '/v1/users/alice/rooms', '/v1/users/bob/rooms', '/v1/rooms/rm', '/v1/rooms/rm/members',
    '/v1/rooms/rm/messages', '/v1/rooms/rm2', '/v1/events', '/v1/events/ev', '/v1/events/ev2',
    '/v1/events/ev/bookings'];
  const state = async () => {
    const out = {};
    for (const p of [...READS, `/v1/bookings/${ids.booking}`]) {
      const r = await s.req('GET', p);
      out[p] = `${r.status} ${r.text}`;
    }
    const m = (await s.req('GET', '/metrics')).text;
    out.metrics = m.split('\n').filter((l) => /^strata_(flush_total|flush_passes_total|compactions_total|reconcile_runs_total|reconcile_keys_total|reconcile_all_passes_total|reconcile_drift_total)\b/.test(l)).join('\n');
    return out;
  };
  let before0;

  before(async () => {
    s = await startStrata({ args: ['--test-hooks', '1', '--flush-interval', '3600', '--reconcile-interval', '3600'] });
    const ok = async (m, p, b, status = 200) => {
      const r = await s.req(m, p, b);
      assert.equal(r.status, status, `${m} ${p}: ${r.text}`);
      return r.json;
    };
    await ok('POST', '/v1/counters/dc/incr', { by: 1 });
    await ok('POST', '/v1/counters/dd/distinct', { member: 'm1' });
    await ok('POST', '/v1/sequences/dc/next', {});
    ids.userMsg = (await ok('POST', '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: 'one' }, 201)).msg_id;
    await ok('POST', '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: 'two' }, 201);
    await ok('POST', '/v1/rooms', { room_id: 'rm', members: ['alice', 'bob'] }, 201);
    ids.roomMsg = (await ok('POST', '/v1/rooms/rm/messages', { from: 'bob', content: 'hello' }, 201)).msg_id;
    await ok('POST', '/v1/rooms/rm/messages', { from: 'alice', content: 'hi bob' }, 201);
    await ok('POST', '/v1/events', { event_id: 'ev', sections: [{ name: 'A', rows: 3, cols: 3 }] }, 201);
    ids.booking = (await ok('POST', '/v1/events/ev/bookings', { section: 'A', seats: ['1-1'] }, 201)).booking_id;
    before0 = await state();
  });
  after(async () => { if (s) { await s.stop(); s.cleanup(); } });

  test('the route table and the document declare the same query parameters for every route', () => {
    const routes = routerQueries();
    assert.ok(routes.length > 40, `only ${routes.length} routes parsed from router.c`);
    const documented = new Map(ops.map((o) => [`${o.method} ${norm(o.template)}`, o.query]));
    for (const r of routes) {
      const key = `${r.method} ${norm(r.pattern)}`;
      assert.ok(documented.has(key), `${key} is served but not documented`);
      assert.deepEqual(r.query, documented.get(key), `${key}: router.c and docs/openapi.yaml differ`);
    }
  });

  for (const o of ops) {
    test(`${o.op.operationId}: ${o.method} ${o.template}?bye=1 is 400 naming "bye" and changes nothing`, async () => {
      const p = fill(o.template);
      const body = BODY[o.op.operationId];
      // alone, and after the parameters the route does take (those must not hide it)
      const qs = ['bye=1', ...(o.query.length ? [`${o.query.map((n) => `${n}=`).join('&')}&bye=1`] : [])];
      for (const q of qs) {
        const r = await s.req(o.method, `${p}?${q}`, body);
        assert.equal(r.status, 400, `${o.method} ${p}?${q}: ${r.text}`);
        if (o.template.startsWith('/iceberg/')) {
          // the Iceberg catalog answers in Iceberg's error model (SPEC v5 §5.1)
          assert.equal(r.json.error.code, 400);
          assert.equal(r.json.error.type, 'BadRequestException');
        } else {
          assert.equal(r.json.error.code, 'invalid_argument');
          assert.equal(r.json.error.field, 'bye');
        }
        assert.match(r.json.error.message, /^unknown query parameter "bye"/);
        const takes = o.query.length ? [...o.query] : ['none'];
        for (const n of takes) assert.ok(r.json.error.message.includes(n), `${r.json.error.message} should list ${n}`);
      }
      assert.deepEqual(await state(), before0, `${o.method} ${p}?bye=1 changed state`);
    });
  }

  test('a refused admin request started no background work either', async () => {
    await sleep(1500);
    assert.deepEqual(await state(), before0);
  });

  test('the issue\'s examples: ?by=100 on an incr and ?limt=1 on a listing', async () => {
    let r = await s.req('POST', '/v1/counters/x/incr?by=100', {});
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.message, 'unknown query parameter "by" (this route takes none)');
    assert.equal((await s.req('GET', '/v1/counters/x')).status, 404, 'the refused incr counted');
    r = await s.req('GET', '/v1/users/alice/messages?limt=1');
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.field, 'limt');
    assert.match(r.json.error.message, /unknown query parameter "limt" \(this route takes .*limit/);
    r = await s.req('GET', '/v1/users/alice/messages?limit=1');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.messages.length, 1);
    // HEAD is GET without the body: the same answer
    r = await s.req('HEAD', '/v1/events?limt=1');
    assert.equal(r.status, 400);
  });

  test('a refused query is not remembered under an Idempotency-Key', async () => {
    const key = { 'idempotency-key': 'strict-query-400' };
    let r = await s.req('POST', '/v1/counters/iq/incr?by=100', { by: 2 }, key);
    assert.equal(r.status, 400, r.text);
    r = await s.req('POST', '/v1/counters/iq/incr', { by: 2 }, key);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers['idempotent-replayed'], undefined, 'the 400 was remembered');
    assert.equal(r.json.value, 2);
  });

  test('every declared parameter still works, all at once, on its route', async () => {
    const bookingsFirst = (await s.req('GET', '/v1/events/ev/bookings?limit=1')).json;
    assert.equal(bookingsFirst.bookings.length, 1);
    const VALUES = {
      listMessages: 'conversation_id=c1&after=1&before=18446744073709551615&limit=1&order=desc&include_deleted=false&cursor=9223372036854775807',
      listConversations: 'limit=1&cursor=1%3Ac0',
      createRoom: 'route=room:rm3',
      listRoomMembers: 'limit=1&cursor=alice',
      listRoomMessages: 'after=1&before=18446744073709551615&limit=1&order=desc&include_deleted=true&cursor=9223372036854775807',
      roomUserErasure: 'route=room:rm',
      listUserRooms: 'limit=1&cursor=1%3Arm',
      userRoomsRemote: 'route=user:alice',
      openStream: 'route=user:alice&access_token=t',
      createEvent: 'route=event:ev3',
      listEvents: 'limit=1&cursor=a',
      getSeatMap: 'format=json',
      listEventBookings: 'status=reserved&owner=nobody&limit=1&cursor=9223372036854775807',
      adminOutbox: 'limit=1',
      icebergConfig: 'warehouse=w',
      icebergListNamespaces: 'parent=strata&pageToken=&pageSize=10',
      icebergListTables: 'pageToken=&pageSize=10',
      icebergLoadTable: 'snapshots=refs',
    };
    const BODIES = {
      createRoom: { room_id: 'rm3', members: ['alice'] },
      roomUserErasure: { user: 'zed' },
      userRoomsRemote: { room_id: 'far', joined_at: 1, change: 'removed' },
      createEvent: { event_id: 'ev3', sections: [{ name: 'A', rows: 1, cols: 1 }] },
    };
    const withQuery = ops.filter((o) => o.query.length);
    assert.deepEqual(withQuery.map((o) => o.op.operationId).sort(), Object.keys(VALUES).sort(), 'a route with query parameters needs values here');
    for (const o of withQuery) {
      const q = VALUES[o.op.operationId];
      assert.deepEqual(q.split('&').map((kv) => kv.split('=')[0]).sort(), o.query, `${o.op.operationId}: send every parameter it takes`);
      const p = `${fill(o.template)}?${q}`;
      const r = await s.req(o.method, p, BODIES[o.op.operationId]);
      // a plain GET of the stream is 426; the outbox's admin route is 404 without --route-url
      // (both past the query check, which runs before the handler)
      // (and the catalog may not have read the table's first metadata yet: 404 NoSuchTableException)
      const want = { openStream: [426], adminOutbox: [404], icebergLoadTable: [200, 404] }[o.op.operationId];
      if (want) assert.ok(want.includes(r.status), `${o.method} ${p}: ${r.status} ${r.text}`);
      else assert.ok(r.status >= 200 && r.status < 300, `${o.method} ${p}: ${r.status} ${r.text}`);
    }
    // and they do what they say
    let r = await s.req('GET', '/v1/users/alice/messages?conversation_id=c1&order=desc&limit=1');
    assert.equal(r.json.messages.length, 1);
    assert.equal(r.json.messages[0].content, 'two');
    r = await s.req('GET', '/v1/events?limit=1');
    assert.equal(r.json.events.length, 1);
    assert.ok(r.json.next, 'a next page');
    r = await s.req('GET', '/v1/events/ev/sections/A/seats?format=json');
    assert.ok(Array.isArray(r.json.seats), r.text);
  });

  test('a parameter given twice, or with a bad escape or %00, is 400 naming it', async () => {
    const cases = [
      ['/v1/events?limit=1&limit=2', 'limit', /^query parameter "limit" given twice$/],
      ['/v1/events?limit=1&li%6Dit=2', 'limit', /given twice/],
      ['/v1/users/alice/messages?cursor=1&cursor=2', 'cursor', /given twice/],
      ['/v1/events?limit=%zz', 'limit', /query parameter "limit": malformed percent-escape/],
      ['/v1/events?limit=1%', 'limit', /malformed percent-escape/],
      ['/v1/events?li%zzmit=1', 'li%zzmit', /malformed percent-escape or %00 in its name/],
      ['/v1/users/alice/messages?order=desc%00x', 'order', /"order".*%00/],
      ['/v1/events?limit=abc', 'limit', /limit must be 1\.\.1000 \(got "abc"\)/],
      ['/v1/users/alice/messages?order=sideways', 'order', /order must be asc or desc/],
      ['/v1/users/alice/messages?after=x', 'after', /'after' must be an id/],
      ['/v1/events/ev/sections/A/seats?format=xml', 'format', /format must be bitmap or json/],
      ['/v1/rooms/rm/members?limit=0', 'limit', /limit must be/],
      ['/v1/users/alice/conversations?cursor=zz', 'cursor', /bad cursor/],
      ['/healthz?%C3%A9%01=1', '%C3%A9%01', /unknown query parameter "%C3%A9%01"/],
    ];
    for (const [p, field, re] of cases) {
      const r = await s.req('GET', p);
      assert.equal(r.status, 400, `${p}: ${r.text}`);
      assert.equal(r.json.error.field, field, `${p}: ${r.text}`);
      assert.match(r.json.error.message, re, p);
    }
    const r = await s.req('POST', `/v1/events?route=event:${'x'.repeat(400)}`, { event_id: 'ev5', sections: [{ name: 'A', rows: 1, cols: 1 }] });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.field, 'route');
    // spelled with escapes, or with empty pieces, a known parameter is still itself
    for (const p of ['/v1/events?li%6Dit=1', '/v1/events?&limit=1&', '/v1/events?limit=1&&']) {
      const ok = await s.req('GET', p);
      assert.equal(ok.status, 200, `${p}: ${ok.text}`);
      assert.equal(ok.json.events.length, 1, p);
    }
    const long = await s.req('GET', `/v1/events?${'y'.repeat(500)}=1`);
    assert.equal(long.status, 400);
    assert.ok(long.json.error.field.length < 100 && long.json.error.field.endsWith('...'), long.text);
  });

  test('the stream upgrade takes ?route= and ?access_token= and refuses anything else', async () => {
    const ws = await wsConnect(s.port, '/v1/stream?route=counter:dc&access_token=unused');
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 'c', topic: 'counter', name: 'dc' });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'c' });
    ws.sock.destroy();
    for (const [q, field] of [['route=counter:dc&bye=1', 'bye'], ['bye', 'bye'], ['route=a&route=b', 'route'], ['route=%zz', 'route']]) {
      const out = parseResponses(await raw(s.port, `GET /v1/stream?${q} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`));
      assert.equal(out.length, 1, q);
      assert.equal(out[0].status, 400, `${q}: ${out[0].body}`);
      const e = JSON.parse(out[0].body).error;
      assert.equal(e.code, 'invalid_argument');
      assert.equal(e.field, field, q);
    }
    // without the upgrade it is the same route: 400 before the 426
    const r = await s.req('GET', '/v1/stream?route=user:alice&bye=1');
    assert.equal(r.status, 400, r.text);
  });
});

describe('strict query strings with auth on', () => {
  let s;
  const SECRET = 'strict-query-secret';
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const jwt = async (claims) => {
    const { createHmac } = await import('node:crypto');
    const h = b64({ alg: 'HS256', typ: 'JWT' });
    const p = b64({ exp: Math.floor(Date.now() / 1000) + 600, ...claims });
    return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
  };
  before(async () => { s = await startStrata({ args: ['--jwt-secret', SECRET] }); });
  after(async () => { if (s) { await s.stop(); s.cleanup(); } });

  test('?access_token= carries a stream\'s token; another parameter is 400 once the token is good, 401 before', async () => {
    const t = await jwt({ sub: 'alice' });
    const ws = await wsConnect(s.port, `/v1/stream?access_token=${t}&route=user:alice`);
    assert.equal(ws.status, 101);
    ws.sock.destroy();
    const up = (q) => raw(s.port, `GET /v1/stream?${q} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`).then(parseResponses);
    let out = await up(`access_token=${t}&route=user:alice&bye=1`);
    assert.equal(out[0].status, 400, out[0].body);
    assert.equal(JSON.parse(out[0].body).error.field, 'bye');
    out = await up('route=user:alice&bye=1');
    assert.equal(out[0].status, 401, out[0].body);
    // a client's route: the same order (auth, then the query)
    const auth = { authorization: `Bearer ${t}` };
    let r = await s.req('POST', '/v1/counters/a/incr?by=5', {}, auth);
    assert.equal(r.status, 400, r.text);
    r = await s.req('GET', '/v1/counters/a', undefined, auth);
    assert.equal(r.status, 404, 'the refused incr counted');
    r = await s.req('POST', '/v1/counters/a/incr?by=5', {});
    assert.equal(r.status, 401, r.text);
  });
});
