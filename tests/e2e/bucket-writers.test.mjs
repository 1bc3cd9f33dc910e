// SPDX-License-Identifier: MIT
// SPEC v4 §5, §9: no object key is ever written twice. The original node, a node restored from
// its backup and a second node share one bucket (a directory, and S3 through the SigV4-checking
// proxy in front of s3rver); every object's bytes are compared before and after the others
// flushed and compacted: none is overwritten or deleted, and the original still reads every
// message. Regression (issue 38): a node restored to a time before the first flush wrote
// alice/batch-{ts}-1.parquet, the original's key, and the original answered 503 cold_unavailable.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { metric, ok, restore, runAsync, s3, shipped } from './backup-lib.mjs';
import { parquetFiles, waitFor } from './cold-lib.mjs';
import { sleep, startStrata, tempDir } from './lib.mjs';

// key -> sha256 of every Parquet object under dir (s3rver keeps an object as KEY._S3rver_object)
function objects(dir) {
  const out = new Map();
  for (const f of parquetFiles(dir)) {
    const key = path.relative(dir, f).replace(/\._S3rver_object$/, '');
    if (!key.endsWith('.parquet')) continue;
    out.set(key, createHash('sha256').update(readFileSync(f)).digest('hex'));
  }
  return out;
}

// An Iceberg table's version-hint.text is the one object strata rewrites in place (SPEC v5 §5.1:
// a hint, never the truth; its metadata files are created with If-None-Match: *).
const hint = (key) => /\/_tables\/[a-z_]+\/metadata\/version-hint\.text$/.test(key);

const writerOf = (key) => /-(w[0-9a-f]{16})-/.exec(key)?.[1];

// Every object seen before is still there with the same bytes.
function unchanged(before, after, what) {
  for (const [k, h] of before) {
    assert.ok(after.has(k), `${what}: ${k} was deleted`);
    assert.equal(after.get(k), h, `${what}: ${k} was overwritten`);
  }
}

async function post(s, n, tag) {
  for (let i = 0; i < n; i++) await ok(s, 'POST', '/v1/users/alice/messages', { conversation_id: 'c1', from: 'alice', content: `${tag} ${i}` }, {}, 201);
}

async function flushed(s, cold) {
  await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
  await waitFor(`${cold} cold messages`, async () => (await s.req('GET', '/v1/users/alice/stats')).json.cold_messages === cold);
}

async function contents(s) {
  const r = await s.req('GET', '/v1/users/alice/messages?limit=1000');
  assert.equal(r.status, 200, r.text);
  return r.json.messages.map((m) => m.content);
}

