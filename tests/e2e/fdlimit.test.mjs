// SPDX-License-Identifier: MIT
// The open files limit fits --max-connections (src/main.c st__fit_fd_limit): a soft limit far
// above what the server needs is lowered to it, because libwebsockets sizes its descriptor table
// by the limit and walks all of it for every descriptor it no longer knows (a mass disconnect).
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { test } from 'node:test';
import { BIN, checkExit, request, skipNow, tempDir, wsConnect } from './lib.mjs';

const softLimit = (pid) => Number(/^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'))[1]);

test('a soft open files limit far above --max-connections is lowered to fit it', { timeout: 60000 }, async (t) => {
  const hard = Number(execFileSync('sh', ['-c', 'ulimit -Hn']).toString().trim());
  const fits = 1000 + 256 + 1024;
  // the soft limit strata starts with: the hard limit, or 65536 where the hard limit may be raised
  // (root with CAP_SYS_RESOURCE)
  let raise = hard;
  if (!(hard > fits)) {
    raise = 65536;
    const probe = spawnSync('sh', ['-c', `ulimit -Hn ${raise}`], { encoding: 'utf8' });
    if (probe.status !== 0) {
      return skipNow(t, `the hard open files limit (${hard}) is not above ${fits} and cannot be raised here: ${probe.stderr.trim()}`);
    }
  }
  const dir = tempDir('fdlimit');
  // sh sets the limits, then execs strata: the PID is strata's own
  const proc = spawn('sh', ['-c', `ulimit -Hn ${raise} && ulimit -Sn ${raise} && exec "$0" "$@"`, BIN,
    '--listen', '127.0.0.1:0', '--data-dir', dir, '--max-connections', '1000'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const closed = new Promise((r) => proc.on('close', (code, sig) => r({ code, sig })));
  let log = '', ex;
  try {
    const port = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`strata did not start:\n${log}`)), 30000);
      const on = (d) => {
        log += d;
        const m = /listening on [0-9.]+:(\d+)/.exec(log);
        if (m) { clearTimeout(timer); resolve(Number(m[1])); }
      };
      proc.stderr.on('data', on);
      proc.stdout.on('data', on);
      proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`strata exited with ${code}:\n${log}`)); });
    });
    proc.removeAllListeners('exit');
    assert.equal(readFileSync(`/proc/${proc.pid}/cmdline`, 'utf8').split('\0')[0], BIN);
    assert.equal(softLimit(proc.pid), fits);
    // and the server works as ever: a write, a read, a stream
    assert.equal((await request(port, 'POST', '/v1/counters/fd/incr', { by: 2 })).status, 200);
    const ws = await wsConnect(port);
    ws.send({ type: 'subscribe', id: 'a', topic: 'counter', name: 'fd' });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'a' });
    assert.equal((await ws.next()).json.value, 2);
    ws.close();
  } finally {
    proc.kill('SIGTERM');
    ex = await closed;
    rmSync(dir, { recursive: true, force: true });
  }
  // a clean stop, as every e2e server's (lib.mjs)
  checkExit('strata', ex, log);
});
