// SPDX-License-Identifier: MIT
// The TypeScript client (clients/js): compiled here with the pinned tsc (strict), then driven
// against the real server — every route with typed results and StrataError codes (room roles and
// last_owner, bookings' owner and finished_at, the outbox's admin routes with and without
// --route-url: a dead letter and its retry); a POST whose
// answer is lost is retried with the same Idempotency-Key and applied once; 503 + Retry-After
// and 307 to the leader are followed; expired and rejected tokens go through the refresh hook;
// a stream survives a server restart and a slow-consumer cut-off with no gap and no duplicate,
// and seats/counter snapshots come again on reconnect; a messages stream without after is live
// only ("0": everything), a counter never written says so; the same client works in Chromium.
import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { clientCleanup, clientDir, loadClient } from './client-lib.mjs';
import { freePort, skipIf, sleep, startStrata } from './lib.mjs';

const SECRET = 'client-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload, secret = SECRET) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64(payload);
  return `${h}.${p}.${createHmac('sha256', secret).update(`${h}.${p}`).digest('base64url')}`;
}
const now = () => Math.floor(Date.now() / 1000);
const admin = () => jwt({ sub: 'ops', role: 'admin', exp: now() + 600 });
async function until(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    if (fn()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

let lib;
before(async () => { lib = await loadClient(); });
after(() => clientCleanup());
const load = loadClient;

describe('the client against the real server', () => {
  let s, port, db;
  before(async () => {
    const { Strata } = await load();
    port = await freePort();
    // --jwt-leeway 1: a stream ends at exp + leeway (SPEC §7), and the expiring stream's test
    // below would wait the default 30 s more for it
    s = await startStrata({ args: ['--listen', `127.0.0.1:${port}`, '--jwt-secret', SECRET, '--jwt-leeway', '1'] });
    db = new Strata({ baseUrl: `http://127.0.0.1:${port}`, token: admin, WebSocket, retries: 30, backoff: { baseMs: 20, capMs: 300 } });
  });
  after(async () => { if (s) { await s.stop(); s.cleanup(); } });

  test('every route, typed results and typed errors', async () => {
    const { StrataError } = await load();
    assert.deepEqual(await db.incr('c', 3), { name: 'c', value: 3 });
    assert.deepEqual(await db.counter('c'), { name: 'c', value: 3 });
    assert.deepEqual(await db.distinct('d', 'm'), { name: 'd', value: 1, added: true });
    assert.deepEqual(await db.next('s', 2), { name: 's', first: 1, last: 2 });
    assert.deepEqual(await db.sequence('s'), { name: 's', last: 2 });
    const alice = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'alice', exp: now() + 600 }) });
    const m = await alice.postMessage('alice', { conversation_id: 'c1', from: 'alice', content: 'hello', metadata: { a: 1 } });
    assert.match(m.msg_id, /^\d+$/);
    assert.equal((await alice.messages('alice', { conversation_id: 'c1' })).messages[0].metadata.a, 1);
    assert.equal((await alice.conversations('alice')).conversations[0].conversation_id, 'c1');
    assert.equal((await alice.conversation('alice', 'c1')).total_messages, 1);
    assert.equal((await alice.stats('alice')).total_messages, 1);
    // rooms (SPEC §2.1): alice creates and owns one, bob joins, both read
    const room = await alice.createRoom({ room_id: 'den', name: 'Den', members: ['bob'] });
    assert.deepEqual([room.room_id, room.members, room.last_msg_id], ['den', 2, null]);
    assert.equal((await alice.changeMembers('den', { add: ['carol'] })).members, 3);
    const rp = await alice.postRoomMessage('den', { from: 'alice', content: 'hi den' });
    assert.deepEqual([rp.room_id, rp.seq], ['den', 1]);
    assert.equal((await alice.roomMessages('den', { order: 'desc' })).messages[0].room_id, 'den');
    assert.equal((await alice.room('den')).last_msg_id, rp.msg_id);
    assert.deepEqual((await alice.roomMembers('den', { limit: 1 })).members.map((x) => x.role), ['owner']);
    assert.deepEqual(await alice.markRead('den', 'alice', 1), { room_id: 'den', user: 'alice', last_read_seq: 1, unread: 0 });
    assert.deepEqual((await alice.userRooms('alice')).rooms.map((x) => [x.room_id, x.unread]), [['den', 0]]);
    // edits, deletes and erasure (SPEC §2.2): PATCH and DELETE carry idempotency keys like POSTs
    const ed = await alice.editMessage('alice', m.msg_id, { content: 'hello!' });
    assert.deepEqual([ed.content, ed.edit_history[0].content], ['hello!', 'hello']);
    const tomb = await alice.deleteMessage('alice', m.msg_id);
    assert.equal(tomb.content, null);
    assert.deepEqual(await alice.deleteMessage('alice', m.msg_id), tomb);
    await assert.rejects(alice.editMessage('alice', m.msg_id, { content: 'x' }), (e) => e instanceof StrataError && e.status === 409);
    assert.deepEqual((await alice.messages('alice', { include_deleted: false })).messages, []);
    const re = await alice.editRoomMessage('den', rp.msg_id, { content: 'hi den!' });
    assert.deepEqual([re.room_id, re.content], ['den', 'hi den!']);
    assert.equal((await alice.deleteRoomMessage('den', rp.msg_id)).content, null);
    assert.equal((await alice.deleteConversation('alice', 'c1')).deleted, 0);
    const er = await db.eraseUser('zed');
    assert.match(er.erasure_id, /^\d+$/);
    assert.ok(['pending', 'done'].includes((await db.erasure(er.erasure_id)).status));
    const ev = await db.createEvent({ event_id: 'gig', sections: [{ name: 'A', rows: 2, cols: 3, price: 7 }] });
    assert.equal(ev.event_stats.total, 6);
    assert.equal((await db.events()).events[0].event_id, 'gig');
    assert.equal((await db.event('gig')).sections.A.price, 7);
    assert.equal((await db.seatMap('gig', 'A')).encoding, '2bit-base64');
    assert.deepEqual((await db.seatMap('gig', 'A', 'json')).seats, [[0, 0, 0], [0, 0, 0]]);
    const b = await db.book('gig', { section: 'A', seats: ['1-1'] });
    assert.equal(b.total_price, 7);
    assert.equal((await db.booking(b.booking_id)).status, 'reserved');
    assert.equal((await db.confirm(b.booking_id)).status, 'sold');
    const b2 = await db.book('gig', { section: 'A', quantity: 2 });
    assert.equal((await db.cancel(b2.booking_id)).status, 'cancelled');
    // the event's bookings (SPEC §4.2): newest first, by status, paged
    const page = await db.bookings('gig', { limit: 1 });
    assert.deepEqual(page.bookings.map((x) => x.booking_id), [b2.booking_id]);
    assert.deepEqual((await db.bookings('gig', { cursor: page.next })).bookings.map((x) => x.booking_id), [b.booking_id]);
    assert.deepEqual((await db.bookings('gig', { status: 'sold' })).bookings.map((x) => x.booking_id), [b.booking_id]);
    // the cart (SPEC §4.1): items over several sections, GA, extend, change seats
    await db.createEvent({ event_id: 'cart', sections: [{ name: 'A', rows: 1, cols: 4, price: 1 }, { name: 'F', capacity: 5, price: 2 }] });
    const c = await db.book('cart', { items: [{ section: 'A', quantity: 2 }, { section: 'F', quantity: 3 }] });
    assert.deepEqual(c.items, [{ section: 'A', seats: ['1-1', '1-2'], quantity: 2 }, { section: 'F', seats: [], quantity: 3 }]);
    assert.equal((await db.extend('cart', c.booking_id, 60)).expires_at, c.expires_at + 60e6);
    assert.deepEqual((await db.changeSeats('cart', c.booking_id, { add: ['1-4'], remove: ['1-1'] })).seats, ['1-2', '1-4']);
    assert.equal((await db.changeSeats('cart', c.booking_id, { section: 'F', add_quantity: 2 })).total_price, 2 + 10);
    assert.equal((await db.health()).status, 'ok');
    assert.match(await db.metrics(), /strata_http_requests_total/);
    assert.equal((await db.flush()).flushing >= 0, true);
    assert.equal(typeof (await db.reconcile()).pass, 'number'); // every key: 202, in the background
    // Errors are StrataError with the status and the code of the error body.
    const err = (p) => p.then(() => assert.fail('no error'), (e) => e);
    assert.equal((await err(db.changeSeats('cart', c.booking_id, { add: ['1-2'] }))).code, 'seats_unavailable');
    const nf = await err(db.counter('never'));
    assert.ok(nf instanceof StrataError);
    assert.deepEqual([nf.status, nf.code], [404, 'not_found']);
    const taken = await err(db.book('gig', { section: 'A', seats: ['1-1'] }));
    assert.deepEqual([taken.status, taken.code, taken.body.seats], [409, 'seats_unavailable', ['1-1']]);
    const final = await err(db.confirm(b.booking_id));
    assert.deepEqual([final.code, final.body.booking.status], ['conflict', 'sold']);
    assert.equal((await err(db.incr('bad name'))).code, 'invalid_argument');
    assert.equal((await err(alice.stats('bob'))).status, 403);
    const anon = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}` });
    assert.equal((await err(anon.counter('c'))).code, 'unauthenticated');
  });

  // SPEC §2.1 v5: add items with a role, setRoomMemberRole answering the member, `admin` in the
  // listing, and 409 last_owner as StrataError's code.
  test('room roles: add with a role, setRoomMemberRole, the listing, last_owner', async () => {
    const { StrataError } = await load();
    const as = (sub) => new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub, exp: now() + 600 }) });
    const ann = as('ann'), cal = as('cal');
    const err = (p) => p.then(() => assert.fail('no error'), (e) => e);
    await ann.createRoom({ room_id: 'roles', members: ['bob'] });
    assert.deepEqual(await ann.changeMembers('roles', { add: [{ user: 'cal', role: 'admin' }, 'dee', { user: 'eve' }] }), { room_id: 'roles', members: 5 });
    const roles = async () => Object.fromEntries((await ann.roomMembers('roles')).members.map((m) => [m.user, m.role]));
    assert.deepEqual(await roles(), { ann: 'owner', bob: 'member', cal: 'admin', dee: 'member', eve: 'member' });
    const bob = await ann.setRoomMemberRole('roles', 'bob', 'admin');
    assert.deepEqual(Object.keys(bob).sort(), ['joined_at', 'last_read_seq', 'role', 'unread', 'user']);
    assert.deepEqual([bob.user, bob.role, bob.last_read_seq, bob.unread], ['bob', 'admin', 0, 0]);
    assert.equal(typeof bob.joined_at, 'number');
    assert.equal((await ann.setRoomMemberRole('roles', 'dee', 'owner')).role, 'owner');
    assert.equal((await ann.setRoomMemberRole('roles', 'dee', 'member')).role, 'member');
    assert.deepEqual(await roles(), { ann: 'owner', bob: 'admin', cal: 'admin', dee: 'member', eve: 'member' });
    // an admin of the room adds and removes members but changes no role
    assert.equal((await cal.changeMembers('roles', { remove: ['eve'] })).members, 4);
    const denied = await err(cal.setRoomMemberRole('roles', 'dee', 'admin'));
    assert.ok(denied instanceof StrataError);
    assert.deepEqual([denied.status, denied.code], [403, 'forbidden']);
    assert.equal((await err(ann.setRoomMemberRole('roles', 'zoe', 'admin'))).status, 404, 'not a member');
    // the last owner neither leaves nor is demoted: 409 last_owner, and nothing changed
    // thunks, each awaited in turn: two promises made at once leave the second's rejection
    // unhandled while the first is awaited
    for (const call of [() => ann.changeMembers('roles', { remove: ['ann'] }), () => ann.setRoomMemberRole('roles', 'ann', 'admin')]) {
      const e = await err(call());
      assert.ok(e instanceof StrataError);
      assert.deepEqual([e.status, e.code, e.body.code], [409, 'last_owner', 'last_owner']);
    }
    assert.equal((await roles()).ann, 'owner');
    // ownership passes by a role change first, then the old owner may step down and leave
    await ann.setRoomMemberRole('roles', 'bob', 'owner');
    assert.equal((await ann.setRoomMemberRole('roles', 'ann', 'member')).role, 'member');
    assert.equal((await ann.changeMembers('roles', { remove: ['ann'] })).members, 3);
    assert.equal((await err(ann.roomMembers('roles'))).status, 403, 'ann is out');
    const bobc = as('bob');
    assert.equal((await err(bobc.setRoomMemberRole('roles', 'bob', 'member'))).code, 'last_owner');
    // SPEC §2.1 v5: an owner deletes the room: 404 at once, the erasure names the room
    assert.equal((await err(cal.deleteRoom('roles'))).status, 403, 'an admin of the room may not');
    const gone = await bobc.deleteRoom('roles');
    assert.match(gone.erasure_id, /^\d+$/);
    assert.equal((await err(bobc.roomMembers('roles'))).status, 404);
    const adminc = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'ops', role: 'admin', exp: now() + 600 }) });
    const st = await adminc.erasure(gone.erasure_id);
    assert.equal(st.room_id, 'roles');
    assert.equal(st.user, undefined);
  });

  // SPEC §4.2: a booking carries the token's sub as owner, and finished_at once sold or cancelled.
  test('bookings carry owner (the token\'s sub) and finished_at (null while reserved)', async () => {
    const kay = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'kay', exp: now() + 600 }) });
    await db.createEvent({ event_id: 'owned', sections: [{ name: 'A', rows: 1, cols: 4, price: 3 }] });
    const b = await kay.book('owned', { section: 'A', seats: ['1-1'] });
    assert.deepEqual([b.owner, b.finished_at, b.status], ['kay', null, 'reserved']);
    assert.deepEqual([(await kay.booking(b.booking_id)).owner, (await kay.booking(b.booking_id, 'owned')).finished_at], ['kay', null]);
    const sold = await kay.confirm(b.booking_id);
    assert.equal(sold.owner, 'kay');
    assert.equal(typeof sold.finished_at, 'number');
    assert.ok(sold.finished_at >= b.created_at && sold.finished_at <= Date.now() * 1000 + 1e6, `finished_at ${sold.finished_at}`);
    assert.equal((await kay.booking(b.booking_id)).finished_at, sold.finished_at);
    const mine = await db.book('owned', { section: 'A', quantity: 1 });
    assert.deepEqual([mine.owner, mine.finished_at], ['ops', null]);
    const gone = await db.cancel(mine.booking_id, 'owned');
    assert.deepEqual([gone.status, typeof gone.finished_at], ['cancelled', 'number']);
    assert.deepEqual((await db.bookings('owned', { owner: 'kay' })).bookings.map((x) => [x.owner, x.finished_at]), [['kay', sold.finished_at]]);
  });

  // SPEC §10: the outbox's admin routes. Here (no --route-url) both are 404 StrataErrors; a second
  // strata with --route-url at a stand-in receiving group (it refuses one user's records with a
  // 400, then accepts) lists its outbox, holds the refused record as a dead letter, and sends it
  // again on retry.
  test('the outbox admin routes: 404 without --route-url; list, dead letter and retry with it', async () => {
    const { StrataError } = await load();
    const err = (p) => p.then(() => assert.fail('no error'), (e) => e);
    for (const call of [() => db.outbox(), () => db.outbox({ limit: 5 }), () => db.retryOutbox('7')]) {
      const e = await err(call());
      assert.ok(e instanceof StrataError);
      assert.deepEqual([e.status, e.code], [404, 'not_found']);
    }
    let refuse = true;
    const got = [];
    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const no = refuse && req.url.startsWith('/v1/users/guest/');
        got.push([req.url, no ? 400 : 200]);
        res.writeHead(no ? 400 : 200, { 'content-type': 'application/json' });
        res.end(no ? '{"error":{"code":"invalid_argument","message":"test: refused"}}' : '{}');
      });
    });
    await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
    const routeUrl = `http://127.0.0.1:${receiver.address().port}`;
    const b = await startStrata({ args: ['--jwt-secret', SECRET, '--cluster-secret', 'client-test-cluster-secret-of-32-bytes', '--route-url', routeUrl] });
    try {
      const bdb = new lib.Strata({ baseUrl: `http://127.0.0.1:${b.port}`, token: admin, retries: 30, backoff: { baseMs: 20, capMs: 300 } });
      assert.deepEqual(await bdb.outbox(), { route_url: routeUrl, pending: [], dead: [], pending_count: 0, dead_count: 0 });
      await bdb.createRoom({ room_id: 'hall', name: 'Hall', members: ['guest'] });
      let ob;
      for (const end = Date.now() + 20000; ;) {
        ob = await bdb.outbox({ limit: 10 });
        if (ob.dead.length === 1 && ob.pending.length === 0) break;
        if (Date.now() > end) assert.fail(`no dead letter: ${JSON.stringify(ob)}`);
        await sleep(50);
      }
      const dead = ob.dead[0];
      assert.deepEqual([dead.kind, dead.user, dead.room_id, dead.name, dead.status, ob.dead_count, ob.pending_count], ['added', 'guest', 'hall', 'Hall', 400, 1, 0]);
      assert.match(dead.id, /^\d+$/);
      assert.match(dead.answer, /test: refused/);
      assert.equal(typeof dead.joined_at, 'number');
      assert.equal(typeof dead.dead_at, 'number');
      refuse = false;
      const again = await bdb.retryOutbox(dead.id);
      assert.deepEqual([again.retried, again.kind, again.user, again.room_id], [dead.id, 'added', 'guest', 'hall']);
      assert.ok(BigInt(again.id) > BigInt(dead.id), 'pending again under a new id');
      for (const end = Date.now() + 20000; ;) {
        ob = await bdb.outbox();
        if (ob.dead.length === 0 && ob.pending.length === 0) break;
        if (Date.now() > end) assert.fail(`not delivered: ${JSON.stringify(ob)}`);
        await sleep(50);
      }
      const sent = got.filter(([u]) => u.startsWith('/v1/users/guest/')).map(([, st]) => st);
      assert.ok(sent[0] === 400 && sent.filter((st) => st === 400).length === 1 && sent.includes(200), `refused once (not sent again while dead), then delivered: ${sent}`);
      const twice = await err(bdb.retryOutbox(dead.id));
      assert.deepEqual([twice.status, twice.code], [404, 'not_found'], 'a dead letter is retried once');
    } finally {
      await b.stop();
      b.cleanup();
      receiver.close();
    }
  });

  test('a POST whose answer is lost is retried with the same Idempotency-Key and applied once', async () => {
    const keys = [];
    let lost = 0;
    const flaky = async (url, init) => {
      const res = await fetch(url, init);
      if (String(url).includes('/incr')) keys.push(init.headers['idempotency-key']);
      if (String(url).includes('/incr') && lost++ === 0) {
        await res.text(); // the server applied it; the answer never arrives
        throw new TypeError('fetch failed: socket hang up');
      }
      return res;
    };
    const c = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: admin, fetch: flaky, backoff: { baseMs: 5 } });
    assert.deepEqual(await c.incr('once', 5), { name: 'once', value: 5 });
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1], 'the retry carries the same key');
    assert.deepEqual(await db.counter('once'), { name: 'once', value: 5 }, 'applied once');
    await c.incr('once', 5);
    assert.notEqual(keys[2], keys[0], 'a new call gets a new key');
  });

  test('503 with Retry-After is retried, and 307 is followed to the leader (method, body, token kept)', async () => {
    let hits = 0;
    const follower = http.createServer((req, res) => {
      hits++;
      if (hits === 1) {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' });
        res.end('{"error":{"code":"no_leader","message":"electing"}}');
        return;
      }
      res.writeHead(307, { location: `http://127.0.0.1:${port}${req.url}` });
      res.end();
    });
    await new Promise((r) => follower.listen(0, '127.0.0.1', r));
    try {
      const c = new lib.Strata({ baseUrl: `http://127.0.0.1:${follower.address().port}`, token: admin });
      assert.deepEqual(await c.incr('led', 4), { name: 'led', value: 4 });
      assert.deepEqual(await c.counter('led'), { name: 'led', value: 4 });
      assert.equal(hits, 3);
    } finally { follower.close(); }
  });

  test('an expired token and a rejected one go through the refresh hook', async () => {
    let calls = 0;
    const refreshToken = async () => { calls++; return admin(); };
    const expired = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'ops', role: 'admin', exp: now() - 10 }), refreshToken });
    assert.equal((await expired.incr('r')).value, 1);
    assert.equal(calls, 1, 'refreshed before sending, from exp');
    const forged = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'ops', role: 'admin' }, 'wrong'), refreshToken });
    assert.equal((await forged.incr('r')).value, 2);
    assert.equal(calls, 2, 'refreshed on the 401');
  });

  test('a room stream: replay, live messages, edits and membership changes to their handlers', async () => {
    const kim = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'kim', exp: now() + 600 }), WebSocket, retries: 30, backoff: { baseMs: 20, capMs: 200 } });
    await kim.createRoom({ room_id: 'lounge', members: ['lee'] });
    const first = await kim.postRoomMessage('lounge', { from: 'kim', content: 'before' });
    const got = [], edits = [], members = [], typing = [], presence = [];
    const st = kim.stream({ topic: 'room', room_id: 'lounge', after: '0' }, {
      onRoomMessage: (m) => got.push(m), onEdit: (k, m) => edits.push([k, m.content]), onMember: (x) => members.push([x.user, x.change]),
      onTyping: (t) => typing.push(t), onPresence: (p) => presence.push([p.room_id, p.user, p.online]),
    });
    await st.ready;
    await until('the replay', () => got.length === 1);
    await kim.postRoomMessage('lounge', { from: 'kim', content: 'live' });
    await kim.editRoomMessage('lounge', first.msg_id, { content: 'before!' });
    await kim.changeMembers('lounge', { add: ['max'] });
    await until('the message, the edit, the member', () => got.length === 2 && edits.length === 1 && members.length === 1);
    assert.deepEqual(got.map((m) => [m.room_id, m.content]), [['lounge', 'before'], ['lounge', 'live']]);
    assert.deepEqual(edits, [['edited', 'before!']]);
    assert.deepEqual(members, [['max', 'added']]);
    // SPEC §2.1 v5: typing, ephemeral, to onTyping
    assert.equal(await kim.typing('lounge', 'kim'), undefined);
    await until('the typing frame', () => typing.length === 1);
    assert.deepEqual([typing[0].room_id, typing[0].user], ['lounge', 'kim']);
    assert.ok(typing[0].until > Date.now() * 1000, 'until is ahead');
    // SPEC §2.1 v5: presence — kim's own stream makes it online, to onPresence and roomPresence
    await until('the presence frame', () => presence.length === 1);
    assert.deepEqual(presence, [['lounge', 'kim', true]]);
    assert.deepEqual(await kim.roomPresence('lounge'), { room_id: 'lounge', online: ['kim'] });
    st.close();
  });

  // SPEC v4 §3 (issue 38 items 3 and 6): without after a messages stream is live only, "0"
  // replays everything; a counter never written says so (value 0, exists false; HTTP: 404).
  test('a messages stream without after is live only, after "0" replays all; a counter never written is not "exists"', async () => {
    const lou = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'lou', exp: now() + 600 }), WebSocket, retries: 30, backoff: { baseMs: 20, capMs: 200 } });
    for (let i = 0; i < 3; i++) await lou.postMessage('lou', { conversation_id: 'h', from: 'lou', content: `old ${i}` });
    const live = [], all = [], counters = [];
    let done = 0;
    const a = lou.stream({ topic: 'messages', user: 'lou' }, { onMessage: (m) => live.push(m.content), onReplayDone: () => done++ });
    const b = lou.stream({ topic: 'messages', user: 'lou', after: '0' }, { onMessage: (m) => all.push(m.content), onReplayDone: () => done++ });
    const c = db.stream({ topic: 'counter', name: 'never-yet' }, { onCounter: (v, i) => counters.push([v, i.exists]) });
    await Promise.all([a.ready, b.ready, c.ready]);
    await until('both replays and the counter', () => done === 2 && all.length === 3 && counters.length === 1);
    await lou.postMessage('lou', { conversation_id: 'h', from: 'lou', content: 'new' });
    await db.incr('never-yet', 2);
    await until('the live message on both, the counter', () => live.length === 1 && all.length === 4 && counters.length === 2);
    assert.deepEqual(live, ['new'], 'no history without after');
    assert.deepEqual(all, ['old 0', 'old 1', 'old 2', 'new']);
    assert.deepEqual(counters, [[0, false], [2, true]]);
    await assert.rejects(db.counter('still-never'), (e) => e.status === 404 && e.code === 'not_found');
    a.close(); b.close(); c.close();
  });

  test('a stream survives a server crash and restart: no gap, no duplicate, snapshots again', async () => {
    const alice = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'alice', exp: now() + 600 }), WebSocket, retries: 30, backoff: { baseMs: 20, capMs: 200 } });
    const got = [], states = [], counters = [], snapshots = [];
    for (let i = 0; i < 3; i++) await alice.postMessage('alice', { conversation_id: 'r', from: 'alice', content: `before ${i}` });
    await db.incr('rc', 3);
    await db.createEvent({ event_id: 'rgig', sections: [{ name: 'A', rows: 1, cols: 2 }] });
    const st = alice.stream({ topic: 'messages', user: 'alice', conversation_id: 'r', after: '0' }, { onMessage: (m) => got.push(m), onState: (x) => states.push(x) });
    const ct = db.stream({ topic: 'counter', name: 'rc' }, { onCounter: (v) => counters.push(v) });
    const se = db.stream({ topic: 'seats', event_id: 'rgig' }, { onSnapshot: (e) => snapshots.push(e) });
    await Promise.all([st.ready, ct.ready, se.ready]);
    await until('the replay', () => got.length === 3 && counters.length === 1 && snapshots.length === 1);
    await s.kill9(); // a crash: nothing is closed cleanly
    // Written while the server is down: the client retries until it is back.
    const writes = (async () => {
      for (let i = 0; i < 2; i++) await alice.postMessage('alice', { conversation_id: 'r', from: 'alice', content: `after ${i}` });
      await db.incr('rc', 10);
    })();
    await sleep(150);
    s = await startStrata({ dataDir: s.dir, args: ['--listen', `127.0.0.1:${port}`, '--jwt-secret', SECRET, '--jwt-leeway', '1'] });
    await writes;
    await until('the messages written across the restart', () => got.length >= 5);
    await until('the counter after the restart', () => counters.at(-1) === 13);
    await until('a fresh seats snapshot', () => snapshots.length >= 2);
    assert.deepEqual(got.map((m) => m.content), ['before 0', 'before 1', 'before 2', 'after 0', 'after 1']);
    assert.deepEqual(got.map((m) => m.seq), [1, 2, 3, 4, 5]);
    assert.ok(states.includes('reconnecting'));
    assert.equal(st.lastMsgId, got.at(-1).msg_id);
    const refused = db.stream({ topic: 'seats', event_id: 'no-such-event' }, {});
    await assert.rejects(refused.ready, (e) => e.code === 'not_found', 'a refused subscription rejects ready and stops');
    assert.ok(counters.length >= 2, 'the counter came again after the reconnect');
    st.close(); ct.close(); se.close();
  });

  test('a stream whose token expires (1008 "token expired") refreshes it and resumes', async () => {
    let refreshed = 0;
    const dave = new lib.Strata({
      baseUrl: `http://127.0.0.1:${port}`, WebSocket, backoff: { baseMs: 20, capMs: 200 },
      token: jwt({ sub: 'dave', exp: now() + 9 }), // outlives the 5 s early-refresh margin at connect, even a slow one
      refreshToken: () => { refreshed++; return jwt({ sub: 'dave', exp: now() + 600 }); },
    });
    const writer = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'dave', exp: now() + 600 }) });
    const got = [], closes = [];
    const st = dave.stream({ topic: 'messages', user: 'dave' }, {
      onMessage: (m) => got.push(m.content),
      onState: (x, d) => { if (x === 'reconnecting' && d?.code) closes.push(`${d.code} ${d.reason}`); },
    });
    await st.ready;
    await writer.postMessage('dave', { conversation_id: 'x', from: 'dave', content: 'one' });
    await until('the close for the expired token', () => closes.length > 0, 20000);
    assert.deepEqual(closes, ['1008 token expired']);
    await until('the refresh', () => refreshed === 1);
    await writer.postMessage('dave', { conversation_id: 'x', from: 'dave', content: 'two' });
    await until('the message after the refresh', () => got.length === 2);
    assert.deepEqual(got, ['one', 'two']);
    st.close();
  });

  test('a stream cut off as a slow consumer resumes from the last msg_id: no gap, no duplicate', async () => {
    const sockets = [];
    class PausableWS extends WebSocket {
      constructor(url) { super(url); sockets.push(this); }
    }
    const bob = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'bob', exp: now() + 600 }), WebSocket: PausableWS, backoff: { baseMs: 20, capMs: 200 } });
    const got = [], closes = [];
    const st = bob.stream({ topic: 'messages', user: 'bob' }, {
      onMessage: (m) => got.push(m),
      onState: (x, d) => { if (x === 'reconnecting' && d?.code) closes.push(d); },
    });
    await st.ready;
    sockets[0]._socket.pause(); // the app stops reading
    // Messages of 2 KB (a replay page of 256 stays under the server's 1 MiB queue limit), posted
    // 16 at a time until the kernel's buffers and strata's queue are full and the stream is cut.
    const pad = 'x'.repeat(2000);
    const writers = Array.from({ length: 16 }, () => new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: jwt({ sub: 'bob', exp: now() + 600 }) }));
    let N = 0;
    const dropped = async () => /strata_ws_slow_consumer_drops_total [1-9]/.test((await s.req('GET', '/metrics')).text);
    while (N < 40000 && !(await dropped())) {
      await Promise.all(writers.map(async (w, k) => {
        for (let i = 0; i < 32; i++) await w.postMessage('bob', { conversation_id: 'flood', from: 'bob', content: `${N + k * 32 + i} ${pad}` });
      }));
      N += 16 * 32;
    }
    assert.ok(await dropped(), 'the paused stream was cut off as a slow consumer');
    sockets[0]._socket.resume();
    await until('every message', () => got.length >= N, 60000);
    assert.ok(closes.length >= 1, 'the stream was cut off and reconnected');
    assert.equal(got.length, N);
    assert.deepEqual(got.map((m) => m.seq), Array.from({ length: N }, (_, i) => i + 1), 'in order, no gap, no duplicate');
    assert.equal(new Set(got.map((m) => m.msg_id)).size, N);
    st.close();
  });
});

