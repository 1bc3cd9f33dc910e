// SPDX-License-Identifier: MIT
// Hostile and clumsy clients (issue 12): each case is named after what broke. No request takes
// the server down, grows it without bound, or reaches someone else's data.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { parseResponses, raw, sleep, startStrata, wsConnect } from './lib.mjs';

const SECRET = 'hostile-secret';
const b64 = (o) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o)).toString('base64url');
function jwt(payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64(payload);
  return `${h}.${p}.${createHmac('sha256', SECRET).update(`${h}.${p}`).digest('base64url')}`;
}
const nowS = () => Math.floor(Date.now() / 1000);

// Peak and current resident memory of a process, in KiB.
function memOf(pid) {
  const st = readFileSync(`/proc/${pid}/status`, 'utf8');
  return { hwm: Number(/VmHWM:\s+(\d+)/.exec(st)[1]), rss: Number(/VmRSS:\s+(\d+)/.exec(st)[1]) };
}

// A raw connection that keeps everything it receives; `closed` resolves when the server ends it.
function rawConn(port) {
  const sock = net.connect(port, '127.0.0.1');
  const c = { sock, data: Buffer.alloc(0) };
  c.connected = new Promise((r) => sock.on('connect', r));
  c.closed = new Promise((r) => { sock.on('close', r); sock.on('end', r); });
  sock.on('data', (d) => { c.data = Buffer.concat([c.data, d]); });
  sock.on('error', () => {});
  return c;
}

// Writes pipelined requests without reading until the server stops taking them (no 'drain'
// for a second) or `maxBytes` went out. Returns the number of requests written.
async function pipelineUntilStalled(sock, request, maxBytes = 64 << 20) {
  const chunk = Buffer.from(request.repeat(256));
  let sent = 0;
  for (;;) {
    sent += 256;
    if (sock.write(chunk)) {
      if (sent * request.length >= maxBytes) return { sent, stalled: false };
      continue;
    }
    const drained = await new Promise((r) => {
      const done = (v) => { clearTimeout(t); sock.off('drain', onDrain); r(v); };
      const onDrain = () => done(true);
      const t = setTimeout(() => done(false), 1000);
      sock.once('drain', onDrain);
    });
    if (!drained) return { sent, stalled: true };
    if (sent * request.length >= maxBytes) return { sent, stalled: false };
  }
}

const UPGRADE = 'GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n';

