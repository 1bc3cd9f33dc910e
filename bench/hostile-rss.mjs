// SPDX-License-Identifier: MIT
// Peak memory of strata under a hostile client (issue 12), for bench/RESULTS.md:
//   node bench/hostile-rss.mjs pipeline [seconds]   one socket pipelines GETs and never reads
//   node bench/hostile-rss.mjs upgrades [count] [KiB] many WebSocket upgrades with large headers
// Starts build/strata (or $STRATA_BIN) on a free port with a temp data dir, runs the attack,
// prints VmHWM (peak RSS) before and after, and whether the server still answers.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.env.STRATA_BIN || path.join(here, '../build/strata');
const [mode = 'pipeline', arg, arg2] = process.argv.slice(2);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const dir = mkdtempSync(path.join(os.tmpdir(), 'strata-rss-'));
const proc = spawn(bin, ['--listen', '127.0.0.1:0', '--data-dir', dir, '--max-connections', '5000',
  '--max-header', '64KiB'], { stdio: ['ignore', 'pipe', 'pipe'] });
let log = '';
const port = await new Promise((resolve, reject) => {
  const on = (d) => { log += d; const m = /listening on [0-9.]+:(\d+)/.exec(log); if (m) resolve(Number(m[1])); };
  proc.stderr.on('data', on);
  proc.stdout.on('data', on);
  proc.on('exit', (c) => reject(new Error(`exited ${c}: ${log}`)));
});
const hwm = () => {
  const s = readFileSync(`/proc/${proc.pid}/status`, 'utf8');
  return { hwm: Number(/VmHWM:\s+(\d+)/.exec(s)[1]), rss: Number(/VmRSS:\s+(\d+)/.exec(s)[1]) };
};
const alive = () => new Promise((resolve) => {
  const s = net.connect(port, '127.0.0.1', () => s.write('GET /healthz HTTP/1.1\r\n\r\n'));
  s.on('data', (d) => { resolve(d.toString().split('\r\n')[0]); s.destroy(); });
  s.on('error', (e) => resolve(e.code));
  setTimeout(() => { resolve('no answer'); s.destroy(); }, 3000);
});

const before = hwm();
console.log(`before: peak RSS ${(before.hwm / 1024).toFixed(1)} MiB`);
const socks = [];
if (mode === 'pipeline') {
  const secs = Number(arg || 10);
  const sock = net.connect(port, '127.0.0.1');
  socks.push(sock);
  sock.on('error', () => {});
  sock.pause(); // never read a byte
  const chunk = Buffer.from('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(512));
  let sent = 0, stop = false;
  await new Promise((r) => sock.on('connect', r));
  (async () => {
    while (!stop) {
      sent += chunk.length;
      if (!sock.write(chunk)) {
        await new Promise((r) => {
          const done = () => { clearTimeout(t); sock.off('drain', done); r(); };
          const t = setTimeout(done, 200);
          sock.once('drain', done);
        });
      }
    }
  })();
  for (let i = 0; i < secs; i++) {
    await sleep(1000);
    const m = hwm();
    console.log(`${i + 1}s: offered ${(sent / 1048576).toFixed(1)} MiB of requests, RSS ${(m.rss / 1024).toFixed(1)} MiB, peak ${(m.hwm / 1024).toFixed(1)} MiB`);
  }
  stop = true;
} else if (mode === 'upgrades') {
  const n = Number(arg || 1000);
  const cookie = 'a'.repeat(Number(arg2 || 14) * 1024);
  let ok = 0, other = 0;
  await Promise.all(Array.from({ length: n }, () => new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(
      `GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nCookie: ${cookie}\r\n\r\n`));
    socks.push(s);
    let got = '';
    s.on('data', (d) => {
      got += d;
      if (got.includes('\r\n')) { if (got.startsWith('HTTP/1.1 101')) ok++; else other++; resolve(); }
    });
    s.on('error', () => { other++; resolve(); });
    setTimeout(resolve, 10000);
  })));
  console.log(`${n} upgrades with ${cookie.length} bytes of cookie: ${ok} switched, ${other} refused or failed, ${n - ok - other} unanswered`);
}
const after = hwm();
console.log(`after: peak RSS ${(after.hwm / 1024).toFixed(1)} MiB, now ${(after.rss / 1024).toFixed(1)} MiB; /healthz: ${await alive()}`);
// SIGTERM while the attacker still holds its socket (issue 12 item 9), then let go of it
proc.kill('SIGTERM');
setTimeout(() => { for (const s of socks) s.destroy(); }, 40000).unref();
const t0 = Date.now();
await new Promise((r) => proc.on('exit', r));
for (const s of socks) s.destroy();
console.log(`SIGTERM to exit: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
rmSync(dir, { recursive: true, force: true });
