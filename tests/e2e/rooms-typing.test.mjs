// SPDX-License-Identifier: MIT
// SPEC §2.1 (v5) over real sockets: typing indicators. POST /v1/rooms/{room}/typing → 204 and a
// {"type":"typing","id","room_id","user","until"} frame to the room's subscribers; never stored
// or replayed; at most one frame per user per room per second (more are coalesced); a client
// that posts typing as fast as it can costs the other subscribers nothing (a bounded number of
// frames, messages still on time); only members, and with auth on only as themselves; in a
// replicated group a subscriber on a follower gets the frame too.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Group } from './cluster-lib.mjs';
import { sleep, startStrata, wsConnect, wsDrain as drain, wsUntil as until } from './lib.mjs';

async function subscribe(port, room, user, path = '/v1/stream') {
  const ws = await wsConnect(port, path);
  assert.equal(ws.status, 101);
  ws.send({ type: 'subscribe', id: 't', topic: 'room', room_id: room, user, after: '0' });
  await until(ws, (f) => f.type === 'replay_done');
  return ws;
}

describe('typing (one node, auth off)', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('a member\'s typing reaches the room\'s subscribers as one frame, 204, until = now + 5 s', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'tt', members: ['ann', 'bob', 'cy'] })).status, 201);
    const ws = await subscribe(s.port, 'tt', 'bob');
    const t0 = Date.now() * 1000;
    const r = await s.req('POST', '/v1/rooms/tt/typing', { user: 'ann' });
    assert.equal(r.status, 204, r.text);
    assert.equal(r.text, '');
    const got = await until(ws, (f) => f.type === 'typing');
    const f = got.at(-1);
    assert.deepEqual(Object.keys(f).sort(), ['id', 'room_id', 'type', 'until', 'user']);
    assert.deepEqual([f.id, f.room_id, f.user], ['t', 'tt', 'ann']);
    assert.ok(f.until >= t0 + 4_000_000 && f.until <= Date.now() * 1000 + 5_100_000, `until ${f.until}`);
    ws.close();
  });

  test('coalesced: at most one frame per user per room per second; other users and rooms apart', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'tc', members: ['ann', 'bob', 'cy'] })).status, 201);
    const ws = await subscribe(s.port, 'tc', 'bob');
    await sleep(1100); // ann's last signal above was in another room; start clean anyway
    const t0 = Date.now();
    for (let i = 0; i < 40; i++) assert.equal((await s.req('POST', '/v1/rooms/tc/typing', { user: 'ann' })).status, 204);
    assert.equal((await s.req('POST', '/v1/rooms/tc/typing', { user: 'cy' })).status, 204);
    const elapsed = Date.now() - t0;
    const got = (await drain(ws, 600)).filter((f) => f.type === 'typing');
    const anns = got.filter((f) => f.user === 'ann').length;
    assert.ok(anns >= 1 && anns <= Math.ceil(elapsed / 1000) + 1, `${anns} frames for 40 signals in ${elapsed} ms`);
    assert.equal(got.filter((f) => f.user === 'cy').length, 1, 'another user is not coalesced with ann');
    await sleep(1050);
    assert.equal((await s.req('POST', '/v1/rooms/tc/typing', { user: 'ann' })).status, 204);
    const later = (await until(ws, (f) => f.type === 'typing')).filter((f) => f.type === 'typing');
    assert.equal(later.at(-1).user, 'ann', 'a second later a new frame leaves');
    ws.close();
  });

  test('never stored: nothing of it in a replay, after a restart either', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'tn', members: ['ann', 'bob'] })).status, 201);
    assert.equal((await s.req('POST', '/v1/rooms/tn/typing', { user: 'ann' })).status, 204);
    assert.equal((await s.req('POST', '/v1/rooms/tn/messages', { from: 'ann', content: 'hi' })).status, 201);
    await s.stop();
    s = await startStrata({ dataDir: s.dir });
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 'r', topic: 'room', room_id: 'tn', after: '0' });
    const got = await until(ws, (f) => f.type === 'replay_done');
    assert.deepEqual(got.map((f) => f.type).filter((t) => t !== 'subscribed'), ['message', 'replay_done']);
    ws.close();
  });

  test('only members; bad bodies are 400; a room that is not there is 404', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'tm', members: ['ann'] })).status, 201);
    let r = await s.req('POST', '/v1/rooms/tm/typing', { user: 'zed' });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.json.error.code, 'forbidden');
    assert.equal((await s.req('POST', '/v1/rooms/none/typing', { user: 'ann' })).status, 404);
    for (const [body, field] of [[{}, 'user'], [{ user: 'a b' }, 'user'], [{ user: 'ann', bye: 1 }, 'bye'], [{ user: 5 }, 'user']]) {
      r = await s.req('POST', '/v1/rooms/tm/typing', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal(r.json.error.field, field, r.text);
    }
    assert.equal((await s.req('GET', '/v1/rooms/tm/typing')).status, 405);
  });

  test('the group\'s internal routes are 404 on a node outside a group, whoever sends them (issue 47)', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'ti', members: ['ann', 'bob'] })).status, 201);
    const ws = await subscribe(s.port, 'ti', 'bob');
    let r = await s.req('POST', '/v1/cluster/typing', { room_id: 'ti', user: 'ann', until: Date.now() * 1000 + 5e6 });
    assert.equal(r.status, 404, r.text);
    assert.equal(r.json.error.code, 'not_found');
    const entries = [{ room_id: 'ti', user: 'zed', online: true }];
    r = await s.req('POST', '/v1/cluster/presence', { member: 2, nonce: 'ab'.repeat(16), entries });
    assert.equal(r.status, 404, r.text);
    assert.equal(r.json.error.code, 'not_found');
    const got = await drain(ws, 400);
    assert.deepEqual(got.filter((f) => f.type === 'typing' || (f.type === 'presence' && f.user === 'zed')), [], 'nothing reached the subscribers');
    assert.deepEqual((await s.req('GET', '/v1/rooms/ti/presence')).json.online, ['bob'], 'no one made online from outside');
    ws.close();
  });

  test('a client typing as fast as it can costs the others nothing', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'th', members: ['mal', 'bob', 'cy'] })).status, 201);
    const ws = await subscribe(s.port, 'th', 'bob');
    const stop = Date.now() + 2000;
    let sent = 0;
    const flood = Promise.all(Array.from({ length: 4 }, async () => {
      while (Date.now() < stop && sent < 20000) {
        const r = await s.req('POST', '/v1/rooms/th/typing', { user: 'mal' });
        assert.equal(r.status, 204);
        sent++;
      }
    }));
    await sleep(500);
    const t0 = Date.now();
    const post = await s.req('POST', '/v1/rooms/th/messages', { from: 'cy', content: 'still here' });
    assert.equal(post.status, 201, post.text);
    const got = await until(ws, (f) => f.type === 'message');
    const lag = Date.now() - t0;
    await flood;
    const rest = await drain(ws, 300);
    const typing = [...got, ...rest].filter((f) => f.type === 'typing');
    assert.ok(sent > 100, `the flood sent ${sent}`);
    assert.ok(typing.length <= 4, `${typing.length} typing frames for ${sent} signals in 2 s`);
    assert.ok(lag < 5000, `the message arrived ${lag} ms after its post, during the flood`);
    ws.close();
  });
});

