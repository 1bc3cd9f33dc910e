// SPDX-License-Identifier: MIT
// Issue 38, a new user's first week, the stream and paging items (SPEC v4):
//  3. a messages subscription without `after` replays nothing (subscribed, replay_done, live);
//     "after":"0" replays every message, hot and cold; null is absent for after/conversation_id.
//  4. before=X is the page just before X in either order (and after=X the page just after),
//     paging on with `next` the same way, across hot and cold, per conversation.
//  6. a counter never written is 404 over HTTP and says so on the stream (value 0, exists false).
//  8. GET /v1/stream without an Upgrade is 426 upgrade_required.
// (The replay that cannot read cold data ending with cold_unavailable is in cold.test.mjs; best
// available keeping a group in one row before avoiding an orphan is in seats_best.test.mjs.)
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { request, startStrata, wsConnect } from './lib.mjs';

let s;
before(async () => { s = await startStrata({ args: ['--flush-interval', '3600'] }); });
after(async () => { await s.stop(); s.cleanup(); });

async function post(user, conv, content) {
  const r = await s.req('POST', `/v1/users/${user}/messages`, { conversation_id: conv, from: 'x', content });
  assert.equal(r.status, 201, r.text);
  return r.json.msg_id;
}

async function flush(user) {
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  await waitFor('the flush', async () => (await s.req('GET', `/v1/users/${user}/stats`)).json.hot_messages === 0);
}

// The frames of subscription `id` up to and including replay_done.
// Frames of each subscription up to its replay_done. Frames of other subscriptions read
// meanwhile are kept for their own call (two replays run side by side: the smaller may finish
// first).
const held = new WeakMap();
async function untilReplayDone(ws, id) {
  if (!held.has(ws)) held.set(ws, []);
  const early = held.get(ws);
  const frames = [];
  for (;;) {
    const i = early.findIndex((x) => x.id === id);
    const f = i >= 0 ? early.splice(i, 1)[0] : (await ws.next(5000)).json;
    assert.notEqual(f.type, 'error', JSON.stringify(f));
    if (f.id !== id) {
      early.push(f);
      continue;
    }
    frames.push(f);
    if (f.type === 'replay_done') return frames;
  }
}

describe('item 3: a subscription replays only when it names where to start', () => {
  const ids = [];
  before(async () => {
    for (let i = 0; i < 6; i++) ids.push(await post('hist', i % 2 ? 'b' : 'a', `old ${i}`));
    await flush('hist'); // the first six are cold
    for (let i = 6; i < 10; i++) ids.push(await post('hist', i % 2 ? 'b' : 'a', `old ${i}`));
  });

  test('no after (absent or null): subscribed, replay_done, then live messages only', async () => {
    for (const extra of [{}, { after: null }, { after: null, conversation_id: null }]) {
      const ws = await wsConnect(s.port);
      ws.send({ type: 'subscribe', id: 'l', topic: 'messages', user: 'hist', ...extra });
      assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'l' });
      assert.deepEqual((await ws.next()).json, { type: 'replay_done', id: 'l' }, `no history with ${JSON.stringify(extra)}`);
      const live = await post('hist', 'b', 'live');
      const f = (await ws.next()).json;
      assert.equal(f.type, 'message');
      assert.equal(f.message.msg_id, live, 'the first message after replay_done is the live one');
      ids.push(live);
      await assert.rejects(ws.next(300), 'nothing else');
      ws.close();
    }
  });

  test('"after":"0" replays every message, cold and hot, then replay_done, then live', async () => {
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 'all', topic: 'messages', user: 'hist', after: '0' });
    ws.send({ type: 'subscribe', id: 'b', topic: 'messages', user: 'hist', after: '0', conversation_id: 'b' });
    const all = await untilReplayDone(ws, 'all');
    assert.deepEqual(all[0], { type: 'subscribed', id: 'all' });
    assert.deepEqual(all.slice(1, -1).map((f) => f.message.msg_id), ids);
    const stats = (await s.req('GET', '/v1/users/hist/stats')).json;
    assert.equal(stats.cold_messages, 6, 'the replay read cold messages too');
    const convB = (await untilReplayDone(ws, 'b')).filter((f) => f.type === 'message');
    const wantB = [];
    for (const id of ids) {
      const m = (await s.req('GET', `/v1/users/hist/messages?conversation_id=b&after=${BigInt(id) - 1n}&limit=1`)).json.messages[0];
      if (m?.msg_id === id) wantB.push(id);
    }
    assert.deepEqual(convB.map((f) => f.message.msg_id), wantB);
    assert.ok(convB.every((f) => f.message.conversation_id === 'b'));
    const live = await post('hist', 'a', 'live all');
    const f = (await ws.next()).json;
    assert.deepEqual([f.type, f.id, f.message.msg_id], ['message', 'all', live]);
    ids.push(live);
    ws.close();
  });

  test('after a msg_id still replays what follows it', async () => {
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 'r', topic: 'messages', user: 'hist', after: ids[3] });
    const got = (await untilReplayDone(ws, 'r')).filter((f) => f.type === 'message');
    assert.deepEqual(got.map((f) => f.message.msg_id), ids.slice(4));
    ws.close();
  });
});

