// SPDX-License-Identifier: MIT
// Object storage as AWS, MinIO and Ceph see it (issue 28): every request strata sends is checked
// by a proxy that recomputes its SigV4 with AWS's own signer (sigv4-proxy.mjs) in front of
// s3rver. The proxy refuses a wrong signature (so the check cannot pass silently); keys and
// prefixes of any bytes, a restore from an s3:// backup (its listing's prefix holds '/'), lists
// past 1,000 keys (continuation tokens hold '/', '+' and '='), 503 SlowDown and 500 answers
// (retried with backoff), HTTPS with a private CA (--s3-ca-file) and virtual-hosted-style
// addressing (--s3-path-style off) all pass it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { runStrata, runStrataAsync, startStrata, tempDir } from './lib.mjs';
import { waitFor } from './cold-lib.mjs';
import { metric, ok, restore, shipped } from './backup-lib.mjs';
import { awsRequest, S3rver } from './sigv4-proxy.mjs';

const creds = ['--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER'];

// strata as a child that does not block this process (the proxy and s3rver run in it); whatever
// status the caller expects, a sanitizer report or a death by signal fails it (lib.mjs)
async function run(args, env = {}) {
  const r = await runStrataAsync(args, { env });
  return { status: r.code, stderr: r.err };
}

async function s3(dir, bucket, extra = {}) {
  const server = new S3rver({ address: '127.0.0.1', port: 0, directory: dir, silent: true, configureBuckets: [{ name: bucket }], ...extra });
  const { port } = await server.run();
  return { server, proxy: server.proxy, port };
}

const flushed = async (s, u, n) => waitFor(`${u}'s flush`, async () => (await s.req('GET', `/v1/users/${encodeURIComponent(u)}/stats`)).json.cold_messages === n);
const flushErrors = async (s) => Number((await s.req('GET', '/metrics')).text.match(/strata_flush_total\{result="error"\} (\d+)/)?.[1] ?? 0);

async function postN(s, u, n) {
  const ids = [];
  for (let i = 0; i < n; i++) ids.push((await ok(s, 'POST', `/v1/users/${encodeURIComponent(u)}/messages`, { conversation_id: 'c', from: 'a', content: `m${i}` }, {}, 201)).json.msg_id);
  return ids;
}

async function readIds(s, u) {
  return (await ok(s, 'GET', `/v1/users/${encodeURIComponent(u)}/messages?limit=1000`)).json.messages.map((m) => m.msg_id);
}

// count objects that no strata reader takes for its own, put through the proxy (signed by AWS's
// signer), keyed so that they sort before strata's own
async function junk(port, keyOf, count) {
  for (let i = 0; i < count; i += 25) {
    await Promise.all(Array.from({ length: Math.min(25, count - i) }, async (_, j) => {
      const r = await awsRequest(port, 'PUT', keyOf(i + j), { body: 'junk' });
      assert.equal(r.status, 200, r.text);
    }));
  }
}

