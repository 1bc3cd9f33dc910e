// SPDX-License-Identifier: MIT
// Several groups sharing one --tables-url (SPEC v5 §5.1: "no group's files are ever dropped by
// another's commit"): two strata nodes, each its own data dir and cold tier (two groups), commit
// to the same `messages` table. Each commit carries the other writer's manifests over unchanged
// (and its own, fast append: it writes a manifest of what it adds),
// so icebird reading the shared table sees both nodes' rows exactly once at every version the
// test samples while both keep committing; an erasure on one node takes its user's rows out and
// leaves the other node's. Each group's manifests and lists are named by its writer token.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { icebergRead } from 'icebird';
import { s3 } from './backup-lib.mjs';
import { erasureDone, waitFor } from './cold-lib.mjs';
import { avroRecords, serveFiles } from './iceberg-lib.mjs';
import { startStrata, tempDir } from './lib.mjs';

const SECRET = 'shared-secret';
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64({ exp: Math.floor(Date.now() / 1000) + 3600, ...payload });
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const as = (sub, extra = {}) => ({ Authorization: `Bearer ${jwt({ sub, ...extra })}` });
const ADMIN = as('ops', { role: 'admin' });

const ok = async (s, method, p, body, headers = ADMIN, status = 200) => {
  const r = await s.req(method, p, body, headers);
  assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
  return r.json;
};

async function post(s, u, n) {
  const ids = [];
  for (let i = 0; i < n; i++)
    ids.push(String((await ok(s, 'POST', `/v1/users/${u}/messages`, { conversation_id: 'c', from: 'x', content: `m ${i}` }, as(u), 201)).msg_id));
  return ids;
}
const flush = async (s) => assert.equal((await s.req('POST', '/v1/admin/flush', undefined, ADMIN)).status, 202);
const pending0 = async (s) => (await ok(s, 'GET', '/v1/admin/tables')).tables.find((t) => t.table === 'messages').pending === 0;

test('tables: two groups share one --tables-url; each commit keeps the other group\'s files', async () => {
  const shared = tempDir('shared-tables');
  const meta = path.join(shared, 'messages', 'metadata');
  const args = ['--jwt-secret', SECRET, '--table-commit-interval', '1', '--tables-url', `file://${shared}`];
  const a = await startStrata({ args });
  const b = await startStrata({ args });
  const versions = () => readdirSync(meta).map((n) => /^v(\d+)\.metadata\.json$/.exec(n)).filter(Boolean).map((m) => Number(m[1])).sort((x, y) => x - y);
  const doc = (v) => JSON.parse(readFileSync(path.join(meta, `v${v}.metadata.json`), 'utf8'));
  async function read(v) {
    const restore = serveFiles();
    try {
      return await icebergRead({ tableUrl: doc(v).location, metadataFileName: `v${v}.metadata.json` });
    } finally {
      restore();
    }
  }
  // every row of want once in version v, nothing twice
  async function holds(v, want, why) {
    const got = (await read(v)).map((r) => String(r.msg_id));
    const seen = new Map();
    for (const id of got) seen.set(id, (seen.get(id) || 0) + 1);
    for (const [id, n] of seen) assert.equal(n, 1, `v${v}: row ${id} read ${n} times (${why})`);
    for (const id of want) assert.equal(seen.get(id), 1, `v${v}: row ${id} missing (${why})`);
    return seen;
  }
  const latest = () => { try { return versions().at(-1) || 0; } catch { return 0; } };
  // waits until the newest version holds every row of want (each once)
  const landed = (want, why) => waitFor(why, async () => {
    const v = latest();
    if (!v) return false;
    try { await holds(v, want, why); return true; } catch { return false; }
  }, 30000);
  try {
    const A = { shaalice: await post(a, 'shaalice', 3), shaerase: await post(a, 'shaerase', 2) };
    const B = { shbbobby: await post(b, 'shbbobby', 4) };
    await flush(a);
    await flush(b);
    const base = [...A.shaalice, ...A.shaerase, ...B.shbbobby];
    await landed(base, 'both groups committed');
    const first = versions().at(-1);
    await holds(first, base, 'both groups committed');

    // both keep committing; sample the newest version as they go
    const more = [];
    for (let round = 0; round < 4; round++) {
      more.push(...(await post(a, 'shaalice', 1)), ...(await post(b, 'shbbobby', 1)));
      await flush(a);
      await flush(b);
      await holds(versions().at(-1), base, `sample ${round}`);
      await new Promise((r) => setTimeout(r, 400));
    }
    await landed([...base, ...more], 'both committed again');
    await waitFor('nothing pending', async () => (await pending0(a)) && (await pending0(b)), 30000);
    const last = versions().at(-1);
    await holds(last, [...base, ...more], 'the end');
    // every version since both committed: both groups' rows, each once
    for (const v of versions().filter((x) => x >= first)) await holds(v, base, 'history');

    // the manifests of the current snapshot: each group's (one per commit of it, carried over:
    // fast append) named by its writer token
    const d = doc(last);
    const snap = d.snapshots.find((s) => s['snapshot-id'] === d['current-snapshot-id']);
    const list = avroRecords(readFileSync(new URL(snap['manifest-list'])));
    const named = list.records.map((m) => /-(w[0-9a-f]{16})-m\d+\.avro$/.exec(m.manifest_path)?.[1]);
    assert.ok(named.every(Boolean), JSON.stringify(list.records.map((m) => m.manifest_path)));
    const tokens = [...new Set(named)];
    assert.equal(tokens.length, 2, JSON.stringify(list.records.map((m) => m.manifest_path)));
    assert.ok(new RegExp(`-${tokens[0]}\\.avro$|-${tokens[1]}\\.avro$`).test(snap['manifest-list']));
    assert.equal(Number(snap.summary['total-records']), base.length + more.length);

    // orphans (a commit killed before its create of v{N}): a's own go at a's next sweep (a
    // delete commit sweeps), b's are not a's to delete
    const tokenOf = (s) => {
      const walk = (d) => readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(d, e.name)) : [e.name]));
      return walk(path.join(s.dir, 'cold')).map((n) => /-(w[0-9a-f]{16})[-.]/.exec(n)?.[1]).find(Boolean);
    };
    const ta = tokenOf(a), tb = tokenOf(b);
    assert.ok(ta && tb && ta !== tb);
    const someManifest = readFileSync(new URL(list.records[0].manifest_path));
    const orphan = (tok, kind) => path.join(meta, kind === 'list' ? `snap-12345-0e1c6f2a-8a5b-4c3d-9e7f-112233445566-${tok}.avro` : `7f00aa11-2b3c-4d5e-8f90-a1b2c3d4e5f6-${tok}-m0.avro`);
    for (const [tok, kind] of [[ta, 'list'], [ta, 'manifest'], [tb, 'list'], [tb, 'manifest']]) writeFileSync(orphan(tok, kind), someManifest);

    // an erasure on a: its user's rows go, b's stay
    const eid = (await ok(a, 'DELETE', '/v1/users/shaerase', undefined, ADMIN, 202)).erasure_id;
    await erasureDone(a, eid, { ms: 30000, headers: ADMIN });
    await waitFor('a delete commit', async () => {
      const dd = doc(versions().at(-1));
      return dd.snapshots.find((s) => s['snapshot-id'] === dd['current-snapshot-id']).summary.operation === 'delete' && (await pending0(a));
    }, 30000);
    const after = await holds(versions().at(-1), [...A.shaalice, ...B.shbbobby, ...more], 'after the erasure');
    for (const id of A.shaerase) assert.ok(!after.has(id), `erased row ${id} still read`);
    // (the sweep follows the create of v{N}: a reader may see v{N} first)
    await waitFor('a\'s orphans swept', () => !existsSync(orphan(ta, 'list')) && !existsSync(orphan(ta, 'manifest')), 30000);
    assert.ok(existsSync(orphan(tb, 'list')) && existsSync(orphan(tb, 'manifest')), 'b\'s files are not a\'s to delete');
    // b commits again on top: a's erasure stays, b's rows stay
    const bmore = await post(b, 'shbbobby', 1);
    await flush(b);
    await landed(bmore, 'b committed');
    const again = await holds(versions().at(-1), [...A.shaalice, ...B.shbbobby, ...more, ...bmore], 'b after the erasure');
    for (const id of A.shaerase) assert.ok(!again.has(id), `erased row ${id} back`);
    await a.stop();
    await b.stop();
  } catch (e) {
    console.error(a.log().slice(-4000));
    console.error(b.log().slice(-4000));
    throw e;
  } finally {
    for (const s of [a, b]) if (s.proc.exitCode === null) await s.kill9();
    a.cleanup();
    b.cleanup();
  }
});

