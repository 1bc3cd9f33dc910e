// SPDX-License-Identifier: MIT
// Dead letters of the rooms outbox (SPEC §10). The rooms live on a 3-member group whose
// --route-url is a small HTTP relay in front of the users' group (one node). The relay answers
// 400 for one record (as a receiving group refusing it for good): that record moves to the dead
// letters, durably and replicated, and the records behind it are delivered; GET
// /v1/admin/outbox lists it with the refusal's status, answer and time; strata_outbox_dead and
// strata_outbox_dead_total count it. Then, with the route down and records pending, the sending
// leader is killed -9: the new leader holds the same dead letters and pending records and
// delivers the pending ones once the route is back; once the cause is fixed, POST
// /v1/admin/outbox/{id}/retry sends the dead letter again and it is delivered. 5xx and network
// failures stay retried, never dead. The admin routes are admin-only, and 404 without an outbox.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import { freePort, Group } from './cluster-lib.mjs';
import { sleep, startStrata } from './lib.mjs';

// A relay on a port to the strata on `target`: mode 'open' relays, 'down' drops the connection
// unread, 'fail' answers 503; refuse(call) true: answered 400 with a JSON error (not relayed).
function relay(target) {
  const r = { mode: 'open', refuse: null, log: [], sockets: new Set() };
  r.listen = (port) => new Promise((resolve) => {
    r.srv = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const e = { mode: r.mode, key: req.headers['idempotency-key'], path: req.url, body: Buffer.concat(chunks).toString() };
        r.log.push(e);
        if (r.mode === 'down') { req.socket.destroy(); return; }
        if (r.mode === 'fail') {
          e.status = 503;
          res.writeHead(503, { 'content-type': 'application/json' });
          res.end('{"error":{"code":"unavailable","message":"test: busy"}}');
          return;
        }
        if (r.refuse && r.refuse(e)) {
          e.status = 400;
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end('{"error":{"code":"invalid_argument","message":"test: this group refuses that user"}}');
          return;
        }
        const up = http.request({ host: '127.0.0.1', port: target, method: req.method, path: req.url, agent: false,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(e.body),
            ...(e.key ? { 'idempotency-key': e.key } : {}) } }, (ur) => {
          const out = [];
          ur.on('data', (c) => out.push(c));
          ur.on('end', () => {
            e.status = ur.statusCode;
            res.writeHead(ur.statusCode, { 'content-type': 'application/json' });
            res.end(Buffer.concat(out));
          });
        });
        up.on('error', () => { e.status = 0; res.destroy(); });
        up.end(e.body);
      });
    });
    r.srv.on('connection', (s) => { r.sockets.add(s); s.on('close', () => r.sockets.delete(s)); });
    r.srv.listen(port, '127.0.0.1', resolve);
  });
  r.close = () => new Promise((resolve) => {
    for (const s of r.sockets) s.destroy();
    r.srv.close(resolve);
  });
  return r;
}

// Answers checked against the OpenAPI document (docs/openapi.json, as contract.test.mjs does).
const doc = JSON.parse(readFileSync('../../docs/openapi.json', 'utf8'));
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
ajv.addSchema(doc, 'https://strata.invalid/openapi.json');
function documented(template, method, json) {
  const p = `#/paths/${template.replace(/~/g, '~0').replace(/\//g, '~1')}/${method}/responses/200/content/application~1json/schema`;
  const v = ajv.compile({ $ref: `https://strata.invalid/openapi.json${p}` });
  assert.ok(v(json), `${method} ${template}: ${ajv.errorsText(v.errors)}\n${JSON.stringify(json)}`);
}

