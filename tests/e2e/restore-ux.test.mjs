// SPDX-License-Identifier: MIT
// Driving a restore (SPEC §9 v4, issue 38 item 5): `restore --list` prints the restore points,
// --to-time takes RFC 3339 as well as µs, and a mistake is named by its flag and value.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, runStrata, sleep, startStrata, tempDir } from './lib.mjs';
import { ok, restore, runAsync, shipped } from './backup-lib.mjs';

const run = runAsync; // a sanitizer report fails the test (backup-lib.mjs)

// "2026-11-27T21:55:00.123456Z" → µs, independently of strata's own conversion.
const rfcMicros = (s) => {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{6})Z$/.exec(s);
  assert.ok(m, s);
  return BigInt(Date.parse(`${m[1]}Z`)) * 1000n + BigInt(m[2]);
};

// µs → RFC 3339 with µs, written in the zone offsetMin minutes east of UTC.
function rfcOf(us, offsetMin) {
  const local = new Date(Number(us / 1000n) + offsetMin * 60000).toISOString().slice(0, 19);
  const frac = String(us % 1000000n).padStart(6, '0');
  if (!offsetMin) return `${local}.${frac}Z`;
  const a = Math.abs(offsetMin);
  return `${local}.${frac}${offsetMin < 0 ? '-' : '+'}${String(a / 60 | 0).padStart(2, '0')}:${String(a % 60).padStart(2, '0')}`;
}

// A backup with counter t at 3 before `mid` and 5 after it.
async function backupWithMiddle(dir) {
  const url = `file://${dir}/b`;
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100'] });
  try {
    await shipped(s);
    for (let i = 0; i < 3; i++) await ok(s, 'POST', '/v1/counters/t/incr', { by: 1 });
    await sleep(30);
    const mid = BigInt(Date.now()) * 1000n + 123n; // µs digits the ms clock never has
    await sleep(30);
    for (let i = 0; i < 2; i++) await ok(s, 'POST', '/v1/counters/t/incr', { by: 1 });
    await shipped(s);
    return { url, mid };
  } finally {
    await s.stop();
  }
}

