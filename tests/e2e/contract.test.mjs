// SPDX-License-Identifier: MIT
// The OpenAPI contract (docs/openapi.yaml): it lints clean with @redocly/cli, the served and
// checked-in docs/openapi.json is the bundle of the YAML, every route of src/http/router.c is in
// it, and every answer the real server gives to a request on every documented route — successes
// and errors, status, headers and body — validates against it (ajv, JSON Schema 2020-12), as do
// the frames of a live stream.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import { raw, parseResponses, sleep, startStrata, wsConnect } from './lib.mjs';

const ROOT = path.resolve('../..');
const YAML = path.join(ROOT, 'docs/openapi.yaml');
const JSON_DOC = path.join(ROOT, 'docs/openapi.json');
// @redocly/cli 1.34 (pinned in package.json): the 2.x line needs Node >= 20.19, and Debian 12 has
// 18. It runs under the node that runs this test, so a fresh machine checks it too.
const REDOCLY = path.resolve('node_modules/@redocly/cli/bin/cli.js');
const REDOCLY_ENV = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
function redocly(args) {
  const r = spawnSync(process.execPath, [REDOCLY, ...args], { encoding: 'utf8', env: REDOCLY_ENV });
  const out = `${r.stdout}${r.stderr}${r.error ? r.error.message : ''}`;
  assert.equal(r.status, 0, `redocly ${args[0]} failed:\n${out}`);
  return out;
}
const doc = JSON.parse(readFileSync(JSON_DOC, 'utf8'));
const DOC_ID = 'https://strata.invalid/openapi.json';

