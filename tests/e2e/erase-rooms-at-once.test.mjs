// An erased user's room messages are tombstones at once (SPEC §2.2: "at once every answer about
// the user is 404 or empty"). The erasure turns a user's room posts into tombstones in slices,
// in the background, long after the 202 for a user with thousands of posts; from the 202 on,
// every read of the room — listings (hot and cold, paged, include_deleted=false) and a stream's
// replay — shows each of them as the tombstone it becomes, and once the erasure is done the room
// reads exactly as it did right after the 202 (the same deleted_at: the erasure's time).
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, test } from 'node:test';
import { erasureDone, parquetFiles, waitFor } from './cold-lib.mjs';
import { FLUSH_ON_ASK, parallel, readPages, suiteServer, wsConnect } from './lib.mjs';

describe("an erased user's room messages", () => {
  const s = suiteServer({ args: FLUSH_ON_ASK });
  // every message of the room, oldest first, page by page
  const listing = (query) => readPages(s, '/v1/rooms/den/messages', query);
  const replay = async () => {
    const ws = await wsConnect(s.port);
    try {
      ws.send({ type: 'subscribe', id: 'r', topic: 'room', room_id: 'den', user: 'amy', after: '0' });
      const got = [];
      for (;;) {
        const f = await ws.next(30000);
        assert.notEqual(f.op, -1, 'the stream ended');
        if (f.json?.type === 'replay_done') return got;
        assert.notEqual(f.json?.type, 'error', f.text);
        if (f.json?.message) got.push(f.json.message);
      }
    } finally { ws.close(); }
  };
  const names = (msgs) => msgs.filter((m) => JSON.stringify(m).includes('zed'));

  test('every read shows them as tombstones from the 202 on, the same ones the erasure writes', async () => {
    await s.ok('POST', '/v1/rooms', { room_id: 'den', members: ['zed', 'amy'] });
    // cold posts of zed (and amy's beside them), then hot ones
    await parallel(1500, (i) => s.ok('POST', '/v1/rooms/den/messages', { from: i % 10 ? 'zed' : 'amy', content: `${i % 10 ? 'zed' : 'amy'} cold ${i}` }));
    await s.ok('POST', '/v1/admin/flush');
    const cold = path.join(s.dir, 'cold', 'shared', 'conversations', 'den');
    await waitFor('the room cooled', () => { try { return parquetFiles(cold).length > 0; } catch { return false; } }, 60000);
    await parallel(1500, (i) => s.ok('POST', '/v1/rooms/den/messages', { from: i % 10 ? 'zed' : 'amy', content: `${i % 10 ? 'zed' : 'amy'} hot ${i}` }));
    // one of zed's posts edited, one deleted (a tombstone that still names zed) before the erasure
    const first = (await listing()).filter((m) => m.from === 'zed');
    await s.ok('PATCH', `/v1/rooms/den/messages/${first[0].msg_id}`, { content: 'zed edited' });
    await s.ok('DELETE', `/v1/rooms/den/messages/${first[1].msg_id}`);
    await s.ok('PATCH', `/v1/rooms/den/messages/${first.at(-1).msg_id}`, { content: 'zed edited hot' });
    const amy = (await listing()).filter((m) => m.from === 'amy');
    assert.equal(amy.length, 300);

    const r = await s.req('DELETE', '/v1/users/zed');
    assert.equal(r.status, 202, r.text);
    // at once: the listing names zed nowhere, shows none of its text
    const now = await listing();
    const pending = (await s.ok('GET', `/v1/admin/erasures/${r.json.erasure_id}`)).status === 'pending';
    assert.equal(now.length, 3000);
    assert.deepEqual(names(now), [], 'zed is still named or its text shown right after the 202');
    const dead = now.filter((m) => m.deleted_at != null);
    assert.equal(dead.length, 2700);
    for (const m of dead) {
      assert.equal(m.from, null);
      assert.equal(m.content, null);
      assert.equal(m.metadata, null);
      assert.deepEqual(m.edit_history, []);
    }
    assert.deepEqual(now.filter((m) => m.deleted_at == null), amy);
    // include_deleted=false hides them, amy's left exactly
    assert.deepEqual(await listing({ include_deleted: 'false' }), amy);
    // newest first, from the hot end: the same messages
    assert.deepEqual((await s.ok('GET', '/v1/rooms/den/messages?order=desc&limit=1000')).messages, now.slice(-1000).reverse());
    // the room's members: amy alone
    assert.deepEqual((await s.ok('GET', '/v1/rooms/den/members')).members.map((m) => m.user), ['amy']);
    // a stream's replay of the room: the same messages, zed named nowhere
    const replayed = await replay();
    assert.deepEqual(replayed.map((m) => m.msg_id), now.map((m) => m.msg_id));
    assert.deepEqual(names(replayed), []);

    await erasureDone(s, r.json.erasure_id, { ms: 120000 });
    // the erasure wrote the very tombstones the reads showed
    assert.deepEqual(await listing(), now);
    assert.deepEqual(await replay(), replayed);
    // the window was there to be seen (a diagnostic, not a timing assertion)
    if (!pending) console.log('note: the erasure was done before the first read; the window was not exercised');
  });
});
