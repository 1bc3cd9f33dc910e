// An erasure far larger than one slice (SPEC §2.2, §7): the erasure runs in slices of a few
// dozen keys, as many a loop turn as fit a short budget (src/main.c). A user with thousands of
// hot and cold messages, edits and room posts is erased completely — nothing readable, no object
// left, its room posts tombstones naming nobody — while a bystander's reads and writes are
// answered, exactly, all along.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { parquetFiles, waitFor } from './cold-lib.mjs';
import { FLUSH_ON_ASK, parallel, readPages, suiteServer } from './lib.mjs';

describe('an erasure of many slices', () => {
  const s = suiteServer({ args: FLUSH_ON_ASK });

  test('every row goes, the bystander is served exactly meanwhile', async () => {
    await s.ok('POST', '/v1/rooms', { room_id: 'hall', members: ['zed', 'amy'] });
    await parallel(600, (i) => s.ok('POST', '/v1/rooms/hall/messages', { from: i % 2 ? 'amy' : 'zed', content: `hall ${i} by ${i % 2 ? 'amy' : 'zed-secret'}` }));
    await parallel(3000, (i) => s.ok('POST', '/v1/users/zed/messages', { conversation_id: `c${i % 5}`, from: 'zed', content: `zed-secret cold ${i}` }));
    await s.ok('POST', '/v1/admin/flush');
    const cold = path.join(s.dir, 'cold');
    const pf = (d) => { try { return parquetFiles(d); } catch { return []; } };
    await waitFor('zed cooled', async () => (await s.ok('GET', '/v1/users/zed/stats')).cold_messages === 3000, 60000);
    const page = await s.ok('GET', '/v1/users/zed/messages?conversation_id=c1&limit=40');
    for (const [i, m] of page.messages.entries())
      await s.ok(i % 2 ? 'DELETE' : 'PATCH', `/v1/users/zed/messages/${m.msg_id}`, i % 2 ? undefined : { content: 'zed-secret edited' });
    await parallel(3000, (i) => s.ok('POST', '/v1/users/zed/messages', { conversation_id: `c${i % 5}`, from: 'zed', content: `zed-secret hot ${i}` }));
    const st = await s.ok('GET', '/v1/users/zed/stats');
    assert.equal(st.total_messages, 6000 - 20);
    assert.ok(st.hot_messages >= 3000, JSON.stringify(st));
    assert.ok(pf(path.join(cold, 'zed')).length > 0);

    const r = await s.req('DELETE', '/v1/users/zed');
    assert.equal(r.status, 202, r.text);
    // the bystander meanwhile: each write acknowledged is read back, its count exact
    let amy = 0, polls = 0;
    for (;;) {
      const m = await s.ok('POST', '/v1/users/amy/messages', { conversation_id: 'side', from: 'amy', content: `amy ${amy}` });
      amy++;
      const back = await s.ok('GET', '/v1/users/amy/messages?conversation_id=side&order=desc&limit=1');
      assert.equal(back.messages[0].msg_id, m.msg_id);
      assert.equal((await s.ok('GET', '/v1/users/amy/conversations/side')).total_messages, amy);
      polls++;
      if ((await s.ok('GET', `/v1/admin/erasures/${r.json.erasure_id}`)).status === 'done') break;
      assert.ok(polls < 20000, 'the erasure never ends');
    }
    // nothing of zed is left
    const mine = await s.req('GET', '/v1/users/zed/messages?limit=1000');
    assert.ok(mine.status === 404 || mine.json.messages.length === 0, mine.text);
    assert.equal(existsSync(path.join(cold, 'zed')), false);
    const hall = await readPages(s, '/v1/rooms/hall/messages');
    assert.equal(hall.length, 600);
    assert.equal(hall.filter((m) => m.from === 'zed').length, 0);
    assert.equal(hall.filter((m) => m.from === null && m.content === null).length, 300);
    assert.equal(hall.filter((m) => m.from === 'amy' && m.content.startsWith('hall ')).length, 300);
    assert.equal((await s.ok('GET', '/v1/users/amy/conversations/side')).total_messages, amy);
  });
});