const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
ajv.addSchema(doc, DOC_ID);
const compiled = new Map();
const ptr = (parts) => parts.map((p) => encodeURIComponent(String(p).replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');
function validator(pointer) {
  if (!compiled.has(pointer)) compiled.set(pointer, ajv.compile({ $ref: `${DOC_ID}#/${pointer}` }));
  return compiled.get(pointer);
}
function validate(pointer, value, what) {
  const v = validator(pointer);
  assert.ok(v(value), `${what}: ${ajv.errorsText(v.errors)}\n${JSON.stringify(value).slice(0, 600)}`);
}
// Follows a local $ref; returns [object, pointer parts].
function deref(obj, parts) {
  while (obj && obj.$ref) {
    parts = obj.$ref.replace(/^#\//, '').split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
    obj = parts.reduce((o, k) => o[k], doc);
  }
  return [obj, parts];
}

const covered = new Set();
// Checks one answer against the operation `method template`.
function check(method, template, res) {
  const key = `${method} ${template}`;
  const op = doc.paths[template]?.[method.toLowerCase()];
  assert.ok(op, `${key} is not in the document`);
  assert.ok(!(res.status === 404 && /^no route for/.test(res.json?.error?.message || '')),
    `${key} is documented, but the server has no route for it`);
  covered.add(key);
  const what = `${key} -> ${res.status}`;
  const [resp, parts] = deref(op.responses[String(res.status)], ['paths', template, method.toLowerCase(), 'responses', String(res.status)]);
  assert.ok(resp, `${what}: status not documented (${res.text.slice(0, 200)})`);
  for (const [name, h0] of Object.entries(resp.headers || {})) {
    const [h, hparts] = deref(h0, [...parts, 'headers', name]);
    const v = res.headers[name.toLowerCase()];
    if (h.required) assert.ok(v !== undefined, `${what}: header ${name} is required`);
    if (v !== undefined) {
      const val = h.schema?.type === 'integer' ? Number(v) : v;
      validate(ptr([...hparts, 'schema']), val, `${what} header ${name}`);
    }
  }
  if (res.headers['idempotent-replayed'] !== undefined)
    assert.ok(resp.headers?.['Idempotent-Replayed'], `${what}: Idempotent-Replayed sent but not documented`);
  if (!resp.content) {
    assert.equal(res.text, '', `${what}: a body that is not documented`);
    return;
  }
  const ct = (res.headers['content-type'] || '').split(';')[0].trim();
  assert.ok(resp.content[ct], `${what}: content type ${ct} not documented`);
  if (ct === 'application/json') validate(ptr([...parts, 'content', ct, 'schema']), res.json, what);
}

const SECRET = 'contract-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload, secret = SECRET) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64({ exp: Math.floor(Date.now() / 1000) + 600, ...payload });
  return `${h}.${p}.${createHmac('sha256', secret).update(`${h}.${p}`).digest('base64url')}`;
}
// a group's internal routes take only --cluster-secret tokens, never a client's (even an admin's)
const CLUSTER = 'contract-cluster-secret';
const MEMBER = { authorization: `Bearer ${jwt({ sub: 'strata-member' }, CLUSTER)}` };
const ADMIN = { authorization: `Bearer ${jwt({ sub: 'ops', role: 'admin' })}` };
const ALICE = { authorization: `Bearer ${jwt({ sub: 'alice' })}` };
const BOB = { authorization: `Bearer ${jwt({ sub: 'bob' })}` };

describe('the OpenAPI document', () => {
  test('lints clean with @redocly/cli (recommended rules)', () => {
    const out = redocly(['lint', '--config', path.join(ROOT, 'docs/redocly.yaml'), '--format', 'summary', YAML]);
    assert.match(out, /valid/, out);
    assert.doesNotMatch(out, /warning|error/i, out);
  });

  test('docs/openapi.json is the bundle of docs/openapi.yaml', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'strata-oa-'));
    try {
      const out = path.join(dir, 'openapi.json');
      redocly(['bundle', YAML, '-o', out, '--ext', 'json']);
      assert.deepEqual(JSON.parse(readFileSync(out, 'utf8')), doc,
        'regenerate: cd tests/e2e && npx redocly bundle ../../docs/openapi.yaml -o ../../docs/openapi.json --ext json');
    } finally { rmSync(dir, { recursive: true, force: true }); }
  });

  test('every route the server serves is documented', () => {
    const src = readFileSync(path.join(ROOT, 'src/http/router.c'), 'utf8');
    const routes = [...src.matchAll(/\{ST_HTTP_(GET|POST),\s*"([^"]+)"/g)].map((m) => [m[1], m[2]]);
    assert.ok(routes.length > 20);
    const norm = (p) => p.replace(/\{[^}]+\}/g, '{}');
    const documented = new Set(Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${norm(p)}`)));
    for (const [m, p] of routes) assert.ok(documented.has(`${m} ${norm(p)}`), `${m} ${p} is served but not documented`);
  });
});

describe('the server keeps the contract', () => {
  let s;
  const call = async (method, template, p, body, headers = {}) => {
    const r = await s.req(method, p, body, headers);
    check(method, template, r);
    return r;
  };
  before(async () => {
    s = await startStrata({ args: ['--jwt-secret', SECRET, '--cluster-secret', CLUSTER, '--max-content', '64', '--max-body', '4096', '--test-hooks', '1'] });
  });
  after(async () => { if (s) { await s.stop(); s.cleanup(); } });

  test('GET /v1/openapi.json serves the document, without auth', async () => {
    const r = await call('GET', '/v1/openapi.json', '/v1/openapi.json');
    assert.deepEqual(r.json, doc);
  });

  test('counters and sequences', async () => {
    const T = '/v1/counters/{name}/incr';
    assert.equal((await call('POST', T, '/v1/counters/c1/incr', { by: 2 }, ADMIN)).json.value, 2);
    const k = { ...ADMIN, 'idempotency-key': 'ct-1' };
    const first = await call('POST', T, '/v1/counters/c1/incr', { by: 5 }, k);
    const again = await call('POST', T, '/v1/counters/c1/incr', { by: 5 }, k);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.json, first.json);
    assert.equal((await call('POST', T, '/v1/counters/c1/incr', { by: 6 }, k)).status, 422);
    assert.equal((await call('POST', T, '/v1/counters/c1/incr', { by: 'x' }, ADMIN)).status, 400);
    assert.equal((await call('POST', T, '/v1/counters/c1/incr', '{"by":', ADMIN)).status, 400);
    assert.equal((await call('POST', T, '/v1/counters/bad%20name/incr', {}, ADMIN)).status, 400);
    assert.equal((await call('POST', T, '/v1/counters/c1/incr', {})).status, 401);
    assert.equal((await call('POST', T, '/v1/counters/c1/incr', { by: 1, pad: 'x'.repeat(5000) }, ADMIN)).status, 413);
    const D = '/v1/counters/{name}/distinct';
    assert.equal((await call('POST', D, '/v1/counters/d1/distinct', { member: 'm1' }, ADMIN)).json.added, true);
    assert.equal((await call('POST', D, '/v1/counters/d1/distinct', { member: 'm1' }, ADMIN)).json.added, false);
    assert.equal((await call('POST', D, '/v1/counters/c1/distinct', { member: 'm1' }, ADMIN)).status, 409);
    assert.equal((await call('POST', T, '/v1/counters/d1/incr', {}, ADMIN)).status, 409);
    assert.equal((await call('POST', D, '/v1/counters/d1/distinct', {}, ADMIN)).status, 400);
    const G = '/v1/counters/{name}';
    assert.equal((await call('GET', G, '/v1/counters/c1', undefined, ADMIN)).json.value, 7);
    assert.equal((await call('GET', G, '/v1/counters/never', undefined, ADMIN)).status, 404);
    assert.equal((await call('GET', G, '/v1/counters/c1')).status, 401);
    const N = '/v1/sequences/{name}/next';
    assert.deepEqual((await call('POST', N, '/v1/sequences/s1/next', { count: 3 }, ADMIN)).json, { name: 's1', first: 1, last: 3 });
    assert.equal((await call('POST', N, '/v1/sequences/s1/next', { count: 0 }, ADMIN)).status, 400);
    const SG = '/v1/sequences/{name}';
    assert.equal((await call('GET', SG, '/v1/sequences/s1', undefined, ADMIN)).json.last, 3);
    const unknown = await call('GET', SG, '/v1/sequences/never', undefined, ADMIN);
    assert.ok([200, 404].includes(unknown.status));
    // A path asked with a method it does not serve: 405 with Allow (documented for every path).
    const wrong = await s.req('GET', '/v1/counters/c1/incr', undefined, ADMIN);
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.allow, 'POST');
    validate(ptr(['components', 'schemas', 'Error']), wrong.json, 'a 405');
  });

  test('messages and conversations', async () => {
    const P = '/v1/users/{user}/messages';
    const m1 = await call('POST', P, '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: 'one', metadata: { k: 1 } }, ALICE);
    assert.equal(m1.status, 201);
    await call('POST', P, '/v1/users/alice/messages', { conversation_id: 'c1', from: 'bob', content: 'two' }, ALICE);
    assert.equal((await call('POST', P, '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: '' }, ALICE)).status, 400);
    assert.equal((await call('POST', P, '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: 'x'.repeat(100) }, ALICE)).status, 413);
    assert.equal((await call('POST', P, '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: 'x' }, BOB)).status, 403);
    const page = await call('GET', P, '/v1/users/alice/messages?conversation_id=c1&limit=1', undefined, ALICE);
    assert.equal(typeof page.json.next, 'string');
    const last = await call('GET', P, `/v1/users/alice/messages?conversation_id=c1&limit=1&cursor=${page.json.next}`, undefined, ALICE);
    assert.equal(last.json.messages[0].content, 'two');
    await call('GET', P, '/v1/users/alice/messages?order=desc', undefined, ALICE);
    assert.equal((await call('GET', P, '/v1/users/alice/messages?limit=0', undefined, ALICE)).status, 400);
    assert.equal((await call('GET', P, '/v1/users/alice/messages', undefined, BOB)).status, 403);
    const C = '/v1/users/{user}/conversations';
    assert.equal((await call('GET', C, '/v1/users/alice/conversations?limit=5', undefined, ALICE)).json.conversations.length, 1);
    assert.equal((await call('GET', C, '/v1/users/alice/conversations?limit=x', undefined, ALICE)).status, 400);
    const CG = '/v1/users/{user}/conversations/{conversation_id}';
    assert.equal((await call('GET', CG, '/v1/users/alice/conversations/c1', undefined, ALICE)).json.total_messages, 2);
    assert.equal((await call('GET', CG, '/v1/users/alice/conversations/none', undefined, ALICE)).status, 404);
    const S = '/v1/users/{user}/stats';
    assert.equal((await call('GET', S, '/v1/users/alice/stats', undefined, ALICE)).json.total_messages, 2);
    assert.equal((await call('GET', S, '/v1/users/alice/stats')).status, 401);
    // edits, deletes and erasure (SPEC §2.2)
    const ME = '/v1/users/{user}/messages/{msg_id}';
    const id = m1.json.msg_id;
    const ed = await call('PATCH', ME, `/v1/users/alice/messages/${id}`, { content: 'uno' }, ALICE);
    assert.equal(ed.json.edit_history[0].content, 'one');
    assert.equal((await call('PATCH', ME, `/v1/users/alice/messages/${id}`, { metadata: null }, ADMIN)).status, 200);
    assert.equal((await call('PATCH', ME, `/v1/users/alice/messages/${id}`, {}, ALICE)).status, 400);
    assert.equal((await call('PATCH', ME, `/v1/users/alice/messages/${id}`, { content: 'x' }, BOB)).status, 403);
    assert.equal((await call('PATCH', ME, '/v1/users/alice/messages/1', { content: 'x' }, ALICE)).status, 404);
    assert.equal((await call('DELETE', ME, `/v1/users/alice/messages/${id}`, undefined, ALICE)).json.content, null);
    assert.equal((await call('PATCH', ME, `/v1/users/alice/messages/${id}`, { content: 'x' }, ALICE)).status, 409);
    assert.equal((await call('GET', CG, '/v1/users/alice/conversations/c1', undefined, ALICE)).json.total_messages, 1);
    await call('POST', P, '/v1/users/alice/messages', { conversation_id: 'c2', from: 'alice', content: 'three' }, ALICE);
    assert.deepEqual((await call('DELETE', CG, '/v1/users/alice/conversations/c2', undefined, ALICE)).json, { deleted: 1 });
    assert.equal((await call('DELETE', CG, '/v1/users/alice/conversations/c2', undefined, ALICE)).status, 404);
    await call('POST', P, '/v1/users/zed/messages', { conversation_id: 'c', from: 'zed', content: 'z' }, ADMIN);
    const U = '/v1/users/{user}';
    assert.equal((await call('DELETE', U, '/v1/users/zed', undefined, BOB)).status, 403);
    const er = await call('DELETE', U, '/v1/users/zed', undefined, ADMIN);
    assert.equal(er.status, 202);
    const EG2 = '/v1/admin/erasures/{id}';
    assert.equal((await call('GET', EG2, `/v1/admin/erasures/${er.json.erasure_id}`, undefined, ADMIN)).json.user, 'zed');
    assert.equal((await call('GET', EG2, `/v1/admin/erasures/${er.json.erasure_id}`, undefined, ALICE)).status, 403);
    assert.equal((await call('GET', EG2, '/v1/admin/erasures/7', undefined, ADMIN)).status, 404);
  });

  test('rooms', async () => {
    const R = '/v1/rooms';
    assert.equal((await call('POST', R, R, { room_id: 'rm', name: 'Room', members: ['bob'] }, ALICE)).status, 201);
    assert.equal((await call('POST', R, R, { room_id: 'rm', members: [] }, ALICE)).status, 409);
    assert.equal((await call('POST', R, R, { room_id: 'a b', members: [] }, ALICE)).status, 400);
    const G = '/v1/rooms/{room}';
    assert.equal((await call('GET', G, '/v1/rooms/rm', undefined, BOB)).json.members, 2);
    assert.equal((await call('GET', G, '/v1/rooms/none', undefined, BOB)).status, 404);
    const M = '/v1/rooms/{room}/members';
    assert.equal((await call('POST', M, '/v1/rooms/rm/members', { add: ['carol'] }, ALICE)).json.members, 3);
    assert.equal((await call('POST', M, '/v1/rooms/rm/members', { add: ['dave'] }, BOB)).status, 403);
    assert.equal((await call('GET', M, '/v1/rooms/rm/members?limit=2', undefined, ALICE)).json.members.length, 2);
    assert.equal((await call('POST', '/v1/rooms', '/v1/rooms', { room_id: 'doomed', members: [] }, ALICE)).status, 201);
    assert.equal((await call('DELETE', G, '/v1/rooms/doomed', undefined, BOB)).status, 403);
    assert.equal((await call('DELETE', G, '/v1/rooms/doomed', undefined, ALICE)).status, 202);
    assert.equal((await call('DELETE', G, '/v1/rooms/doomed', undefined, ALICE)).status, 404);
    const TY = '/v1/rooms/{room}/typing';
    assert.equal((await call('POST', TY, '/v1/rooms/rm/typing', { user: 'alice' }, ALICE)).status, 204);
    assert.equal((await call('POST', TY, '/v1/rooms/rm/typing', { user: 'alice' }, BOB)).status, 403);
    const PR = '/v1/rooms/{room}/presence';
    assert.deepEqual((await call('GET', PR, '/v1/rooms/rm/presence', undefined, ALICE)).json, { room_id: 'rm', online: [] });
    assert.equal((await call('GET', PR, '/v1/rooms/rm/presence', undefined, { authorization: `Bearer ${jwt({ sub: 'eve' })}` })).status, 403);
    assert.equal((await call('GET', PR, '/v1/rooms/none/presence', undefined, ALICE)).status, 404);
    assert.equal((await call('GET', PR, '/v1/rooms/rm/presence')).status, 401);
    const MR = '/v1/rooms/{room}/members/{user}';
    assert.equal((await call('PATCH', MR, '/v1/rooms/rm/members/carol', { role: 'admin' }, ALICE)).json.role, 'admin');
    assert.equal((await call('PATCH', MR, '/v1/rooms/rm/members/carol', { role: 'owner' }, BOB)).status, 403);
    assert.equal((await call('PATCH', MR, '/v1/rooms/rm/members/alice', { role: 'member' }, ALICE)).status, 409);
    assert.equal((await call('PATCH', MR, '/v1/rooms/rm/members/zed', { role: 'member' }, ALICE)).status, 404);
    const P = '/v1/rooms/{room}/messages';
    assert.equal((await call('POST', P, '/v1/rooms/rm/messages', { from: 'bob', content: 'hi', metadata: { a: 1 } }, BOB)).status, 201);
    assert.equal((await call('POST', P, '/v1/rooms/rm/messages', { from: 'bob', content: 'hi' }, ALICE)).status, 403);
    assert.equal((await call('GET', P, '/v1/rooms/rm/messages?order=desc', undefined, ALICE)).json.messages[0].room_id, 'rm');
    assert.equal((await call('GET', P, '/v1/rooms/rm/messages', undefined, { authorization: `Bearer ${jwt({ sub: 'eve' })}` })).status, 403);
    const D = '/v1/rooms/{room}/read';
    assert.equal((await call('POST', D, '/v1/rooms/rm/read', { user: 'alice', seq: 1 }, ALICE)).json.unread, 0);
    // edits and deletes of a room's messages: the author, an owner or an admin (SPEC §2.2)
    const RM = '/v1/rooms/{room}/messages/{msg_id}';
    const rid = (await call('POST', P, '/v1/rooms/rm/messages', { from: 'bob', content: 'typo' }, BOB)).json.msg_id;
    assert.equal((await call('PATCH', RM, `/v1/rooms/rm/messages/${rid}`, { content: 'fixed' }, BOB)).json.content, 'fixed');
    assert.equal((await call('DELETE', RM, `/v1/rooms/rm/messages/${rid}`, undefined, ALICE)).json.content, null);
    assert.equal((await call('PATCH', RM, `/v1/rooms/rm/messages/${rid}`, { content: 'x' }, BOB)).status, 409);
    assert.equal((await call('GET', P, '/v1/rooms/rm/messages?include_deleted=false', undefined, ALICE)).json.messages.every((m) => m.content !== null), true);
    assert.equal((await call('POST', D, '/v1/rooms/rm/read', { user: 'alice' }, ALICE)).status, 400);
    const U = '/v1/users/{user}/rooms';
    assert.equal((await call('GET', U, '/v1/users/bob/rooms', undefined, BOB)).json.rooms[0].room_id, 'rm');
    assert.equal((await call('GET', U, '/v1/users/bob/rooms', undefined, ALICE)).status, 403);
    // SPEC §10: another group's outbox, signed with the groups' --cluster-secret only
    const X = '/v1/users/{user}/rooms/remote';
    const far = { room_id: 'far', name: 'Far', joined_at: 5, change: 'added' };
    assert.equal((await call('POST', X, '/v1/users/bob/rooms/remote', far, ADMIN)).status, 401);
    assert.equal((await call('POST', X, '/v1/users/bob/rooms/remote', far, BOB)).status, 401);
    assert.equal((await call('POST', X, '/v1/users/bob/rooms/remote?route=user:bob', far, MEMBER)).json.applied, true);
    assert.equal((await call('POST', X, '/v1/users/bob/rooms/remote', { ...far, change: 'x' }, MEMBER)).status, 400);
    // SPEC §2.2, §10: a user's group erases a user who was in a room of this group (its outbox)
    const XE = '/v1/rooms/{room}/erasures';
    const gone = { user: 'gone-user' };
    assert.equal((await call('POST', XE, '/v1/rooms/rm/erasures', gone, ADMIN)).status, 401);
    assert.equal((await call('POST', XE, '/v1/rooms/rm/erasures', gone, BOB)).status, 401);
    const xe = await call('POST', XE, '/v1/rooms/rm/erasures?route=room:rm', gone, MEMBER);
    assert.equal(xe.status, 202);
    assert.equal((await call('GET', '/v1/admin/erasures/{id}', `/v1/admin/erasures/${xe.json.erasure_id}`, undefined, ADMIN)).json.user, 'gone-user');
    assert.equal((await call('POST', XE, '/v1/rooms/rm/erasures?route=room:other', gone, MEMBER)).status, 400);
    assert.equal((await call('POST', XE, '/v1/rooms/rm/erasures', { user: 'a b' }, MEMBER)).status, 400);
    const rows = (await call('GET', U, '/v1/users/bob/rooms', undefined, BOB)).json.rooms;
    assert.deepEqual(rows.find((x) => x.room_id === 'far'), { room_id: 'far', name: 'Far', joined_at: 5, remote: true });
  });

  test('events, seat maps and bookings (flat and nested routes)', async () => {
    const E = '/v1/events';
    const ev = { event_id: 'show', name: 'Show', sections: [{ name: 'A', rows: 2, cols: 4, price: 50 }] };
    assert.equal((await call('POST', E, E, ev, ADMIN)).status, 201);
    assert.equal((await call('POST', E, E, ev, ADMIN)).status, 409);
    assert.equal((await call('POST', E, E, { ...ev, event_id: 'x2' }, ALICE)).status, 403);
    assert.equal((await call('POST', E, E, { event_id: 'x3', sections: [] }, ADMIN)).status, 400);
    await call('POST', E, E, { ...ev, event_id: 'show2', name: null }, ADMIN);
    const list = await call('GET', E, '/v1/events?limit=1', undefined, ALICE);
    assert.equal(typeof list.json.next, 'string');
    await call('GET', E, `/v1/events?limit=5&cursor=${list.json.next}`, undefined, ALICE);
    const EG = '/v1/events/{event_id}';
    assert.equal((await call('GET', EG, '/v1/events/show', undefined, ALICE)).json.event_stats.total, 8);
    assert.equal((await call('GET', EG, '/v1/events/none', undefined, ALICE)).status, 404);
    const M = '/v1/events/{event_id}/sections/{section}/seats';
    assert.equal((await call('GET', M, '/v1/events/show/sections/A/seats', undefined, ALICE)).json.encoding, '2bit-base64');
    assert.equal((await call('GET', M, '/v1/events/show/sections/A/seats?format=json', undefined, ALICE)).json.seats.length, 2);
    assert.equal((await call('GET', M, '/v1/events/show/sections/A/seats?format=png', undefined, ALICE)).status, 400);
    assert.equal((await call('GET', M, '/v1/events/show/sections/Z/seats', undefined, ALICE)).status, 404);
    const B = '/v1/events/{event_id}/bookings';
    const b1 = await call('POST', B, '/v1/events/show/bookings', { section: 'A', seats: ['1-1', '1-2'] }, ALICE);
    assert.equal(b1.status, 201);
    const taken = await call('POST', B, '/v1/events/show/bookings', { section: 'A', seats: ['1-2'] }, ALICE);
    assert.equal(taken.status, 409);
    assert.deepEqual(taken.json.error.seats, ['1-2']);
    assert.equal((await call('POST', B, '/v1/events/show/bookings', { section: 'A', quantity: 100 }, ALICE)).status, 409);
    const b2 = await call('POST', B, '/v1/events/show/bookings', { section: 'A', quantity: 2 }, ALICE);
    const b3 = await call('POST', B, '/v1/events/show/bookings', { section: 'A', quantity: 1 }, ALICE);
    const b4 = await call('POST', B, '/v1/events/show/bookings', { section: 'A', quantity: 1 }, ALICE);
    assert.equal((await call('POST', B, '/v1/events/show/bookings', { section: 'A' }, ALICE)).status, 400);
    assert.equal((await call('POST', B, '/v1/events/none/bookings', { section: 'A', quantity: 1 }, ALICE)).status, 404);
    const id = b1.json.booking_id;
    const G = '/v1/bookings/{booking_id}';
    assert.equal((await call('GET', G, `/v1/bookings/${id}`, undefined, ALICE)).json.status, 'reserved');
    assert.equal((await call('GET', G, `/v1/bookings/${id}`, undefined, BOB)).status, 403);
    assert.equal((await call('GET', G, '/v1/bookings/12345', undefined, ALICE)).status, 404);
    const CF = '/v1/bookings/{booking_id}/confirm';
    assert.equal((await call('POST', CF, `/v1/bookings/${id}/confirm`, undefined, ALICE)).json.status, 'sold');
    const final = await call('POST', CF, `/v1/bookings/${id}/confirm`, undefined, ALICE);
    assert.equal(final.status, 409);
    assert.equal(final.json.error.booking.status, 'sold');
    const CA = '/v1/bookings/{booking_id}/cancel';
    assert.equal((await call('POST', CA, `/v1/bookings/${b2.json.booking_id}/cancel`, undefined, ALICE)).json.status, 'cancelled');
    assert.equal((await call('POST', CA, '/v1/bookings/999/cancel', undefined, ALICE)).status, 404);
    // The nested routes (SPEC §4, routed by event for proxies).
    const NG = '/v1/events/{event_id}/bookings/{booking_id}';
    await call('GET', NG, `/v1/events/show/bookings/${id}`, undefined, ALICE);
    await call('GET', NG, `/v1/events/show2/bookings/${id}`, undefined, ALICE);
    await call('POST', `${NG}/confirm`, `/v1/events/show/bookings/${b3.json.booking_id}/confirm`, undefined, ALICE);
    await call('POST', `${NG}/cancel`, `/v1/events/show/bookings/${b4.json.booking_id}/cancel`, undefined, ALICE);
    // The event's bookings (SPEC §4.2): ALICE's own, newest first (the shape is checked by call)
    const L = await call('GET', B, '/v1/events/show/bookings?status=sold&limit=1', undefined, ALICE);
    assert.equal(L.status, 200);
    assert.equal(L.json.bookings.length, 1);
    assert.equal((await call('GET', B, '/v1/events/show/bookings?status=gone', undefined, ALICE)).status, 400);
    assert.equal((await call('GET', B, '/v1/events/none/bookings', undefined, ALICE)).status, 404);
  });

  test('cart: items over several sections, general admission, extend, change seats (SPEC §4.1)', async () => {
    const E = '/v1/events';
    const ev = { event_id: 'cart', hold_seconds: 60, sections: [{ name: 'A', rows: 2, cols: 4, price: 5 }, { name: 'floor', capacity: 10, price: 2 }] };
    assert.equal((await call('POST', E, E, ev, ADMIN)).json.sections.floor.capacity, 10);
    const M = '/v1/events/{event_id}/sections/{section}/seats';
    assert.equal((await call('GET', M, '/v1/events/cart/sections/floor/seats', undefined, ALICE)).status, 400);
    const B = '/v1/events/{event_id}/bookings';
    const b = await call('POST', B, '/v1/events/cart/bookings', { items: [{ section: 'A', seats: ['1-1'] }, { section: 'floor', quantity: 3 }] }, ALICE);
    assert.equal(b.status, 201);
    assert.equal(b.json.items.length, 2);
    const taken = await call('POST', B, '/v1/events/cart/bookings', { items: [{ section: 'A', seats: ['1-1'] }, { section: 'floor', quantity: 3 }] }, ALICE);
    assert.equal(taken.status, 409);
    assert.deepEqual(taken.json.error.items, [{ section: 'A', seats: ['1-1'] }]);
    await call('POST', B, '/v1/events/cart/bookings', { section: 'A', quantity: 2, allow_orphans: true }, ALICE);
    const X = '/v1/events/{event_id}/bookings/{booking_id}/extend';
    const xp = `/v1/events/cart/bookings/${b.json.booking_id}/extend`;
    assert.equal((await call('POST', X, xp, { seconds: 60 }, ALICE)).json.expires_at, b.json.expires_at + 60e6);
    assert.equal((await call('POST', X, xp, { seconds: 7200 }, ALICE)).status, 400);
    assert.equal((await call('POST', X, xp, { seconds: 1 }, BOB)).status, 403);
    assert.equal((await call('POST', X, '/v1/events/cart/bookings/999/extend', { seconds: 1 }, ALICE)).status, 404);
    const C = '/v1/events/{event_id}/bookings/{booking_id}/seats';
    const cp = `/v1/events/cart/bookings/${b.json.booking_id}/seats`;
    assert.deepEqual((await call('POST', C, cp, { add: ['2-4'], remove: ['1-1'] }, ALICE)).json.seats, ['2-4']);
    assert.equal((await call('POST', C, cp, { section: 'floor', add_quantity: 2 }, ALICE)).json.items[1].quantity, 5);
    assert.equal((await call('POST', C, cp, { add: ['1-2'] }, ALICE)).status, 409);
    assert.equal((await call('POST', C, cp, {}, ALICE)).status, 400);
    assert.equal((await call('POST', C, cp, { add_quantity: 1 }, BOB)).status, 403);
    const cancelled = await call('POST', C, cp, { section: 'floor', remove_quantity: 5 }, ALICE);
    assert.equal(cancelled.status, 200);
    assert.equal((await call('POST', C, cp, { remove: ['2-4'] }, ALICE)).json.status, 'cancelled');
    assert.equal((await call('POST', C, cp, { add: ['1-1'] }, ALICE)).status, 409);
    assert.equal((await call('POST', X, xp, { seconds: 1 }, ALICE)).status, 409);
  });

  test('operations: health, metrics, admin, cluster', async () => {
    assert.equal((await call('GET', '/healthz', '/healthz')).status, 200);
    assert.match((await call('GET', '/metrics', '/metrics')).text, /strata_http_requests_total/);
    assert.equal((await call('POST', '/v1/admin/flush', '/v1/admin/flush', undefined, ADMIN)).status, 202);
    assert.equal((await call('POST', '/v1/admin/flush', '/v1/admin/flush', undefined, ALICE)).status, 403);
    // the Iceberg tables' commits (SPEC v5 §5.1; tables.test.mjs reads the tables)
    const TB = '/v1/admin/tables';
    const tables = await call('GET', TB, TB, undefined, ADMIN);
    assert.equal(tables.status, 200);
    assert.deepEqual(tables.json.tables.map((t) => t.table), ['messages', 'room_messages', 'bookings']);
    assert.equal((await call('GET', TB, TB, undefined, ALICE)).status, 403);
    assert.equal((await call('GET', TB, TB)).status, 401);
    // the rooms outbox's admin routes (this server has no --route-url: 404; outbox-dead.test.mjs has one)
    const OB = '/v1/admin/outbox', OR = '/v1/admin/outbox/{id}/retry';
    assert.equal((await call('GET', OB, OB, undefined, ADMIN)).status, 404);
    assert.equal((await call('GET', OB, OB, undefined, ALICE)).status, 403);
    assert.equal((await call('GET', OB, OB)).status, 401);
    assert.equal((await call('GET', OB, `${OB}?limit=0`, undefined, ADMIN)).status, 400);
    assert.equal((await call('POST', OR, `${OB}/5/retry`, undefined, ADMIN)).status, 404);
    assert.equal((await call('POST', OR, `${OB}/x/retry`, undefined, ADMIN)).status, 400);
    assert.equal((await call('POST', OR, `${OB}/5/retry`, undefined, ALICE)).status, 403);
    assert.equal((await call('POST', '/v1/admin/reconcile', '/v1/admin/reconcile', undefined, ADMIN)).status, 202);
    await call('POST', '/v1/admin/reconcile', '/v1/admin/reconcile', { counter: 'd1' }, ADMIN);
    const plain = await call('POST', '/v1/admin/reconcile', '/v1/admin/reconcile', { counter: 'c1' }, ADMIN);
    assert.equal(plain.status, 409, 'a plain counter has nothing to recount');
    assert.equal((await call('POST', '/v1/admin/reconcile', '/v1/admin/reconcile', { counter: 'bad name' }, ADMIN)).status, 400);
    assert.equal((await call('POST', '/v1/admin/test/drift', '/v1/admin/test/drift', { counter: 'd1', by: 1 }, ADMIN)).status, 200);
    await call('POST', '/v1/admin/compact', '/v1/admin/compact', {}, ADMIN);
    await call('GET', '/v1/cluster', '/v1/cluster', undefined, ADMIN);
    assert.equal((await call('POST', '/v1/cluster/snapshot', '/v1/cluster/snapshot', {}, MEMBER)).status, 404);
    assert.equal((await call('POST', '/v1/cluster/snapshot', '/v1/cluster/snapshot', {}, ADMIN)).status, 401);
    const rec = { id: 1, http: 'http://127.0.0.1:1', cold: '' };
    assert.equal((await call('POST', '/v1/cluster/announce', '/v1/cluster/announce', rec, MEMBER)).status, 404);
    assert.equal((await call('POST', '/v1/cluster/announce', '/v1/cluster/announce', rec, ADMIN)).status, 401);
    assert.equal((await call('POST', '/v1/cluster/read-index', '/v1/cluster/read-index', {}, MEMBER)).status, 404);
    assert.equal((await call('POST', '/v1/cluster/read-index', '/v1/cluster/read-index', {}, ADMIN)).status, 401);
    const tsig = { room_id: 'rm', user: 'alice', until: 1 };
    // outside a group the group's member-to-member calls are 404, as snapshot's (issue 47)
    assert.equal((await call('POST', '/v1/cluster/typing', '/v1/cluster/typing', tsig, MEMBER)).status, 404);
    assert.equal((await call('POST', '/v1/cluster/typing', '/v1/cluster/typing', tsig, ADMIN)).status, 401);
    const CP = '/v1/cluster/presence';
    const pres = { member: 2, nonce: 'ab'.repeat(16), entries: [{ room_id: 'rm', user: 'alice', online: false }] };
    assert.equal((await call('POST', CP, CP, pres, MEMBER)).status, 404);
    assert.equal((await call('POST', CP, CP, { ...pres, nonce: 'x' }, MEMBER)).status, 400);
    assert.equal((await call('POST', CP, CP, pres, ADMIN)).status, 401);
    // 431 on any route: a head over --max-header (16 KiB by default).
    const text = await raw(s.port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`, { idleMs: 500 });
    const [big] = parseResponses(text);
    check('GET', '/healthz', { status: big.status, headers: big.headers, text: big.body, json: big.json });
    assert.equal(big.status, 431);
  });

  test('the Iceberg REST catalog (SPEC v5 §5.1): answers and Iceberg errors', async () => {
    // strata's own tables: the committer writes each one's v1 at start-up
    const C = '/iceberg/v1/config';
    assert.equal((await call('GET', C, `${C}?warehouse=w`, undefined, ADMIN)).status, 200);
    assert.equal((await call('GET', C, C)).status, 401);
    assert.equal((await call('GET', C, C, undefined, ALICE)).status, 403);
    assert.equal((await call('GET', C, `${C}?bye=1`, undefined, ADMIN)).status, 400);
    const N = '/iceberg/v1/namespaces';
    assert.deepEqual((await call('GET', N, N, undefined, ADMIN)).json.namespaces, [['strata']]);
    assert.equal((await call('GET', N, `${N}?parent=nope`, undefined, ADMIN)).status, 404);
    const NS = '/iceberg/v1/namespaces/{namespace}';
    assert.equal((await call('GET', NS, `${N}/strata`, undefined, ADMIN)).status, 200);
    assert.equal((await call('GET', NS, `${N}/other`, undefined, ADMIN)).status, 404);
    const TL = '/iceberg/v1/namespaces/{namespace}/tables';
    assert.equal((await call('GET', TL, `${N}/strata/tables?pageToken=`, undefined, ADMIN)).status, 200);
    const T = '/iceberg/v1/namespaces/{namespace}/tables/{table}';
    let r;
    for (let i = 0; i < 100; i++) {
      r = await call('GET', T, `${N}/strata/tables/messages?snapshots=refs`, undefined, ADMIN);
      if (r.status === 200) break;
      await sleep(50);
    }
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.metadata['format-version'], 2);
    assert.match(r.json['metadata-location'], /^file:\/\/\/.*\/messages\/metadata\/v\d+\.metadata\.json$/);
    assert.equal((await call('GET', T, `${N}/strata/tables/nope`, undefined, ADMIN)).status, 404);
    assert.equal((await call('GET', T, `${N}/strata/tables/messages?snapshots=x`, undefined, ADMIN)).status, 400);
    assert.equal((await call('GET', T, `${N}/strata/tables/messages`, undefined, BOB)).status, 403);
    const M = '/iceberg/v1/namespaces/{namespace}/tables/{table}/metrics';
    assert.equal((await call('POST', M, `${N}/strata/tables/messages/metrics`, { 'report-type': 'scan-report' }, ADMIN)).status, 204);
    assert.equal((await call('POST', M, `${N}/strata/tables/nope/metrics`, {}, ADMIN)).status, 404);
    assert.equal((await call('POST', M, `${N}/strata/tables/messages/metrics`, 'x', { ...ADMIN, 'content-type': 'text/plain' })).status, 415);
    assert.equal((await call('POST', M, `${N}/strata/tables/messages/metrics`, { pad: 'x'.repeat(5000) }, ADMIN)).status, 413);
    const O = '/iceberg/v1/oauth/tokens';
    assert.equal((await call('POST', O, O, 'grant_type=client_credentials', { 'content-type': 'application/x-www-form-urlencoded' })).json.error, 'unsupported_grant_type');
    assert.equal((await call('POST', O, `${O}?bye=1`)).status, 400);
    // a change is 403 ForbiddenException, in Iceberg's error model
    for (const [m, p] of [['POST', N], ['DELETE', `${N}/strata/tables/messages`], ['POST', '/iceberg/v1/tables/rename']]) {
      const w = await s.req(m, p, m === 'POST' ? {} : undefined, ADMIN);
      assert.equal(w.status, 403, `${m} ${p}`);
      validate(ptr(['components', 'schemas', 'IcebergError']), w.json, `${m} ${p}`);
    }
  });

  test('a live stream: the upgrade and every frame', async () => {
    const T = '/v1/stream';
    const noTok = await wsConnect(s.port, T);
    check('GET', T, { status: noTok.status, headers: { 'content-type': 'application/json', 'www-authenticate': 'Bearer' }, text: noTok.body, json: JSON.parse(noTok.body) });
    assert.equal(noTok.status, 401);
    const ws = await wsConnect(s.port, `${T}?access_token=${ALICE.authorization.slice(7)}&route=user:alice`);
    assert.equal(ws.status, 101);
    covered.add(`GET ${T}`);
    const frame = async () => {
      const f = await ws.next(5000);
      validate(ptr(['components', 'schemas', 'StreamServerFrame']), f.json, `frame ${f.text.slice(0, 100)}`);
      return f.json;
    };
    const subs = [
      { type: 'subscribe', id: 'm', topic: 'messages', user: 'alice', after: '0' },
      { type: 'subscribe', id: 's', topic: 'seats', event_id: 'show' },
      { type: 'subscribe', id: 'c', topic: 'counter', name: 'c1' },
      { type: 'subscribe', id: 'x', topic: 'nope' },
    ];
    for (const sub of subs) {
      if (sub.topic !== 'nope') validate(ptr(['components', 'schemas', 'StreamClientFrame']), sub, 'client frame');
      ws.send(sub);
    }
    const seen = [];
    const until = async (pred) => { for (;;) { const f = await frame(); seen.push(f); if (pred(f)) return f; } };
    const got = new Set();
    await until((f) => { got.add(f.type); return ['error', 'counter', 'replay_done', 'seats'].every((t) => got.has(t)); });
    await s.req('POST', '/v1/users/alice/messages', { conversation_id: 'c2', from: 'alice', content: 'live' }, ALICE);
    await s.req('POST', '/v1/events/show/bookings', { section: 'A', seats: ['2-4'] }, ALICE);
    await s.req('POST', '/v1/counters/c1/incr', { by: 1 }, ADMIN);
    await until((f) => f.type === 'message' && f.message.content === 'live');
    await until((f) => f.type === 'seats' && f.changes);
    await until((f) => f.type === 'counter' && f.value > 1);
    ws.send({ type: 'unsubscribe', id: 'c' });
    ws.close();
    const types = new Set(seen.map((f) => f.type));
    for (const t of ['subscribed', 'message', 'replay_done', 'seats', 'counter', 'error']) assert.ok(types.has(t), t);
  });

  test('every documented operation was exercised, and answered by a route of its own', () => {
    const all = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`));
    assert.deepEqual(all.filter((k) => !covered.has(k)), []);
  });
});
