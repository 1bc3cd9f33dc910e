// SPDX-License-Identifier: MIT
// TLS in front of strata (SPEC §7: strata speaks plain HTTP; TLS ends at a proxy): a replicated
// group of three behind Debian's nginx running the shipped deploy/nginx/strata-tls.conf with only
// its ports and certificate paths changed. The test makes its own CA and a certificate for
// 127.0.0.1/localhost with the openssl CLI; Node's https and the `ws` WebSocket client trust
// that CA only. Checked: writes and reads over https (a follower's 307 is followed by nginx, so
// the client sees only the leader's answer), a wss stream that sees a live change, TLS 1.2 and
// 1.3, plain HTTP at the TLS port refused, a client that does not trust the CA refused, a wrong
// host name refused, and the routing section identical to the plain recipe's.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import tls from 'node:tls';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { Group, call, freePort } from './cluster-lib.mjs';
import { skipIf, sleep, tempDir, wsConnect } from './lib.mjs';

const ROOT = path.resolve('../..');
const NGINX = '/usr/sbin/nginx';
const RECIPE = path.join(ROOT, 'deploy/nginx/strata-tls.conf');

// The maps and the upstream: from the first `map` to the end of `upstream strata_nodes { }`.
function routing(conf) {
  const start = conf.indexOf('\nmap ');
  const up = conf.indexOf('\nupstream strata_nodes {');
  assert.ok(start > 0 && up > start, 'maps, then the upstream');
  return conf.slice(start, conf.indexOf('\n}\n', up) + 3);
}

// A CA and a server certificate signed by it, for 127.0.0.1 and localhost (P-256 keys).
function makePki(dir) {
  const sh = (cmd) => execFileSync('sh', ['-c', cmd], { cwd: dir, stdio: 'pipe' });
  const key = '-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';
  sh(`openssl req -x509 ${key} -keyout ca.key -out ca.pem -days 2 -subj "/CN=strata test CA" `
    + '-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"');
  sh(`openssl req ${key} -keyout srv.key -out srv.csr -subj "/CN=localhost"`);
  writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n'
    + 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n');
  sh('openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile ext.cnf');
  return { ca: readFileSync(path.join(dir, 'ca.pem')), cert: path.join(dir, 'srv.pem'), key: path.join(dir, 'srv.key') };
}

// The shipped recipe with its listen port, three upstream servers and certificate paths
// replaced; nothing else. The test's own nginx.conf logs which upstream answered each request.
function nginxConfig(dir, port, members, pki) {
  let conf = readFileSync(RECIPE, 'utf8');
  let i = 0;
  conf = conf.replace(/server 127\.0\.0\.1:808\d/g, () => `server 127.0.0.1:${members[i++]}`);
  assert.equal(i, 3, 'the shipped upstream lists three servers');
  const swap = (re, to) => { assert.match(conf, re); conf = conf.replace(re, to); };
  swap(/listen 443 ssl;/, `listen 127.0.0.1:${port} ssl;`);
  swap(/ssl_certificate +\/etc\/nginx\/tls\/strata\.crt;/, `ssl_certificate ${pki.cert};`);
  swap(/ssl_certificate_key +\/etc\/nginx\/tls\/strata\.key;/, `ssl_certificate_key ${pki.key};`);
  writeFileSync(path.join(dir, 'strata-tls.conf'), conf);
  const main = path.join(dir, 'nginx.conf');
  writeFileSync(main, `${process.getuid?.() === 0 ? 'user root;' : ''}
daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  log_format hops '$request_method $uri $status [$upstream_status] [$upstream_addr]';
  access_log ${dir}/access.log hops;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  include ${dir}/strata-tls.conf;
}
`);
  return [NGINX, ['-c', main, '-p', dir, '-e', `${dir}/error.log`]];
}

// One https request; resolves {status, headers, json, protocol} or rejects with the TLS error.
function httpsReq(port, method, p, body, opts = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const r = https.request({ host: '127.0.0.1', port, method, path: p, agent: false, ...opts,
      headers: data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {} },
    (res) => {
      const protocol = res.socket.getProtocol();
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, json, protocol });
      });
      res.on('error', reject);
    });
    r.setTimeout(10000, () => r.destroy(new Error('timeout')));
    r.on('error', reject);
    if (data) r.write(data);
    r.end();
  });
}