// README's setup: tokens from an identity provider (RS256, keys at a JWKS URL, roles where
// Keycloak puts them), the client's refresh hook standing for the provider's SDK. (Key rotation
// at the provider is auth-idp.test.mjs's.)
describe('the client with an identity provider\'s RS256 tokens (JWKS URL, realm_access.roles)', () => {
  const ISS = 'https://sso.example/realms/shop';
  const pair = (kid) => {
    const k = generateKeyPairSync('rsa', { modulusLength: 2048 });
    return { kid, priv: k.privateKey, jwk: { ...k.publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' } };
  };
  const key = pair('kc-1'), keys = [key.jwk];
  let idp, s, port;
  // what the provider's SDK hands the app (keycloak-js: kc.token after kc.updateToken())
  const accessToken = (sub, roles, ttl = 600) => {
    const h = b64({ alg: 'RS256', typ: 'JWT', kid: key.kid });
    const p = b64({ iss: ISS, aud: ['account', 'strata'], sub, exp: now() + ttl, realm_access: { roles } });
    return `${h}.${p}.${sign('sha256', Buffer.from(`${h}.${p}`), key.priv).toString('base64url')}`;
  };
  before(async () => {
    idp = http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify({ keys })); });
    await new Promise((r) => idp.listen(0, '127.0.0.1', r));
    port = await freePort();
    s = await startStrata({ args: ['--listen', `127.0.0.1:${port}`, '--jwt-jwks-url', `http://127.0.0.1:${idp.address().port}/realms/shop/protocol/openid-connect/certs`,
      '--jwt-issuer', ISS, '--jwt-audience', 'strata', '--jwt-roles-claim', 'realm_access.roles'] });
  });
  after(async () => { if (s) { await s.stop(); s.cleanup(); } idp?.close(); });

  test('admin and user routes, a stream, refreshes before exp and on a 401', async () => {
    const { StrataError } = await load();
    let refreshes = 0;
    const ops = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: accessToken('ops', ['offline_access', 'admin']), retries: 30, backoff: { baseMs: 20, capMs: 200 } });
    await ops.createEvent({ event_id: 'kc', sections: [{ name: 'A', rows: 1, cols: 2 }] }); // the first key set may still be on its way: 503s are retried
    const ann = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: accessToken('ann', ['user'], 3), WebSocket,
      refreshToken: () => { refreshes++; return accessToken('ann', ['user']); } });
    assert.equal(refreshes, 0);
    await assert.rejects(ann.createEvent({ event_id: 'kc2', sections: [{ name: 'A', rows: 1, cols: 1 }] }),
      (e) => e instanceof StrataError && e.status === 403, 'no admin among the realm roles');
    assert.equal(refreshes, 1, 'a token within 5 s of its exp is refreshed before it is sent');
    const got = [];
    const st = ann.stream({ topic: 'messages', user: 'ann', conversation_id: 'kc' }, { onMessage: (m) => got.push(m) });
    await st.ready;
    await ann.postMessage('ann', { conversation_id: 'kc', from: 'ann', content: 'hi' });
    await until('the live message', () => got.length === 1);
    assert.equal(got[0].content, 'hi');
    const bob = new lib.Strata({ baseUrl: `http://127.0.0.1:${port}`, token: 'expired-or-garbage', refreshToken: () => accessToken('bob', ['user']) });
    assert.equal((await bob.postMessage('bob', { conversation_id: 'kc', from: 'bob', content: 'hello' })).seq, 1, 'a 401, then the hook\'s token');
    st.close();
  });
});