test('the proxy refuses a wrong signature: 64 zeros, a wrong secret, and strata started with a wrong secret key', async () => {
  const dir = tempDir('sig');
  const { server, proxy, port } = await s3(path.join(dir, 's3'), 'cold', { allowRefused: true });
  let s;
  try {
    // AWS's own signer, right secret: accepted (also proves the proxy's check agrees with it)
    assert.equal((await awsRequest(port, 'PUT', '/cold/a/b c+d=e&f', { body: 'x' })).status, 200);
    const list = await awsRequest(port, 'GET', '/cold', { query: { 'list-type': '2', prefix: 'a/b c+d=e&' } });
    assert.equal(list.status, 200, list.text);
    assert.match(list.text, /<Key>a\/b c\+d=e&amp;f<\/Key>/);
    for (const bad of [{ signature: '0'.repeat(64) }, { secret: 'not-the-secret' }]) {
      const r = await awsRequest(port, 'GET', '/cold', { query: { 'list-type': '2', prefix: 'a/' }, ...bad });
      assert.equal(r.status, 403, r.text);
      assert.match(r.text, /<Error><Code>SignatureDoesNotMatch<\/Code>/);
    }
    const before = proxy.refused.length;
    s = await startStrata({
      dataDir: path.join(dir, 'd'),
      args: ['--cold-url', 's3://cold/p', '--s3-endpoint', `http://127.0.0.1:${port}`, '--s3-access-key', 'S3RVER',
        '--s3-secret-key', 'WRONG', '--flush-interval', '3600', '--cold-retries', '0'],
    });
    await postN(s, 'u', 3);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('a refused flush', async () => (await flushErrors(s)) >= 1);
    assert.ok(proxy.refused.length > before);
    assert.ok(proxy.refused.slice(before).every((x) => x.code === 'SignatureDoesNotMatch'), JSON.stringify(proxy.refused));
    assert.equal((await s.req('GET', '/v1/users/u/stats')).json.cold_messages, 0);
  } finally {
    if (s) await s.stop();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('keys and prefixes of any bytes, a list past 1,000 keys and rebuild-meta: every request signed right', async () => {
  const dir = tempDir('sig');
  const { server, proxy, port } = await s3(path.join(dir, 's3'), 'cold');
  const prefix = "odd pre+fix=1&x'(y)*!~";
  const args = ['--cold-url', `s3://cold/${prefix}`, '--s3-endpoint', `http://127.0.0.1:${port}`, ...creds, '--flush-interval', '3600'];
  const users = ['a:b', '.dot', '..', 'x_y-z.1', 'plain'];
  let s = await startStrata({ dataDir: path.join(dir, 'd'), args });
  try {
    const posted = {};
    for (const u of users) posted[u] = await postN(s, u, 3);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    for (const u of users) await flushed(s, u, 3);
    await s.stop();
    // 1,100 strangers' objects sort before strata's: rebuild-meta must page through them
    await junk(port, (i) => `/cold/${prefix}/!junk/${i}`, 1100);
    for (const f of ['data.mdb', 'lock.mdb', 'strata.wal']) rmSync(path.join(dir, 'd', f), { force: true });
    const r = await run(['rebuild-meta', '--data-dir', path.join(dir, 'd'), '--accept-loss', ...args]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`rebuild-meta: ${users.length} users`));
    const pages = proxy.log.filter((l) => /^GET \/cold\?continuation-token=[^&]+&list-type=2&prefix=\S+ 200$/.test(l));
    assert.ok(pages.length >= 1, `a continued listing: ${proxy.log.filter((l) => l.startsWith('GET /cold?')).join('\n')}`);
    s = await startStrata({ dataDir: path.join(dir, 'd'), args });
    for (const u of users) assert.deepEqual(await readIds(s, u), posted[u], u);
    assert.deepEqual(proxy.refused, []);
    assert.ok(proxy.verified > 1100);
  } finally {
    await s.stop();
    s.cleanup?.();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('restore from an s3:// backup (a listing whose prefix holds \'/\', past 1,000 keys) through the verifying proxy', async () => {
  const dir = tempDir('sig');
  const { server, proxy, port } = await s3(path.join(dir, 's3'), 'bk');
  const url = 's3://bk/strata/deep/backups';
  const s3args = ['--s3-endpoint', `http://127.0.0.1:${port}`, ...creds];
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100', ...s3args] });
  try {
    await shipped(s);
    for (let i = 0; i < 5; i++) await ok(s, 'POST', '/v1/counters/c/incr', { by: 2 });
    await shipped(s);
    await s.kill9();
    await junk(port, (i) => `/bk/strata/deep/backups/snap/0-junk-${i}`, 1050);
    const res = await restore(path.join(dir, 'r'), url, s3args);
    assert.equal(res.code, 0, res.err + proxy.log.filter((l) => !l.startsWith('PUT')).join('\n'));
    assert.match(res.out, /restored .* from snapshot snap\//);
    assert.ok(proxy.log.some((l) => /^GET \/bk\?continuation-token=[^&]+&list-type=2&prefix=strata%2Fdeep%2Fbackups%2Fsnap%2F 200$/.test(l)), 'the listing went on past its first page');
    assert.deepEqual(proxy.refused, []);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      assert.equal((await ok(r, 'GET', '/v1/counters/c')).json.value, 10);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('503 SlowDown and 500 are retried with backoff: flushes, reads, a restore\'s listing and gets', async () => {
  const dir = tempDir('sig');
  const { server, proxy, port } = await s3(path.join(dir, 's3'), 'bk');
  const s3args = ['--s3-endpoint', `http://127.0.0.1:${port}`, ...creds];
  const s = await startStrata({
    dataDir: path.join(dir, 'd'),
    args: ['--cold-url', 's3://bk/cold', '--backup-url', 's3://bk/b', '--backup-interval', '100', '--flush-interval', '3600', '--cold-cache', '0', ...s3args],
  });
  try {
    await shipped(s);
    const ids = await postN(s, 'u', 4);
    proxy.inject(/^PUT \/bk\/cold\//, 1, 503, 'SlowDown');
    proxy.inject(/^PUT \/bk\/cold\//, 1, 500, 'InternalError');
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await flushed(s, 'u', 4);
    assert.equal(await flushErrors(s), 0, 'the flush succeeded on its own retries');
    assert.equal(proxy.injected, 2);
    proxy.inject(/^GET \/bk\/cold\//, 2, 503, 'SlowDown');
    assert.deepEqual(await readIds(s, 'u'), ids);
    assert.equal(proxy.injected, 4);
    await ok(s, 'POST', '/v1/counters/c/incr', { by: 7 });
    await shipped(s);
    await s.kill9();
    proxy.inject(/^GET \/bk\?list-type=2&prefix=b%2Fsnap%2F$/, 2, 503, 'SlowDown');
    proxy.inject(/^GET \/bk\/b\/snap\//, 1, 500, 'InternalError');
    const res = await restore(path.join(dir, 'r'), 's3://bk/b', s3args);
    assert.equal(res.code, 0, res.err);
    assert.equal(proxy.injected, 7);
    assert.deepEqual(proxy.refused, []);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      assert.equal((await ok(r, 'GET', '/v1/counters/c')).json.value, 7);
    } finally {
      await r.stop();
    }
    // past --cold-retries the error shows: a restore whose listing keeps failing fails
    proxy.inject(/^GET \/bk\?list-type=2/, 10, 503, 'SlowDown');
    const bad = await restore(path.join(dir, 'r2'), 's3://bk/b', [...s3args, '--cold-retries', '1']);
    assert.notEqual(bad.code, 0);
    proxy.clearFaults();
  } finally {
    await s.kill9();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('HTTPS: the endpoint\'s certificate is verified; --s3-ca-file trusts a private CA', async () => {
  const dir = tempDir('sig');
  const pki = path.join(dir, 'pki');
  execFileSync('mkdir', ['-p', pki]);
  const sh = (cmd) => execFileSync('sh', ['-c', cmd], { cwd: pki, stdio: 'pipe' });
  sh('openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=strata test CA"');
  sh('openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj "/CN=127.0.0.1"');
  sh('printf "subjectAltName=IP:127.0.0.1,DNS:localhost\\nbasicConstraints=CA:FALSE\\n" > ext.cnf && openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile ext.cnf');
  const tls = { key: readFileSync(path.join(pki, 'srv.key')), cert: readFileSync(path.join(pki, 'srv.pem')) };
  const { server, proxy, port } = await s3(path.join(dir, 's3'), 'cold', { tls });
  const args = ['--cold-url', 's3://cold/tls', '--s3-endpoint', `https://127.0.0.1:${port}`, ...creds, '--flush-interval', '3600', '--cold-retries', '0'];
  let s;
  try {
    s = await startStrata({ dataDir: path.join(dir, 'a'), args });
    await postN(s, 'u', 2);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await waitFor('a flush refused for an unknown CA', async () => (await flushErrors(s)) >= 1);
    assert.equal(proxy.verified, 0, 'no request went past the TLS handshake');
    await s.stop();
    s = await startStrata({ dataDir: path.join(dir, 'b'), args: [...args, '--s3-ca-file', path.join(pki, 'ca.pem')] });
    const ids = await postN(s, 'u', 2);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await flushed(s, 'u', 2);
    assert.ok(proxy.verified >= 1);
    assert.deepEqual(proxy.refused, []);
    await s.stop();
    // the environment twin
    s = await startStrata({ dataDir: path.join(dir, 'b'), args, env: { STRATA_S3_CA_FILE: path.join(pki, 'ca.pem') } });
    assert.deepEqual(await readIds(s, 'u'), ids);
  } finally {
    if (s) await s.stop();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('virtual-hosted style (--s3-path-style off) and path style (the default with --s3-endpoint)', async () => {
  const dir = tempDir('sig');
  const { server, proxy, port } = await s3(path.join(dir, 's3'), 'cold');
  let s;
  try {
    const vargs = ['--cold-url', 's3://cold/v', '--s3-endpoint', `http://localhost:${port}`, ...creds, '--flush-interval', '3600'];
    s = await startStrata({ dataDir: path.join(dir, 'v'), args: [...vargs, '--s3-path-style', 'off'] });
    const ids = await postN(s, 'u', 3);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await flushed(s, 'u', 3);
    await s.stop();
    assert.deepEqual([...proxy.hosts], [`cold.localhost:${port}`]);
    for (const f of ['data.mdb', 'lock.mdb', 'strata.wal']) rmSync(path.join(dir, 'v', f), { force: true });
    const r = await run(['rebuild-meta', '--data-dir', path.join(dir, 'v'), '--accept-loss', ...vargs], { STRATA_S3_PATH_STYLE: 'off' });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(proxy.log.some((l) => l.startsWith('GET /?list-type=2&prefix=v%2F ')), 'the bucket listed at its root');
    s = await startStrata({ dataDir: path.join(dir, 'v'), args: [...vargs, '--s3-path-style', 'off'] });
    assert.deepEqual(await readIds(s, 'u'), ids);
    await s.stop();
    proxy.hosts.clear();
    s = await startStrata({ dataDir: path.join(dir, 'p'), args: ['--cold-url', 's3://cold/p', '--s3-endpoint', `http://127.0.0.1:${port}`, ...creds, '--flush-interval', '3600'] });
    await postN(s, 'u', 1);
    await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
    await flushed(s, 'u', 1);
    assert.deepEqual([...proxy.hosts], [`127.0.0.1:${port}`]);
    assert.ok(proxy.log.some((l) => /^PUT \/cold\/p\/u\/batch-/.test(l)));
    assert.deepEqual(proxy.refused, []);
    const bad = runStrata(['--s3-path-style', 'sideways', '--data-dir', path.join(dir, 'x')], { expect: 2 });
    assert.match(bad.stderr, /--s3-path-style/);
    const help = runStrata(['--help']).stdout;
    for (const f of ['--s3-ca-file', 'STRATA_S3_CA_FILE', '--s3-path-style', 'STRATA_S3_PATH_STYLE']) assert.ok(help.includes(f), f);
  } finally {
    if (s) await s.stop();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