async function scenario({ coldArgs, bucketDir }) {
  const bk = tempDir('bw-bk');
  // --table-keep 0: objects a compaction replaced go at once (no kept snapshot holds them)
  const common = [...coldArgs, '--flush-interval', '3600', '--table-keep', '0'];
  const a = await startStrata({ args: [...common, '--backup-url', `file://${bk}`, '--backup-interval', '100'] });
  const started = [a];
  try {
    // writes wait for the first snapshot of a backup (503 until then)
    await waitFor('the first snapshot', async () => (await metric(a, 'strata_backup_snapshots_total')) >= 1);
    await post(a, 3, 'early');
    await shipped(a);
    await sleep(20);
    const beforeFlush = Date.now() * 1000;
    await sleep(20);
    await post(a, 4, 'late');
    await flushed(a, 7);
    await shipped(a);
    const original = await contents(a);
    assert.equal(original.length, 7);
    const first = objects(bucketDir);
    assert.equal(first.size, 1);
    assert.match([...first.keys()][0], /alice\/batch-\d+-(w[0-9a-f]{16}-)?1\.parquet$/); // the writer: below

    // a node restored to before the first flush: its first object has the same rows, time and
    // number as the original's, and must not land on the original's key
    const r1 = tempDir('bw-r1');
    let res = await restore(r1, `file://${bk}`, ['--to-time', String(beforeFlush)]);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: r1, args: common });
    started.push(r);
    assert.deepEqual(await contents(r), original.slice(0, 3));
    await post(r, 1, 'restored');
    await flushed(r, 4);
    // a node restored to the newest point inherits the original's object; it flushes and
    // compacts everything into one object, which must leave the original's object alone
    const r2dir = tempDir('bw-r2');
    res = await restore(r2dir, `file://${bk}`);
    assert.equal(res.code, 0, res.err);
    const r2 = await startStrata({ dataDir: r2dir, args: common });
    started.push(r2);
    assert.deepEqual(await contents(r2), original);
    await post(r2, 2, 'restored2');
    await flushed(r2, 9);
    await ok(r2, 'POST', '/v1/admin/compact', { user: 'alice' }, {}, 202);
    await waitFor('the compaction and the reaper', async () => (await metric(r2, 'strata_cold_objects_kept_total')) >= 1);
    // a second, fresh node on the same bucket
    const c = await startStrata({ args: common });
    started.push(c);
    await post(c, 2, 'second');
    await flushed(c, 2);
    // and the original goes on flushing
    await post(a, 2, 'more');
    await flushed(a, 9);

    const after = objects(bucketDir);
    unchanged(first, after, 'the original\'s first object');
    // a: 2; r: 1; r2: 1, the merge of the original's object and its own flush (its own object
    // deleted, the original's kept); c: 1
    assert.equal(after.size, 5, [...after.keys()].join('\n'));
    assert.deepEqual(await contents(a), [...original, 'more 0', 'more 1']);
    assert.deepEqual(await contents(r), [...original.slice(0, 3), 'restored 0']);
    assert.deepEqual(await contents(r2), [...original, 'restored2 0', 'restored2 1']);
    assert.deepEqual(await contents(c), ['second 0', 'second 1']);
    // the writers' tokens: the original's, two restored ones, the second node's
    const writers = new Set([...after.keys()].map((k) => /-(w[0-9a-f]{16})-/.exec(k)?.[1]));
    assert.equal(writers.size, 4);
    for (const s of started) await s.stop();

    // rebuild-meta never takes another writer's objects over (review: a rebuilt store that
    // adopted every writer in the bucket would compact and delete them under their node).
    // A lost store with no backup, over a bucket of four writers: it cannot tell which were its.
    const lost = tempDir('bw-lost');
    const refused = await runAsync(['rebuild-meta', '--data-dir', lost, ...common, '--accept-loss']);
    assert.notEqual(refused.code, 0, refused.err);
    assert.match(refused.err, /several writers \(w[0-9a-f]{16}, w[0-9a-f]{16}/);
    // the original, in place: its manifest is rebuilt from its own objects only
    const rb = await runAsync(['rebuild-meta', '--data-dir', a.dir, ...common]);
    assert.equal(rb.code, 0, rb.err);
    assert.match(rb.err, /object\(s\) of other writers .* left alone/);
    const a2 = await startStrata({ dataDir: a.dir, args: common });
    started.push(a2);
    assert.deepEqual(await contents(a2), [...original, 'more 0', 'more 1']);
    await ok(a2, 'POST', '/v1/admin/compact', { user: 'alice' }, {}, 202);
    const mine = writerOf([...first.keys()][0]);
    const own = () => [...objects(bucketDir).keys()].filter((k) => writerOf(k) === mine);
    // its two objects merged into one, the two deleted by its reaper
    await waitFor('the original\'s compaction and its reaper', async () => {
      const o = own();
      return o.length === 1 && /\.\d+\.parquet$/.test(o[0]);
    });
    assert.deepEqual(await contents(a2), [...original, 'more 0', 'more 1']);
    await a2.stop();
    const last = objects(bucketDir);
    for (const [k, h] of after) {
      if (writerOf(k) !== mine) assert.equal(last.get(k), h, `another writer's ${k} after the original compacted`);
    }
  } finally {
    for (const s of started) if (s.proc.exitCode === null) s.proc.kill('SIGKILL');
  }
}

test('a restored node, a second node and the original share a directory without overwriting', async () => {
  const cold = tempDir('bw-cold');
  await scenario({ coldArgs: ['--cold-url', `file://${cold}`], bucketDir: cold });
});

test('the same on S3 through the SigV4-checking proxy', async () => {
  const dir = tempDir('bw-s3');
  const { server, port } = await s3(dir);
  try {
    await scenario({
      coldArgs: ['--cold-url', 's3://bk/cold', '--s3-endpoint', `http://127.0.0.1:${port}`,
        '--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER'],
      bucketDir: path.join(dir, 'bk'),
    });
    // and each of the four nodes created its objects with If-None-Match: * (AWS refuses 412)
    assert.ok(server.proxy.creates.length >= 6);
    assert.deepEqual(server.proxy.creates.filter((c) => !c.conditional && !hint(c.key)), [], 'creates without If-None-Match: *');
  } finally {
    await server.close();
  }
});