async function metric(port, name) {
  const r = await new Promise((resolve) => {
    http.get({ host: '127.0.0.1', port, path: '/metrics', agent: false, timeout: 2500 }, (res) => {
      let t = '';
      res.on('data', (c) => { t += c; });
      res.on('end', () => resolve({ status: res.statusCode, text: t }));
    }).on('error', () => resolve({ status: 0, text: '' }));
  });
  assert.equal(r.status, 200, `/metrics on ${port}`);
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

const routePort = await freePort();
const g = new Group(3, ['--route-url', `http://127.0.0.1:${routePort}`]);
let users, route;
after(async () => {
  g.kill();
  g.cleanup();
  if (route) await route.close();
  if (users) { users.proc.kill('SIGKILL'); users.cleanup(); }
});

test('a record refused for good goes to the dead letters, the rest flow; both survive a failover; retry delivers it', { timeout: 300000 }, async () => {
  users = await startStrata();
  route = relay(users.port);
  await route.listen(routePort);
  await g.init();
  const first = await g.leader();
  const rooms = async (user) => {
    const r = await users.req('GET', `/v1/users/${user}/rooms?limit=100`);
    assert.equal(r.status, 200);
    return r.json.rooms.map((x) => x.room_id).sort();
  };
  const add = async (user, via) => {
    const r = await g.req('POST', '/v1/rooms/hall/members', { add: [user] }, { via });
    assert.equal(r.status, 200, `add ${user}: ${r.status} ${JSON.stringify(r.json)}`);
  };
  const outbox = async (via) => {
    const r = await g.req('GET', '/v1/admin/outbox', undefined, { via });
    assert.equal(r.status, 200, `GET /v1/admin/outbox: ${r.status} ${JSON.stringify(r.json)}`);
    documented('/v1/admin/outbox', 'get', r.json);
    return r.json;
  };

  let r = await g.req('POST', '/v1/rooms?route=room:hall', { room_id: 'hall', name: 'Hall', members: ['host'] });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  await until('the first member delivered', async () => (await rooms('host')).includes('hall'));

  // 5xx: retried, never dead
  route.mode = 'fail';
  await add('busy', first);
  await until('a 503 seen', async () => route.log.some((e) => e.status === 503));
  await sleep(600);
  route.mode = 'open'; // (it stays out of the dead letters: exactly one is there below)
  await until('the 503 record delivered once the route answers', async () => (await rooms('busy')).includes('hall'));

  // One record refused for good: it goes dead, the ones behind it flow
  route.refuse = (e) => e.path.startsWith('/v1/users/poison/');
  await add('poison', first);
  for (const u of ['a1', 'a2', 'a3']) await add(u, first);
  await until('the records behind the refused one delivered', async () => (await rooms('a3')).includes('hall'));
  for (const u of ['a1', 'a2']) assert.deepEqual(await rooms(u), ['hall']);
  assert.deepEqual(await rooms('poison'), [], 'the refused record was not applied');
  await until('the pending records gone', async () => (await metric(g.port(first), 'strata_outbox_pending')) === 0);
  assert.equal(await metric(g.port(first), 'strata_outbox_dead'), 1);
  assert.ok(await metric(g.port(first), 'strata_outbox_dead_total') >= 1);
  const refusals = route.log.filter((e) => e.status === 400);
  assert.equal(refusals.length, 1, 'a record refused for good is not sent again');
  let ob = await outbox(first);
  assert.deepEqual(ob.pending, []);
  assert.equal(ob.dead.length, 1);
  assert.equal(ob.dead_count, 1);
  const dead = ob.dead[0];
  assert.equal(dead.kind, 'added');
  assert.equal(dead.user, 'poison');
  assert.equal(dead.room_id, 'hall');
  assert.equal(dead.status, 400);
  assert.match(dead.answer, /this group refuses that user/);
  assert.ok(dead.dead_at > 0 && dead.dead_at <= Date.now() * 1000 + 1e6);
  assert.equal(refusals[0].key.replace(/^outbox-[0-9a-f]+-/, ''), dead.id, 'the dead letter keeps the record\'s id');
  // every member holds the same dead letter (replicated in the batch that moved it)
  for (const id of g.live()) await until(`member ${id} counts the dead letter`, async () => (await metric(g.port(id), 'strata_outbox_dead')) === 1);

  // records pending while the route is down, and the leader killed -9
  route.mode = 'down';
  for (const u of ['b1', 'b2', 'b3']) await add(u, first);
  await until('the leader tried the route', async () => route.log.some((e) => e.mode === 'down'));
  await g.members.get(first).kill9();
  g.members.delete(first);
  const next = await g.leader(15000);
  assert.notEqual(next, first);
  ob = await outbox(next);
  assert.deepEqual(ob.dead, [dead], 'the new leader holds the same dead letter');
  assert.deepEqual(ob.pending.map((p) => p.user), ['b1', 'b2', 'b3'], 'and the pending records, in order');
  assert.equal(await metric(g.port(next), 'strata_outbox_pending'), 3);
  assert.equal(await metric(g.port(next), 'strata_outbox_dead'), 1);
  // a follower redirects the admin route to the leader
  const follower = g.live().find((id) => id !== next);
  const red = await new Promise((resolve) => http.get({ host: '127.0.0.1', port: g.port(follower), path: '/v1/admin/outbox', agent: false }, (res) => { res.resume(); resolve(res); }));
  assert.equal(red.statusCode, 307);

  route.mode = 'open';
  await until('the pending records delivered from the new leader', async () => (await rooms('b3')).includes('hall'));
  for (const u of ['b1', 'b2']) assert.deepEqual(await rooms(u), ['hall']);
  await until('nothing pending', async () => (await metric(g.port(next), 'strata_outbox_pending')) === 0);
  assert.deepEqual((await outbox(next)).dead, [dead], 'the dead letter stays dead until retried');
  assert.deepEqual(await rooms('poison'), []);

  // the cause fixed, the retry delivers it
  route.refuse = null;
  r = await g.req('POST', `/v1/admin/outbox/${dead.id}/retry`, undefined, { via: next });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  documented('/v1/admin/outbox/{id}/retry', 'post', r.json);
  assert.equal(r.json.retried, dead.id);
  assert.equal(r.json.user, 'poison');
  assert.ok(BigInt(r.json.id) > BigInt(dead.id), 'staged again as the newest record');
  await until('the retried record delivered', async () => (await rooms('poison')).includes('hall'));
  await until('no dead letter left', async () => (await metric(g.port(next), 'strata_outbox_dead')) === 0);
  ob = await outbox(next);
  assert.deepEqual([ob.pending, ob.dead], [[], []]);
  r = await g.req('POST', `/v1/admin/outbox/${dead.id}/retry`, undefined, { via: next });
  assert.equal(r.status, 404, 'a dead letter is retried once');
  r = await g.req('POST', '/v1/admin/outbox/x/retry', undefined, { via: next });
  assert.equal(r.status, 400);
});

const SECRET = 'outbox-dead-secret-outbox-dead-32';
function token(sub, role) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub, ...(role ? { role } : {}), exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
}

