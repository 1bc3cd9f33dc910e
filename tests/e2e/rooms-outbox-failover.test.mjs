// SPDX-License-Identifier: MIT
// The rooms outbox across a leader failover (SPEC §8, §10). The rooms live on a 3-member group
// whose --route-url is a small HTTP relay in front of the users' group (one node); the relay logs
// every call and can hold the answers (the user's group applies the change, the room group never
// hears back) or drop the calls (the route is down). While the route is down, 75 membership
// changes pile up in the outbox; the leader is killed -9 with a call of its own applied but not
// answered; the new leader finds every record, stages more under the same origin, and once the
// route is back delivers them all: every acknowledged change is in the users' room lists
// ("remote":true, adds and removes of one user in their order), each Idempotency-Key was applied
// once (the resent one answered as a replay), seqs in order with no gap, strata_outbox_pending 0
// on every member, and the old leader, restarted as a follower with a route of its own, sends
// nothing. Then the new leader is killed -9 while it delivers through a slow route, and the next
// one delivers the rest, again each change once and in order.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, test } from 'node:test';
import { freePort, Group } from './cluster-lib.mjs';
import { sleep, startStrata } from './lib.mjs';

// A relay on `port` to the strata on `target`: mode 'open' relays, 'slow' answers 100 ms late,
// 'hold' relays the request but never answers (strata's call times out), 'down' drops the
// connection unread. Every call is logged with the users' group's answer.
function relay(target) {
  const r = { mode: 'open', log: [], held: 0, servers: [], sockets: new Set() };
  r.listen = (port, tag) => new Promise((resolve) => {
    const srv = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const e = { tag, mode: r.mode, key: req.headers['idempotency-key'], path: req.url,
          body: Buffer.concat(chunks).toString() };
        r.log.push(e);
        if (r.mode === 'down') { req.socket.destroy(); return; }
        if (r.mode === 'hold') r.held++;
        const mode = r.mode;
        const up = http.request({ host: '127.0.0.1', port: target, method: req.method, path: req.url, agent: false,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(e.body),
            ...(e.key ? { 'idempotency-key': e.key } : {}) } }, (ur) => {
          const out = [];
          ur.on('data', (c) => out.push(c));
          ur.on('end', () => {
            const text = Buffer.concat(out).toString();
            e.status = ur.statusCode;
            e.replayed = ur.headers['idempotent-replayed'] === 'true';
            try { e.json = JSON.parse(text); } catch { e.json = undefined; }
            if (mode === 'hold') return; // applied there, never answered here
            setTimeout(() => {
              res.writeHead(ur.statusCode, { 'content-type': 'application/json', ...(e.replayed ? { 'idempotent-replayed': 'true' } : {}) });
              res.end(text);
            }, mode === 'slow' ? 100 : 0);
          });
        });
        up.on('error', (err) => { e.status = 0; e.error = err.message; res.destroy(); });
        up.end(e.body);
      });
    });
    srv.on('connection', (s) => { r.sockets.add(s); s.on('close', () => r.sockets.delete(s)); });
    r.servers.push(srv);
    srv.listen(port, '127.0.0.1', resolve);
  });
  r.close = () => Promise.all(r.servers.map((srv) => new Promise((resolve) => {
    for (const s of r.sockets) s.destroy();
    srv.close(resolve);
  })));
  return r;
}

const routeA = await freePort(), routeB = await freePort();
const g = new Group(3, ['--route-url', `http://127.0.0.1:${routeA}`]);
let users, route;
after(async () => {
  g.kill();
  g.cleanup();
  if (route) await route.close();
  if (users) { users.proc.kill('SIGKILL'); users.cleanup(); }
});

// A number from a member's /metrics (the text, not JSON).
async function gauge(id, name) {
  const r = await new Promise((resolve) => {
    http.get({ host: '127.0.0.1', port: g.port(id), path: '/metrics', agent: false, timeout: 2500 }, (res) => {
      let t = '';
      res.on('data', (c) => { t += c; });
      res.on('end', () => resolve({ status: res.statusCode, text: t }));
    }).on('error', () => resolve({ status: 0, text: '' }));
  });
  assert.equal(r.status, 200, `/metrics of member ${id}`);
  const m = new RegExp(`^${name} (\\d+)`, 'm').exec(r.text);
  assert.ok(m, `${name} is in /metrics`);
  return Number(m[1]);
}

