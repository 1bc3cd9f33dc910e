// SPDX-License-Identifier: MIT
// SPEC §2 over real sockets: messages and conversations. A randomized test posts across users
// and conversations and checks every pagination path against the posted set; conversation
// fields against a recount; isolation and auth per user; kill -9 while posting; bad input.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { request, sleep, startStrata, tempDir } from './lib.mjs';

const cmp = (a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0);

async function pageAll(s, user, params, limit) {
  const out = [];
  let cursor = null;
  for (let guard = 0; guard < 10000; guard++) {
    const qs = new URLSearchParams({ ...params, limit: String(limit) });
    if (cursor) qs.set('cursor', cursor);
    const r = await s.req('GET', `/v1/users/${user}/messages?${qs}`);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.messages.length <= limit);
    out.push(...r.json.messages);
    cursor = r.json.next;
    if (cursor === null) return out;
    assert.ok(r.json.messages.length === limit, 'a non-final page is full');
  }
  throw new Error('pagination did not end');
}

describe('chat', () => {
  let s;
  before(async () => { s = await startStrata({ args: ['--max-content', '4096'] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('post returns 201 with a snowflake id, seq and timestamp', async () => {
    const t0 = Date.now() * 1000;
    const r = await s.req('POST', '/v1/users/u1/messages', { conversation_id: 'c', from: 'u1', content: 'hi', metadata: { a: [1, 'x'] } });
    assert.equal(r.status, 201);
    assert.match(r.json.msg_id, /^\d+$/);
    assert.equal(r.json.conversation_id, 'c');
    assert.equal(r.json.seq, 1);
    assert.ok(r.json.timestamp >= t0 - 1e6 && r.json.timestamp <= Date.now() * 1000 + 1e6);
    const g = await s.req('GET', '/v1/users/u1/messages');
    assert.deepEqual(g.json.messages[0], { msg_id: r.json.msg_id, conversation_id: 'c', from: 'u1', timestamp: r.json.timestamp, seq: 1, content: 'hi', metadata: { a: [1, 'x'] } });
    assert.equal(g.json.next, null);
  });

  test('randomized: every pagination path returns exactly the posted set, in order', async () => {
    const users = ['ra', 'rb', 'rc'];
    const posted = Object.fromEntries(users.map((u) => [u, []]));
    let seed = 99;
    const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
    const posts = [];
    for (let i = 0; i < 300; i++) {
      const user = users[rnd(3)];
      const conv = `conv-${rnd(5)}`;
      const body = { conversation_id: conv, from: rnd(2) ? user : 'assistant', content: `m${i} ${'é'.repeat(rnd(4))}`, ...(rnd(3) ? {} : { metadata: { i } }) };
      posts.push(s.req('POST', `/v1/users/${user}/messages`, body).then((r) => {
        assert.equal(r.status, 201);
        posted[user].push({ ...body, msg_id: r.json.msg_id, seq: r.json.seq });
      }));
      if (i % 25 === 0) await Promise.all(posts.splice(0));
    }
    await Promise.all(posts);
    for (const user of users) {
      const all = [...posted[user]].sort((a, b) => cmp(a.msg_id, b.msg_id));
      for (const limit of [1, 3, 7, 50, 1000]) {
        for (const order of ['asc', 'desc']) {
          const got = await pageAll(s, user, { order }, limit);
          const want = order === 'asc' ? all : [...all].reverse();
          assert.deepEqual(got.map((m) => m.msg_id), want.map((m) => m.msg_id), `${user} ${order} ${limit}`);
        }
      }
      const convs = [...new Set(all.map((m) => m.conversation_id))];
      for (const conv of convs) {
        const mine = all.filter((m) => m.conversation_id === conv);
        // seq is 1..n without gaps in id order
        assert.deepEqual(mine.map((m) => m.seq), mine.map((_, i) => i + 1), `${user}/${conv} seq`);
        for (const order of ['asc', 'desc']) {
          const got = await pageAll(s, user, { conversation_id: conv, order }, 4);
          const want = order === 'asc' ? mine : [...mine].reverse();
          assert.deepEqual(got.map((m) => m.msg_id), want.map((m) => m.msg_id));
          assert.ok(got.every((m) => m.conversation_id === conv));
        }
        // after / before windows
        const mid = mine[Math.floor(mine.length / 2)].msg_id;
        const after = await pageAll(s, user, { conversation_id: conv, after: mid }, 2);
        assert.deepEqual(after.map((m) => m.msg_id), mine.filter((m) => cmp(m.msg_id, mid) > 0).map((m) => m.msg_id));
        const beforeDesc = await pageAll(s, user, { conversation_id: conv, before: mid, order: 'desc' }, 2);
        assert.deepEqual(beforeDesc.map((m) => m.msg_id), mine.filter((m) => cmp(m.msg_id, mid) < 0).reverse().map((m) => m.msg_id));
        // hybrid fields equal a recount
        const c = (await s.req('GET', `/v1/users/${user}/conversations/${conv}`)).json;
        assert.equal(c.total_messages, mine.length);
        assert.equal(c.first_msg_id, mine[0].msg_id);
        assert.equal(c.last_msg_id, mine[mine.length - 1].msg_id);
        assert.ok(c.updated >= c.created);
      }
      // conversations newest-updated first, every page, no duplicates
      let cursor = null;
      const seen = [];
      do {
        const r = await s.req('GET', `/v1/users/${user}/conversations?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        seen.push(...r.json.conversations);
        cursor = r.json.next;
      } while (cursor);
      assert.deepEqual(seen.map((c) => c.conversation_id).sort(), [...convs].sort());
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i - 1].updated >= seen[i].updated);
      const st = (await s.req('GET', `/v1/users/${user}/stats`)).json;
      assert.equal(st.total_messages, all.length);
      assert.equal(st.conversations, convs.length);
    }
  });

  test('users are isolated', async () => {
    await s.req('POST', '/v1/users/iso-a/messages', { conversation_id: 'shared', from: 'x', content: 'secret' });
    const b = await s.req('GET', '/v1/users/iso-b/messages?conversation_id=shared');
    assert.deepEqual(b.json.messages, []);
    assert.equal((await s.req('GET', '/v1/users/iso-b/conversations/shared')).status, 404);
    assert.equal((await s.req('GET', '/v1/users/iso-b/stats')).json.total_messages, 0);
    assert.deepEqual((await s.req('GET', '/v1/users/iso-b/conversations')).json.conversations, []);
  });

  test('Idempotency-Key: a retried post never creates a second message', async () => {
    const h = { 'idempotency-key': 'client-msg-1' };
    const body = { conversation_id: 'idem', from: 'u', content: 'once' };
    const rs = await Promise.all(Array.from({ length: 6 }, () => s.req('POST', '/v1/users/idem-u/messages', body, h)));
    for (const r of rs) assert.deepEqual(r.json, rs[0].json);
    assert.equal((await s.req('GET', '/v1/users/idem-u/conversations/idem')).json.total_messages, 1);
  });

  test('bad input', async () => {
    const bad = [
      [{ from: 'a', content: 'x' }, 400],
      [{ conversation_id: 'a b', from: 'a', content: 'x' }, 400],
      [{ conversation_id: 'c', content: 'x' }, 400],
      [{ conversation_id: 'c', from: 7, content: 'x' }, 400],
      [{ conversation_id: 'c', from: 'a', content: '' }, 400],
      [{ conversation_id: 'c', from: 'a', content: 5 }, 400],
      [{ conversation_id: 'c', from: 'a', content: 'x', metadata: 'str' }, 400],
      [{ conversation_id: 'c', from: 'a', content: 'x', metadata: [1] }, 400],
      [{ conversation_id: 'c', from: 'a', content: 'x'.repeat(4097) }, 413],
    ];
    for (const [body, status] of bad) {
      const r = await s.req('POST', '/v1/users/bad/messages', body);
      assert.equal(r.status, status, JSON.stringify(body).slice(0, 80));
    }
    // invalid UTF-8 inside a JSON string (raw bytes)
    const raw = Buffer.concat([Buffer.from('{"conversation_id":"c","from":"a","content":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const r = await s.req('POST', '/v1/users/bad/messages', raw);
    assert.equal(r.status, 400);
    for (const q of ['limit=0', 'limit=1001', 'limit=x', 'order=up', 'after=abc', 'before=-1', 'cursor=1x', 'conversation_id=a%20b', 'after=99999999999999999999999'])
      assert.equal((await s.req('GET', `/v1/users/bad/messages?${q}`)).status, 400, q);
    for (const q of ['before=0', 'cursor=0'])
      assert.equal((await s.req('GET', `/v1/users/bad/messages?${q}`)).status, 400, q);
    // after=0 is "after nothing" (a stream's "after":"0"): the same page as no after
    for (const content of ['z1', 'z2', 'z3']) assert.equal((await s.req('POST', '/v1/users/zero/messages', { conversation_id: 'c', from: 'a', content })).status, 201);
    const all = await s.req('GET', '/v1/users/zero/messages?limit=2'), zero = await s.req('GET', '/v1/users/zero/messages?after=0&limit=2');
    assert.equal(zero.status, 200);
    assert.deepEqual(zero.json, all.json);
    assert.deepEqual(zero.json.messages.map((m) => m.content), ['z1', 'z2']);
    // …and like any after=X: the page just after it in either order, and with before=X, as after=1
    const page = async (q) => (await s.req('GET', `/v1/users/zero/messages?${q}`)).json.messages.map((m) => m.content);
    assert.deepEqual(await page('after=0&order=desc&limit=2'), ['z2', 'z1']);
    assert.deepEqual(await page('after=1&order=desc&limit=2'), ['z2', 'z1']);
    const z3 = all.json.next && (await s.req('GET', `/v1/users/zero/messages?cursor=${all.json.next}`)).json.messages[0].msg_id;
    assert.deepEqual(await page(`after=0&before=${z3}&order=desc&limit=1`), await page(`after=1&before=${z3}&order=desc&limit=1`));
    assert.equal((await s.req('GET', '/v1/users/bad/conversations?cursor=zzz')).status, 400);
    assert.equal((await s.req('GET', '/v1/users/a%20b/messages')).status, 400);
    assert.equal((await s.req('GET', '/v1/users/bad/stats')).json.total_messages, 0);
  });
});

describe('chat auth and crash', () => {
  const SECRET = 's3cret';
  const tok = (sub) => {
    const b = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const h = b({ alg: 'HS256', typ: 'JWT' }), p = b({ sub, exp: Math.floor(Date.now() / 1000) + 60 });
    return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
  };

  test('a token for user a can never read, write or count anything of user b', async () => {
    const s = await startStrata({ env: { STRATA_JWT_SECRET: SECRET } });
    const A = { authorization: `Bearer ${tok('alice')}` };
    assert.equal((await s.req('POST', '/v1/users/alice/messages', { conversation_id: 'c', from: 'alice', content: 'x' }, A)).status, 201);
    for (const [m, p] of [['POST', '/v1/users/bob/messages'], ['GET', '/v1/users/bob/messages'], ['GET', '/v1/users/bob/conversations'], ['GET', '/v1/users/bob/conversations/c'], ['GET', '/v1/users/bob/stats']]) {
      const r = await s.req(m, p, m === 'POST' ? { conversation_id: 'c', from: 'alice', content: 'x' } : undefined, A);
      assert.equal(r.status, 403, `${m} ${p}`);
      assert.equal(r.json.error.code, 'forbidden');
      assert.equal((await s.req(m, p, m === 'POST' ? {} : undefined)).status, 401, `no token ${m} ${p}`);
    }
    assert.equal((await s.req('GET', '/v1/users/alice/stats', undefined, A)).json.total_messages, 1);
    // bad signature, expired, wrong algorithm on a user route: 401
    const forged = tok('alice').replace(/\.[^.]+$/, '.' + Buffer.from('nope').toString('base64url'));
    const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const h = b64({ alg: 'HS256' }), p = b64({ sub: 'alice', exp: Math.floor(Date.now() / 1000) - 60 }); // past the leeway
    const expired = `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
    const none = `${b64({ alg: 'none' })}.${b64({ sub: 'alice' })}.`;
    for (const t of [forged, expired, none]) {
      const r = await s.req('GET', '/v1/users/alice/messages', undefined, { authorization: `Bearer ${t}` });
      assert.equal(r.status, 401);
    }
    await s.stop();
    s.cleanup();
  });

  test('kill -9 while posting: every acknowledged message survives, seq has no gaps or repeats', async () => {
    const dir = tempDir('chat');
    let s = await startStrata({ dataDir: dir });
    const acked = [];
    let killed = false;
    // every answer is a 201; only a connection error after the kill ends a worker
    const worker = async (w) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        for (let i = 0; ; i++) {
          let r;
          try {
            r = await request(s.port, 'POST', '/v1/users/crash/messages', { conversation_id: `c${w % 3}`, from: 'x', content: `w${w} ${i}` }, {}, agent);
          } catch (e) {
            if (killed) return;
            throw e;
          }
          assert.equal(r.status, 201, r.text);
          acked.push(r.json);
        }
      } finally {
        agent.destroy();
      }
    };
    const ws = Promise.allSettled(Array.from({ length: 12 }, (_, w) => worker(w)));
    await sleep(600);
    // a loaded machine may not have answered a write yet: kill once one was
    for (const end = Date.now() + 30000; !acked.length && Date.now() < end;) await sleep(20);
    killed = true;
    await s.kill9();
    for (const w of await ws) if (w.status === 'rejected') throw w.reason;
    assert.ok(acked.length > 0);
    s = await startStrata({ dataDir: dir });
    const all = await pageAll(s, 'crash', {}, 1000);
    const ids = new Set(all.map((m) => m.msg_id));
    for (const a of acked) assert.ok(ids.has(a.msg_id), `lost ${a.msg_id}`);
    for (const conv of ['c0', 'c1', 'c2']) {
      const mine = all.filter((m) => m.conversation_id === conv);
      assert.deepEqual(mine.map((m) => m.seq), mine.map((_, i) => i + 1), `${conv} seq`);
      assert.equal((await s.req('GET', `/v1/users/crash/conversations/${conv}`)).json.total_messages, mine.length);
    }
    // ids keep increasing after the restart
    const next = await s.req('POST', '/v1/users/crash/messages', { conversation_id: 'c0', from: 'x', content: 'after' });
    assert.ok(all.every((m) => cmp(m.msg_id, next.json.msg_id) < 0));
    await s.stop();
    s.cleanup();
  });
});