test('the outbox admin routes are admin-only, and 404 without --route-url', async () => {
  const port = await freePort();
  const s = await startStrata({ args: ['--jwt-secret', SECRET, '--cluster-secret', 'outbox-dead-cluster-secret-32-bytes', '--route-url', `http://127.0.0.1:${port}`] });
  const plain = await startStrata();
  try {
    assert.equal((await s.req('GET', '/v1/admin/outbox')).status, 401);
    assert.equal((await s.req('GET', '/v1/admin/outbox', undefined, { Authorization: `Bearer ${token('ann')}` })).status, 403);
    assert.equal((await s.req('POST', '/v1/admin/outbox/1/retry', undefined, { Authorization: `Bearer ${token('ann')}` })).status, 403);
    const r = await s.req('GET', '/v1/admin/outbox', undefined, { Authorization: `Bearer ${token('root', 'admin')}` });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { route_url: `http://127.0.0.1:${port}`, pending: [], dead: [], pending_count: 0, dead_count: 0 });
    assert.equal((await s.req('POST', '/v1/admin/outbox/7/retry', undefined, { Authorization: `Bearer ${token('root', 'admin')}` })).status, 404);
    assert.equal((await s.req('GET', '/v1/admin/outbox?limit=0', undefined, { Authorization: `Bearer ${token('root', 'admin')}` })).status, 400);
    const off = await plain.req('GET', '/v1/admin/outbox');
    assert.equal(off.status, 404);
    assert.match(off.json.error.message, /--route-url/);
  } finally {
    await s.stop();
    await plain.stop();
  }
});
