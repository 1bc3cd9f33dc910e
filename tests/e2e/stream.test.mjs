// SPDX-License-Identifier: MIT
// SPEC §3 over a real WebSocket on the HTTP port: the counter topic (current value, then every
// change, in order, only once durable), bad input, limits, slow consumers and auth.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { request, sleep, startStrata, wsConnect } from './lib.mjs';

// Streams closed by earlier tests may still be closing: read a gauge until it stops moving.
async function settled(read) {
  let last = -1;
  for (let now = await read(); now !== last; now = await read()) { last = now; await sleep(100); }
  return last;
}

describe('streams', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('counter topic: current value, then every change exactly once and in order', async () => {
    await s.req('POST', '/v1/counters/live/incr', { by: 10 });
    const ws = await wsConnect(s.port);
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 's3', topic: 'counter', name: 'live' });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 's3' });
    assert.deepEqual((await ws.next()).json, { type: 'counter', id: 's3', name: 'live', value: 10, exists: true });
    // 8 writers, 25 increments each
    await Promise.all(Array.from({ length: 8 }, async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; i < 25; i++) await request(s.port, 'POST', '/v1/counters/live/incr', {}, {}, agent);
      agent.destroy();
    }));
    const seen = [];
    for (let i = 0; i < 200; i++) seen.push((await ws.next()).json.value);
    assert.deepEqual(seen, Array.from({ length: 200 }, (_, i) => 11 + i));
    // a second subscriber on another connection starts from the current value
    const ws2 = await wsConnect(s.port);
    ws2.send({ type: 'subscribe', id: 'x', topic: 'counter', name: 'live' });
    await ws2.next();
    assert.equal((await ws2.next()).json.value, 210);
    ws.send({ type: 'unsubscribe', id: 's3' });
    await s.req('POST', '/v1/counters/live/incr');
    assert.equal((await ws2.next()).json.value, 211);
    await assert.rejects(ws.next(300)); // unsubscribed: nothing more
    ws.close();
    ws2.close();
  });

  test('distinct counters publish only when a member is new', async () => {
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 'd', topic: 'counter', name: 'people' });
    await ws.next();
    assert.equal((await ws.next()).json.value, 0);
    await s.req('POST', '/v1/counters/people/distinct', { member: 'a' });
    await s.req('POST', '/v1/counters/people/distinct', { member: 'a' });
    await s.req('POST', '/v1/counters/people/distinct', { member: 'b' });
    assert.equal((await ws.next()).json.value, 1);
    assert.equal((await ws.next()).json.value, 2);
    // a member already counted publishes nothing: quiet, and the next frame is the next new member's
    assert.equal((await s.req('POST', '/v1/counters/people/distinct', { member: 'b' })).status, 200);
    await assert.rejects(ws.next(300), /no frame in time/);
    assert.equal((await s.req('POST', '/v1/counters/people/distinct', { member: 'c' })).status, 200);
    const f = (await ws.next()).json;
    assert.deepEqual([f.type, f.id, f.name, f.value], ['counter', 'd', 'people', 3], JSON.stringify(f));
    ws.close();
  });

  test('seats topic: a snapshot, then every seat change with stats, expiry included', async () => {
    await s.req('POST', '/v1/events', { event_id: 'live', hold_seconds: 2, sections: [{ name: 'A', rows: 2, cols: 3, price: 5 }] });
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 's2', topic: 'seats', event_id: 'live' });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 's2' });
    const snap = (await ws.next()).json;
    assert.equal(snap.type, 'seats');
    assert.equal(snap.snapshot.event_stats.available, 6);
    const b1 = (await s.req('POST', '/v1/events/live/bookings', { section: 'A', seats: ['1-1', '1-2'] })).json;
    let f = (await ws.next()).json;
    assert.deepEqual(f.changes, [{ seat: '1-1', state: 'reserved' }, { seat: '1-2', state: 'reserved' }]);
    assert.equal(f.id, 's2');
    assert.equal(f.event_id, 'live');
    assert.equal(f.section, 'A');
    assert.deepEqual(f.stats, { available: 4, reserved: 2, sold: 0, total: 6 });
    await s.req('POST', `/v1/bookings/${b1.booking_id}/confirm`);
    f = (await ws.next()).json;
    assert.deepEqual(f.changes.map((x) => x.state), ['sold', 'sold']);
    assert.equal(f.event_stats.sold, 2);
    const b2 = (await s.req('POST', '/v1/events/live/bookings', { section: 'A', quantity: 2 })).json;
    assert.deepEqual((await ws.next()).json.changes.map((x) => x.seat), b2.seats);
    const expired = (await ws.next(15000)).json; // the 2 s hold runs out (1 s left b1's confirm too little room)
    assert.deepEqual(expired.changes.map((x) => x.state), ['available', 'available']);
    assert.deepEqual(expired.stats, { available: 4, reserved: 0, sold: 2, total: 6 });
    ws.send({ type: 'subscribe', id: 'nope', topic: 'seats', event_id: 'no-such-event' });
    const err = (await ws.next()).json;
    assert.deepEqual([err.type, err.code], ['error', 'not_found']);
    ws.close();
  });

  test('messages topic: replay after a msg_id, replay_done, then live; per conversation', async () => {
    const ids = [];
    for (let i = 0; i < 30; i++)
      ids.push((await s.req('POST', '/v1/users/mu/messages', { conversation_id: i % 2 ? 'odd' : 'even', from: 'x', content: `m${i}` })).json.msg_id);
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 's1', topic: 'messages', user: 'mu', after: ids[9] });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 's1' });
    const got = [];
    for (;;) {
      const f = (await ws.next()).json;
      if (f.type === 'replay_done') { assert.equal(f.id, 's1'); break; }
      assert.equal(f.type, 'message');
      assert.equal(f.id, 's1');
      got.push(f.message.msg_id);
    }
    assert.deepEqual(got, ids.slice(10));
    const live = (await s.req('POST', '/v1/users/mu/messages', { conversation_id: 'even', from: 'x', content: 'live' })).json;
    const f = (await ws.next()).json;
    assert.equal(f.message.msg_id, live.msg_id);
    assert.equal(f.message.content, 'live');
    assert.equal(f.message.seq, 16);
    // one conversation only, from the start
    const wc = await wsConnect(s.port);
    wc.send({ type: 'subscribe', id: 'c', topic: 'messages', user: 'mu', conversation_id: 'odd', after: '0' });
    await wc.next();
    const odd = [];
    for (let m; (m = (await wc.next()).json).type === 'message';) odd.push(m.message.conversation_id);
    assert.equal(odd.length, 15);
    assert.ok(odd.every((c) => c === 'odd'));
    // another user's messages never show up
    await s.req('POST', '/v1/users/other/messages', { conversation_id: 'odd', from: 'x', content: 'no' });
    await s.req('POST', '/v1/users/mu/messages', { conversation_id: 'odd', from: 'x', content: 'yes' });
    assert.equal((await wc.next()).json.message.content, 'yes');
    ws.close();
    wc.close();
  });

  test('no gap and no duplicate between replay and live while posting continues', async () => {
    const posted = [];
    for (let i = 0; i < 600; i++) // more than one replay page
      posted.push((await s.req('POST', '/v1/users/busy/messages', { conversation_id: 'c', from: 'x', content: `p${i}` })).json.msg_id);
    let stop = false;
    const poster = (async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; !stop; i++) {
        const r = await request(s.port, 'POST', '/v1/users/busy/messages', { conversation_id: 'c', from: 'x', content: `q${i}` }, {}, agent);
        posted.push(r.json.msg_id);
      }
      agent.destroy();
    })();
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 'b', topic: 'messages', user: 'busy', after: posted[99] });
    await ws.next();
    const got = [];
    let done = false;
    while (!done || got.length < posted.length - 100) {
      const f = (await ws.next(5000)).json;
      if (f.type === 'replay_done') { done = true; stop = true; await poster; continue; }
      got.push(f.message.msg_id);
    }
    assert.ok(done);
    assert.equal(new Set(got).size, got.length, 'a message came twice');
    assert.deepEqual(got, posted.slice(100), 'replay + live equals everything posted after `after`, in order');
    ws.close();
  });

  test('bad input gets error frames and the stream keeps working', async () => {
    const ws = await wsConnect(s.port);
    const expectError = async (code) => {
      const f = await ws.next();
      assert.equal(f.json.type, 'error', f.text);
      assert.equal(f.json.code, code, f.text);
    };
    ws.send('not json');
    await expectError('invalid_json');
    ws.send('[1,2]');
    await expectError('invalid_json');
    ws.send({ type: 'dance', id: 'a' });
    await expectError('invalid_argument');
    ws.send({ type: 'subscribe' });
    await expectError('invalid_argument');
    ws.send({ type: 'subscribe', id: 'a', topic: 'weather' });
    await expectError('invalid_argument');
    ws.send({ type: 'subscribe', id: 'a', topic: 'counter', name: 'a b' });
    await expectError('invalid_argument');
    ws.send({ type: 'unsubscribe', id: 'nope' });
    await expectError('not_found');
    ws.sendBinary(Buffer.from([1, 2, 3]));
    await expectError('invalid_argument');
    for (let i = 0; i < 64; i++) ws.send({ type: 'subscribe', id: `s${i}`, topic: 'counter', name: 'many' });
    for (let i = 0; i < 128; i++) await ws.next();
    ws.send({ type: 'subscribe', id: 's0', topic: 'counter', name: 'many' });
    await expectError('conflict');
    ws.send({ type: 'subscribe', id: 's64', topic: 'counter', name: 'many' });
    await expectError('too_many_requests');
    ws.send({ type: 'subscribe', id: 'big', topic: 'counter', name: 'x', pad: 'y'.repeat(70000) });
    const closed = await ws.next();
    assert.equal(closed.op, 8);
    assert.equal(closed.code, 1009);
    // other paths are not streams
    const other = await wsConnect(s.port, '/v1/counters/x');
    assert.equal(other.status, 404);
    assert.equal((await s.req('GET', '/healthz')).status, 200);
  });

  test('thousands of subscriptions on one connection: 64 live, the rest refused, churn is clean', async () => {
    const subs = async () => Number((await s.req('GET', '/metrics')).text.match(/strata_ws_subscribers (\d+)/)[1]);
    const before = await settled(subs);
    const ws = await wsConnect(s.port);
    for (let i = 0; i < 3000; i++) ws.send({ type: 'subscribe', id: `t${i}`, topic: 'counter', name: `burst${i % 7}` });
    const frames = [];
    for (let i = 0; i < 64 * 2 + (3000 - 64); i++) frames.push((await ws.next()).json);
    assert.equal(frames.filter((f) => f.type === 'subscribed').length, 64);
    assert.equal(frames.filter((f) => f.type === 'counter').length, 64);
    const refused = frames.filter((f) => f.type === 'error');
    assert.equal(refused.length, 3000 - 64);
    assert.ok(refused.every((f) => f.code === 'too_many_requests'));
    // subscribe/unsubscribe churn on one channel leaves exactly the live ones
    for (let i = 0; i < 64; i++) ws.send({ type: 'unsubscribe', id: `t${i}` });
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 64; i++) ws.send({ type: 'subscribe', id: `r${i}`, topic: 'counter', name: 'burst0' });
      for (let i = 0; i < 128; i++) await ws.next();
      for (let i = 0; i < 64; i++) ws.send({ type: 'unsubscribe', id: `r${i}` });
    }
    ws.send({ type: 'subscribe', id: 'last', topic: 'counter', name: 'burst0' });
    assert.equal((await ws.next()).json.type, 'subscribed');
    assert.equal((await ws.next()).json.value, 0);
    await s.req('POST', '/v1/counters/burst0/incr');
    assert.deepEqual((await ws.next()).json, { type: 'counter', id: 'last', name: 'burst0', value: 1 });
    await assert.rejects(ws.next(300), 'only the one live subscription gets the change');
    assert.equal(await subs(), before + 1);
    ws.close();
  });

  test('a thousand connections on one counter and one conversation: each gets every change once, in order', async () => {
    const N = 1000;
    const open = async () => Number((await s.req('GET', '/metrics')).text.match(/strata_ws_connections (\d+)/)[1]);
    const before = await settled(open);
    const conns = [];
    for (let i = 0; i < N; i += 100) {
      conns.push(...await Promise.all(Array.from({ length: 100 }, () => wsConnect(s.port))));
    }
    await Promise.all(conns.map(async (ws, i) => {
      assert.equal(ws.status, 101);
      ws.send({ type: 'subscribe', id: `c${i}`, topic: 'counter', name: 'fan' });
      ws.send({ type: 'subscribe', id: `m${i}`, topic: 'messages', user: 'fanuser', conversation_id: 'room' });
      const got = [(await ws.next()).json.type, (await ws.next()).json.type, (await ws.next()).json.type, (await ws.next()).json.type];
      assert.deepEqual(got.sort(), ['counter', 'replay_done', 'subscribed', 'subscribed']);
    }));
    assert.equal(await open(), before + N);
    const posted = [];
    for (let k = 0; k < 10; k++) {
      await s.req('POST', '/v1/counters/fan/incr');
      const r = await s.req('POST', '/v1/users/fanuser/messages', { conversation_id: 'room', from: 'x', content: `hi ${k}` });
      posted.push(r.json.msg_id);
    }
    await Promise.all(conns.map(async (ws, i) => {
      const values = [], ids = [];
      for (let k = 0; k < 20; k++) {
        const f = (await ws.next(10000)).json;
        if (f.type === 'counter') { assert.equal(f.id, `c${i}`); values.push(f.value); }
        else { assert.equal(f.type, 'message'); assert.equal(f.id, `m${i}`); ids.push(f.message.msg_id); }
      }
      assert.deepEqual(values, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      assert.deepEqual(ids, posted);
    }));
    for (const ws of conns) ws.close();
  });

  test('a consumer that never reads is cut off, and server memory stays bounded', async () => {
    const ws = await wsConnect(s.port);
    // 64 subscriptions to one counter: every increment is 64 frames, so the kernel's socket
    // buffers (several MB on loopback) fill quickly and strata's own queue limit is reached
    for (let i = 0; i < 64; i++) ws.send({ type: 'subscribe', id: `slow${i}`, topic: 'counter', name: 'flood' });
    ws.sock.pause(); // stop reading
    await Promise.all(Array.from({ length: 32 }, async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; i < 300; i++) await request(s.port, 'POST', '/v1/counters/flood/incr', {}, {}, agent);
      agent.destroy();
    }));
    const sent = Number((await s.req('GET', '/metrics')).text.match(/strata_ws_frames_sent_total (\d+)/)[1]);
    assert.ok(sent < 32 * 300 * 64, 'not every frame was sent: the reader was cut off');
    ws.sock.resume();
    let f;
    do { f = await ws.next(5000); } while (f.op === 1);
    // The stream is cut off, and the close frame (ahead of the dropped queue) reaches the reader
    // once it reads again (stream-slow.test.mjs covers a longer pause and a reader that never reads).
    assert.ok(f.op === 8 && f.code === 1008 && f.reason === 'slow consumer', JSON.stringify(f));
    const m = await s.req('GET', '/metrics');
    assert.match(m.text, /strata_ws_slow_consumer_drops_total [1-9]/);
  });
});

