// SPDX-License-Identifier: MIT
// SPEC §2.1 (v5) over real sockets: DELETE /v1/rooms/{room}. An owner or a global admin deletes;
// at once the room is 404 to everyone, its streams end with not_found and it leaves every
// member's list; then its messages are erased hot and cold exactly as a user's (no cold object,
// read with DuckDB or as bytes, holds any of its text) and the erasure reports done; the id may
// then be taken again and starts at seq 1 with no history; its Idempotency-Key answers go with it
// (a retry never replays its text). Survives kill -9 mid-way.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { filesHolding, filesUnder, waitFor } from './cold-lib.mjs';
import { startStrata, wsConnect } from './lib.mjs';

const SECRET = 'rooms-delete-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64({ exp: Math.floor(Date.now() / 1000) + 3600, ...payload });
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const as = (sub, extra = {}) => ({ Authorization: `Bearer ${jwt({ sub, ...extra })}` });
const ADMIN = as('ops', { role: 'admin' });

// Which files under dir hold the text (as bytes: Parquet pages are zstd-compressed, so the test
// also reads every Parquet file's rows below).
// A file the flush renames (its .tmp-N) or compaction removes between the walk and the read is
// skipped (filesHolding): what it held is in the file it became, which a later walk reads.
const holding = filesHolding;

async function frames(ws, pred, ms = 15000) {
  const got = [];
  const end = Date.now() + ms;
  for (;;) {
    const f = await ws.next(Math.max(1, end - Date.now()));
    if (f.op === -1) throw new Error(`stream closed; got ${JSON.stringify(got)}`);
    if (f.json) got.push(f.json);
    if (f.json && pred(f.json, got)) return got;
  }
}

