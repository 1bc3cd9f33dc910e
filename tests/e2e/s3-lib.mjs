// SPDX-License-Identifier: MIT
// Object storage that fails the way a real one does, for the tests of flushes against it
// (issue 48, "failures are tested, not hoped for"):
// - s3Process(dir): s3rver behind the verifying SigV4 proxy (sigv4-proxy.mjs) in a process of
//   its own, so that a test can SIGSTOP it (a store that is slow, not down) without stopping
//   itself;
// - frontProxy(port): a TCP proxy in front of it that passes, refuses (every connection, old and
//   new, closed at once: the service is down) or blackholes (connections accepted, nothing
//   forwarded, nothing answered: a network that drops packets), switched by the test; cutAt()
//   blackholes from the middle of the first request whose bytes match, so a PUT is cut after its
//   head (a half-sent object);
// - s3Fetch(dir): globalThis.fetch serving icebird's https://BUCKET.s3.amazonaws.com/KEY from
//   s3rver's directory, Avro re-encoded with codec null (NOTES.md), to read the Iceberg tables.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { avroToNull } from './iceberg-lib.mjs';

const CHILD = `
import { S3rver } from './sigv4-proxy.mjs';
const [dir, bucket] = process.argv.slice(1);
const server = new S3rver({ address: '127.0.0.1', port: 0, directory: dir, silent: true, configureBuckets: [{ name: bucket }] });
const { port } = await server.run();
console.log('port ' + port);
process.on('SIGTERM', async () => { await server.close().catch((e) => console.error(e)); process.exit(0); });
`;

// s3rver in a child process: { port, proc, stop(), pause(), resume() }.
export async function s3Process(dir, bucket = 'bk') {
  const proc = spawn(process.execPath, ['--input-type=module', '-e', CHILD, dir, bucket], { cwd: path.dirname(new URL(import.meta.url).pathname), stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /port (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.on('exit', (c) => reject(new Error(`s3rver exited ${c}`)));
  });
  return {
    port,
    proc,
    pause: () => proc.kill('SIGSTOP'),
    resume: () => proc.kill('SIGCONT'),
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGCONT');
      const gone = new Promise((r) => proc.on('exit', r));
      proc.kill('SIGTERM');
      await gone;
    },
  };
}

// A TCP proxy to 127.0.0.1:target: { port, mode, set(mode), cutAt(re), onFirst(re, fn), close() }.
export function frontProxy(target) {
  const pairs = new Set(); // { client, up }
  let mode = 'pass';
  let cut = null; // a RegExp: blackhole from the first client chunk matching it, half of it sent
  const hooks = []; // { re, fn }: fn() called before the first client chunk matching re goes on
  const drop = (p) => { p.client.destroy(); p.up?.destroy(); pairs.delete(p); };
  const server = net.createServer((client) => {
    if (mode === 'refuse') return client.destroy();
    const p = { client, up: null };
    pairs.add(p);
    client.on('error', () => {});
    client.on('close', () => drop(p));
    if (mode === 'blackhole') return client.resume(); // read and dropped, never answered
    p.up = net.connect(target, '127.0.0.1');
    p.up.on('error', () => drop(p));
    p.up.on('close', () => drop(p));
    client.on('data', (d) => {
      if (mode === 'blackhole') return;
      const hook = hooks.find((h) => h.re.test(d.toString('latin1')));
      if (hook) { // once, before the chunk goes on
        hooks.splice(hooks.indexOf(hook), 1);
        hook.fn();
      }
      if (cut && cut.test(d.toString('latin1'))) { // the head and half of what came with it
        cut = null;
        p.up.write(d.subarray(0, Math.max(1, d.length >> 1)));
        front.set('blackhole');
        return;
      }
      p.up.write(d);
    });
    p.up.on('data', (d) => { if (mode === 'pass') client.write(d); });
  });
  const front = {
    port: 0,
    get mode() { return mode; },
    set(m) {
      mode = m;
      if (m === 'refuse') for (const p of [...pairs]) drop(p);
    },
    cutAt(re) { cut = re; },
    onFirst(re, fn) { hooks.push({ re, fn }); },
    close: () => new Promise((r) => { for (const p of [...pairs]) drop(p); server.close(() => r()); }),
  };
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    front.port = server.address().port;
    resolve(front);
  }));
}

// globalThis.fetch serving https://BUCKET.s3.amazonaws.com/KEY (icebird's form of s3://) from
// s3rver's directory; returns the function that puts the real fetch back.
export function s3Fetch(dir) {
  const real = globalThis.fetch;
  globalThis.fetch = async (url, init = {}) => {
    const m = /^https:\/\/([^./]+)\.s3\.amazonaws\.com\/([^?]*)$/.exec(String(url));
    if (!m) return real(url, init);
    const p = path.join(dir, m[1], `${decodeURIComponent(m[2])}._S3rver_object`);
    let body;
    try {
      body = p.endsWith('.avro._S3rver_object') ? avroToNull(readFileSync(p)) : readFileSync(p);
    } catch {
      return new Response('not found', { status: 404 });
    }
    if (init.method === 'HEAD') return new Response(null, { status: 200, headers: { 'content-length': String(body.length) } });
    const range = new Headers(init.headers || {}).get('range');
    if (range) {
      const r = /bytes=(\d+)-(\d*)/.exec(range);
      return new Response(body.subarray(Number(r[1]), r[2] ? Number(r[2]) + 1 : body.length), { status: 206 });
    }
    return new Response(body, { status: 200 });
  };
  return () => { globalThis.fetch = real; };
}
