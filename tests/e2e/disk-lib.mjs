// SPDX-License-Identifier: MIT
// Helpers for tests of what strata does when its disk fills up or fails: a small ext4 file system
// on a loop device (needs root for mount -o loop; mountLoopFs() returns { skip } with the reason
// when that is not permitted, and the test skips; always call fs.cleanup(), which unmounts and
// deletes), and checks that every request is answered and every stop is clean.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'pipe' }).toString();

// mkfs.ext4 with no reserved blocks (strata runs as root in these tests, and root may use them).
export function mountLoopFs(sizeMiB, tag = 'loopfs') {
  const base = mkdtempSync(path.join(os.tmpdir(), `strata-${tag}-`));
  const img = path.join(base, 'fs.img');
  const mnt = path.join(base, 'mnt');
  mkdirSync(mnt);
  try {
    run('truncate', ['-s', `${sizeMiB}M`, img]);
    run('mkfs.ext4', ['-q', '-F', '-m', '0', img]);
    run('mount', ['-o', 'loop', img, mnt]);
  } catch (e) {
    rmSync(base, { recursive: true, force: true });
    return { skip: `cannot mount a loop file system here (needs root): ${String(e.stderr || e.message).trim()}` };
  }
  let mounted = true;
  const fs = {
    mnt,
    base,
    dataDir: path.join(mnt, 'data'),
    freeBytes() {
      const s = statfsSync(mnt);
      return s.bavail * s.bsize;
    },
    // Writes a file of zeros until the disk is full (or `bytes` are written).
    fill(name, bytes) {
      const args = [`of=${path.join(mnt, name)}`, 'if=/dev/zero', 'bs=64K'];
      if (bytes) args.push(`count=${Math.ceil(bytes / 65536)}`);
      spawnSync('dd', args, { stdio: 'pipe' });
      spawnSync('sync', ['-f', mnt]);
    },
    remove(name) {
      rmSync(path.join(mnt, name), { force: true });
      spawnSync('sync', ['-f', mnt]);
    },
    // EXT4_IOC_SHUTDOWN with NOLOGFLUSH: from now on every write and fsync on it fails with
    // EIO, as on a disk that died (what was synced stays; a remount recovers).
    shutdown() {
      run('python3', ['-c',
        'import fcntl,os,struct,sys; fd=os.open(sys.argv[1], os.O_RDONLY); ' +
        'fcntl.ioctl(fd, 0x8004587d, struct.pack("I", 2))', mnt]);
    },
    remount() {
      run('umount', [mnt]);
      run('mount', ['-o', 'loop', img, mnt]);
    },
    cleanup() {
      if (mounted) {
        for (let i = 0; i < 50; i++) {
          if (spawnSync('umount', [mnt]).status === 0) break;
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
        }
        if (spawnSync('mountpoint', ['-q', mnt]).status === 0) spawnSync('umount', ['-l', mnt]);
        mounted = false;
      }
      rmSync(base, { recursive: true, force: true });
    },
  };
  return fs;
}

// python3 runs the shutdown ioctl; without it the fail-stop test skips.
export function havePython() {
  return spawnSync('python3', ['-c', 'import fcntl'], { stdio: 'pipe' }).status === 0;
}

// Every request must be answered: a hang is the failure these tests look for.
export function answered(p, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer to ${what} in 20 s: the server hung`)), 20000);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

// A clean and prompt exit (0), and no sanitizer report in the log (the ASan build runs these too).
export async function stopClean(s, what = 'SIGTERM') {
  const ex = await answered(s.stop(), what);
  assert.equal(ex.code, 0, s.log());
  assert.doesNotMatch(s.log(), /Sanitizer|runtime error/);
  assert.doesNotMatch(s.log(), /did not finish in time/); // prompt, not cut off by the deadline
  return ex;
}
