// SPDX-License-Identifier: MIT
// Helpers for tests of what strata does when its disk fills up or fails: a small ext4 file system
// on a loop device (needs root for mount -o loop; mountLoopFs() returns { skip } with the reason
// only when that is not permitted — not root, or the mount refused with EPERM — and the test
// skips through skipNow(); any other failure of truncate, mkfs.ext4 or mount throws. Always call
// fs.cleanup(), which unmounts and deletes), and checks that every request is answered and every
// stop is clean.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const run = (cmd, args) => execFileSync(cmd, args, { stdio: 'pipe' }).toString();
const NOT_PERMITTED = /permission denied|operation not permitted|must be superuser|only root/i;

// mkfs.ext4 with no reserved blocks (strata runs as root in these tests, and root may use them).
// tools/install-deps.sh --test installs e2fsprogs (mkfs.ext4), mount and python3.
export function mountLoopFs(sizeMiB, tag = 'loopfs') {
  if (process.getuid() !== 0) return { skip: 'mounting a loop file system needs root' };
  const base = mkdtempSync(path.join(os.tmpdir(), `strata-${tag}-`));
  const img = path.join(base, 'fs.img');
  const mnt = path.join(base, 'mnt');
  mkdirSync(mnt);
  const step = (cmd, args) => {
    try {
      run(cmd, args);
    } catch (e) {
      rmSync(base, { recursive: true, force: true });
      const why = String(e.stderr || e.message).trim();
      if (cmd === 'mount' && NOT_PERMITTED.test(why)) return `mount -o loop is not permitted here: ${why}`;
      throw new Error(`${cmd} ${args.join(' ')} failed (tools/install-deps.sh --test installs the tools): ${why}`);
    }
    return null;
  };
  step('truncate', ['-s', `${sizeMiB}M`, img]);
  step('mkfs.ext4', ['-q', '-F', '-m', '0', img]);
  const denied = step('mount', ['-o', 'loop', img, mnt]);
  if (denied) return { skip: denied };
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

// Every request must be answered: a hang is the failure these tests look for.
export function answered(p, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer to ${what} in 20 s: the server hung`)), 20000);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

// A clean and prompt exit: stop() checks exit 0 and no sanitizer report (lib.mjs), this that it
// came without the deadline.
export async function stopClean(s, what = 'SIGTERM') {
  const ex = await answered(s.stop(), what);
  assert.doesNotMatch(s.log(), /did not finish in time/); // prompt, not cut off by the deadline
  return ex;
}
