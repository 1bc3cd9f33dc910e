// SPDX-License-Identifier: MIT
// A restore that fails after it marked its data dir (RESTORE-INCOMPLETE) can be run again into
// the same directory once its cause is fixed (SPEC §9): the retry removes what the failed restore
// wrote (the files its marker names, nothing else) and restores. A directory holding anything
// else — a real data dir, files no restore wrote, a marker no restore wrote — is still refused,
// and nothing in it is touched.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { startStrata, tempDir } from './lib.mjs';
import { ok, restore, s3, shipped, stallingProxy } from './backup-lib.mjs';

const S3KEYS = ['--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER'];
const MARKER = 'RESTORE-INCOMPLETE';
const counter = async (s, name) => (await ok(s, 'GET', `/v1/counters/${name}`)).json.value;

// A restored dir starts and holds the state the backup had.
async function check(dataDir, want) {
  assert.ok(!existsSync(path.join(dataDir, MARKER)), 'the finished restore removed its marker');
  const s = await startStrata({ dataDir });
  try {
    for (const [name, v] of Object.entries(want)) assert.equal(await counter(s, name), v, `counter ${name}`);
  } finally {
    await s.stop();
  }
}

test('a restore that failed on a bad --to-time: the corrected retry into the same dir succeeds', async () => {
  const dir = tempDir('rx-retry');
  const url = `file://${dir}/b`;
  try {
    const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100'] });
    await ok(s, 'POST', '/v1/counters/a/incr', { by: 7 });
    await shipped(s);
    await s.stop();
    const target = path.join(dir, 'r');
    const bad = await restore(target, url, ['--to-time', '2001-01-01T00:00:00Z']); // before every snapshot
    assert.notEqual(bad.code, 0);
    assert.match(bad.err, /no snapshot .* at or before --to-time/);
    assert.ok(existsSync(path.join(target, MARKER)), 'the failed restore left its marker');
    const again = await restore(target, url);
    assert.equal(again.code, 0, again.err);
    assert.match(again.err, /held an unfinished restore: removed what it wrote/);
    await check(target, { a: 7 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a restore whose object store failed mid-way (snapshot written, a segment unreadable): the retry succeeds', async () => {
  const dir = tempDir('rx-retry-s3');
  const { server, port } = await s3(path.join(dir, 's3'));
  const proxy = await stallingProxy(port);
  const url = 's3://bk/rr';
  try {
    const s = await startStrata({
      dataDir: path.join(dir, 'd'),
      args: ['--backup-url', url, '--backup-interval', '100', '--s3-endpoint', `http://127.0.0.1:${port}`, ...S3KEYS],
    });
    await ok(s, 'POST', '/v1/counters/a/incr', { by: 1 });
    await shipped(s); // the snapshot
    for (let i = 0; i < 5; i++) await ok(s, 'POST', '/v1/counters/b/incr', { by: 10 }); // in segments after it
    await shipped(s);
    await s.stop();
    const target = path.join(dir, 'r');
    const via = ['--s3-endpoint', `http://127.0.0.1:${proxy.port}`, ...S3KEYS, '--cold-retries', '0'];
    proxy.failOnce(/^GET \/bk\/rr\/seg\//); // the store fails once the snapshot is in
    const bad = await restore(target, url, via);
    assert.notEqual(bad.code, 0, bad.err);
    assert.match(bad.err, /restore failed: .*run the restore again/);
    const left = readdirSync(target).sort();
    assert.ok(left.includes(MARKER) && left.includes('data.mdb'), `the failed restore wrote its files: ${left}`);
    const again = await restore(target, url, via);
    assert.equal(again.code, 0, again.err);
    await check(target, { a: 1, b: 50 });
  } finally {
    await proxy.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a dir holding anything an unfinished restore did not write is still refused, untouched; the failed restore\'s own dir is not', async () => {
  const dir = tempDir('rx-refuse');
  const url = `file://${dir}/b`;
  try {
    const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100'] });
    await ok(s, 'POST', '/v1/counters/a/incr', { by: 3 });
    await shipped(s);
    await s.stop();
    // a failed restore's dir, then a user's file put into it
    const target = path.join(dir, 'r');
    assert.notEqual((await restore(target, url, ['--to-time', '2001-01-01T00:00:00Z'])).code, 0);
    const marker = readFileSync(path.join(target, MARKER), 'utf8');
    assert.match(marker, /^wrote: data\.mdb lock\.mdb strata\.wal$/m, 'the marker names the files a restore writes');
    writeFileSync(path.join(dir, 'keep.txt'), 'outside');
    const cases = {
      'a foreign file beside the marker': { [MARKER]: marker, 'data.mdb': 'mine', 'notes.txt': 'keep me' },
      'a directory named like a restore file': { [MARKER]: marker, 'strata.wal/': null },
      'a foreign directory': { [MARKER]: marker, 'cold/': null },
      'a marker no restore wrote': { [MARKER]: 'x\n', 'data.mdb': 'mine' },
      'a marker naming a file no restore writes': { [MARKER]: marker.replace('wrote: ', 'wrote: ../keep.txt '), 'data.mdb': 'mine' },
      'a real data dir, no marker': { 'data.mdb': 'mine', 'lock.mdb': 'l', 'strata.wal': 'w' },
    };
    for (const [what, files] of Object.entries(cases)) {
      const d = path.join(dir, `case-${Object.keys(cases).indexOf(what)}`);
      mkdirSync(d);
      for (const [name, body] of Object.entries(files)) {
        if (name.endsWith('/')) mkdirSync(path.join(d, name));
        else writeFileSync(path.join(d, name), body);
      }
      const before = readdirSync(d).sort();
      const r = await restore(d, url);
      assert.notEqual(r.code, 0, `${what}: refused`);
      assert.match(r.err, /not empty|no restore wrote/, what);
      assert.deepEqual(readdirSync(d).sort(), before, `${what}: nothing removed`);
      for (const [name, body] of Object.entries(files))
        if (body !== null) assert.equal(readFileSync(path.join(d, name), 'utf8'), body, `${what}: ${name} untouched`);
    }
    assert.equal(readFileSync(path.join(dir, 'keep.txt'), 'utf8'), 'outside', 'nothing outside the dir is touched');
    // the failed restore's own dir, untouched by anyone, restores
    const again = await restore(target, url);
    assert.equal(again.code, 0, again.err);
    await check(target, { a: 3 });
    // the real data dir the backup came from is refused too, and still starts
    const own = await restore(path.join(dir, 'd'), url);
    assert.notEqual(own.code, 0);
    assert.match(own.err, /not empty/);
    await check(path.join(dir, 'd'), { a: 3 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// A restore to a time restores the newest point beside the dir (DIR.erasures) for the erasures
// made after it: a leftover of a killed run there is cleared like the dir's own; anything else
// there is refused and kept (it used to be removed whatever it held).
test('--to-time: a DIR.erasures holding what no restore wrote is refused, untouched; the retry after clearing it succeeds', async () => {
  const dir = tempDir('rx-erasures');
  const url = `file://${dir}/b`;
  try {
    const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100'] });
    await ok(s, 'POST', '/v1/counters/a/incr', { by: 5 });
    await shipped(s);
    await s.stop();
    const at = String(Date.now() * 1000);
    const target = path.join(dir, 'r');
    mkdirSync(`${target}.erasures`);
    writeFileSync(`${target}.erasures/notes.txt`, 'keep me');
    const bad = await restore(target, url, ['--to-time', at]);
    assert.notEqual(bad.code, 0, bad.err);
    assert.match(bad.err, /erasures is in the way of the erasures pass/);
    assert.equal(readFileSync(`${target}.erasures/notes.txt`, 'utf8'), 'keep me');
    assert.ok(existsSync(path.join(target, MARKER)), 'the restore into the dir itself is unfinished');
    // the user moves it away; a killed run's leftovers there (a marker and its files) are fine
    rmSync(`${target}.erasures`, { recursive: true });
    mkdirSync(`${target}.erasures`);
    writeFileSync(`${target}.erasures/${MARKER}`, readFileSync(path.join(target, MARKER)));
    writeFileSync(`${target}.erasures/data.mdb`, 'half a snapshot');
    const again = await restore(target, url, ['--to-time', at]);
    assert.equal(again.code, 0, again.err);
    assert.ok(!existsSync(`${target}.erasures`), 'the scratch dir is gone');
    await check(target, { a: 5 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
