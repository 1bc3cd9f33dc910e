// SPDX-License-Identifier: MIT
// Holds that run out together expire in slices of bounded work, one per loop turn, instead of
// all in one callback (which stalled the loop for every client, and queued one batch of changes
// large enough to close a subscriber as a slow consumer). The server is paused (SIGSTOP) until
// 10,000 holds are all past due, then resumed: a seat map read as soon as the first change is
// streamed shows part of them freed, not all; in the end every seat is back exactly once on the
// stream, every booking is expired, and the stats equal a recount of the bitmap.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { request, sleep, startStrata, wsConnect } from './lib.mjs';

const ROWS = 100, COLS = 400, HOLDS = 10000, PER = 4, HOLD_SECONDS = 8;
const seatName = (i) => `${Math.floor(i / COLS) + 1}-${(i % COLS) + 1}`;

function available(map) {
  const bytes = Buffer.from(map.seats, 'base64');
  let n = 0;
  for (let i = 0; i < map.rows * map.cols; i++) n += ((bytes[i >> 2] >> ((i & 3) * 2)) & 3) === 0;
  return n;
}

test('hold expiries run in slices: a mass expiry is seen in part, then exactly in full', async () => {
  const s = await startStrata();
  try {
    const ev = { event_id: 'mass', hold_seconds: HOLD_SECONDS, sections: [{ name: 'A', rows: ROWS, cols: COLS, price: 1 }] };
    assert.equal((await s.req('POST', '/v1/events', ev)).status, 201);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    const ids = [];
    let lastExpiry = 0;
    for (let k = 0; k < HOLDS; k += 32) {
      await Promise.all(Array.from({ length: Math.min(32, HOLDS - k) }, async (_, j) => {
        const seats = Array.from({ length: PER }, (_, x) => seatName((k + j) * PER + x));
        const r = await request(s.port, 'POST', '/v1/events/mass/bookings', { section: 'A', seats }, {}, agent);
        assert.equal(r.status, 201, r.text);
        ids.push(r.json.booking_id);
        lastExpiry = Math.max(lastExpiry, r.json.expires_at);
      }));
    }
    agent.destroy();

    const ws = await wsConnect(s.port);
    ws.send({ type: 'subscribe', id: 'm', topic: 'seats', event_id: 'mass' });
    assert.equal((await ws.next()).json.type, 'subscribed');
    const snap = (await ws.next()).json;
    const already = snap.stats?.available ?? snap.event_stats?.available;

    // every hold runs out while the server is paused; resumed, all are due at once
    s.proc.kill('SIGSTOP');
    await sleep(Math.max(0, lastExpiry / 1000 - Date.now()) + 500);
    s.proc.kill('SIGCONT');

    const freed = new Set();
    let mid;
    let last;
    while (freed.size < ROWS * COLS - (already ?? 0) || !mid) {
      const f = await ws.next(15000);
      assert.equal(f.op, 1, `the stream stays open (got ${f.op} ${f.code ?? ''} ${f.reason ?? ''} ${f.error ?? ''}) after ${freed.size} seats, snapshot ${JSON.stringify(snap).slice(0, 300)}`);
      if (f.json.type !== 'seats') continue;
      for (const c of f.json.changes) {
        assert.equal(c.state, 'available');
        assert.ok(!freed.has(c.seat), `${c.seat} freed twice`);
        freed.add(c.seat);
      }
      last = f.json;
      if (!mid) mid = available((await s.req('GET', '/v1/events/mass/sections/A/seats')).json);
    }
    ws.close();
    assert.ok(mid < ROWS * COLS, `a read during the mass expiry sees it in part (${mid} of ${ROWS * COLS} free)`);
    assert.equal(freed.size + (already ?? 0), ROWS * COLS);
    assert.equal(last.stats.available, ROWS * COLS);
    assert.equal(last.stats.reserved, 0);

    const e = (await s.req('GET', '/v1/events/mass')).json;
    assert.deepEqual([e.event_stats.available, e.event_stats.reserved, e.event_stats.sold], [ROWS * COLS, 0, 0]);
    assert.equal(available((await s.req('GET', '/v1/events/mass/sections/A/seats')).json), ROWS * COLS);
    for (const id of ids.filter((_, i) => i % 97 === 0))
      assert.equal((await s.req('GET', `/v1/bookings/${id}`)).json.status, 'expired');
    const m = (await s.req('GET', '/metrics')).text.match(/^strata_bookings_total\{result="expired"\} (\d+)/m);
    assert.equal(Number(m[1]), HOLDS);
  } catch (e) { console.log(s.log().slice(-3000)); throw e; } finally {
    s.proc.kill('SIGCONT');
    await s.stop();
    s.cleanup();
  }
});
