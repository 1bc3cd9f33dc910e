// SPDX-License-Identifier: MIT
// SPEC §2.1 (v5) over real sockets: room roles. Owners, admins and members with the rights SPEC
// lists; `add` items with a role; PATCH /v1/rooms/{room}/members/{user}; the last owner cannot
// leave or be demoted (409 last_owner); admins edit and delete any message; a global admin may
// do anything; roles survive kill -9; hostile bodies get a 400 naming the field.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startStrata, wsConnect, wsUntil } from './lib.mjs';

const SECRET = 'roles-test-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64({ exp: Math.floor(Date.now() / 1000) + 3600, ...payload });
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const as = (sub, extra = {}) => ({ Authorization: `Bearer ${jwt({ sub, ...extra })}` });
const ADMIN = as('ops', { role: 'admin' });

async function roles(s, room) {
  const r = await s.req('GET', `/v1/rooms/${room}/members?limit=1000`, undefined, ADMIN);
  assert.equal(r.status, 200, r.text);
  return Object.fromEntries(r.json.members.map((m) => [m.user, m.role]));
}

function expectError(r, status, code, field) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.json.error.code, code, r.text);
  if (field) assert.equal(r.json.error.field, field, r.text);
}

describe('room roles (auth on)', () => {
  let s;
  before(async () => { s = await startStrata({ args: ['--jwt-secret', SECRET] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('add items carry roles; the listing shows owner, admin and member', async () => {
    let r = await s.req('POST', '/v1/rooms', { room_id: 'team', members: [] }, as('alice'));
    assert.equal(r.status, 201, r.text);
    r = await s.req('POST', '/v1/rooms/team/members',
      { add: [{ user: 'carol', role: 'admin' }, 'dave', { user: 'erin', role: 'owner' }, { user: 'ivy' }] },
      as('alice'));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.members, 5);
    assert.deepEqual(await roles(s, 'team'),
      { alice: 'owner', carol: 'admin', dave: 'member', erin: 'owner', ivy: 'member' });
    // an existing member is not changed by add (roles change through PATCH)
    r = await s.req('POST', '/v1/rooms/team/members', { add: [{ user: 'dave', role: 'admin' }] }, as('alice'));
    assert.equal(r.status, 200, r.text);
    assert.equal((await roles(s, 'team')).dave, 'member');
  });

  test('admins add members and admins and remove those, never owners; members only leave', async () => {
    let r = await s.req('POST', '/v1/rooms/team/members', { add: ['frank', { user: 'hank', role: 'admin' }] }, as('carol'));
    assert.equal(r.status, 200, r.text);
    r = await s.req('POST', '/v1/rooms/team/members', { add: [{ user: 'gina', role: 'owner' }] }, as('carol'));
    expectError(r, 403, 'forbidden', 'add');
    r = await s.req('POST', '/v1/rooms/team/members', { remove: ['erin'] }, as('carol'));
    expectError(r, 403, 'forbidden', 'remove');
    r = await s.req('POST', '/v1/rooms/team/members', { remove: ['dave'] }, as('carol'));
    assert.equal(r.status, 200, r.text);
    r = await s.req('POST', '/v1/rooms/team/members', { add: ['zed'] }, as('frank'));
    expectError(r, 403, 'forbidden');
    r = await s.req('POST', '/v1/rooms/team/members', { remove: ['ivy'] }, as('frank'));
    expectError(r, 403, 'forbidden');
    r = await s.req('POST', '/v1/rooms/team/members', { remove: ['frank'] }, as('frank'));
    assert.equal(r.status, 200, r.text);
    const now = await roles(s, 'team');
    assert.deepEqual(now, { alice: 'owner', carol: 'admin', erin: 'owner', hank: 'admin', ivy: 'member' });
  });

  test('PATCH changes a role (owners only) and answers the member', async () => {
    let r = await s.req('PATCH', '/v1/rooms/team/members/ivy', { role: 'admin' }, as('carol'));
    expectError(r, 403, 'forbidden');
    r = await s.req('PATCH', '/v1/rooms/team/members/ivy', { role: 'admin' }, as('ivy'));
    expectError(r, 403, 'forbidden');
    r = await s.req('PATCH', '/v1/rooms/team/members/hank', { role: 'member' }, as('alice'));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.user, 'hank');
    assert.equal(r.json.role, 'member');
    assert.equal(typeof r.json.joined_at, 'number');
    assert.equal(r.json.last_read_seq, 0);
    assert.equal(r.json.unread, 0);
    assert.equal((await roles(s, 'team')).hank, 'member');
    r = await s.req('PATCH', '/v1/rooms/team/members/frank', { role: 'admin' }, as('alice'));
    expectError(r, 404, 'not_found'); // frank left
    r = await s.req('PATCH', '/v1/rooms/nope/members/hank', { role: 'admin' }, as('alice'));
    expectError(r, 404, 'not_found');
    // a global admin may do anything
    r = await s.req('PATCH', '/v1/rooms/team/members/ivy', { role: 'admin' }, ADMIN);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.role, 'admin');
  });

  test('the last owner cannot leave or be demoted until ownership passes', async () => {
    let r = await s.req('PATCH', '/v1/rooms/team/members/erin', { role: 'member' }, as('alice'));
    assert.equal(r.status, 200, r.text); // two owners: erin may go down
    r = await s.req('POST', '/v1/rooms/team/members', { remove: ['alice'] }, as('alice'));
    expectError(r, 409, 'last_owner');
    r = await s.req('PATCH', '/v1/rooms/team/members/alice', { role: 'admin' }, as('alice'));
    expectError(r, 409, 'last_owner');
    r = await s.req('PATCH', '/v1/rooms/team/members/alice', { role: 'member' }, ADMIN);
    expectError(r, 409, 'last_owner');
    assert.equal((await roles(s, 'team')).alice, 'owner');
    r = await s.req('PATCH', '/v1/rooms/team/members/carol', { role: 'owner' }, as('alice'));
    assert.equal(r.status, 200, r.text);
    r = await s.req('POST', '/v1/rooms/team/members', { remove: ['alice'] }, as('alice'));
    assert.equal(r.status, 200, r.text);
    r = await s.req('PATCH', '/v1/rooms/team/members/carol', { role: 'member' }, as('carol'));
    expectError(r, 409, 'last_owner');
    // removing the last owner together with adding a new one is fine
    r = await s.req('POST', '/v1/rooms/team/members',
      { add: [{ user: 'olga', role: 'owner' }], remove: ['carol'] }, as('carol'));
    assert.equal(r.status, 200, r.text);
    const now = await roles(s, 'team');
    assert.equal(now.olga, 'owner');
    assert.equal(now.carol, undefined);
  });

  test('admins edit and delete any message; members only their own', async () => {
    let r = await s.req('POST', '/v1/rooms/team/messages', { from: 'hank', content: 'hi' }, as('hank'));
    assert.equal(r.status, 201, r.text);
    const id = r.json.msg_id;
    r = await s.req('PATCH', `/v1/rooms/team/messages/${id}`, { content: 'edited by erin' }, as('erin'));
    expectError(r, 403, 'forbidden'); // erin is a member now
    r = await s.req('PATCH', `/v1/rooms/team/messages/${id}`, { content: 'edited by ivy' }, as('ivy'));
    assert.equal(r.status, 200, r.text); // ivy is an admin
    assert.equal(r.json.content, 'edited by ivy');
    r = await s.req('DELETE', `/v1/rooms/team/messages/${id}`, undefined, as('ivy'));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.content, null);
  });

  test('hostile bodies: a 400 naming what is wrong, nothing changed', async () => {
    const before = await roles(s, 'team');
    const cases = [
      ['PATCH', '/v1/rooms/team/members/ivy', { role: 'boss' }, 'role'],
      ['PATCH', '/v1/rooms/team/members/ivy', {}, 'role'],
      ['PATCH', '/v1/rooms/team/members/ivy', { role: 7 }, 'role'],
      ['PATCH', '/v1/rooms/team/members/ivy', { role: 'owner', bye: 1 }, 'bye'],
      ['PATCH', '/v1/rooms/team/members/bad%20name', { role: 'owner' }, null],
      ['POST', '/v1/rooms/team/members', { add: [{ user: 'x', role: 'god' }] }, 'add[0]'],
      ['POST', '/v1/rooms/team/members', { add: [{ usr: 'x' }] }, 'add[0]'],
      ['POST', '/v1/rooms/team/members', { add: [{ role: 'admin' }] }, 'add[0]'],
      ['POST', '/v1/rooms/team/members', { add: [{ user: 'x' }, 'x'] }, 'add[1]'],
      ['POST', '/v1/rooms/team/members', { add: [['x']] }, 'add[0]'],
    ];
    for (const [m, p, body, field] of cases) {
      const r = await s.req(m, p, body, as('olga'));
      assert.equal(r.status, 400, `${m} ${p} ${JSON.stringify(body)}: ${r.text}`);
      if (field) assert.equal(r.json.error.field, field, `${JSON.stringify(body)}: ${r.text}`);
    }
    const r = await s.req('PATCH', '/v1/rooms/team/members/ivy', '{"role":', as('olga'));
    assert.equal(r.status, 400, r.text);
    assert.deepEqual(await roles(s, 'team'), before);
  });

  test('a global admin that is no member streams the room as a reader, not online in it; a non-member without the role is refused', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'watch', members: ['bob'] }, as('alice'))).status, 201);
    const sub = async (headers, user) => {
      const ws = await wsConnect(s.port, '/v1/stream', headers);
      assert.equal(ws.status, 101);
      ws.send({ type: 'subscribe', id: 'w', topic: 'room', room_id: 'watch', after: '0', ...(user ? { user } : {}) });
      return ws;
    };
    const ops = await sub(ADMIN);
    const first = (await wsUntil(ops, (f) => f.type === 'replay_done' || f.type === 'error')).at(-1);
    assert.equal(first.type, 'replay_done', JSON.stringify(first));
    const r = await s.req('POST', '/v1/rooms/watch/messages', { from: 'bob', content: 'hello ops' }, as('bob'));
    assert.equal(r.status, 201, r.text);
    const got = (await wsUntil(ops, (f) => f.type === 'message')).at(-1).message;
    assert.deepEqual([got.room_id, got.content, got.from], ['watch', 'hello ops', 'bob']);
    // a reader, not a member: presence does not count it
    assert.deepEqual((await s.req('GET', '/v1/rooms/watch/presence', undefined, ADMIN)).json.online, []);
    ops.close();
    // without the admin role a non-member is still refused, and an admin streams as itself only
    const eve = await sub(as('eve'));
    const e = (await wsUntil(eve, (f) => f.type === 'error')).at(-1);
    assert.equal(e.code, 'forbidden', JSON.stringify(e));
    eve.close();
    const other = await sub(ADMIN, 'bob');
    assert.equal((await wsUntil(other, (f) => f.type === 'error')).at(-1).code, 'forbidden');
    other.close();
  });

  test('roles and the owner count survive kill -9', async () => {
    let r = await s.req('PATCH', '/v1/rooms/team/members/ivy', { role: 'owner' }, as('olga'));
    assert.equal(r.status, 200, r.text);
    const want = await roles(s, 'team');
    await s.kill9();
    s = await startStrata({ dataDir: s.dir, args: ['--jwt-secret', SECRET] });
    assert.deepEqual(await roles(s, 'team'), want);
    // two owners (olga, ivy): one may step down, then the other is the last
    r = await s.req('PATCH', '/v1/rooms/team/members/ivy', { role: 'member' }, as('ivy'));
    assert.equal(r.status, 200, r.text);
    r = await s.req('POST', '/v1/rooms/team/members', { remove: ['olga'] }, as('olga'));
    expectError(r, 409, 'last_owner');
  });
});

describe('room roles (auth off)', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('the first member owns the room; roles and last_owner hold without tokens', async () => {
    let r = await s.req('POST', '/v1/rooms', { room_id: 'open', members: ['ann', 'ben'] });
    assert.equal(r.status, 201, r.text);
    r = await s.req('POST', '/v1/rooms/open/members', { remove: ['ann'] });
    expectError(r, 409, 'last_owner');
    r = await s.req('PATCH', '/v1/rooms/open/members/ben', { role: 'owner' });
    assert.equal(r.status, 200, r.text);
    r = await s.req('POST', '/v1/rooms/open/members', { remove: ['ann'] });
    assert.equal(r.status, 200, r.text);
    r = await s.req('PATCH', '/v1/rooms/open/members/ben', { role: 'admin' });
    expectError(r, 409, 'last_owner');
    r = await s.req('GET', '/v1/rooms/open/members');
    assert.deepEqual(r.json.members.map((m) => [m.user, m.role]), [['ben', 'owner']]);
  });
});