test('restore --list prints each timeline\'s snapshots and records with times in RFC 3339 and µs', async () => {
  const dir = tempDir('rux');
  try {
    const { url } = await backupWithMiddle(dir);
    const r = await run(['restore', '--list', '--backup-url', url]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, new RegExp(`^restore points in ${url} `, 'm'));
    assert.match(r.out, /^timeline [0-9a-f]{16}$/m);
    const snap = /^ {2}snapshot (\S+) \((\d+) µs\) seq \d+, [\d.]+ MiB$/m.exec(r.out);
    assert.ok(snap, r.out);
    assert.equal(rfcMicros(snap[1]), BigInt(snap[2]));
    const recs = /^ {2}records {2}seq (\d+)\.\.(\d+) in \d+ segment\(s\), (\S+) \((\d+) µs\) \.\. (\S+) \((\d+) µs\)$/m.exec(r.out);
    assert.ok(recs, r.out);
    assert.ok(Number(recs[2]) >= 5, 'every write is in the records');
    assert.equal(rfcMicros(recs[5]), BigInt(recs[6]));
    const range = /^ {2}--to-time from (\S+) \((\d+) µs\) to (\S+) \((\d+) µs\)$/m.exec(r.out);
    assert.ok(range, r.out);
    assert.equal(range[2], snap[2]);
    assert.equal(range[4], recs[6], 'the newest point is the last record\'s commit time');
    // the newest point as listed, in RFC 3339: everything is restored
    const res = await restore(path.join(dir, 'last'), url, ['--to-time', range[3]]);
    assert.equal(res.code, 0, res.err);
    const s = await startStrata({ dataDir: path.join(dir, 'last') });
    try {
      assert.equal((await ok(s, 'GET', '/v1/counters/t')).json.value, 5);
    } finally {
      await s.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--to-time in RFC 3339 (Z, fraction, offsets) restores the same point as the same µs', async () => {
  const dir = tempDir('rux');
  try {
    const { url, mid } = await backupWithMiddle(dir);
    const forms = [String(mid), rfcOf(mid, 0), rfcOf(mid, 120), rfcOf(mid, -330)];
    assert.match(forms[2], /\+02:00$/);
    const lines = [];
    for (const [i, f] of forms.entries()) {
      const res = await restore(path.join(dir, `r${i}`), url, ['--to-time', f]);
      assert.equal(res.code, 0, `${f}: ${res.err}`);
      lines.push(res.out.replace(path.join(dir, `r${i}`), 'DIR'));
    }
    for (const l of lines.slice(1)) assert.equal(l, lines[0]);
    const s = await startStrata({ dataDir: path.join(dir, 'r2') });
    try {
      assert.equal((await ok(s, 'GET', '/v1/counters/t')).json.value, 3, 'the state as of mid');
    } finally {
      await s.stop();
    }
    const bad = await restore(path.join(dir, 'bad'), url, ['--to-time', '2026-11-27 lunch']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /bad value '2026-11-27 lunch' from the command line for --to-time \(expected RFC 3339/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a --backup-url that is no URL and a backup dir that is missing are named as such', async () => {
  const dir = tempDir('rux');
  try {
    const plain = path.join(dir, 'bk');
    for (const args of [['restore', '--data-dir', path.join(dir, 'x')], ['restore', '--list'], ['rebuild-meta', '--data-dir', path.join(dir, 'y')], []]) {
      const r = await run([...args, '--backup-url', plain]);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.err}`);
      assert.match(r.err, new RegExp(`--backup-url must be file://DIR or s3://BUCKET\\[/PREFIX\\], not '${plain}'`));
      assert.doesNotMatch(r.err, /--cold-url/);
    }
    const missing = `file://${dir}/nothing`;
    const r = await restore(path.join(dir, 'x'), missing);
    assert.notEqual(r.code, 0);
    assert.match(r.err, new RegExp(`no backup found at ${missing}`));
    assert.doesNotMatch(r.err, /requested time/);
    const l = await run(['restore', '--list', '--backup-url', missing]);
    assert.notEqual(l.code, 0);
    assert.match(l.err, new RegExp(`no backup found at ${missing}`));
    assert.ok(!existsSync(path.join(dir, 'nothing')), 'a mistyped backup dir is not created');
    assert.ok(!existsSync(path.join(dir, 'x')), 'nor the data dir of a restore that cannot start');
    const empty = await restore(path.join(dir, 'z'), `file://${dir}`); // exists, holds no backup
    assert.notEqual(empty.code, 0);
    assert.match(empty.err, new RegExp(`no backup found at file://${dir} \\(no snapshot there\\)`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// A restore that failed or was killed leaves RESTORE-INCOMPLETE in its data dir (review: a
// store left before its sequences resumed and its writer was renewed could reissue numbers and
// delete the original node's objects): strata refuses to start there.
test('strata refuses a data dir whose restore never finished', async () => {
  const dir = tempDir('rx-incomplete');
  writeFileSync(path.join(dir, 'RESTORE-INCOMPLETE'), 'x\n');
  const r = runStrata(['--data-dir', dir, '--listen', '127.0.0.1:0'], { expect: 2 });
  assert.match(r.stderr, /restore that never finished .*RESTORE-INCOMPLETE.*restore again into an empty directory/);
  rmSync(dir, { recursive: true, force: true });
});

test('a damaged newest snapshot: the restore falls back to an older one; junk named like one is not listed', async () => {
  const dir = tempDir('rux');
  const url = `file://${dir}/b`;
  const args = ['--backup-url', url, '--backup-interval', '100'];
  try {
    let s = await startStrata({ dataDir: path.join(dir, 'd'), args });
    await shipped(s);
    await ok(s, 'POST', '/v1/counters/t/incr', { by: 1 });
    await shipped(s);
    await s.stop();
    s = await startStrata({ dataDir: path.join(dir, 'd'), args }); // a restart: a new timeline, a new snapshot
    await shipped(s);
    await ok(s, 'POST', '/v1/counters/t/incr', { by: 10 });
    await shipped(s);
    await s.stop();
    const snapRoot = path.join(dir, 'b', 'snap');
    const snaps = readdirSync(snapRoot).flatMap((tl) => readdirSync(path.join(snapRoot, tl)).map((f) => path.join(snapRoot, tl, f)));
    assert.ok(snaps.length >= 2, snaps.join());
    // the newest snapshot (highest timeline is not ordered by name: take the newest time)
    const newest = snaps.sort((a, b) => Number(BigInt(path.basename(a).split('-')[1].slice(0, -4)) - BigInt(path.basename(b).split('-')[1].slice(0, -4)))).at(-1);
    const bytes = readFileSync(newest);
    for (let i = 20; i < bytes.length; i += 7) bytes[i] ^= 0x5a;
    writeFileSync(newest, bytes);
    // junk named almost like a snapshot: sscanf-style parsing took these for restore points
    const tl = path.basename(path.dirname(newest));
    writeFileSync(path.join(snapRoot, tl, '+1- 2.zst'), 'junk');
    writeFileSync(path.join(snapRoot, tl, `${'9'.repeat(20)}-${'9'.repeat(19)}.zst`), 'junk');
    const list = await run(['restore', '--list', '--backup-url', url]);
    assert.equal(list.code, 0, list.err);
    assert.doesNotMatch(list.out, /\+1- 2|9{19}/, list.out);
    const res = await restore(path.join(dir, 'r'), url);
    assert.equal(res.code, 0, res.err);
    assert.match(res.err, /is damaged: trying an older one/);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      const v = (await ok(r, 'GET', '/v1/counters/t')).json.value;
      assert.ok(v === 1 || v === 11, `restored from the older snapshot: ${v}`);
    } finally {
      await r.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