describe('typing beside a subscriber that does not read (issue 47)', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${s.proc.pid}/status`, 'utf8'))[1]) * 1024;

  test('typing frames are dropped, not queued, for a stream that does not read: it is not cut, the server holds little, its post frames arrive; a reading one gets them coalesced', async () => {
    // 400 typers with long names, and a stream holding 60 subscriptions of the room: one round
    // of signals is 24,000 typing frames (about 7 MB) for a stream that does not read
    const typers = Array.from({ length: 400 }, (_, i) => `t${i}-${'x'.repeat(200)}`);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'tq', members: ['bob', 'cy', ...typers] })).status, 201);
    const idle = await wsConnect(s.port);
    assert.equal(idle.status, 101);
    const ids = Array.from({ length: 60 }, (_, i) => `s${i}`);
    for (const id of ids) {
      idle.send({ type: 'subscribe', id, topic: 'room', room_id: 'tq', user: 'bob', after: '0' });
      await until(idle, (f) => f.type === 'replay_done' && f.id === id);
    }
    const reader = await subscribe(s.port, 'tq', 'cy');
    const seen = [];
    let reading = true;
    const readLoop = (async () => {
      while (reading) {
        let f;
        try { f = await reader.next(500); } catch { continue; }
        assert.notEqual(f.op, -1, 'the reading stream stayed open');
        if (f.json) seen.push(f.json);
      }
    })();
    idle.sock.pause(); // reads nothing from here on
    const rss0 = rss();
    const t0 = Date.now();
    let sent = 0, first;
    for (let round = 0; round < 4; round++) {
      const start = Date.now();
      for (let i = 0; i < typers.length; i += 32)
        await Promise.all(typers.slice(i, i + 32).map(async (u) => {
          assert.equal((await s.req('POST', '/v1/rooms/tq/typing', { user: u })).status, 204);
          sent++;
        }));
      if (round === 1) { // a post while the stream does not read
        const r = await s.req('POST', '/v1/rooms/tq/messages', { from: 'cy', content: 'during' });
        assert.equal(r.status, 201, r.text);
        first = r.json.msg_id;
      }
      await sleep(Math.max(0, 1050 - (Date.now() - start))); // the next signal of each is a new frame
    }
    const elapsed = Date.now() - t0;
    const grew = rss() - rss0;
    assert.ok(grew < 48 << 20, `the server grew ${grew >> 20} MiB while one stream did not read`);
    idle.sock.resume();
    const later = await s.req('POST', '/v1/rooms/tq/messages', { from: 'cy', content: 'after' });
    assert.equal(later.status, 201, later.text);
    const want = new Set([first, later.json.msg_id]);
    const end = Date.now() + 20000;
    let typingFrames = 0;
    const tally = {};
    while (want.size && Date.now() < end) {
      let f;
      try { f = await idle.next(Math.max(1, end - Date.now())); } catch { break; }
      const k = `${f.op}:${f.json?.type}:${f.json?.type === 'message' ? f.json.id : ''}`;
      tally[k] = (tally[k] ?? 0) + 1;
      assert.notEqual(f.op, 8, `the stream was cut: ${f.code} ${f.reason}`);
      assert.notEqual(f.op, -1, 'the stream stayed open');
      if (f.json?.type === 'message' && f.json.id === 's0') want.delete(f.json.message.msg_id);
      if (f.json?.type === 'typing') typingFrames++;
    }
    assert.equal(want.size, 0, `both posts reached the stream that did not read: ${JSON.stringify(tally)} ${[...want]}`);
    assert.ok(typingFrames < sent * ids.length, `${typingFrames} typing frames of ${sent * ids.length}: some were dropped`);
    reading = false;
    await readLoop;
    // the reading stream: every typer's frames, at most one per user per second
    const per = new Map();
    for (const f of seen.filter((x) => x.type === 'typing')) per.set(f.user, (per.get(f.user) ?? 0) + 1);
    assert.equal(per.size, typers.length, `typing frames of ${per.size} of ${typers.length} typers reached the reader`);
    const most = Math.max(...per.values());
    assert.ok(most <= Math.ceil(elapsed / 1000) + 1, `${most} frames of one user in ${elapsed} ms`);
    assert.ok(seen.some((f) => f.type === 'message' && f.message.msg_id === first), 'the reader got the post');
    idle.close();
    reader.close();
  });
});

describe('typing (auth on)', () => {
  const SECRET = 'typing-secret';
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const jwt = (p) => {
    const h = b64({ alg: 'HS256', typ: 'JWT' });
    const b = b64({ exp: Math.floor(Date.now() / 1000) + 600, ...p });
    return `${h}.${b}.${createHmac('sha256', SECRET).update(`${h}.${b}`).digest('base64url')}`;
  };
  const as = (sub, extra = {}) => ({ Authorization: `Bearer ${jwt({ sub, ...extra })}` });
  let s;
  before(async () => { s = await startStrata({ args: ['--jwt-secret', SECRET] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('a member types as itself; another\'s name is 403 unless a global admin', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'ta', members: ['bob'] }, as('ann'))).status, 201);
    assert.equal((await s.req('POST', '/v1/rooms/ta/typing', { user: 'ann' }, as('ann'))).status, 204);
    assert.equal((await s.req('POST', '/v1/rooms/ta/typing', { user: 'bob' }, as('ann'))).status, 403);
    assert.equal((await s.req('POST', '/v1/rooms/ta/typing', { user: 'bob' }, as('ops', { role: 'admin' }))).status, 204);
    assert.equal((await s.req('POST', '/v1/rooms/ta/typing', { user: 'ann' })).status, 401);
    assert.equal((await s.req('POST', '/v1/cluster/typing', { room_id: 'ta', user: 'ann', until: 1 }, as('ann'))).status, 401, 'the internal route is the group\'s');
  });
});

describe('typing in a replicated group', () => {
  const g = new Group(3);
  after(() => { g.kill(); g.cleanup(); });

  test('a subscriber on a follower gets the frame the leader took', { timeout: 120000 }, async () => {
    await g.init();
    const leader = await g.leader();
    const follower = g.live().find((id) => id !== leader);
    // the leader hands signals to the members whose URLs it knows (each announces its own)
    for (const end = Date.now() + 30000; ;) {
      const st = await g.req('GET', '/v1/cluster', undefined, { via: leader });
      if (st.status === 200 && st.json.members.every((m) => m.http)) break;
      assert.ok(Date.now() < end, `the members announced their URLs: ${st.text}`);
      await sleep(200);
    }
    const r = await g.req('POST', '/v1/rooms', { room_id: 'gt', members: ['ann', 'ben'] }, { via: leader });
    assert.equal(r.status, 201, r.text);
    let ws;
    for (const end = Date.now() + 20000; ;) { // the follower has applied the room
      ws = await wsConnect(g.port(follower));
      ws.send({ type: 'subscribe', id: 'f', topic: 'room', room_id: 'gt', user: 'ben', after: '0' });
      const got = await until(ws, (f) => f.type === 'replay_done' || f.type === 'error');
      if (got.at(-1).type === 'replay_done') break;
      ws.close();
      assert.ok(Date.now() < end, 'the follower knows the room');
      await sleep(200);
    }
    // through the follower: 307 to the leader, which hands the signal to every member
    const t = await g.req('POST', '/v1/rooms/gt/typing', { user: 'ann' }, { via: leader });
    assert.equal(t.status, 204, t.text);
    let got;
    try {
      got = await until(ws, (f) => f.type === 'typing', 10000);
    } catch (e) {
      for (const id of g.live()) console.log(`member ${id}:\n${g.members.get(id).log().slice(-3000)}`);
      throw e;
    }
    assert.deepEqual([got.at(-1).room_id, got.at(-1).user, got.at(-1).id], ['gt', 'ann', 'f']);
    ws.close();
  });
});