const CHROMIUM = '/usr/bin/chromium';
const puppeteer = (await import('puppeteer-core')).default;
describe('the client in a browser', { skip: skipIf(!existsSync(CHROMIUM) && `${CHROMIUM} not installed (tools/install-deps.sh --test)`) }, () => {
  test('posts, reads and streams from a page on another origin (CORS, global fetch and WebSocket)', async () => {
    const pages = http.createServer((req, res) => {
      const f = req.url === '/' ? null : path.join(clientDir(), path.basename(req.url));
      if (f && !existsSync(f)) { res.writeHead(404); res.end(); return; }
      res.writeHead(200, { 'content-type': f ? 'text/javascript' : 'text/html' });
      res.end(f ? readFileSync(f) : '<!doctype html><title>client</title>');
    });
    await new Promise((r) => pages.listen(0, '127.0.0.1', r));
    const origin = `http://127.0.0.1:${pages.address().port}`;
    const s = await startStrata({ args: ['--jwt-secret', SECRET, '--cors-origins', origin] });
    const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
    try {
      const page = await browser.newPage();
      await page.goto(`${origin}/`);
      const token = jwt({ sub: 'carol', exp: now() + 600 });
      const res = await page.evaluate(async (base, token) => {
        const { Strata } = await import('/index.js');
        const db = new Strata({ baseUrl: base, token });
        const got = [];
        const st = db.stream({ topic: 'messages', user: 'carol' }, { onMessage: (m) => got.push(m.content) });
        await st.ready;
        await db.postMessage('carol', { conversation_id: 'web', from: 'carol', content: 'from the page' });
        const page = await db.messages('carol');
        for (let i = 0; i < 1200 && got.length < 1; i++) await new Promise((r) => setTimeout(r, 25)); // up to 30 s
        st.close();
        let code;
        try { await db.counter('never'); } catch (e) { code = `${e.name} ${e.status} ${e.code}`; }
        return { listed: page.messages.map((m) => m.content), streamed: got, code };
      }, `http://127.0.0.1:${s.port}`, token);
      assert.deepEqual(res, { listed: ['from the page'], streamed: ['from the page'], code: 'StrataError 404 not_found' });
    } finally {
      await browser.close();
      pages.close();
      await s.stop();
      s.cleanup();
    }
  });
});
