// SPDX-License-Identifier: MIT
// The open files limit fits --max-connections (src/main.c st__fit_fd_limit): a soft limit far
// above what the server needs is lowered to it, because libwebsockets sizes its descriptor table
// by the limit and walks all of it for every descriptor it no longer knows (a mass disconnect).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { test } from 'node:test';
import { BIN, tempDir, request, wsConnect } from './lib.mjs';

const softLimit = (pid) => Number(/^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'))[1]);

test('a soft open files limit far above --max-connections is lowered to fit it', { timeout: 60000 }, async (t) => {
  const hard = Number(execFileSync('sh', ['-c', 'ulimit -Hn']).toString().trim());
  const fits = 1000 + 256 + 1024;
  if (!(hard > fits)) return t.skip(`the hard limit (${hard}) is not above ${fits}`);
  const dir = tempDir('fdlimit');
  const proc = spawn('sh', ['-c', `ulimit -Sn ${hard} && exec "$0" "$@"`, BIN, '--listen', '127.0.0.1:0',
    '--data-dir', dir, '--max-connections', '1000'], { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    let log = '';
    const port = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`strata did not start:\n${log}`)), 10000);
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
    assert.equal(softLimit(proc.pid), fits);
    // and the server works as ever: a write, a read, a stream
    assert.equal((await request(port, 'POST', '/v1/counters/fd/incr', { by: 2 })).status, 200);
    const ws = await wsConnect(port);
    ws.send({ type: 'subscribe', id: 'a', topic: 'counter', name: 'fd' });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'a' });
    assert.equal((await ws.next()).json.value, 2);
    ws.close();
  } finally {
    const exited = new Promise((r) => proc.on('exit', r));
    proc.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
});