describe('item 4: before= is the page just before, in the asked order', () => {
  const all = [], conv = { a: [], b: [] };
  before(async () => {
    for (let i = 0; i < 40; i++) {
      const c = i % 3 ? 'a' : 'b';
      const id = await post('pager', c, `p${i}`);
      all.push(id);
      conv[c].push(id);
      if (i === 19) await flush('pager'); // the first half cold, the rest hot
    }
  });
  const list = async (q) => {
    const r = await s.req('GET', `/v1/users/pager/messages?${new URLSearchParams(q)}`);
    assert.equal(r.status, 200, r.text);
    return r.json;
  };
  const ids = (page) => page.messages.map((m) => m.msg_id);

  test('before=X&limit=N: the N newest older than X, ascending by default, newest first with desc', async () => {
    for (const x of [30, 22, 20, 18, 5]) { // hot, across the boundary, cold
      const want = all.slice(Math.max(0, x - 4), x);
      assert.deepEqual(ids(await list({ before: all[x], limit: 4 })), want, `before #${x}`);
      assert.deepEqual(ids(await list({ before: all[x], limit: 4, order: 'asc' })), want);
      assert.deepEqual(ids(await list({ before: all[x], limit: 4, order: 'desc' })), [...want].reverse());
    }
    // the example: before the newest, limit 1 is the one just before it, not seq 1
    const one = await list({ before: all[39], limit: 1 });
    assert.deepEqual(ids(one), [all[38]]);
    assert.equal(one.messages[0].content, 'p38');
  });

  test('after=X&limit=N: the N just after X, in either order', async () => {
    for (const x of [2, 17, 25]) {
      const want = all.slice(x + 1, x + 5);
      assert.deepEqual(ids(await list({ after: all[x], limit: 4 })), want);
      assert.deepEqual(ids(await list({ after: all[x], limit: 4, order: 'desc' })), [...want].reverse());
    }
  });

  test('next goes on the same way: further back for before (both orders), further on for after', async () => {
    const pages = async (q) => {
      const out = [];
      for (let cursor = null, n = 0; n < 100; n++) {
        const p = await list({ ...q, ...(cursor ? { cursor } : {}) });
        out.push(ids(p));
        if (!(cursor = p.next)) return out;
      }
      throw new Error('too many pages');
    };
    const chunk = (arr, n, back) => {
      const out = [];
      if (back) for (let end = arr.length; end > 0; end -= n) out.push(arr.slice(Math.max(0, end - n), end));
      else for (let i = 0; i < arr.length; i += n) out.push(arr.slice(i, i + n));
      return out;
    };
    for (const [c, src] of [[null, all], ['a', conv.a], ['b', conv.b]]) {
      const q = c ? { conversation_id: c } : {};
      const x = src[src.length - 3];
      const older = src.filter((id) => BigInt(id) < BigInt(x));
      // before, asc: "load older" — each page the 6 before the last, listed oldest first
      assert.deepEqual(await pages({ ...q, before: x, limit: 6 }), chunk(older, 6, true), `before asc ${c}`);
      assert.deepEqual(await pages({ ...q, before: x, limit: 6, order: 'desc' }),
        chunk(older, 6, true).map((p) => [...p].reverse()), `before desc ${c}`);
      const y = src[2];
      const newer = src.filter((id) => BigInt(id) > BigInt(y));
      assert.deepEqual(await pages({ ...q, after: y, limit: 5 }), chunk(newer, 5, false), `after asc ${c}`);
      assert.deepEqual(await pages({ ...q, after: y, limit: 5, order: 'desc' }),
        chunk(newer, 5, false).map((p) => [...p].reverse()), `after desc ${c}`);
      // both bounds: the window, walked from the end the order names
      const win = src.filter((id) => BigInt(id) > BigInt(y) && BigInt(id) < BigInt(x));
      assert.deepEqual((await pages({ ...q, after: y, before: x, limit: 4 })).flat(), win);
      assert.deepEqual((await pages({ ...q, after: y, before: x, limit: 4, order: 'desc' })).flat(), [...win].reverse());
    }
  });
});