describe('deleting a room', () => {
  let s;
  const args = ['--jwt-secret', SECRET, '--flush-interval', '3600'];
  before(async () => { s = await startStrata({ args }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('only an owner or a global admin deletes; 404 for a room that is not there', async () => {
    let r = await s.req('POST', '/v1/rooms', { room_id: 'who', members: ['bea'] }, as('amy'));
    assert.equal(r.status, 201, r.text);
    r = await s.req('POST', '/v1/rooms/who/members', { add: [{ user: 'cal', role: 'admin' }] }, as('amy'));
    assert.equal(r.status, 200, r.text);
    for (const sub of ['bea', 'cal', 'zed']) {
      r = await s.req('DELETE', '/v1/rooms/who', undefined, as(sub));
      assert.equal(r.status, 403, `${sub}: ${r.text}`);
    }
    assert.equal((await s.req('GET', '/v1/rooms/who', undefined, as('amy'))).status, 200, 'still there');
    r = await s.req('DELETE', '/v1/rooms/who', undefined, ADMIN);
    assert.equal(r.status, 202, r.text);
    assert.match(r.json.erasure_id, /^\d+$/);
    assert.equal((await s.req('DELETE', '/v1/rooms/who', undefined, ADMIN)).status, 404);
    assert.equal((await s.req('DELETE', '/v1/rooms/never', undefined, ADMIN)).status, 404);
    assert.equal((await s.req('DELETE', '/v1/rooms/who', { bye: 1 }, ADMIN)).status, 400);
  });

  test('at once 404, streams end not_found, gone from every list; then nothing left hot or cold', async () => {
    const members = ['dan', 'eve', 'fox'];
    let r = await s.req('POST', '/v1/rooms', { room_id: 'big', name: 'Big', members }, as('dan'));
    assert.equal(r.status, 201, r.text);
    // also in another room, which must stay whole
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'keep', members: ['eve'] }, as('dan'))).status, 201);
    const texts = [];
    for (let i = 0; i < 12; i++) {
      const from = members[i % 3];
      const content = `room-secret-${i}-${'x'.repeat(40)}`;
      texts.push(content);
      r = await s.req('POST', '/v1/rooms/big/messages', { from, content }, as(from));
      assert.equal(r.status, 201, r.text);
    }
    assert.equal((await s.req('POST', '/v1/rooms/keep/messages', { from: 'eve', content: 'kept-text' }, as('eve'))).status, 201);
    // an edit leaves a version in edit_history; cool the room, then post more (hot)
    const first = (await s.req('GET', '/v1/rooms/big/messages?limit=1', undefined, as('dan'))).json.messages[0];
    assert.equal((await s.req('PATCH', `/v1/rooms/big/messages/${first.msg_id}`, { content: 'edited-secret' }, as('dan'))).status, 200);
    assert.equal((await s.req('POST', '/v1/admin/flush', undefined, ADMIN)).status, 202);
    const cold = path.join(s.dir, 'cold');
    await waitFor('the room cooled', () => holding(cold, 'big').length > 0 || filesUnder(path.join(cold, 'shared', 'conversations', 'big')).length > 0);
    for (let i = 12; i < 15; i++) {
      texts.push(`room-secret-${i}`);
      assert.equal((await s.req('POST', '/v1/rooms/big/messages', { from: 'eve', content: `room-secret-${i}` }, as('eve'))).status, 201);
    }
    const ws = await wsConnect(s.port, `/v1/stream?access_token=${jwt({ sub: 'fox' })}`);
    ws.send({ type: 'subscribe', id: 'b', topic: 'room', room_id: 'big' });
    await frames(ws, (f) => f.type === 'replay_done' || f.type === 'subscribed');

    r = await s.req('DELETE', '/v1/rooms/big', undefined, as('dan'));
    assert.equal(r.status, 202, r.text);
    const eid = r.json.erasure_id;
    // at once
    const got = await frames(ws, (f) => f.type === 'error');
    assert.equal(got.at(-1).code, 'not_found');
    assert.equal(got.at(-1).id, 'b');
    for (const [m, p, body] of [['GET', '/v1/rooms/big'], ['GET', '/v1/rooms/big/messages'], ['GET', '/v1/rooms/big/members'],
      ['POST', '/v1/rooms/big/messages', { from: 'dan', content: 'late' }], ['POST', '/v1/rooms/big/read', { user: 'dan', seq: 1 }],
      ['POST', '/v1/rooms/big/members', { add: ['zed'] }]]) {
      r = await s.req(m, p, body, as('dan'));
      assert.equal(r.status, 404, `${m} ${p}: ${r.text}`);
    }
    for (const u of members) {
      const list = (await s.req('GET', `/v1/users/${u}/rooms`, undefined, as(u))).json.rooms.map((x) => x.room_id);
      assert.ok(!list.includes('big'), `${u}'s list: ${list}`);
    }
    assert.deepEqual((await s.req('GET', '/v1/users/eve/rooms', undefined, as('eve'))).json.rooms.map((x) => x.room_id), ['keep']);
    // then the erasure: done, and no object holds the room's text
    await waitFor('the room\'s erasure done', async () => {
      const st = await s.req('GET', `/v1/admin/erasures/${eid}`, undefined, ADMIN);
      assert.equal(st.status, 200, st.text);
      assert.equal(st.json.room_id, 'big');
      assert.equal(st.json.user, undefined, 'a room erasure names the room, not a user');
      return st.json.status === 'done';
    }, 30000);
    for (const t of [...texts, 'edited-secret']) assert.deepEqual(holding(cold, t), [], `no cold file holds "${t.slice(0, 16)}"`);
    assert.deepEqual(filesUnder(path.join(cold, 'shared', 'conversations', 'big')), [], 'no object of the room is left');
    assert.equal((await s.req('GET', '/v1/rooms/keep/messages', undefined, as('eve'))).json.messages[0].content, 'kept-text');
    ws.close();
  });

  test('the id is free again once the deletion is done: seq 1, no history, only the new members', async () => {
    let r = await s.req('POST', '/v1/rooms', { room_id: 'reuse', members: ['gil', 'hal'] }, as('gil'));
    for (let i = 0; i < 4; i++) await s.req('POST', '/v1/rooms/reuse/messages', { from: 'hal', content: `old-${i}` }, as('hal'));
    r = await s.req('DELETE', '/v1/rooms/reuse', undefined, as('gil'));
    assert.equal(r.status, 202, r.text);
    const eid = r.json.erasure_id;
    r = await s.req('POST', '/v1/rooms', { room_id: 'reuse', members: ['ivy'] }, as('ivy'));
    if (r.status === 409) { // still being deleted: a clear conflict, then free once done
      assert.equal(r.json.error.code, 'conflict');
      assert.match(r.json.error.message, /being deleted/);
      await waitFor('done', async () => (await s.req('GET', `/v1/admin/erasures/${eid}`, undefined, ADMIN)).json.status === 'done', 30000);
      r = await s.req('POST', '/v1/rooms', { room_id: 'reuse', members: ['ivy'] }, as('ivy'));
    }
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.total_messages, 0);
    assert.equal(r.json.last_msg_id, null);
    const m = (await s.req('GET', '/v1/rooms/reuse/members', undefined, as('ivy'))).json.members.map((x) => [x.user, x.role]);
    assert.deepEqual(m, [['ivy', 'owner']]);
    r = await s.req('POST', '/v1/rooms/reuse/messages', { from: 'ivy', content: 'new' }, as('ivy'));
    assert.equal(r.json.seq, 1);
    const msgs = (await s.req('GET', '/v1/rooms/reuse/messages', undefined, as('ivy'))).json.messages;
    assert.deepEqual(msgs.map((x) => x.content), ['new']);
    assert.equal((await s.req('GET', '/v1/rooms/reuse', undefined, as('hal'))).status, 403, 'an old member is no member');
    assert.ok(!(await s.req('GET', '/v1/users/hal/rooms', undefined, as('hal'))).json.rooms.some((x) => x.room_id === 'reuse'));
  });

  test('its Idempotency-Key answers go with it: a retry never replays its text, at once or after', async () => {
    const key = (k) => ({ 'Idempotency-Key': `keyed-${k}` });
    let r = await s.req('POST', '/v1/rooms', { room_id: 'keyed', name: 'keyed-room-name', members: ['lu'] }, { ...as('lu'), ...key('make') });
    assert.equal(r.status, 201, r.text);
    const post = { from: 'lu', content: 'keyed-secret-post' };
    r = await s.req('POST', '/v1/rooms/keyed/messages', post, { ...as('lu'), ...key('post') });
    assert.equal(r.status, 201, r.text);
    const patch = ['PATCH', `/v1/rooms/keyed/messages/${r.json.msg_id}`, { content: 'keyed-secret-edit' }];
    r = await s.req(...patch, { ...as('lu'), ...key('edit') });
    assert.equal(r.status, 200, r.text);
    r = await s.req(...patch, { ...as('lu'), ...key('edit') }); // a retry before: the first answer
    assert.equal(r.headers['idempotent-replayed'], 'true');
    const del = await s.req('DELETE', '/v1/rooms/keyed', undefined, { ...as('lu'), ...key('delete') });
    assert.equal(del.status, 202, del.text);
    // at once: the requests run afresh (the room is not there), nothing of it answered
    for (const [what, req] of [['edit', patch], ['post', ['POST', '/v1/rooms/keyed/messages', post]]]) {
      r = await s.req(...req, { ...as('lu'), ...key(what) });
      assert.equal(r.status, 404, `${what} retried at once: ${r.text}`);
      assert.ok(!/keyed-secret/.test(r.text), r.text);
    }
    await waitFor('done', async () => (await s.req('GET', `/v1/admin/erasures/${del.json.erasure_id}`, undefined, ADMIN)).json.status === 'done', 30000);
    // DELETE's own answer stays: a retry finds the same erasure
    r = await s.req('DELETE', '/v1/rooms/keyed', undefined, { ...as('lu'), ...key('delete') });
    assert.deepEqual([r.status, r.json], [202, del.json]);
    // after: the stored answers are gone (the creation's too: a retry makes a new room)
    r = await s.req(...patch, { ...as('lu'), ...key('edit') });
    assert.equal(r.status, 404, r.text);
    assert.ok(!/keyed-secret/.test(r.text), r.text);
    r = await s.req('POST', '/v1/rooms', { room_id: 'keyed', name: 'keyed-room-name', members: ['lu'] }, { ...as('lu'), ...key('make') });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.headers['idempotent-replayed'], undefined, 'a new room, not the old answer');
    assert.equal((await s.req('GET', '/v1/rooms/keyed', undefined, as('lu'))).json.created, r.json.created);
  });

  test('a kill -9 right after the 202 loses nothing: still 404, the erasure finishes', async () => {
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'crash', members: ['jo', 'kay'] }, as('jo'))).status, 201);
    for (let i = 0; i < 30; i++) await s.req('POST', '/v1/rooms/crash/messages', { from: 'kay', content: `crash-secret-${i}` }, as('kay'));
    const r = await s.req('DELETE', '/v1/rooms/crash', undefined, as('jo'));
    assert.equal(r.status, 202, r.text);
    await s.kill9();
    s = await startStrata({ dataDir: s.dir, args });
    assert.equal((await s.req('GET', '/v1/rooms/crash', undefined, ADMIN)).status, 404);
    await waitFor('done after the restart', async () => (await s.req('GET', `/v1/admin/erasures/${r.json.erasure_id}`, undefined, ADMIN)).json.status === 'done', 30000);
    for (const u of ['jo', 'kay']) assert.deepEqual((await s.req('GET', `/v1/users/${u}/rooms`, undefined, as(u))).json.rooms, []);
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'crash', members: ['kay'] }, as('kay'))).status, 201);
  });
});