// SPEC v5 §5.1: "after a timeout re-reads v{N} to learn whether its own commit won". On S3 the
// create of v2 is done but its answer is lost, and the read-back of the retry's 412 fails too
// (ST_EIO): strata reads v2 again, finds its own snapshot there and takes the commit as won (its
// manifest and list kept, no v3 for the same change). Only the read-back's GETs fail (a Range of
// the object's own length); reads of a metadata file (a Range of up to 64 MiB: the settling read,
// the catalog's probes) go through.
test('tables on S3: a create of v{N} that got no answer is settled by reading v{N} back', async () => {
  const dir = tempDir('tables-lost');
  const { server, port } = await s3(dir);
  const proxy = server.proxy;
  const bucket = path.join(dir, 'bk');
  const s = await startStrata({
    args: ['--jwt-secret', SECRET, '--table-commit-interval', '1', '--cold-url', 's3://bk/cold', '--s3-endpoint', `http://127.0.0.1:${port}`,
      '--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER', '--cold-retries', '2', '--flush-interval', '3600'],
  });
  const obj = (k) => path.join(bucket, `cold/_tables/messages/metadata/${k}._S3rver_object`);
  try {
    await waitFor('v1 of messages', () => existsSync(obj('v1.metadata.json')), 30000);
    proxy.lose(/^PUT \S*\/_tables\/messages\/metadata\/v2\.metadata\.json/, 1, { unreadable: [500], range: /^bytes=0-\d{1,6}$/ });
    const ids = await post(s, 'shlost', 2);
    await flush(s);
    await waitFor('committed', async () => {
      const t = (await ok(s, 'GET', '/v1/admin/tables')).tables.find((x) => x.table === 'messages');
      return t.snapshot_id !== null && t.pending === 0;
    }, 30000);
    assert.equal(proxy.lost.length, 1);
    assert.match(s.log(), /exists and could not be read back/);
    assert.match(s.log(), /messages: v2 was ours after all/);
    assert.ok(!existsSync(obj('v3.metadata.json')), 'no second commit of the same change');
    const v2 = JSON.parse(readFileSync(obj('v2.metadata.json'), 'utf8'));
    const snap = v2.snapshots.find((x) => x['snapshot-id'] === v2['current-snapshot-id']);
    const listKey = new URL(snap['manifest-list']).pathname.replace(/^\/cold\//, '');
    assert.ok(existsSync(path.join(bucket, 'cold', `${listKey}._S3rver_object`)), `${listKey} kept`);
    assert.equal(Number(snap.summary['total-records']), ids.length);
    await s.stop();
  } catch (e) {
    console.error(s.log().slice(-4000));
    throw e;
  } finally {
    if (s.proc.exitCode === null) await s.kill9();
    s.cleanup();
    await server.close();
  }
});
