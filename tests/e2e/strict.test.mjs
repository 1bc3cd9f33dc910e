// SPDX-License-Identifier: MIT
// Strict requests (SPEC v4 §7, issue 37): a body field a route does not know is 400 naming it —
// on every operation of docs/openapi.json that takes a body, driven from the document itself, and
// in nested objects; a body with a Content-Type other than application/json is 415 (and is not
// remembered by Idempotency-Key); every 400 names the field or value at fault.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import { parseResponses, raw, startStrata } from './lib.mjs';

const doc = JSON.parse(readFileSync(path.resolve('../../docs/openapi.json'), 'utf8'));
const DOC_ID = 'https://strata.invalid/openapi.json';
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
ajv.addSchema(doc, DOC_ID);

// A valid body for every operation that takes one (a new one must be added here).
const VALID = {
  incrCounter: { by: 2 },
  addDistinct: { member: 'm1' },
  nextSequence: { count: 3 },
  postMessage: { conversation_id: 'c1', from: 'alice', content: 'hi', metadata: { lang: 'en' } },
  editMessage: { content: 'hi again', metadata: { lang: 'fr' } },
  createEvent: { event_id: 'ev2', name: 'E', hold_seconds: 60, sections: [{ name: 'A', rows: 3, cols: 3, price: 5 }, { name: 'floor', capacity: 10 }] },
  book: { section: 'A', seats: ['1-1'], allow_orphans: false },
  extendEventBooking: { seconds: 30 },
  changeEventBookingSeats: { section: 'A', add: ['2-2'], allow_orphans: true },
  adminCompact: { user: 'alice' },
  adminReconcile: { counter: 'dc' },
  adminTestDrift: { counter: 'dc', by: 1 },
  clusterAnnounce: { id: 1, http: 'http://127.0.0.1:1', cold: '' },
  clusterReadIndex: {},
  createRoom: { room_id: 'rm2', name: 'R', members: ['alice'] },
  changeRoomMembers: { add: ['bob', { user: 'cy', role: 'admin' }], remove: ['nobody'] },
  setRoomMemberRole: { role: 'owner' },
  roomTyping: { user: 'alice' },
  clusterTyping: { room_id: 'rm', user: 'alice', until: 1 },
  clusterPresence: { member: 2, nonce: '0'.repeat(32), entries: [{ room_id: 'rm', user: 'alice', online: false }] },
  postRoomMessage: { from: 'alice', content: 'hi', metadata: { lang: 'en' } },
  editRoomMessage: { content: 'hi again', metadata: { lang: 'fr' } },
  markRoomRead: { user: 'alice', seq: 0 },
  userRoomsRemote: { room_id: 'far', name: null, joined_at: 1, change: 'removed' },
  roomUserErasure: { user: 'gone' },
};
const PARAMS = { name: 'dc', user: 'alice', event_id: 'ev', booking_id: '1', room: 'rm', msg_id: '1' };
const fill = (t) => t.replace(/\{([^}]+)\}/g, (_, k) => PARAMS[k]);
const bodyOps = Object.entries(doc.paths).flatMap(([p, ops]) => Object.entries(ops)
  .filter(([, op]) => op.requestBody).map(([m, op]) => ({ method: m.toUpperCase(), template: p, op })));

