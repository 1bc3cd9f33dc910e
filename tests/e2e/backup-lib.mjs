// SPDX-License-Identifier: MIT
// Helpers for the backup tests: figures from /metrics, `strata restore` as a child process, an
// S3 target (s3rver, in this process), and a TCP proxy in front of it that can stop answering.
import assert from 'node:assert/strict';
import net from 'node:net';
import { S3rver } from './sigv4-proxy.mjs';
import { freePort, runStrataAsync } from './lib.mjs';
import { waitFor } from './cold-lib.mjs';

export const metric = async (s, name) => Number((await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm'))?.[1] ?? NaN);

// Everything acknowledged so far is in the backup: a snapshot went and the backlog is empty.
export async function shipped(s) {
  await waitFor('the backup to catch up', async () => (await metric(s, 'strata_backup_snapshots_total')) >= 1
    && (await s.req('GET', '/healthz')).json.backup_lag_seconds === 0);
}

// Asynchronous: s3rver runs in this process and must keep answering meanwhile. The caller checks
// the exit code (some restores must fail); a sanitizer report fails any of them (lib.mjs).
export function restore(dataDir, url, extra = []) {
  return runAsync(['restore', '--backup-url', url, '--data-dir', dataDir, ...extra]);
}

// Any strata command, asynchronously, likewise: {code, out, err}, rejected on a sanitizer report
// or a death by signal (lib.mjs's runStrataAsync).
export const runAsync = (args) => runStrataAsync(args);

export async function ok(s, method, p, body, headers, status = 200) {
  const r = await s.req(method, p, body, headers);
  assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
  return r;
}

export async function s3(dir, port) {
  // from freePort, outside the ephemeral range: a test restarts it on this port, and meanwhile
  // strata's connections to it could be given that port as their own (lib.mjs's freePort)
  port ??= await freePort();
  const server = new S3rver({ address: '127.0.0.1', port, directory: dir, silent: true, configureBuckets: [{ name: 'bk' }] });
  const addr = await server.run();
  return { server, port: addr.port };
}

// A proxy to 127.0.0.1:targetPort. pause(): it goes on accepting connections but forwards
// nothing either way (a target that stops answering: requests hang until the client's timeout).
// requests: the request lines seen ("PUT /bk/p/key?partNumber=1&…"). failOnce(re): the next
// request whose line matches is answered 500 instead of being forwarded.
export function stallingProxy(targetPort) {
  const socks = new Set();
  const requests = [];
  let paused = false, failRe = null;
  const server = net.createServer((client) => {
    const up = net.connect(targetPort, '127.0.0.1');
    socks.add(client);
    socks.add(up);
    let failing = false;
    client.on('data', (d) => {
      const m = /^(GET|PUT|POST|DELETE|HEAD) (\S+) HTTP\/1\.1\r\n/.exec(d.subarray(0, 2048).toString('latin1'));
      if (!m) return;
      requests.push(`${m[1]} ${m[2]}`);
      if (failRe && failRe.test(`${m[1]} ${m[2]}`)) {
        failRe = null;
        failing = true;
        client.end('HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        up.destroy();
      }
    });
    const pipe = (from, to) => {
      from.on('data', (d) => { if (!paused && !failing && to.writable) to.write(d); });
      from.on('end', () => { if (!paused) to.end(); });
      from.on('error', () => to.destroy());
      from.on('close', () => socks.delete(from));
    };
    pipe(client, up);
    pipe(up, client);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    port: server.address().port,
    requests,
    failOnce(re) { failRe = re; },
    pause() { paused = true; },
    resume() {
      paused = false;
      for (const s of socks) s.destroy(); // what was swallowed is lost: clients reconnect
    },
    close: () => new Promise((r) => { for (const s of socks) s.destroy(); server.close(() => r()); }),
  })));
}

// A request that must be answered within ms (it would hang for ever on the bug under test).
export function within(ms, what, promise) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms); }),
  ]);
}
