// SPDX-License-Identifier: MIT
// A connection storm: the server takes new connections a bounded number per loop iteration
// (src/http/server.c), the rest waiting in the kernel's backlog. Every one of a thousand HTTP
// connections opened at once is answered, four hundred WebSocket streams opened at once all
// upgrade and all see a change published after they are open, and the server counts them all.
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { startStrata, waitStreams, wsConnect } from './lib.mjs';

const metric = (text, name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);

// One raw connection: connects, then sends `GET path` when asked and resolves its status.
function rawConn(port) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.on('error', reject);
    sock.on('connect', () => resolve({
      sock,
      get: (path) => new Promise((res, rej) => {
        let buf = '';
        sock.on('data', (d) => {
          buf += d;
          const m = /^HTTP\/1\.1 (\d+)/.exec(buf);
          if (m && buf.includes('\r\n\r\n')) res(Number(m[1]));
        });
        sock.on('error', rej);
        sock.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      }),
    }));
  });
}

test('a thousand HTTP connections opened at once are all accepted and answered', { timeout: 120000 }, async () => {
  const s = await startStrata();
  let conns = [];
  try {
    // the storm arrives at once: the thousand connect while the server is stopped (the kernel
    // completes them into the listen backlog), so the first iteration after SIGCONT finds them
    // all waiting — however slowly this process opened them on a loaded machine
    s.proc.kill('SIGSTOP');
    try {
      conns = await Promise.all(Array.from({ length: 1000 }, () => rawConn(s.port)));
    } finally {
      s.proc.kill('SIGCONT');
    }
    const rs = await Promise.all(conns.map((c, i) => c.get(i % 2 ? '/healthz' : `/v1/counters/storm${i % 10}`)));
    assert.ok(rs.every((st, i) => st === (i % 2 ? 200 : 404)), `statuses: ${[...new Set(rs)]}`);
    const m = (await s.req('GET', '/metrics')).text;
    assert.equal(metric(m, 'strata_http_connections'), 1001, 'the thousand and the one asking');
    assert.ok(metric(m, 'strata_http_accepts_held_total') > 0, 'some waited for a later iteration');
  } finally {
    for (const c of conns) c.sock.destroy();
    await s.stop();
    s.cleanup();
  }
});

test('four hundred streams opened at once all upgrade and all see a change', { timeout: 120000 }, async () => {
  const s = await startStrata();
  const streams = [];
  try {
    const opened = await Promise.all(Array.from({ length: 400 }, () => wsConnect(s.port)));
    for (const ws of opened) {
      assert.equal(ws.status, 101, ws.head);
      const st = { ws, values: [], error: null };
      streams.push(st);
      ws.send({ type: 'subscribe', id: 'c', topic: 'counter', name: 'storm' });
      (async () => {
        try {
          for (;;) {
            const f = await ws.next(60000);
            if (f.op === -1 || f.op === 8) return;
            if (f.json?.type === 'counter' && f.json.name === 'storm') st.values.push(f.json.value);
          }
        } catch (e) { st.error = e; }
      })();
    }
    assert.equal(metric((await s.req('GET', '/metrics')).text, 'strata_ws_connections'), 400);
    // each has its current value (0: none yet) before the change
    await waitStreams(streams, (st) => st.values.length === 1, 'every stream is subscribed');
    assert.ok(streams.every((st) => st.values[0] === 0), 'the current value first');
    assert.equal((await s.req('POST', '/v1/counters/storm/incr')).json.value, 1);
    await waitStreams(streams, (st) => st.values.includes(1), 'every stream sees storm = 1');
  } finally {
    for (const st of streams) st.ws.sock.destroy();
    await s.stop();
    s.cleanup();
  }
});