// A wss client; resolves {ws, next(ms)} once open, rejects with the handshake's error.
function wss(port, p, opts) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`wss://127.0.0.1:${port}${p}`, opts);
    const queue = [];
    let waiting = null;
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (waiting) { const w = waiting; waiting = null; w(f); } else queue.push(f);
    });
    ws.once('open', () => resolve({
      ws,
      next: (ms = 5000) => queue.length ? Promise.resolve(queue.shift()) : new Promise((res, rej) => {
        const t = setTimeout(() => { waiting = null; rej(new Error('no frame in time')); }, ms);
        waiting = (f) => { clearTimeout(t); res(f); };
      }),
    }));
    ws.once('error', reject);
  });
}

describe('a group of three behind nginx terminating TLS', { skip: skipIf(!existsSync(NGINX) && `${NGINX} not installed (tools/install-deps.sh --test)`) }, () => {
  let g, dir, pki, port, proxy, plog = '';
  const trusted = () => ({ ca: pki.ca });
  const via = (method, p, body) => httpsReq(port, method, p, body, trusted());

  before(async () => {
    dir = tempDir('tls');
    pki = makePki(dir);
    g = new Group(3);
    await g.init();
    await g.leader();
    // Every follower knows the leader's URL (it answers 307, not 503 no_leader) before the proxy
    // starts, so no request below has to be retried.
    for (const id of [1, 2, 3]) {
      for (let i = 0; ; i++) {
        const r = await call(g.port(id), 'GET', '/v1/counters/__probe');
        if (r.status === 307 || r.status === 404) break;
        if (i > 600) throw new Error(`member ${id} answers ${r.status}`); // ~30 s on a loaded machine
        await sleep(50);
      }
    }
    port = await freePort();
    const [exe, args] = nginxConfig(dir, port, [1, 2, 3].map((id) => g.port(id)), pki);
    proxy = spawn(exe, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    proxy.stdout.on('data', (d) => { plog += d; });
    proxy.stderr.on('data', (d) => { plog += d; });
    for (let i = 0; ; i++) {
      const up = await via('GET', '/v1/cluster').then((r) => r.status === 200, () => false);
      if (up) break;
      if (i > 600 || proxy.exitCode !== null) { // ~30 s on a loaded machine
        throw new Error(`nginx did not start:\n${plog}${existsSync(`${dir}/error.log`) ? readFileSync(`${dir}/error.log`, 'utf8') : ''}`);
      }
      await sleep(50);
    }
  });

  after(async () => {
    if (proxy && proxy.exitCode === null) {
      const gone = new Promise((r) => proxy.on('exit', (code, sig) => r({ code, sig })));
      proxy.kill('SIGTERM');
      const ex = await gone;
      assert.equal(ex.code, 0, `nginx ended with ${JSON.stringify(ex)}:\n${plog}`);
    }
    try {
      if (g) await g.stopAll();
    } finally {
      if (g) { g.kill(); g.cleanup(); }
      if (dir) rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the TLS recipe routes exactly as the plain one (same maps, same upstream)', () => {
    const plain = readFileSync(path.join(ROOT, 'deploy/nginx/strata.conf'), 'utf8');
    assert.equal(routing(readFileSync(RECIPE, 'utf8')), routing(plain));
    assert.match(routing(plain), /hash \$strata_route_key consistent;/);
  });

  test('writes and reads over https; followers\' 307s are followed by nginx', async () => {
    const keys = 12;
    for (let i = 1; i <= keys; i++) {
      const w = await via('POST', `/v1/counters/k${i}/incr`, { by: i });
      assert.equal(w.status, 200, w.text);
      assert.match(w.protocol, /^TLSv1\.[23]$/);
      const m = await via('POST', `/v1/users/u${i}/messages`, { conversation_id: 'c', from: `u${i}`, content: `hi ${i}` });
      assert.equal(m.status, 201, m.text);
    }
    for (let i = 1; i <= keys; i++) {
      const r = await via('GET', `/v1/counters/k${i}`);
      assert.deepEqual([r.status, r.json], [200, { name: `k${i}`, value: i }]);
      const m = await via('GET', `/v1/users/u${i}/messages?conversation_id=c`);
      assert.deepEqual(m.json.messages.map((x) => x.content), [`hi ${i}`]);
    }
    // The log shows both hops: requests that reached a follower (307) and went on to the
    // leader (200/201), with their bodies (the counters and messages above are exact).
    const log = readFileSync(path.join(dir, 'access.log'), 'utf8').split('\n');
    const followed = log.filter((l) => /^POST \/v1\/counters\/\S+ 200 \[307 : 200\]/.test(l));
    assert.ok(followed.length >= 1, `some keys hash to a follower:\n${log.join('\n')}`);
    assert.ok(log.some((l) => /^POST \/v1\/users\/\S+ 201 \[307 : 201\]/.test(l)), 'a message body went on too');
    assert.ok(!log.some((l) => / 307 \[/.test(l)), 'no client saw a 307');
  });

  test('TLS 1.3 by default, TLS 1.2 on request, nothing older', async () => {
    assert.equal((await via('GET', '/v1/counters/k1')).protocol, 'TLSv1.3');
    const r = await httpsReq(port, 'GET', '/v1/counters/k1', undefined, { ...trusted(), maxVersion: 'TLSv1.2' });
    assert.deepEqual([r.status, r.protocol, r.json.value], [200, 'TLSv1.2', 1]);
    // A client that offers at most TLS 1.1 (its own floor lowered so that it can) gets the
    // server's protocol_version alert.
    const err = await new Promise((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port, ca: pki.ca, minVersion: 'TLSv1', maxVersion: 'TLSv1.1',
        ciphers: 'DEFAULT:@SECLEVEL=0' });
      s.on('secureConnect', () => { resolve(new Error(`connected with ${s.getProtocol()}`)); s.destroy(); });
      s.on('error', resolve);
    });
    assert.equal(err.code, 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION', err.message);
  });

  test('a wss stream sees a live change', async () => {
    const s = await wss(port, '/v1/stream?route=counter:k3', trusted());
    s.ws.send(JSON.stringify({ type: 'subscribe', id: 'c', topic: 'counter', name: 'k3' }));
    let f;
    do f = await s.next(); while (f.type !== 'counter');
    assert.equal(f.value, 3);
    assert.equal((await via('POST', '/v1/counters/k3/incr', { by: 10 })).status, 200);
    do f = await s.next(); while (f.type !== 'counter');
    assert.equal(f.value, 13, 'the live change arrived over wss');
    const m = await wss(port, '/v1/stream?route=user:u4', trusted());
    m.ws.send(JSON.stringify({ type: 'subscribe', id: 'm', topic: 'messages', user: 'u4', after: '0' }));
    do f = await m.next(); while (f.type !== 'replay_done');
    await via('POST', '/v1/users/u4/messages', { conversation_id: 'c', from: 'x', content: 'live' });
    do f = await m.next(); while (f.type !== 'message');
    assert.equal(f.message.content, 'live');
    for (const c of [s, m]) {
      const closed = new Promise((r) => c.ws.once('close', r));
      c.ws.close();
      await closed;
    }
  });

  test('plain HTTP and plain WebSocket at the TLS port are refused', async () => {
    const r = await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port, path: '/v1/counters/k1', agent: false }, (res) => {
        let text = '';
        res.on('data', (d) => { text += d; });
        res.on('end', () => resolve({ status: res.statusCode, text }));
      }).on('error', reject);
    });
    assert.equal(r.status, 400);
    assert.match(r.text, /plain HTTP request was sent to HTTPS port/);
    assert.doesNotMatch(r.text, /"value"/, 'strata was not reached');
    const ws = await wsConnect(port, '/v1/stream?route=counter:k1');
    assert.equal(ws.status, 400, 'no upgrade in clear');
  });

  test('a client that does not trust the CA is refused, and so is a wrong host name', async () => {
    const untrusted = /UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|SELF_SIGNED_CERT_IN_CHAIN/;
    await assert.rejects(httpsReq(port, 'GET', '/v1/counters/k1'), (e) => untrusted.test(e.code));
    await assert.rejects(wss(port, '/v1/stream?route=counter:k1', {}), (e) => untrusted.test(e.code));
    // Another CA that the client trusts instead proves nothing either.
    const other = tempDir('tls-other');
    try {
      const o = makePki(other);
      await assert.rejects(httpsReq(port, 'GET', '/v1/counters/k1', undefined, { ca: o.ca }), (e) => untrusted.test(e.code));
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
    await assert.rejects(httpsReq(port, 'GET', '/v1/counters/k1', undefined, { ...trusted(), servername: 'strata.example.com' }),
      (e) => e.code === 'ERR_TLS_CERT_ALTNAME_INVALID');
    // The trusted client still gets through on the same port.
    assert.equal((await via('GET', '/v1/counters/k1')).status, 200);
  });
});
