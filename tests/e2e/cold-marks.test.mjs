// SPDX-License-Identifier: MIT
// The hot store's marks of conversations with cold rows (src/chat/marks.c, issue 48; SPEC §7: no
// request waits on object storage): where they were left incomplete, a post to a conversation
// with no hot record read its owner's footers, so with object storage down it was refused 503.
// - a deleted conversation kept its mark: a post re-creating it read the footers. Its delete now
//   takes the mark out (every row of it is masked from then on), and the re-created one goes on
//   from the deleted one's last seq (SPEC §2: a seq is never issued twice in a conversation).
// Object storage is s3rver behind a proxy the test switches to refuse (s3-lib.mjs, as in
// cold-s3down.test.mjs); each server is restarted before storage goes down, so no footer is in
// its memory.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitFor } from './cold-lib.mjs';
import { startStrata, tempDir } from './lib.mjs';
import { frontProxy, s3Process } from './s3-lib.mjs';

const args = (port) => ['--cold-url', 's3://bk/cold', '--s3-endpoint', `http://127.0.0.1:${port}`, '--s3-access-key', 'S3RVER',
  '--s3-secret-key', 'S3RVER', '--flush-interval', '3600', '--table-commit-interval', '1', '--cold-retries', '0',
  '--cold-timeout-ms', '1500'];
const stats = async (s, u) => (await s.req('GET', `/v1/users/${u}/stats`)).json;
const postTo = (s, u, c, content = 'x') => s.req('POST', `/v1/users/${u}/messages`, { conversation_id: c, from: u, content });

test('a deleted conversation with cold rows, re-created while storage is down: acknowledged, its seq going on', { timeout: 90000 }, async () => {
  const s3 = await s3Process(tempDir('s3delconv'));
  const front = await frontProxy(s3.port);
  const dataDir = tempDir();
  let s = await startStrata({ dataDir, args: args(front.port) });
  try {
    for (let i = 1; i <= 3; i++) assert.equal((await postTo(s, 'dl', 'gone', `m ${i}`)).json.seq, i);
    assert.equal((await postTo(s, 'dl', 'kept')).status, 201);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('cold', async () => (await stats(s, 'dl')).cold_messages === 4);
    const d = await s.req('DELETE', '/v1/users/dl/conversations/gone');
    assert.equal(d.status, 200, d.text);
    assert.equal(d.json.deleted, 3);
    // its rows are still in the object (masked until a fold rewrites it): a re-created
    // conversation's seq comes from the delete's record of its last, not from them
    await s.stop();
    s = await startStrata({ dataDir, args: args(front.port) });
    front.set('refuse');
    const r = await postTo(s, 'dl', 'gone');
    assert.equal(r.status, 201, `a deleted conversation's name needs no cold read: ${r.text}`);
    assert.equal(r.json.seq, 4, 'the seq goes on from the deleted one (never issued twice)');
    const c = await s.req('GET', '/v1/users/dl/conversations/gone');
    assert.equal(c.status, 200, c.text);
    assert.equal(c.json.total_messages, 1, 'the deleted messages are not counted');
    front.set('pass');
    const k = await postTo(s, 'dl', 'kept');
    assert.equal(k.json.seq, 2, k.text);
  } catch (e) {
    console.error(s.log().slice(-6000));
    throw e;
  } finally {
    front.set('pass');
    await s.stop();
    s.cleanup();
    await front.close();
    await s3.stop();
  }
});
