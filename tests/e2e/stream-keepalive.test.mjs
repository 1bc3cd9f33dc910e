// SPDX-License-Identifier: MIT
// Stream keep-alive (SPEC §3: ping every 30 s, a peer silent for 90 s is closed), here with
// --ws-ping-seconds 1: a stream silent for 1 s is pinged, one silent for 3 s is closed (1001), one
// that answers its pings stays, and pings never land inside a frame of a parallel fan-out.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { runStrata, sleep, startStrata, tempDir, waitStreams, wsConnect } from './lib.mjs';

let s;
const open = [];
before(async () => { s = await startStrata({ args: ['--ws-ping-seconds', '1'] }); });
after(async () => {
  for (const ws of open) ws.close();
  await s.stop();
  s.cleanup();
});

const connect = async (opts) => {
  const ws = await wsConnect(s.port, '/v1/stream', {}, opts);
  assert.equal(ws.status, 101);
  open.push(ws);
  return ws;
};

const metric = async (name) => {
  const m = (await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\d+)`, 'm'));
  return m ? Number(m[1]) : 0;
};

test('a client that sends nothing is pinged within ~1 s of silence', async () => {
  const t0 = Date.now();
  const ws = await connect({ pong: false, pings: true });
  const f = await ws.next(4000);
  const took = Date.now() - t0;
  assert.equal(f.op, 9, `a ping, not ${JSON.stringify(f)}`);
  assert.equal(f.text, '', 'an empty ping');
  assert.ok(took >= 800 && took < 2500, `pinged after ${took} ms`);
  ws.close();
});

test('a client that answers pings stays connected and subscribed', async () => {
  const ws = await connect(); // answers pings (the default)
  ws.send({ type: 'subscribe', id: 'k', topic: 'counter', name: 'kept' });
  assert.equal((await ws.next()).json.type, 'subscribed');
  const first = await ws.next();
  assert.equal(first.json.type, 'counter');
  await sleep(5500); // 5 ping intervals, past the 3 s a silent peer gets
  assert.ok(ws.pings.length >= 3, `pinged ${ws.pings.length} times in 5.5 s`);
  assert.equal((await s.req('POST', '/v1/counters/kept/incr', { by: 7 })).status, 200);
  const f = await ws.next(15000);
  assert.equal(f.op, 1, `a live frame, not ${JSON.stringify({ op: f.op, code: f.code, reason: f.reason })}`);
  assert.deepEqual(f.json, { type: 'counter', id: 'k', name: 'kept', value: first.json.value + 7 });
  ws.close();
});

test('a client that never answers is closed (1001) after ~3 s of silence', async () => {
  const t0 = Date.now();
  const ws = await connect({ pong: false });
  const f = await ws.next(10000);
  assert.equal(f.op, 8, `a close frame, not ${JSON.stringify(f)}`);
  assert.equal(f.code, 1001);
  assert.equal((await ws.next(10000)).op, -1, 'then the socket closes');
  const took = Date.now() - t0;
  assert.ok(took >= 2500 && took < 8000, `closed after ${took} ms`);
  assert.ok(ws.pings.length >= 1, `pinged first (${ws.pings.length})`);
});

test('pings under a parallel fan-out never land inside a frame', { timeout: 120000 }, async (t) => {
  const STREAMS = 80; // >= ST__WS_FAN_MIN (64): a batch's frames go out through the parallel send
  const writes = async () => await metric('strata_ws_fanout_writes_total\\{thread="loop"\\}') +
    await metric('strata_ws_fanout_writes_total\\{thread="sender"\\}');
  const writes0 = await writes();
  const streams = [];
  for (let i = 0; i < STREAMS; i++) {
    const st = { ws: await connect(), values: [], error: null };
    st.ws.send({ type: 'subscribe', id: `c${i}`, topic: 'counter', name: 'busy' });
    streams.push(st);
    (async () => {
      for (;;) {
        const f = await st.ws.next(60000);
        if (f.op === -1 && st.closing) return;
        assert.equal(f.op, 1, `a text frame, not ${JSON.stringify({ op: f.op, code: f.code, reason: f.reason })}`);
        assert.ok(f.json, `a whole JSON frame: ${f.text.slice(0, 80)}`);
        if (f.json.type === 'subscribed') continue;
        assert.equal(f.json.type, 'counter', f.text);
        st.values.push(f.json.value);
      }
    })().catch((e) => { st.error = e; });
  }
  const waitFor = (pred, what) => waitStreams(streams, pred, what, 30000);
  await waitFor((st) => st.values.length === 1, 'the first value');
  const pings0 = streams.map((st) => st.ws.pings.length);

  // increments, a few in flight, for 4.5 s: each stream is pinged about every second meanwhile
  let done = 0;
  const end = Date.now() + 4500;
  const incr = async () => {
    while (Date.now() < end) {
      const r = await s.req('POST', '/v1/counters/busy/incr', {});
      assert.equal(r.status, 200, r.text);
      done++;
    }
  };
  await Promise.all([incr(), incr(), incr(), incr()]);
  await waitFor((st) => st.values.at(-1) === done, 'the last value');
  for (const st of streams) {
    assert.deepEqual(st.values, Array.from({ length: done + 1 }, (_, k) => k), 'every value once, in order');
  }
  const pinged = streams.map((st, i) => st.ws.pings.length - pings0[i]);
  const n = await writes() - writes0;
  t.diagnostic(`increments ${done}, parallel writes ${n}, pings per stream ${Math.min(...pinged)}..${Math.max(...pinged)}`);
  assert.ok(n >= STREAMS * 10, `the parallel path was taken: ${n} writes`);
  assert.ok(Math.min(...pinged) >= 2, `every stream was pinged during the fan-out: ${pinged}`);
  for (const st of streams) st.closing = true;
});

test('--ws-ping-seconds must be 1..3600: anything else is refused at start-up (exit 2)', () => {
  const dir = tempDir('wsping');
  for (const [args, env] of [[['--ws-ping-seconds', '0'], {}], [['--ws-ping-seconds', 'soon'], {}],
    [['--ws-ping-seconds', '3601'], {}], [[], { STRATA_WS_PING_SECONDS: '-5' }]]) {
    const r = runStrata(['--listen', '127.0.0.1:0', '--data-dir', dir, ...args],
      { expect: 2, env: { ...process.env, ...env }, timeout: 10000 });
    assert.match(r.stderr, /bad value .* for --ws-ping-seconds \(expected 1\.\.3600\)/);
  }
  rmSync(dir, { recursive: true, force: true });
});