describe('item 6: a counter never written', () => {
  test('is 404 over HTTP, and its stream snapshot says it does not exist (value 0, exists false)', async () => {
    const r = await s.req('GET', '/v1/counters/fresh');
    assert.equal(r.status, 404);
    assert.equal(r.json.error.code, 'not_found');
    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 'c', topic: 'counter', name: 'fresh' });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'c' });
    assert.deepEqual((await ws.next()).json, { type: 'counter', id: 'c', name: 'fresh', value: 0, exists: false });
    assert.equal((await s.req('POST', '/v1/counters/fresh/incr', { by: 2 })).status, 200);
    assert.deepEqual((await ws.next()).json, { type: 'counter', id: 'c', name: 'fresh', value: 2 });
    assert.deepEqual((await s.req('GET', '/v1/counters/fresh')).json, { name: 'fresh', value: 2 });
    // written now: a new subscription's snapshot says it exists, as HTTP does
    ws.send({ type: 'subscribe', id: 'd', topic: 'counter', name: 'fresh' });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'd' });
    assert.deepEqual((await ws.next()).json, { type: 'counter', id: 'd', name: 'fresh', value: 2, exists: true });
    ws.close();
  });
});

describe('item 8: GET /v1/stream without an Upgrade', () => {
  test('is 426 upgrade_required with the error shape of SPEC §0 and an Upgrade header', async () => {
    for (const headers of [{}, { Upgrade: 'websocket' }]) { // no Connection: Upgrade is no upgrade
      const r = await request(s.port, 'GET', '/v1/stream', undefined, headers);
      assert.equal(r.status, 426, r.text);
      assert.equal(r.json.error.code, 'upgrade_required');
      assert.equal(typeof r.json.error.message, 'string');
      assert.deepEqual(Object.keys(r.json), ['error']);
      assert.equal(r.headers.upgrade, 'websocket');
    }
    // the query a proxy routes on changes nothing; other methods are still 405
    assert.equal((await s.req('GET', '/v1/stream?route=user:alice')).status, 426);
    assert.equal((await s.req('POST', '/v1/stream', {})).status, 405);
    // with a full handshake too: the path exists, so another method is 405 (HEAD 426), not 404,
    // and the connection closes (nothing after a handshake is HTTP)
    const handshake = (method) => new Promise((resolve, reject) => {
      const sock = net.connect(s.port, '127.0.0.1', () => sock.write(`${method} /v1/stream HTTP/1.1\r\nHost: x\r\n` +
        'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
        'Sec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n'));
      let got = '';
      sock.on('data', (d) => { got += d; });
      sock.on('end', () => resolve(got));
      sock.on('error', reject);
    });
    const raw = await handshake('POST');
    assert.match(raw, /^HTTP\/1\.1 405 /, raw);
    assert.match(raw, /"code":"method_not_allowed"/, raw);
    assert.match(raw, /\r\nAllow: GET, HEAD\r\n/i, raw);
    assert.match(raw, /\r\nConnection: close\r\n/i, raw);
    assert.match(await handshake('HEAD'), /^HTTP\/1\.1 426 /);
    // and the upgrade itself still works on the same path
    assert.equal((await wsConnect(s.port)).status, 101);
  });
});