describe('streams with auth', () => {
  test('the upgrade needs a valid token (header or access_token)', async () => {
    const SECRET = 'ws-secret';
    const s = await startStrata({ env: { STRATA_JWT_SECRET: SECRET } });
    const b = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const h = b({ alg: 'HS256' }), p = b({ sub: 'alice' });
    const tok = `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
    assert.equal((await wsConnect(s.port)).status, 401);
    assert.equal((await wsConnect(s.port, '/v1/stream?access_token=garbage')).status, 401);
    const ok = await wsConnect(s.port, `/v1/stream?access_token=${tok}`);
    assert.equal(ok.status, 101);
    const ok2 = await wsConnect(s.port, '/v1/stream', { Authorization: `Bearer ${tok}` });
    assert.equal(ok2.status, 101);
    ok2.send({ type: 'subscribe', id: 'a', topic: 'counter', name: 'c' });
    assert.equal((await ok2.next()).json.type, 'subscribed');
    assert.equal((await ok2.next()).json.type, 'counter');
    ok2.send({ type: 'subscribe', id: 'm', topic: 'messages', user: 'bob' });
    const denied = (await ok2.next()).json;
    assert.deepEqual([denied.type, denied.code], ['error', 'forbidden']);
    ok2.send({ type: 'subscribe', id: 'mine', topic: 'messages', user: 'alice' });
    assert.equal((await ok2.next()).json.type, 'subscribed');
    assert.equal((await ok2.next()).json.type, 'replay_done');
    ok.close();
    ok2.close();
    const ex = await s.stop();
    assert.equal(ex.code, 0, s.log());
    s.cleanup();
  });
});