async function until(what, fn, ms = 30000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

test('the outbox across a kill -9 of the room group\'s leader: every change delivered once, in order', { timeout: 300000 }, async () => {
  users = await startStrata({ args: ['--route-url', `http://127.0.0.1:${routeA}`] });
  route = relay(users.port);
  await route.listen(routeA, 'A');
  await route.listen(routeB, 'B'); // the restarted old leader's own route
  await g.init();
  const first = await g.leader();

  // The model: every acknowledged change, in order, and what each user's list must end as.
  const changes = []; // {user, room, added}
  const want = new Map(); // user -> Set(room)
  const member = (u) => want.get(u) || want.set(u, new Set()).get(u);
  const change = async (room, user, added, via) => {
    const r = await g.req('POST', `/v1/rooms/${room}/members`, added ? { add: [user] } : { remove: [user] }, { via });
    assert.equal(r.status, 200, `${added ? 'add' : 'remove'} ${user} ${room}: ${r.status} ${JSON.stringify(r.json)}`);
    changes.push({ user, room, added });
    if (added) member(user).add(room); else member(user).delete(room);
  };

  const rooms = ['hall', 'den', 'loft', 'yard', 'deck'];

  // Every user's list on the users' group is the model (remote rooms, joined_at as the room says),
  // and the calls: one origin whichever member leads, seqs 1..N each applied exactly once, in
  // order, none lost (a resend under its key answered as a replay, changing nothing).
  async function delivered(leader) {
    const joined = new Map(); // `${room} ${user}` -> joined_at on the room's group
    for (const room of rooms) {
      const r = await g.req('GET', `/v1/rooms/${room}/members?limit=1000`, undefined, { via: leader });
      assert.equal(r.status, 200);
      for (const m of r.json.members) joined.set(`${room} ${m.user}`, m.joined_at);
    }
    for (const [user, in_] of want) {
      const r = await users.req('GET', `/v1/users/${user}/rooms?limit=100`);
      assert.equal(r.status, 200);
      const got = r.json.rooms.slice().sort((a, b) => a.room_id.localeCompare(b.room_id));
      const exp = [...in_].sort().map((room) => ({ room_id: room, name: `Room ${rooms.indexOf(room)}`,
        joined_at: joined.get(`${room} ${user}`), remote: true }));
      assert.deepEqual(got, exp, `${user}'s rooms`);
    }
    const ok = route.log.filter((e) => e.status === 200);
    const keys = ok.map((e) => /^outbox-([0-9a-f]{16})-(\d+)$/.exec(e.key));
    assert.ok(keys.every(Boolean), 'every call has an outbox Idempotency-Key');
    assert.equal(new Set(keys.map((k) => k[1])).size, 1, 'one origin, whichever member leads');
    const fresh = ok.filter((e) => !e.replayed);
    const seqs = fresh.map((e) => Number(/-(\d+)$/.exec(e.key)[1]));
    assert.deepEqual(seqs, changes.map((_, i) => i + 1), 'each change applied once, in order, none lost');
    for (const [i, e] of fresh.entries()) {
      const c = changes[i];
      const body = JSON.parse(e.body);
      assert.equal(e.path, `/v1/users/${c.user}/rooms/remote?route=user:${c.user}`);
      assert.deepEqual([body.room_id, body.change], [c.room, c.added ? 'added' : 'removed'], `seq ${i + 1}`);
      assert.equal(e.json.applied, true, `seq ${i + 1} applied`);
    }
    assert.deepEqual(route.log.filter((e) => e.status !== undefined && e.status !== 200), [],
      'the users\' group took every call it got');
  }

  // Rooms made while the route is up: their first members arrive, and the outbox empties.
  for (const [i, room] of rooms.entries()) {
    const r = await g.req('POST', `/v1/rooms?route=room:${room}`, { room_id: room, name: `Room ${i}`, members: [`host${i}`] });
    assert.equal(r.status, 201, r.text);
    changes.push({ user: `host${i}`, room, added: true });
    member(`host${i}`).add(room);
  }
  await until('the first members delivered', async () => (await gauge(first, 'strata_outbox_pending')) === 0);
  const before = changes.length;

  // The users' group applies what it gets, the room group never hears back: nothing leaves the
  // outbox, and the leader's first record is applied there without an answer.
  route.mode = 'hold';
  const u = (i) => `u${String(i).padStart(2, '0')}`;
  for (let i = 0; i < 50; i++) await change(rooms[i % 5], u(i), true, first);
  for (let i = 0; i < 10; i++) await change(rooms[i % 5], u(i), false, first); // added, then removed
  for (let i = 10; i < 15; i++) {
    await change(rooms[i % 5], u(i), false, first);
    await change(rooms[i % 5], u(i), true, first); // removed, then added again: in, newer joined_at
  }
  for (let i = 15; i < 20; i++) await change(rooms[(i + 1) % 5], u(i), true, first); // a second room
  const staged = changes.length - before;
  assert.equal(staged, 75);
  await until('a call of the leader applied by the users\' group and not answered', async () => route.held > 0);
  assert.equal(await gauge(first, 'strata_outbox_pending'), staged, 'every change waits in the outbox');
  const heldKeys = new Set(route.log.filter((e) => e.mode === 'hold').map((e) => e.key));

  // The route goes down and the leader dies with its call in flight.
  route.mode = 'down';
  await g.members.get(first).kill9();
  g.members.delete(first);
  const next = await g.leader(15000);
  assert.notEqual(next, first);
  assert.equal(await gauge(next, 'strata_outbox_pending'), staged, 'the new leader holds every pending change');
  // More changes on the new leader while the route is down: the same outbox, later seqs.
  await change('hall', u(20), false, next);
  await change('hall', u(50), true, next);
  await change(rooms[2], u(16), false, next); // out of its second room, still in its first
  await change(rooms[0], u(0), true, next);
  const total = staged + 4;
  await until('the new leader tried the route', async () => (await gauge(next, 'strata_outbox_failures_total')) > 0);
  assert.equal(await gauge(next, 'strata_outbox_pending'), total);

  // The old leader comes back as a follower, with a route of its own (B): it must send nothing.
  g.extra = ['--route-url', `http://127.0.0.1:${routeB}`];
  await g.start(first);
  route.mode = 'open';
  await until('the new leader\'s outbox emptied', async () => (await gauge(next, 'strata_outbox_pending')) === 0, 90000);

  await delivered(next);
  assert.equal(member(u(0)).size, 1, 'u00: added, removed, added again after the failover');
  assert.equal(member(u(20)).size, 0);
  assert.ok(heldKeys.size >= 1);
  const ok = route.log.filter((e) => e.status === 200);
  for (const k of heldKeys) {
    assert.ok(ok.some((e) => e.key === k && e.replayed && e.mode === 'open'), `${k}, applied but never answered, was resent and replayed`);
  }
  assert.equal(await gauge(next, 'strata_outbox_sent_total'), total, 'the new leader sent each pending change once');
  for (const id of g.live()) {
    await until(`member ${id}'s outbox empty`, async () => (await gauge(id, 'strata_outbox_pending')) === 0);
  }
  await until('the old leader follows the new one', async () => (await g.status(first))?.leader === next);
  assert.equal(await gauge(first, 'strata_outbox_sent_total'), 0);
  assert.deepEqual(route.log.filter((e) => e.tag === 'B'), [], 'the old leader sent nothing');

  // A second kill -9, of the new leader while it delivers through a slow route: some records are
  // acknowledged (their deletes committed or not), the rest wait; whoever leads next goes on.
  route.mode = 'down';
  const before2 = changes.length;
  const v = (i) => `v${String(i).padStart(2, '0')}`;
  for (let i = 0; i < 20; i++) await change(rooms[i % 5], v(i), true, next);
  for (let i = 0; i < 5; i++) await change(rooms[i % 5], v(i), false, next);
  for (let i = 5; i < 10; i++) {
    await change(rooms[i % 5], v(i), false, next);
    await change(rooms[i % 5], v(i), true, next);
  }
  assert.equal(changes.length - before2, 35);
  const freshOf = () => route.log.filter((e) => e.status === 200 && !e.replayed).length;
  const had = freshOf();
  route.mode = 'slow';
  await until('the leader delivering', async () => freshOf() >= had + 10, 90000);
  await g.members.get(next).kill9();
  g.members.delete(next);
  assert.ok(freshOf() < changes.length, 'records were still pending at the kill');
  const third = await g.leader(15000);
  assert.notEqual(third, next);
  route.mode = 'open';
  await until('the third leader\'s outbox emptied', async () => (await gauge(third, 'strata_outbox_pending')) === 0, 90000);
  await g.start(next);
  await delivered(third);
  for (const id of g.live()) {
    await until(`member ${id}'s outbox empty`, async () => (await gauge(id, 'strata_outbox_pending')) === 0);
  }

  await g.stopAll(); // each member exits 0 with no sanitizer report (lib.mjs)
  await users.stop();
});