// SPEC v4 §5 on S3: every kind of object — flushes, deltas, booking objects, compactions, backup
// segments and snapshots — is created with If-None-Match: * (the proxy refuses 412 over an
// existing key, as AWS does). A key another writer took between strata's HEAD and its PUT is left
// alone and the flush goes on under a fresh key; a PUT whose answer was lost is retried into 412
// and, finding its own bytes there, counts as created (no second object, nothing deleted).
test('every kind of object is created only where none is (If-None-Match: *): a raced key is left alone, a lost answer is not a second object', async () => {
  const dir = tempDir('bw-kinds');
  const { server, port } = await s3(dir);
  const proxy = server.proxy;
  const bucket = path.join(dir, 'bk');
  let s;
  try {
    s = await startStrata({
      args: ['--cold-url', 's3://bk/cold', '--s3-endpoint', `http://127.0.0.1:${port}`, '--s3-access-key', 'S3RVER',
        '--s3-secret-key', 'S3RVER', '--backup-url', 's3://bk/backup', '--backup-interval', '100',
        '--flush-interval', '3600', '--booking-hot-seconds', '0'],
    });
    await waitFor('the first snapshot', async () => (await metric(s, 'strata_backup_snapshots_total')) >= 1);
    await post(s, 4, 'm');
    await flushed(s, 4);
    const first = (await s.req('GET', '/v1/users/alice/messages?limit=1')).json.messages[0];
    await ok(s, 'PATCH', `/v1/users/alice/messages/${first.msg_id}`, { content: 'edited' }); // a delta
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', sections: [{ name: 'A', rows: 1, cols: 4, price: 1 }] }, {}, 201);
    const b = (await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', seats: ['1-1'] }, {}, 201)).json;
    await ok(s, 'POST', `/v1/bookings/${b.booking_id}/confirm`); // finished: a booking object
    // another writer takes the next batch key between strata's HEAD and its PUT
    proxy.race(/alice\/batch-/, 'another writer\'s object');
    await post(s, 2, 'raced');
    await flushed(s, 6);
    assert.equal(proxy.raced.length, 1);
    const raced = proxy.raced[0];
    const created = () => proxy.creates.map((c) => c.key);
    const batchKeys = () => created().filter((k) => /^cold\/alice\/batch-/.test(k));
    const retried = batchKeys().filter((k) => k !== raced).at(-1);
    assert.notEqual(retried, raced);
    const num = (k) => Number(/-(\d+)\.parquet$/.exec(k)[1]);
    assert.ok(num(retried) > num(raced), `${retried} takes a fresh number after ${raced}`);
    await waitFor('the delta and booking objects', async () => created().some((k) => /^cold\/alice\/delta-/.test(k))
      && created().some((k) => /^cold\/events\/gig\/bookings-/.test(k)));
    // a PUT done by S3 whose answer is lost: the retry's 412 finds its own bytes
    proxy.lose(/^PUT \S*\/alice\/batch-/);
    const before = batchKeys().length;
    await post(s, 1, 'lost');
    await flushed(s, 7);
    const lostKeys = batchKeys().slice(before);
    assert.equal(lostKeys.length, 2, `the PUT and its retry, one key: ${lostKeys.join(' ')}`);
    assert.equal(lostKeys[0], lostKeys[1]);
    assert.match(s.log(), /holds these very bytes already/);
    // a major compaction: one merged object
    await ok(s, 'POST', '/v1/admin/compact', { user: 'alice' }, {}, 202);
    await waitFor('a merged object', async () => batchKeys().some((k) => /\.\d+\.parquet$/.test(k)));
    await shipped(s);
    const want = ['edited', 'm 1', 'm 2', 'm 3', 'raced 0', 'raced 1', 'lost 0'];
    await waitFor('every message read', async () => JSON.stringify(await contents(s)) === JSON.stringify(want));
    assert.equal((await ok(s, 'GET', `/v1/bookings/${b.booking_id}`)).json.status, 'sold');
    // every create was conditional, of every kind
    assert.deepEqual(proxy.creates.filter((c) => !c.conditional && !hint(c.key)), [], 'creates without If-None-Match: *');
    for (const re of [/^cold\/alice\/batch-[^.]*\.parquet$/, /^cold\/alice\/delta-/, /^cold\/events\/gig\/bookings-/,
      /^cold\/alice\/batch-.*\.\d+\.parquet$/, /^backup\/seg\//, /^backup\/snap\//]) {
      assert.ok(created().some((k) => re.test(k)), `a create of ${re}`);
    }
    // the raced object is the other writer's still
    assert.equal(readFileSync(path.join(bucket, `${raced}._S3rver_object`), 'utf8'), 'another writer\'s object');
    await s.stop();
    s = null;
  } finally {
    if (s) await s.kill9();
    await server.close();
  }
});

// SPEC v4 §5 on S3: a PUT done by S3 whose answer is lost, retried into 412, and whose object
// then cannot be read back (every GET answered 5xx or its connection reset, until it is gone) is
// a failed write, not a collision and not a success: the flush is retried under a fresh number,
// the object nobody can tell is ours or not (it is: its key names this store's incarnation) is
// deleted by the reaper, every acknowledged message reads, and every object left under the
// user's prefix is one the manifest records (their count and bytes are strata's).
test('a lost PUT whose object cannot be read back is a failed write: flushed again, the object reaped, nothing unrecorded left', async () => {
  const dir = tempDir('bw-unread');
  const { server, port } = await s3(dir);
  const proxy = server.proxy;
  const bucket = path.join(dir, 'bk');
  let s;
  try {
    s = await startStrata({
      args: ['--cold-url', 's3://bk/cold', '--s3-endpoint', `http://127.0.0.1:${port}`, '--s3-access-key', 'S3RVER',
        '--s3-secret-key', 'S3RVER', '--cold-retries', '2', '--flush-interval', '3600'],
    });
    await post(s, 2, 'm');
    await flushed(s, 2);
    // the next flush's PUT is stored and its answer lost; the retry gets 412 and every GET of
    // the key fails (1 + 2 retries: --cold-retries) until the key is deleted
    proxy.lose(/^PUT \S*\/alice\/batch-/, 1, { unreadable: [500, 'reset', 503] });
    const deletedBefore = await metric(s, 'strata_cold_objects_deleted_total');
    await post(s, 2, 'lost');
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('the flush retried and done', async () => (await s.req('GET', '/v1/users/alice/stats')).json.cold_messages === 4, 30000);
    assert.equal(proxy.lost.length, 1);
    const lostPath = proxy.lost[0];
    const lostKey = lostPath.replace(/^\/bk\//, '');
    assert.ok(proxy.unread.length >= 3, JSON.stringify(proxy.unread));
    assert.ok(proxy.unread.every((u) => u.path === lostPath), JSON.stringify(proxy.unread));
    assert.deepEqual(proxy.unread.slice(0, 3).map((u) => u.how), [500, 'reset', 503]);
    assert.ok(proxy.log.some((l) => l.startsWith(`PUT ${lostPath}`) && l.endsWith(' 412')), 'the retried PUT was refused 412');
    assert.match(s.log(), /exists and could not be read back: the write counts as failed/);
    assert.doesNotMatch(s.log(), /holds these very bytes already/);
    // the flush went on under a fresh number, with If-None-Match: * as every create
    const created = proxy.creates.filter((c) => /^cold\/alice\/batch-/.test(c.key));
    assert.deepEqual(proxy.creates.filter((c) => !c.conditional && !hint(c.key)), [], 'creates without If-None-Match: *');
    const num = (k) => Number(/-(\d+)\.parquet$/.exec(k)[1]);
    const retried = created.at(-1).key;
    assert.ok(num(retried) > num(lostKey), `${retried} takes a fresh number after ${lostKey}`);
    // every acknowledged message reads, once
    assert.deepEqual(await contents(s), ['m 0', 'm 1', 'lost 0', 'lost 1']);
    // the abandoned object is deleted by the reaper (a DELETE through the proxy)
    await waitFor('the abandoned object reaped', async () => !existsSync(path.join(bucket, `${lostKey}._S3rver_object`)));
    assert.ok(proxy.log.some((l) => l.startsWith(`DELETE ${lostPath} `)), 'a DELETE of the abandoned key');
    await waitFor('the deletion counted', async () => (await metric(s, 'strata_cold_objects_deleted_total')) >= deletedBefore + 1);
    // nothing unrecorded under the user's prefix: the objects there are the manifest's, by
    // count (strata_cold_objects, counted every 10 s) and by bytes (the user's cold_bytes)
    const left = parquetFiles(bucket).filter((f) => f.endsWith('.parquet._S3rver_object'))
      .map((f) => ({ key: path.relative(bucket, f).replace(/\._S3rver_object$/, ''), size: statSync(f).size }));
    assert.ok(left.every((o) => o.key.startsWith('cold/alice/batch-')), left.map((o) => o.key).join('\n'));
    assert.equal(left.length, 2, left.map((o) => o.key).join('\n'));
    assert.ok(left.some((o) => o.key === retried), `${retried} is in the bucket`);
    const stats = (await s.req('GET', '/v1/users/alice/stats')).json;
    assert.equal(stats.cold_bytes, left.reduce((n, o) => n + o.size, 0), JSON.stringify({ stats, left }));
    await waitFor('the objects counted in /metrics', async () => (await metric(s, 'strata_cold_objects\\{tier="small"\\}'))
      + (await metric(s, 'strata_cold_objects\\{tier="large"\\}')) === left.length, 15000);
    await s.stop();
    s = null;
  } finally {
    if (s) await s.kill9();
    await server.close();
  }
});
