// SPDX-License-Identifier: MIT
// Proxies in front of several strata (SPEC §10), shared by the scale-out tests: the shipped
// nginx and HAProxy configurations with only their ports and upstream servers templated.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, request, sleep } from './lib.mjs';

export { freePort };

export const ROOT = path.resolve('../..');
export const NGINX = '/usr/sbin/nginx';
export const HAPROXY = '/usr/sbin/haproxy';

// The shipped config with its listen port and upstream servers (the shipped three become the
// given ports, one line each) replaced; nothing else.
export function nginxConfig(dir, port, nodes) {
  let conf = readFileSync(path.join(ROOT, 'deploy/nginx/strata.conf'), 'utf8');
  const line = /^ *server 127\.0\.0\.1:808\d max_fails=0;\n/gm;
  const shipped = conf.match(line) || [];
  assert.equal(shipped.length, 3, 'the shipped upstream lists three servers');
  let i = 0;
  conf = conf.replace(line, (l) => (i++ ? '' : nodes.map((p) => l.replace(/808\d/, String(p))).join('')));
  conf = conf.replace(/listen 8080;/, `listen 127.0.0.1:${port};`);
  writeFileSync(path.join(dir, 'strata.conf'), conf);
  const main = path.join(dir, 'nginx.conf');
  writeFileSync(main, `${process.getuid?.() === 0 ? 'user root;' : ''}
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  include ${dir}/strata.conf;
}
`);
  return [NGINX, ['-c', main, '-p', dir, '-e', `${dir}/error.log`]];
}

export function haproxyConfig(dir, port, nodes) {
  let conf = readFileSync(path.join(ROOT, 'deploy/haproxy/haproxy.cfg'), 'utf8');
  let i = 0;
  conf = conf.replace(/127\.0\.0\.1:808\d/g, () => `127.0.0.1:${nodes[i++]}`);
  assert.equal(i, 3, 'the shipped backend lists three servers');
  conf = conf.replace(/bind :8080/, `bind 127.0.0.1:${port}`);
  const file = path.join(dir, 'haproxy.cfg');
  writeFileSync(file, conf);
  return [HAPROXY, ['-db', '-f', file]];
}

// Starts a proxy ([exe, args] from a config function) and waits until it answers on port.
// Returns { proc, log(), stop() }.
export async function startProxy(name, [exe, args], port) {
  let plog = '';
  const proc = spawn(exe, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout.on('data', (d) => { plog += d; });
  proc.stderr.on('data', (d) => { plog += d; });
  for (const until = Date.now() + 30000; ;) {
    const ok = await request(port, 'GET', '/healthz').then((r) => r.status === 200, () => false);
    if (ok) break;
    if (Date.now() > until || proc.exitCode !== null) throw new Error(`${name} did not start:\n${plog}`);
    await sleep(50);
  }
  return {
    proc,
    log: () => plog,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const gone = new Promise((r) => proc.on('exit', r));
      proc.kill('SIGTERM');
      await gone;
    },
  };
}