describe('strict requests', () => {
  let s;
  before(async () => {
    s = await startStrata({ args: ['--test-hooks', '1'] });
    let r = await s.req('POST', '/v1/events', { event_id: 'ev', sections: [{ name: 'A', rows: 3, cols: 3 }, { name: 'floor', capacity: 10 }] });
    assert.equal(r.status, 201, r.text);
    r = await s.req('POST', '/v1/counters/dc/distinct', { member: 'x' });
    assert.equal(r.status, 200, r.text);
    r = await s.req('POST', '/v1/rooms', { room_id: 'rm', members: ['alice'] });
    assert.equal(r.status, 201, r.text);
  });
  after(async () => { if (s) { await s.stop(); s.cleanup(); } });

  test('the document lists the operations with a body this test drives', () => {
    assert.ok(bodyOps.length >= 13, `only ${bodyOps.length} operations with a body`);
    for (const { op } of bodyOps) assert.ok(VALID[op.operationId], `add a valid body for ${op.operationId}`);
  });

  // What the valid body gets, exactly (a 500 is not "accepted"): its success status, or, where the
  // path's parameters (PARAMS) name nothing of that kind here, the error the state gives once the
  // body was taken (counter dc is a distinct one, there is no message or booking 1, one node)
  const ACCEPTED = {
    incrCounter: [409, 'conflict'], addDistinct: 200, nextSequence: 200, postMessage: 201,
    editMessage: [404, 'not_found'], createRoom: 201, changeRoomMembers: 200, setRoomMemberRole: 200, roomTyping: 204, clusterTyping: [404, 'not_found'], clusterPresence: [404, 'not_found'],
    postRoomMessage: 201,
    editRoomMessage: [404, 'not_found'], markRoomRead: 200, roomUserErasure: 202, userRoomsRemote: 200,
    createEvent: 201, book: 201, extendEventBooking: [404, 'not_found'],
    changeEventBookingSeats: [404, 'not_found'], adminCompact: 202, adminReconcile: 200,
    adminTestDrift: 200, clusterAnnounce: [404, 'not_found'], clusterReadIndex: [404, 'not_found'],
  };
  for (const { method, template, op } of bodyOps) {
    test(`${op.operationId}: an unknown field is 400 naming it; the document agrees`, async () => {
      const schema = ajv.compile({ $ref: `${DOC_ID}#/paths/${template.replace(/~/g, '~0').replace(/\//g, '~1')}/${method.toLowerCase()}/requestBody/content/application~1json/schema` });
      const good = VALID[op.operationId];
      assert.ok(schema(good), `${op.operationId}: the valid body does not fit the document: ${ajv.errorsText(schema.errors)}`);
      const bad = { ...good, bye: 1 };
      assert.ok(!schema(bad), `${op.operationId}: the document takes an unknown field`);
      const p = fill(template);
      const r = await s.req(method, p, bad);
      assert.equal(r.status, 400, `${method} ${p}: ${r.text}`);
      assert.equal(r.json.error.code, 'invalid_argument');
      assert.equal(r.json.error.message, 'unknown field "bye"');
      assert.equal(r.json.error.field, 'bye');
      const ok = await s.req(method, p, good);
      assert.ok(ACCEPTED[op.operationId], `add the status a valid body gets for ${op.operationId}`);
      const [status, code] = [ACCEPTED[op.operationId]].flat();
      assert.ok(op.responses[String(status)], `${op.operationId}: the document lists no ${status}`);
      assert.equal(ok.status, status, `${method} ${p} with a valid body: ${ok.text}`);
      if (code) assert.equal(ok.json.error.code, code, ok.text);
    });
  }

  test('nested objects: an event\'s sections[] and a booking\'s items[]; metadata stays free-form', async () => {
    let r = await s.req('POST', '/v1/events', { event_id: 'ev3', sections: [{ name: 'A', rows: 2, cols: 2 }, { name: 'B', rows: 2, cols: 2, colz: 3 }] });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.message, 'unknown field "colz" in sections[1]');
    assert.equal(r.json.error.field, 'sections[1].colz');
    r = await s.req('GET', '/v1/events/ev3');
    assert.equal(r.status, 404, 'a refused event is not created');
    r = await s.req('POST', '/v1/events/ev/bookings', { items: [{ section: 'A', seats: ['3-3'] }, { section: 'floor', quantity: 1, allow_orphans: true }] });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.field, 'items[1].allow_orphans');
    r = await s.req('POST', '/v1/events/ev/bookings', { items: [{ section: 'A', seats: ['3-3'] }], quantity: 2 });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.field, 'quantity');
    r = await s.req('POST', '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: 'x', metadata: { bye: 1, role: 'assistant', nested: { any: [1] } } });
    assert.equal(r.status, 201, r.text);
    r = await s.req('POST', '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: 'x', role: 'assistant', tokens: 12 });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.field, 'role');
  });

  test('a header that holds one value, given twice, is 400 (hostile test: the last one won)', async () => {
    const body = '{"by":1}';
    for (const hdrs of ['Content-Type: text/plain\r\nContent-Type: application/json',
      'Content-Type: application/json\r\nContent-Type: text/plain',
      'Content-Type: application/json\r\nIdempotency-Key: a\r\nIdempotency-Key: b']) {
      const out = parseResponses(await raw(s.port, `POST /v1/counters/hh/incr HTTP/1.1\r\nHost: x\r\n${hdrs}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`));
      assert.equal(out.length, 1, hdrs);
      assert.equal(out[0].status, 400, hdrs);
    }
    assert.equal((await s.req('GET', '/v1/counters/hh')).status, 404, 'nothing was counted');
  });

  test('a field given twice is 400 naming it, at any level (hostile test: the first one won)', async () => {
    const json = { 'content-type': 'application/json' };
    let r = await s.req('POST', '/v1/counters/twice/incr', '{"by":1,"by":5}', json);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.field, 'by');
    assert.equal(r.json.error.message, 'field "by" given twice');
    assert.equal((await s.req('GET', '/v1/counters/twice')).status, 404, 'nothing was counted');
    r = await s.req('POST', '/v1/events/ev/bookings', '{"section":"A","section":"floor","quantity":1}', json);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.field, 'section');
    r = await s.req('POST', '/v1/events', '{"event_id":"ev9","sections":[{"name":"A","rows":1,"rows":2,"cols":1}]}', json);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.field, 'sections[0].rows');
    // metadata is the caller's JSON, kept as sent
    r = await s.req('POST', '/v1/users/alice/messages', '{"conversation_id":"c1","from":"a","content":"x","metadata":{"k":1,"k":2}}', json);
    assert.equal(r.status, 201, r.text);
  });

  test('routes without body fields take no body, {} or nothing; any field is unknown', async () => {
    const b = await s.req('POST', '/v1/events/ev/bookings', { section: 'floor', quantity: 1 });
    assert.equal(b.status, 201, b.text);
    const id = b.json.booking_id;
    for (const p of [`/v1/bookings/${id}/confirm`, `/v1/events/ev/bookings/${id}/cancel`, '/v1/admin/flush']) {
      const r = await s.req('POST', p, { bye: 1 });
      assert.equal(r.status, 400, `${p}: ${r.text}`);
      assert.equal(r.json.error.field, 'bye');
    }
    let r = await s.req('POST', `/v1/bookings/${id}/confirm`, {});
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.status, 'sold');
    r = await s.req('POST', '/v1/admin/flush');
    assert.equal(r.status, 202, r.text);
  });

  test('a body that is not application/json is 415 and changes nothing', async () => {
    await s.req('POST', '/v1/counters/media/incr', { by: 10 });
    for (const ct of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', '']) {
      const r = await s.req('POST', '/v1/counters/media/incr', '{"by":1}', { 'content-type': ct });
      assert.equal(r.status, 415, `${JSON.stringify(ct)}: ${r.text}`);
      assert.equal(r.json.error.code, 'unsupported_media_type');
      assert.match(r.json.error.message, /application\/json/);
    }
    const r = await s.req('GET', '/v1/counters/media');
    assert.equal(r.json.value, 10, 'a 415 changed the counter');
  });

  test('application/json with parameters, in any case, is accepted; a body without Content-Type is JSON, unless a browser (Origin) sent it', async () => {
    for (const ct of ['application/json; charset=utf-8', 'APPLICATION/JSON;charset=UTF-8', ' application/json ']) {
      const r = await s.req('POST', '/v1/counters/cs/incr', '{"by":1}', { 'content-type': ct });
      assert.equal(r.status, 200, `${ct}: ${r.text}`);
    }
    // a script or tool that sends no Content-Type: read as JSON
    const body = '{"by":5}';
    let out = parseResponses(await raw(s.port, `POST /v1/counters/cs/incr HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`));
    assert.equal(out.length, 1);
    assert.equal(out[0].status, 200, out[0].body);
    assert.equal(JSON.parse(out[0].body).value, 8);
    // what a browser sends for a Blob without a type or for bytes: Origin, no Content-Type, no preflight
    out = parseResponses(await raw(s.port, `POST /v1/counters/cs/incr HTTP/1.1\r\nHost: x\r\nOrigin: http://evil.example\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`));
    assert.equal(out.length, 1);
    assert.equal(out[0].status, 415, out[0].body);
    assert.equal(JSON.parse(out[0].body).error.code, 'unsupported_media_type');
    assert.match(JSON.parse(out[0].body).error.message, /Content-Type: application\/json/);
    assert.equal((await s.req('GET', '/v1/counters/cs')).json.value, 8, 'the 415 changed nothing');
  });

  test('a POST without a body needs no Content-Type (any Content-Type is ignored)', async () => {
    const out = parseResponses(await raw(s.port, 'POST /v1/sequences/nb/next HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n'
      + 'POST /v1/sequences/nb/next HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
    assert.deepEqual(out.map((r) => r.status), [200, 200]);
    assert.equal(JSON.parse(out[1].body).last, 2);
  });

  test('a 415 is not remembered under an Idempotency-Key', async () => {
    const key = { 'idempotency-key': 'strict-415' };
    let r = await s.req('POST', '/v1/counters/idem415/incr', '{"by":3}', { ...key, 'content-type': 'text/plain' });
    assert.equal(r.status, 415);
    r = await s.req('POST', '/v1/counters/idem415/incr', '{"by":3}', key);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers['idempotent-replayed'], undefined);
    assert.equal(r.json.value, 3);
    r = await s.req('POST', '/v1/counters/idem415/incr', '{"by":3}', key);
    assert.equal(r.headers['idempotent-replayed'], 'true');
    assert.equal(r.json.value, 3);
    r = await s.req('POST', '/v1/counters/idem415/incr', { by: 3, bye: 1 }, { 'idempotency-key': 'strict-400' });
    assert.equal(r.status, 400);
    r = await s.req('POST', '/v1/counters/idem415/incr', { by: 3 }, { 'idempotency-key': 'strict-400' });
    assert.equal(r.status, 200, 'a 400 was remembered');
    assert.equal(r.json.value, 6);
  });

  test('every 400 names its field or value', async () => {
    const cases = [
      ['POST', '/v1/events/ev/bookings', { section: 'A', seats: ['9-9'] }, /seat "9-9".*section "A"/],
      ['POST', '/v1/events/ev/bookings', { section: 'A', seats: ['1-2', '1-2'] }, /seat "1-2" is listed twice/],
      ['POST', '/v1/events/ev/bookings', { section: 'floor', seats: ['1-1'] }, /section "floor" is general admission/],
      ['POST', '/v1/events/ev/bookings', { section: 'A', seats: [7] }, /'seats'.*got a number/],
      ['POST', '/v1/events/ev/bookings', { section: 'A' }, /section "A": give either 'seats' or 'quantity'/],
      ['POST', '/v1/events/ev/bookings', { section: 'A', quantity: 500 }, /'quantity'.*got 500/],
      ['POST', '/v1/events', { event_id: 'bad id', sections: [] }, /'event_id'.*got "bad id"/],
      ['POST', '/v1/events', { event_id: 'ev4', sections: [{ name: 'A', rows: 2 }] }, /section "A" needs rows and cols/],
      ['POST', '/v1/events', { event_id: 'ev4', sections: [{ name: 'A', rows: 2, cols: 2 }, { name: 'A', capacity: 3 }] }, /"A" is given twice/],
      ['POST', '/v1/counters/c/distinct', { member: 'a b' }, /'member'.*got "a b"/],
      ['POST', '/v1/counters/c/incr', { by: 'one' }, /'by'.*got a string/],
      ['POST', '/v1/sequences/s/next', { count: 0 }, /'count'.*got 0/],
      ['POST', '/v1/users/alice/messages', { conversation_id: 'c', from: 'alice', content: 5 }, /'content'.*got a number/],
      ['POST', '/v1/users/alice/messages', { conversation_id: 'c', from: 'alice', content: 'x', metadata: [1] }, /'metadata'.*got an array/],
      ['GET', '/v1/counters/bad%20name', undefined, /counter name.*got "bad name"/],
      ['GET', '/v1/events/ev/sections/A/seats?format=xml', undefined, /format.*got "xml"/],
      ['GET', '/v1/users/alice/messages?limit=lots', undefined, /limit.*got "lots"/],
      ['GET', '/v1/users/alice/messages?order=sideways', undefined, /order.*got "sideways"/],
      ['GET', '/v1/users/alice/messages?after=12x', undefined, /'after'.*got "12x"/],
      ['GET', '/v1/events?cursor=a%20b', undefined, /cursor.*got "a b"/],
      ['POST', '/v1/counters/c/incr', '[1]', /JSON object \(got an array\)/],
    ];
    for (const [m, p, body, re] of cases) {
      const r = await s.req(m, p, body);
      assert.equal(r.status, 400, `${m} ${p} ${JSON.stringify(body)}: ${r.text}`);
      assert.match(r.json.error.message, re, `${m} ${p} ${JSON.stringify(body)}`);
    }
    let r = await s.req('POST', '/v1/events/ev/bookings', { section: 'nope', quantity: 1 });
    assert.equal(r.status, 404);
    assert.match(r.json.error.message, /section "nope" not found in event "ev"/);
    const b = await s.req('POST', '/v1/events/ev/bookings', { section: 'A', seats: ['3-1'] });
    assert.equal(b.status, 201, b.text);
    r = await s.req('POST', `/v1/events/ev/bookings/${b.json.booking_id}/seats`, { remove: ['3-2'] });
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.error.message, /seat "3-2" to remove/);
  });

  test('named values are cut to 64 bytes on a character boundary and control bytes are escaped', async () => {
    const long = 'é'.repeat(100); // 200 bytes: a cut in the middle of a character would be invalid UTF-8
    let r = await s.req('POST', '/v1/events/ev/bookings', { section: 'A', seats: [long] });
    assert.equal(r.status, 400, r.text);
    const m = r.json.error.message.match(/seat "([^"]*)"/);
    assert.ok(m, r.json.error.message);
    assert.equal(m[1], `${'é'.repeat(32)}...`);
    assert.ok(!r.text.includes('\uFFFD'), 'a character was cut in two');
    r = await s.req('POST', '/v1/events/ev/bookings', { section: 'A', seats: ['1-\u0001\u001b[31m'] });
    assert.equal(r.status, 400, r.text);
    assert.ok(!/[\x00-\x1f]/.test(r.text), `raw control bytes in ${JSON.stringify(r.text)}`);
    assert.ok(r.text.includes('\\u0001') && r.text.includes('\\u001b'), r.text);
    assert.match(r.json.error.message, /seat "1-\u0001\u001b\[31m"/);
    r = await s.req('POST', '/v1/counters/c/incr', { [`x${'y'.repeat(300)}`]: 1 });
    assert.equal(r.status, 400);
    assert.ok(r.json.error.message.length < 100, r.json.error.message);
    r = await s.req('POST', '/v1/counters/c/incr', '{"by":1}', { 'content-type': `text/${'p'.repeat(300)}` });
    assert.equal(r.status, 415);
    assert.ok(r.json.error.message.length < 160, r.json.error.message);
  });
});
