// SPDX-License-Identifier: MIT
// SPEC §3, slow consumers (issue 21, item 5). Past the per-connection outbound limit a stream is
// closed with 1008 "slow consumer": the close frame goes out ahead of what is still queued (the
// queue is dropped), and the socket stays open up to 10 s for it, so a reader that paused and
// reads again gets 1008, not a bare TCP close (1006). A reader that never reads again is closed
// after those 10 s. And a stream resuming with `after` behind messages of ~200 KB always makes
// progress: it is never cut off again and again before it catches up.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { sleep, startStrata, wsConnect } from './lib.mjs';

const metric = async (s, name) => {
  const m = (await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\d+)`, 'm'));
  return m ? Number(m[1]) : 0;
};

// Whether process `pid` still holds its end of the loopback TCP connection from `peerPort` to
// `port` (a socket the process closed may linger in the kernel, with inode 0, to send the rest).
function holds(pid, port, peerPort) {
  const inodes = new Set();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let l = '';
    try { l = readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { continue; } // closed meanwhile
    if (l.startsWith('socket:[')) inodes.add(l.slice(8, -1));
  }
  const hex = (p) => `:${p.toString(16).toUpperCase().padStart(4, '0')}`;
  return readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1).some((line) => {
    const f = line.trim().split(/\s+/);
    return f.length > 9 && f[1].endsWith(hex(port)) && f[2].endsWith(hex(peerPort)) && inodes.has(f[9]);
  });
}

// Subscribes a raw stream to one user's messages and waits for its (empty) replay to end.
async function subscriber(s, user, extra = {}) {
  const ws = await wsConnect(s.port);
  assert.equal(ws.status, 101);
  ws.send({ type: 'subscribe', id: 'm', topic: 'messages', user, ...extra });
  for (let f = await ws.next(); f.json?.type !== 'replay_done'; f = await ws.next()) assert.equal(f.op, 1);
  return ws;
}

// Posts messages of `size` bytes into one conversation, 8 at a time, until the slow-consumer
// counter moves past `drops0`; returns how many were posted.
async function floodUntilCut(s, user, size, drops0) {
  const pad = 'x'.repeat(size);
  let n = 0;
  while (n < 4000 && (await metric(s, 'strata_ws_slow_consumer_drops_total')) === drops0) {
    const rs = await Promise.all(Array.from({ length: 8 }, (_, k) =>
      s.req('POST', `/v1/users/${user}/messages`, { conversation_id: 'flood', from: 'f', content: `${n + k} ${pad}` })));
    for (const r of rs) assert.equal(r.status, 201, r.text);
    n += 8;
  }
  assert.ok((await metric(s, 'strata_ws_slow_consumer_drops_total')) > drops0, 'the paused stream was cut off');
  return n;
}

describe('slow consumers', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('a paused reader that reads again within 10 s gets the 1008 "slow consumer" close frame', async () => {
    const ws = await subscriber(s, 'paused', { conversation_id: 'flood' });
    ws.sock.pause(); // the application stops reading; the kernel's buffers fill, then strata's queue
    const posted = await floodUntilCut(s, 'paused', 100000, await metric(s, 'strata_ws_slow_consumer_drops_total'));
    await sleep(6000); // still paused after the cut-off, past libwebsockets' own 5 s close timeouts
    ws.sock.resume();
    let f, messages = 0;
    for (f = await ws.next(10000); f.op === 1; f = await ws.next(10000)) {
      assert.equal(f.json.type, 'message');
      messages++;
    }
    assert.equal(f.op, 8, `a close frame, not a bare TCP close (1006): ${JSON.stringify({ op: f.op, error: f.error?.code })}`);
    assert.equal(f.code, 1008);
    assert.equal(f.reason, 'slow consumer');
    assert.ok(messages < posted, `the queue behind the close frame was dropped (${messages} of ${posted} arrived)`);
    ws.close();
  });

  test('a reader that never reads again is closed within 10 s of the cut-off', async () => {
    const before = await metric(s, 'strata_ws_connections');
    const ws = await subscriber(s, 'gone');
    const peer = ws.sock.localPort;
    assert.ok(holds(s.proc.pid, s.port, peer));
    ws.sock.pause();
    await floodUntilCut(s, 'gone', 100000, await metric(s, 'strata_ws_slow_consumer_drops_total'));
    const cut = Date.now();
    while (Date.now() - cut < 15000 && holds(s.proc.pid, s.port, peer)) await sleep(250);
    const took = Date.now() - cut;
    assert.ok(!holds(s.proc.pid, s.port, peer), 'strata closed the socket');
    assert.ok(took <= 11500, `within the 10 s grace (${took} ms)`);
    assert.equal(await metric(s, 'strata_ws_connections'), before, 'the stream is gone');
    ws.close();
  });

  // Review (session 8): a reader that takes each write but reads slower than the changes come
  // must still reach the cap. A stream whose whole write was taken goes back on the end-of-turn
  // list, and that once made its whole backlog one "release" the cap never counted: such a
  // reader grew the server's memory for ever and was never cut off.
  test('a reader that reads, but slower than the messages come, is cut off', async () => {
    const ws = await subscriber(s, 'trickle', { conversation_id: 'flood' });
    let reading = true;
    ws.sock.on('data', () => { // ~one chunk every 20 ms: well under what the flood sends
      if (!reading) return;
      ws.sock.pause();
      setTimeout(() => ws.sock.resume(), 20);
    });
    await floodUntilCut(s, 'trickle', 100000, await metric(s, 'strata_ws_slow_consumer_drops_total'));
    reading = false;
    ws.sock.resume();
    let f;
    for (f = await ws.next(15000); f.op === 1; f = await ws.next(15000)) assert.equal(f.json.type, 'message');
    assert.equal(f.op, 8, `a close frame: ${JSON.stringify({ op: f.op, error: f.error?.code })}`);
    assert.equal(f.code, 1008);
    assert.equal(f.reason, 'slow consumer');
    ws.close();
  });

  test('a stream resuming with `after` behind ~200 KB messages makes progress every time and catches up', async () => {
    // The backlog: 30 messages of ~200 KB (a page of 256 would be 50 MB, far past the 1 MiB cap).
    const ids = [];
    for (let i = 0; i < 30; i++) {
      const r = await s.req('POST', '/v1/users/resume/messages', { conversation_id: 'big', from: 'r', content: `${i} ${'y'.repeat(200000)}` });
      assert.equal(r.status, 201, r.text);
      ids.push(r.json.msg_id);
    }
    // Live traffic on the same streams all along: 50 KB messages into another conversation.
    let writing = true;
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        await s.req('POST', '/v1/users/resume/messages', { conversation_id: 'live', from: 'w', content: `${i} ${'z'.repeat(50000)}` });
        await sleep(100);
      }
    })();
    const got = [];
    const progress = [];
    try {
      while (got.length < ids.length && progress.length < 15) {
        const ws = await wsConnect(s.port);
        ws.send({ type: 'subscribe', id: 'live', topic: 'messages', user: 'resume', conversation_id: 'live' });
        ws.send({ type: 'subscribe', id: 'm', topic: 'messages', user: 'resume', conversation_id: 'big', after: got.at(-1) ?? '0' });
        // a reader that pauses while its replay is queued, then reads again
        ws.sock.pause();
        await sleep(1500);
        ws.sock.resume();
        const before = got.length;
        for (;;) {
          const f = await ws.next(15000);
          if (f.op !== 1) break; // cut off (1008): resume with after
          if (f.json.id !== 'm') continue;
          assert.notEqual(f.json.type, 'error', f.text);
          if (f.json.type === 'replay_done') break;
          if (f.json.type === 'message') {
            assert.equal(f.json.message.content.length, String(got.length).length + 1 + 200000);
            got.push(f.json.message.msg_id);
          }
        }
        ws.close();
        progress.push(got.length - before);
        assert.ok(got.length > before, `every resume makes progress (messages per session: ${progress})`);
      }
    } finally {
      writing = false;
      await writer;
    }
    assert.deepEqual(got, ids, `every message once, in order (messages per session: ${progress})`);
  });
});
