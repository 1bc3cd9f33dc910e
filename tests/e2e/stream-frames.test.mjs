// SPDX-License-Identifier: MIT
// RFC 6455 on the read side of a stream, over a raw TCP socket after a valid upgrade: a client
// frame that breaks the framing rules fails the connection with a close frame carrying 1002
// (protocol error: unmasked §5.1, reserved bits §5.2, control frame over 125 bytes or fragmented
// §5.5) or 1009 (message too big), and the server then closes the socket. Nothing the bad frame
// carried is acted on.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { sleep, startStrata } from './lib.mjs';

// One raw connection, upgraded; collects every server byte and notes when the socket closes.
async function upgraded(port) {
  const sock = net.connect(port, '127.0.0.1');
  let data = Buffer.alloc(0);
  let closed = false;
  sock.on('data', (d) => { data = Buffer.concat([data, d]); });
  const done = new Promise((r) => sock.on('close', () => { closed = true; r(); }));
  sock.on('error', () => {});
  await new Promise((r) => sock.on('connect', r));
  sock.write('GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
  for (let i = 0; i < 1500 && data.indexOf('\r\n\r\n') < 0; i++) await sleep(20);
  const end = data.indexOf('\r\n\r\n');
  assert.ok(end > 0, 'no upgrade answer');
  assert.match(data.subarray(0, end).toString(), /^HTTP\/1\.1 101 /);
  const start = end + 4;
  return {
    sock,
    done,
    get closed() { return closed; },
    frames() { return parseFrames(data.subarray(start)); },
  };
}

// Server frames (never masked): [{op, payload, code}].
function parseFrames(b) {
  const out = [];
  for (let off = 0; off + 2 <= b.length;) {
    const op = b[off] & 15;
    let len = b[off + 1] & 127, h = 2;
    if (len === 126) { len = b.readUInt16BE(off + 2); h = 4; } else if (len === 127) { len = Number(b.readBigUInt64BE(off + 2)); h = 10; }
    if (off + h + len > b.length) break;
    const payload = b.subarray(off + h, off + h + len);
    out.push({ op, payload, code: op === 8 && len >= 2 ? payload.readUInt16BE(0) : undefined });
    off += h + len;
  }
  return out;
}

// A client frame: first byte as given, masked unless mask === null.
function frame(b0, payload, mask = Buffer.from([0x11, 0x22, 0x33, 0x44])) {
  payload = Buffer.from(payload);
  let head;
  const m = mask ? 0x80 : 0;
  if (payload.length < 126) head = Buffer.from([b0, m | payload.length]);
  else if (payload.length < 65536) { head = Buffer.alloc(4); head[0] = b0; head[1] = m | 126; head.writeUInt16BE(payload.length, 2); }
  else { head = Buffer.alloc(10); head[0] = b0; head[1] = m | 127; head.writeBigUInt64BE(BigInt(payload.length), 2); }
  if (!mask) return Buffer.concat([head, payload]);
  return Buffer.concat([head, mask, Buffer.from(payload.map((x, i) => x ^ mask[i % 4]))]);
}

const SUB = (id) => JSON.stringify({ type: 'subscribe', id, topic: 'counter', name: 'frames' });

describe('stream frames (RFC 6455)', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  // Sends bytes after the upgrade; expects a close frame with `code` and then the socket closed.
  async function expectFailed(bytes, code) {
    const c = await upgraded(s.port);
    // a good frame first: the connection works until the bad one
    c.sock.write(frame(0x81, SUB('ok')));
    for (let i = 0; i < 1500 && c.frames().length < 2; i++) await sleep(20);
    assert.deepEqual(c.frames().slice(0, 1).map((f) => JSON.parse(f.payload)), [{ type: 'subscribed', id: 'ok' }]);
    const before = c.frames().length;
    c.sock.write(bytes);
    await Promise.race([c.done, sleep(8000)]);
    const after = c.frames().slice(before);
    const close = after.find((f) => f.op === 8);
    assert.ok(close, `a close frame, got ${JSON.stringify(after.map((f) => [f.op, f.payload.toString()]))}`);
    assert.equal(close.code, code);
    // nothing carried by the bad frame was acted on: no answer to a subscribe in it
    assert.ok(!after.some((f) => f.op === 1 && f.payload.includes('"bad"')), 'the bad frame was served');
    assert.ok(c.closed, 'the server closed the socket');
    c.sock.destroy();
  }

  test('an unmasked text frame: 1002, socket closed', async () => {
    await expectFailed(frame(0x81, SUB('bad'), null), 1002);
  });

  test('an unmasked frame split across writes: 1002', async () => {
    const c = await upgraded(s.port);
    const f = frame(0x81, SUB('bad'), null);
    c.sock.write(f.subarray(0, 1));
    await sleep(100);
    c.sock.write(f.subarray(1));
    await Promise.race([c.done, sleep(8000)]);
    const close = c.frames().find((x) => x.op === 8);
    assert.equal(close?.code, 1002);
    assert.ok(!c.frames().some((x) => x.op === 1), 'the unmasked frame was served');
    assert.ok(c.closed);
  });

  test('an unmasked frame in the same write as the upgrade request: 1002, nothing served', async () => {
    const sock = net.connect(s.port, '127.0.0.1');
    let data = Buffer.alloc(0);
    sock.on('data', (d) => { data = Buffer.concat([data, d]); });
    sock.on('error', () => {});
    const done = new Promise((r) => sock.on('close', r));
    await new Promise((r) => sock.on('connect', r));
    sock.write(Buffer.concat([Buffer.from('GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n' +
      'Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n'),
    frame(0x81, SUB('ok')), frame(0x81, SUB('bad'), null)]));
    await Promise.race([done, sleep(8000)]);
    const end = data.indexOf('\r\n\r\n');
    assert.match(data.subarray(0, end).toString(), /^HTTP\/1\.1 101 /);
    const f = parseFrames(data.subarray(end + 4));
    // the stream fails as soon as it is established: nothing it asked for is served
    assert.deepEqual(f.filter((x) => x.op === 1).map((x) => x.payload.toString()), []);
    assert.equal(f.find((x) => x.op === 8)?.code, 1002);
    assert.ok(sock.destroyed || sock.readableEnded, 'the server closed the socket');
  });

  test('an unmasked ping: 1002', async () => {
    await expectFailed(frame(0x89, 'hi', null), 1002);
  });

  test('an unmasked continuation behind a masked first fragment: 1002', async () => {
    const msg = SUB('bad');
    await expectFailed(Buffer.concat([frame(0x01, msg.slice(0, 10)), frame(0x80, msg.slice(10), null)]), 1002);
  });

  test('reserved bits set (no extension negotiated): 1002', async () => {
    await expectFailed(frame(0x81 | 0x40, SUB('bad')), 1002); // RSV1
    await expectFailed(frame(0x81 | 0x10, SUB('bad')), 1002); // RSV3
  });

  test('a reserved opcode: 1002', async () => {
    await expectFailed(frame(0x83, SUB('bad')), 1002);
    await expectFailed(frame(0x8b, 'x'), 1002);
  });

  test('a control frame over 125 bytes: 1002', async () => {
    await expectFailed(frame(0x89, 'p'.repeat(126)), 1002);
  });

  test('a fragmented control frame: 1002', async () => {
    await expectFailed(frame(0x09, 'ping'), 1002);
  });

  // §5.5.1: a close body is empty or starts with a 2-byte code; §7.4: a code outside
  // 1000-1003, 1007-1014 and 3000-4999 is a protocol error (lws 4.1 echoed 5000 and answered a
  // 1-byte body with an empty close frame).
  const closeFrame = (code, reason = '') => {
    const b = Buffer.alloc(2);
    b.writeUInt16BE(code);
    return frame(0x88, Buffer.concat([b, Buffer.from(reason)]));
  };

  test('a close frame with a 1-byte body: 1002', async () => {
    await expectFailed(frame(0x88, Buffer.from([3])), 1002);
  });

  test('a close frame with a code out of range or one an endpoint must not send: 1002', async () => {
    for (const code of [0, 999, 1004, 1005, 1006, 1015, 2999, 5000, 65535]) await expectFailed(closeFrame(code, 'bye'), 1002);
  });

  test('a close frame whose code arrives in pieces is checked all the same: 1002', async () => {
    const c = await upgraded(s.port);
    const f = closeFrame(5000);
    for (const part of [f.subarray(0, 3), f.subarray(3, 6), f.subarray(6, 7), f.subarray(7)]) {
      c.sock.write(part);
      await sleep(50);
    }
    await Promise.race([c.done, sleep(8000)]);
    assert.equal(c.frames().find((x) => x.op === 8)?.code, 1002);
    assert.ok(c.closed);
  });

  // §8.1: text that is not UTF-8 fails the connection, with 1007 (§7.4.1); lws closed the socket
  // bare on a close reason that is not UTF-8 (§7.1.7: a close frame SHOULD go first).
  test('a close frame whose reason is not UTF-8: 1007', async () => {
    for (const reason of [Buffer.from([0xff]), Buffer.from('ok \xc3', 'latin1'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xe2, 0x82])]) {
      const b = Buffer.alloc(2);
      b.writeUInt16BE(1000);
      await expectFailed(frame(0x88, Buffer.concat([b, reason])), 1007);
    }
  });

  test('a close frame with a valid code is answered with that code', async () => {
    for (const code of [1000, 1001, 3000, 4999]) {
      const c = await upgraded(s.port);
      c.sock.write(closeFrame(code, 'done \u00e9\u20ac\u{1f600}'));
      await Promise.race([c.done, sleep(8000)]);
      assert.equal(c.frames().find((x) => x.op === 8)?.code, code);
      assert.ok(c.closed);
    }
  });

  test('a message over 64 KiB (in fragments): 1009', async () => {
    const big = Buffer.alloc(40000, 0x61);
    await expectFailed(Buffer.concat([frame(0x01, big), frame(0x80, big)]), 1009);
  });

  test('a well-formed stream still works after all that', async () => {
    const c = await upgraded(s.port);
    c.sock.write(frame(0x81, SUB('fine')));
    c.sock.write(frame(0x89, 'ping'));
    for (let i = 0; i < 1500 && c.frames().length < 3; i++) await sleep(20);
    const f = c.frames();
    assert.deepEqual(JSON.parse(f.find((x) => x.op === 1).payload), { type: 'subscribed', id: 'fine' });
    assert.ok(f.some((x) => x.op === 10 && x.payload.toString() === 'ping'), 'pong');
    assert.ok(!c.closed);
    c.sock.destroy();
  });
});