describe('hostile clients', () => {
  let s;
  before(async () => {
    s = await startStrata({ args: ['--max-connections', '8', '--max-header', '64KiB', '--idle-timeout', '2'] });
  });
  after(async () => { await s.stop(); s.cleanup(); });

  test('malformed WebSocket upgrades are answered 400 and do not lock everyone out (ws nconns underflow)', async () => {
    const bad = [
      `${UPGRADE}Sec-WebSocket-Version: 13\r\n\r\n`, // no key
      `${UPGRADE}Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${'A'.repeat(500)}\r\n\r\n`,
      `${UPGRADE}Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
      'GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    ];
    for (let round = 0; round < 3; round++) {
      for (const b of bad) {
        const out = parseResponses(await raw(s.port, b, { idleMs: 1000 }));
        assert.equal(out.length, 1, JSON.stringify(b.slice(0, 120)));
        assert.equal(out[0].status, 400);
        assert.equal(out[0].json.error.code, 'invalid_argument');
      }
    }
    // everyone else still gets in: plain requests and good streams
    assert.equal((await s.req('GET', '/healthz')).status, 200);
    const ws = await wsConnect(s.port);
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 'a', topic: 'counter', name: 'nc' });
    assert.equal((await ws.next()).json.type, 'subscribed');
    ws.close();
    const m = (await s.req('GET', '/metrics')).text;
    await sleep(200);
    assert.match(m, /strata_ws_connections \d/);
    assert.doesNotMatch(m, /strata_ws_connections -/);
  });

  test('an upgrade with more than 2 KiB of headers (cookies, a long access_token) gets its stream', { timeout: 30000 }, async () => {
    const ws = await wsConnect(s.port, `/v1/stream?route=counter:big&access_token=${'p'.repeat(3000)}`, {
      Cookie: 'session=' + 'c'.repeat(20000),
      'Sec-WebSocket-Protocol': 'strata',
    });
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 'b', topic: 'counter', name: 'bigup' });
    assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'b' });
    assert.equal((await ws.next()).json.value, 0);
    await s.req('POST', '/v1/counters/bigup/incr');
    assert.equal((await ws.next()).json.value, 1);
    ws.close();
    // past --max-header it is 431, like any request
    const out = parseResponses(await raw(s.port, `${UPGRADE}Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nCookie: ${'c'.repeat(70000)}\r\n\r\n`));
    assert.equal(out[0].status, 431);
  });

  // RFC 6455 §4.2.2: a server that takes none of the subprotocols a client offers answers without
  // Sec-WebSocket-Protocol (the client then decides). A client offering only others ("chat", as a
  // client library's default) got no answer at all: libwebsockets refused the handshake and the
  // socket was closed bare.
  test('an upgrade offering subprotocols other than strata is answered 101 without one; strata is chosen when offered', async () => {
    for (const [offer, chosen] of [['chat', undefined], ['chat, superchat', undefined], ['chat, strata', 'strata'], ['strata', 'strata']]) {
      const head = parseResponses(await raw(s.port, `${UPGRADE}Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: ${offer}\r\n\r\n`, { idleMs: 500 }));
      assert.equal(head[0]?.status, 101, offer);
      assert.equal(head[0].headers['sec-websocket-protocol'], chosen, offer);
      const ws = await wsConnect(s.port, '/v1/stream', { 'Sec-WebSocket-Protocol': offer });
      assert.equal(ws.status, 101, offer);
      ws.send({ type: 'subscribe', id: 'p', topic: 'counter', name: 'proto' });
      assert.deepEqual((await ws.next()).json, { type: 'subscribed', id: 'p' }, offer);
      ws.close();
    }
  });

  test('a peer that never reads its answers is closed (write timeout)', { timeout: 30000 }, async () => {
    const c = rawConn(s.port);
    await c.connected;
    c.sock.pause();
    const { stalled } = await pipelineUntilStalled(c.sock, 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n', 24 << 20);
    assert.ok(stalled);
    await c.closed; // --idle-timeout 2: the server gives up on it
    assert.equal((await s.req('GET', '/healthz')).status, 200);
  });

  test('an upgrade split across reads, with a frame right behind it, gets its stream', { timeout: 30000 }, async () => {
    const c = rawConn(s.port);
    await c.connected;
    const head = `${UPGRADE}Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nX-Pad: ${'z'.repeat(3000)}\r\n\r\n`;
    const payload = Buffer.from(JSON.stringify({ type: 'subscribe', id: 'sp', topic: 'counter', name: 'split' }));
    const mask = Buffer.from([1, 2, 3, 4]);
    const frame = Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, Buffer.from(payload.map((b, i) => b ^ mask[i % 4]))]);
    c.sock.write(head.slice(0, 1500));
    await sleep(200);
    c.sock.write(Buffer.concat([Buffer.from(head.slice(1500)), frame]));
    for (let i = 0; i < 300 && !c.data.includes('"subscribed"'); i++) await sleep(100);
    const text = c.data.toString('latin1');
    assert.match(text, /^HTTP\/1\.1 101 /);
    assert.ok(text.includes('{"type":"subscribed","id":"sp"}'), text);
    c.sock.destroy();
  });

  test('half-close after pipelined writes answers every applied write', async () => {
    const c = rawConn(s.port);
    await c.connected;
    c.sock.end('POST /v1/sequences/hc/next HTTP/1.1\r\nContent-Length: 0\r\n\r\n'.repeat(5));
    await c.closed;
    const out = parseResponses(c.data.toString('latin1'));
    assert.deepEqual(out.map((r) => r.status), [200, 200, 200, 200, 200]);
    assert.deepEqual(out.map((r) => r.json.last), [1, 2, 3, 4, 5]);
    assert.equal((await s.req('GET', '/v1/sequences/hc')).json.last, 5);
  });

  test('requests after Connection: close are neither applied nor answered', async () => {
    const c = rawConn(s.port);
    await c.connected;
    c.sock.write('POST /v1/sequences/cc/next HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    c.sock.write('POST /v1/sequences/cc/next HTTP/1.1\r\nContent-Length: 0\r\n\r\n');
    await c.closed;
    const out = parseResponses(c.data.toString('latin1'));
    assert.equal(out.length, 1);
    assert.equal(out[0].json.last, 1);
    assert.equal((await s.req('GET', '/v1/sequences/cc')).json.last, 1);
  });

  test('blank lines do not dodge the idle timeout', { timeout: 30000 }, async () => {
    const c = rawConn(s.port);
    await c.connected;
    let open = true;
    c.closed.then(() => { open = false; });
    for (let i = 0; i < 40 && open; i++) {
      c.sock.write('\r\n');
      await sleep(250);
    }
    assert.equal(open, false, 'still open after 10 s of blank lines with --idle-timeout 2');
  });

  test('obs-folded headers are refused (Transfer-Encoding:\\r\\n chunked)', async () => {
    for (const b of [
      'POST /v1/counters/fold/incr HTTP/1.1\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n',
      'POST /v1/counters/fold/incr HTTP/1.1\r\nX-A: a\r\n\tb\r\nContent-Length: 0\r\n\r\n',
    ]) {
      const out = parseResponses(await raw(s.port, b, { idleMs: 800 }));
      assert.equal(out.length, 1);
      assert.equal(out[0].status, 400);
    }
    // split right at the fold, across two reads
    const out = parseResponses(await raw(s.port, null, { idleMs: 800, writes: [
      'POST /v1/counters/fold/incr HTTP/1.1\r\nTransfer-Encoding:\r\n', 100, ' chunked\r\n\r\n0\r\n\r\n'] }));
    assert.equal(out[0].status, 400);
    assert.equal((await s.req('GET', '/v1/counters/fold')).status, 404);
  });

  test('unknown methods get 501 not_implemented', async () => {
    const out = parseResponses(await raw(s.port, 'BREW /v1/counters/x HTTP/1.1\r\n\r\n', { idleMs: 800 }));
    assert.equal(out[0].status, 501);
    assert.equal(out[0].json.error.code, 'not_implemented');
    // methods llhttp knows but HTTP does not define (WebDAV) are not implemented either
    const r = await s.req('PROPFIND', '/v1/counters/x');
    assert.equal(r.status, 501);
    assert.equal(r.json.error.code, 'not_implemented');
    assert.equal((await s.req('DELETE', '/v1/counters/x')).status, 405);
  });

  test('Expect: 100-continuefoo is not 100-continue', async () => {
    const c = rawConn(s.port);
    await c.connected;
    c.sock.write('POST /v1/counters/ex/incr HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continuefoo\r\n\r\n');
    await sleep(300);
    assert.equal(c.data.length, 0, c.data.toString());
    c.sock.write('{}');
    await sleep(300);
    c.sock.write('POST /v1/counters/ex/incr HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect:  100-Continue \r\nConnection: close\r\n\r\n');
    await sleep(300);
    c.sock.write('{}');
    await c.closed;
    const text = c.data.toString('latin1');
    assert.equal(text.split('100 Continue').length - 1, 1);
    const out = parseResponses(text.replace('HTTP/1.1 100 Continue\r\n\r\n', ''));
    assert.deepEqual(out.map((r) => r.json.value), [1, 2]);
  });

  test('100 Continue for a request pipelined behind a pending write comes after that answer', async () => {
    const c = rawConn(s.port);
    await c.connected;
    // one write: a whole incr (its answer waits for its commit) and the head of a second one
    c.sock.write('POST /v1/counters/ex2/incr HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}' +
      'POST /v1/counters/ex2/incr HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n');
    for (let i = 0; i < 50 && !c.data.toString('latin1').includes('100 Continue'); i++) await sleep(20);
    const early = c.data.toString('latin1');
    assert.ok(early.includes('100 Continue'), `no 100 Continue while the body is withheld: ${early}`);
    assert.ok(early.indexOf('HTTP/1.1 200') < early.indexOf('100 Continue'), early);
    c.sock.write('{}');
    await c.closed;
    const text = c.data.toString('latin1');
    assert.equal(text.split('100 Continue').length - 1, 1);
    const out = parseResponses(text.replace('HTTP/1.1 100 Continue\r\n\r\n', ''));
    assert.deepEqual(out.map((r) => r.json.value), [1, 2]);
  });

  test('?conversation_id=%zz is a 400, not a dropped filter', async () => {
    const r = await s.req('GET', '/v1/users/u/messages?conversation_id=%zz');
    assert.equal(r.status, 400);
    assert.equal(r.json.error.code, 'invalid_argument');
  });

  test('invalid UTF-8 in metadata or anywhere in a body is refused', async () => {
    const body = Buffer.concat([Buffer.from('{"conversation_id":"c","from":"a","content":"hi","metadata":{"k":"'),
      Buffer.from([0xc3, 0x28]), Buffer.from('"}}')]);
    const r = await s.req('POST', '/v1/users/u8/messages', body);
    assert.equal(r.status, 400);
    assert.equal(r.json.error.code, 'invalid_json');
    assert.equal((await s.req('GET', '/v1/users/u8/messages')).json.messages.length, 0);
  });

  test('metadata is kept byte-exact (big numbers, 1e400, \\u0000), not re-serialized', async () => {
    const meta = '{"big":12345678901234567, "x":9007199254740993,"inf":1e400,"s":"a\\u0000b","n":[1.50,-0]}';
    const body = `{"conversation_id":"c","from":"a","content":"hi","metadata":${meta}}`;
    const r = await s.req('POST', '/v1/users/meta/messages', body);
    assert.equal(r.status, 201);
    const list = (await s.req('GET', '/v1/users/meta/messages')).text;
    assert.ok(list.includes(`"metadata":${meta}`), list);
    // and it is JSON the web can read
    assert.equal(JSON.parse(list).messages[0].metadata.s, 'a\u0000b');
  });

  test('U+0000 in names, ids and content is refused (conversation_id "c\\u0000zz" was stored as "c")', async () => {
    for (const body of [
      '{"conversation_id":"c\\u0000zz","from":"a","content":"hi"}',
      '{"conversation_id":"c","from":"a\\u0000b","content":"hi"}',
      '{"conversation_id":"c","from":"a","content":"h\\u0000i"}',
    ]) {
      const r = await s.req('POST', '/v1/users/nul/messages', body);
      assert.equal(r.status, 400, body);
      assert.equal(r.json.error.code, 'invalid_argument');
    }
    assert.equal((await s.req('POST', '/v1/counters/x/distinct', '{"member":"m\\u0000x"}')).status, 400);
    assert.equal((await s.req('GET', '/v1/users/nul/conversations')).json.conversations.length, 0);
  });

  test('strict JSON: what cJSON would misread is invalid_json', async () => {
    for (const body of ['{"by":01}', '{"by":+1}', '{"by":.5}', '{"by":1}\u0000', '{"by":"\t"}', '{"a":"\\ud800"}']) {
      const r = await s.req('POST', '/v1/counters/strict/incr', body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.json.error.code, 'invalid_json', JSON.stringify(body));
    }
  });

  test('invalid UTF-8 and U+0000 in stream frames are not echoed back', async () => {
    let ws = await wsConnect(s.port);
    ws.send(Buffer.concat([Buffer.from('{"type":"subscribe","id":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","topic":"counter","name":"n"}')]));
    let f = await ws.next();
    assert.equal(f.op, 8);
    assert.equal(f.code, 1007);
    ws.close();
    ws = await wsConnect(s.port);
    ws.send('{"type":"subscribe","id":"a\\u0000<b>","topic":"counter","name":"n"}');
    f = (await ws.next()).json;
    assert.equal(f.type, 'error');
    assert.equal(f.id, undefined);
    assert.equal(f.code, 'invalid_argument');
    ws.close();
  });
});

describe('hostile clients, auth on', () => {
  let s;
  before(async () => { s = await startStrata({ env: { STRATA_JWT_SECRET: SECRET } }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('a token whose sub is "alice\\u0000bob" does not reach /v1/users/alice', async () => {
    const tok = jwt({ sub: 'alice\u0000bob', exp: nowS() + 60 });
    const r = await s.req('GET', '/v1/users/alice/messages', undefined, { authorization: `Bearer ${tok}` });
    assert.equal(r.status, 401);
    const ok = jwt({ sub: 'alice', exp: nowS() + 60 });
    assert.equal((await s.req('GET', '/v1/users/alice/messages', undefined, { authorization: `Bearer ${ok}` })).status, 200);
  });

  test('a token that expires while its stream is open ends the stream with 1008 token expired', async () => {
    // valid 4 s more: exp 26 s ago, within the default 30 s --jwt-leeway (a stream ends at
    // exp + leeway, as a request is refused then); 2 s left as little as 1 s for the first frames
    const tok = jwt({ sub: 'u', exp: nowS() - 26 });
    const ws = await wsConnect(s.port, `/v1/stream?access_token=${tok}`);
    assert.equal(ws.status, 101);
    ws.send({ type: 'subscribe', id: 'e', topic: 'counter', name: 'exp' });
    assert.equal((await ws.next()).json.type, 'subscribed');
    assert.equal((await ws.next()).json.type, 'counter');
    let f;
    do f = await ws.next(10000); while (f.op !== 8 && f.op !== -1);
    assert.equal(f.op, 8);
    assert.equal(f.code, 1008);
    assert.equal(f.reason, 'token expired');
    ws.close();
  });
});

describe('hostile clients, default timeouts', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('pipelined GETs never read stop being read: memory stays bounded, every request is answered in order', async () => {
    const before = memOf(s.proc.pid);
    const sock = net.connect(s.port, '127.0.0.1');
    await new Promise((r) => sock.on('connect', r));
    sock.pause();
    // count answers as they stream in (no copy of the whole stream)
    let n = 0, tail = '';
    sock.on('data', (d) => {
      const t = tail + d.toString('latin1');
      n += t.split('HTTP/1.1 200 OK\r\n').length - 1;
      tail = t.slice(-16); // shorter than the marker: no match is counted twice
    });
    const req = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
    const { sent, stalled } = await pipelineUntilStalled(sock, req, 32 << 20);
    const peak = memOf(s.proc.pid);
    assert.ok(stalled, `the server kept reading ${sent} requests it could not answer`);
    assert.ok(peak.hwm - before.hwm < 100 * 1024, `peak RSS grew by ${(peak.hwm - before.hwm) >> 10} MiB`);
    // others are served meanwhile
    assert.equal((await s.req('GET', '/healthz')).status, 200);
    // once the client reads, every request it sent is answered
    const want = sent;
    sock.resume();
    for (let tries = 0; tries < 600 && n < want; tries++) await sleep(100);
    assert.equal(n, want);
    sock.destroy();
  });
});

describe('hostile clients and shutdown', () => {
  test('SIGTERM finishes while a client holds unread responses', { timeout: 25000 }, async () => {
    const s = await startStrata();
    try {
      const c = rawConn(s.port);
      await c.connected;
      c.sock.pause();
      const { stalled } = await pipelineUntilStalled(c.sock, 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n', 24 << 20);
      assert.ok(stalled);
      s.proc.kill('SIGTERM');
      await s.ended(); // exit 0, no sanitizer report
      assert.match(s.log(), /shutdown: closed 1 connection/);
      c.sock.destroy();
    } finally {
      s.cleanup();
    }
  });
});
