// SPDX-License-Identifier: MIT
// SPEC §4 over real sockets: events, seat maps, bookings (explicit and best available), the
// booking state machine, expiry (also across a restart), a concurrent race to sellout that must
// never oversell, kill -9 during booking, and bad input.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { request, sleep, startStrata, tempDir } from './lib.mjs';

const ev = (id, sections, extra = {}) => ({ event_id: id, sections, ...extra });

// Decodes the 2bit-base64 map per SPEC: seat i is bits 2*(i%4) of byte i/4, LSB first.
function decodeMap(m) {
  const bytes = Buffer.from(m.seats, 'base64');
  const out = [];
  for (let i = 0; i < m.rows * m.cols; i++) out.push((bytes[i >> 2] >> ((i & 3) * 2)) & 3);
  return out;
}
const seatIndex = (name, cols) => { const [r, c] = name.split('-').map(Number); return (r - 1) * cols + (c - 1); };

async function recount(s, id) {
  const e = (await s.req('GET', `/v1/events/${id}`)).json;
  const total = { available: 0, reserved: 0, sold: 0 };
  for (const [name, sec] of Object.entries(e.sections)) {
    const m = (await s.req('GET', `/v1/events/${id}/sections/${name}/seats`)).json;
    assert.equal(m.encoding, '2bit-base64');
    const states = decodeMap(m);
    const c = { available: 0, reserved: 0, sold: 0 };
    for (const st of states) c[['available', 'reserved', 'sold'][st]]++;
    assert.equal(sec.stats.available, c.available, `${name} available`);
    assert.equal(sec.stats.reserved, c.reserved, `${name} reserved`);
    assert.equal(sec.stats.sold, c.sold, `${name} sold`);
    assert.equal(sec.stats.total, m.rows * m.cols);
    for (const k of Object.keys(total)) total[k] += c[k];
  }
  for (const k of Object.keys(total)) assert.equal(e.event_stats[k], total[k], `event ${k}`);
  assert.equal(e.event_stats.available + e.event_stats.reserved + e.event_stats.sold, e.event_stats.total);
  return e;
}

describe('seats', () => {
  let s;
  before(async () => { s = await startStrata({ args: ['--max-seats', '2000000'] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('create an event, read its state, list events', async () => {
    const r = await s.req('POST', '/v1/events', ev('show1', [{ name: 'A-1', rows: 25, cols: 20, price: 1000 }, { name: 'B', rows: 2, cols: 3, price: 5 }], { name: 'Show' }));
    assert.equal(r.status, 201);
    assert.equal(r.json.event_id, 'show1');
    assert.equal(r.json.name, 'Show');
    assert.deepEqual({ ...r.json.event_stats, updated_at: 0 }, { available: 506, reserved: 0, sold: 0, total: 506, updated_at: 0 });
    assert.deepEqual(r.json.sections['A-1'].stats, { available: 500, reserved: 0, sold: 0, total: 500 });
    assert.equal(r.json.sections['A-1'].price, 1000);
    assert.deepEqual(r.json.sellout, { first_ticket_reserved_at: null, fully_reserved_at: null, duration_seconds: null });
    assert.equal((await s.req('POST', '/v1/events', ev('show1', [{ name: 'A', rows: 1, cols: 1, price: 1 }]))).status, 409);
    await s.req('POST', '/v1/events', ev('show0', [{ name: 'A', rows: 1, cols: 1, price: 1 }]));
    const l1 = await s.req('GET', '/v1/events?limit=1');
    assert.equal(l1.json.events.length, 1);
    assert.equal(l1.json.events[0].event_id, 'show0');
    assert.ok(l1.json.next);
    const l2 = await s.req('GET', `/v1/events?limit=1&cursor=${l1.json.next}`);
    assert.equal(l2.json.events[0].event_id, 'show1');
    assert.equal(typeof l2.json.events[0].event_stats.available, 'number');
    assert.equal((await s.req('GET', '/v1/events/nope')).status, 404);
  });

  test('?route=event:X on POST /v1/events must name the body\'s event (SPEC §10)', async () => {
    const one = [{ name: 'A', rows: 1, cols: 2, price: 1 }];
    for (const route of ['event:other', 'user:routed', 'event:', 'event:routedX', 'routed']) {
      const r = await s.req('POST', `/v1/events?route=${encodeURIComponent(route)}`, ev('routed', one));
      assert.equal(r.status, 400, route);
      assert.equal(r.json.error.code, 'invalid_argument');
    }
    assert.equal((await s.req('GET', '/v1/events/routed')).status, 404, 'nothing was created');
    assert.equal((await s.req('POST', '/v1/events?route=event%3Arouted', ev('routed', one))).status, 201);
    assert.equal((await s.req('POST', '/v1/events?route=event:routed2', ev('routed2', one))).status, 201);
  });

  test('explicit seats: all or nothing, 409 names the taken seats', async () => {
    const a = await s.req('POST', '/v1/events/show1/bookings', { section: 'A-1', seats: ['1-5', '1-6'] });
    assert.equal(a.status, 201);
    assert.deepEqual(a.json.seats, ['1-5', '1-6']);
    assert.equal(a.json.status, 'reserved');
    assert.equal(a.json.total_price, 2000);
    assert.equal(typeof a.json.booking_id, 'string');
    assert.ok(a.json.expires_at - a.json.created_at === 900 * 1e6);
    const b = await s.req('POST', '/v1/events/show1/bookings', { section: 'A-1', seats: ['1-4', '1-5', '1-6', '1-7'] });
    assert.equal(b.status, 409);
    assert.equal(b.json.error.code, 'seats_unavailable');
    assert.deepEqual(b.json.error.seats.sort(), ['1-5', '1-6']);
    const m = (await s.req('GET', '/v1/events/show1/sections/A-1/seats?format=json')).json;
    assert.deepEqual(m.seats[0].slice(2, 8), [0, 0, 1, 1, 0, 0]); // 1-4 and 1-7 untouched
    const e = await recount(s, 'show1');
    assert.equal(e.sellout.first_ticket_reserved_at, a.json.created_at);
  });

  test('best available: side by side in one row, nearest the front, then fewest blocks', async () => {
    await s.req('POST', '/v1/events', ev('ba', [{ name: 'S', rows: 3, cols: 5, price: 1 }]));
    await s.req('POST', '/v1/events/ba/bookings', { section: 'S', seats: ['1-2', '1-4', '2-3'] });
    const r1 = await s.req('POST', '/v1/events/ba/bookings', { section: 'S', quantity: 3 });
    assert.deepEqual(r1.json.seats, ['3-1', '3-2', '3-3']); // rows 1-2 have no run of 3
    const r2 = await s.req('POST', '/v1/events/ba/bookings', { section: 'S', quantity: 2 });
    assert.deepEqual(r2.json.seats, ['2-1', '2-2']);
    // left: 1-1, 1-3, 1-5, 2-4, 2-5, 3-4, 3-5 -> 4 seats: two runs of two
    const r3 = await s.req('POST', '/v1/events/ba/bookings', { section: 'S', quantity: 4 });
    assert.deepEqual(r3.json.seats, ['2-4', '2-5', '3-4', '3-5']);
    const r4 = await s.req('POST', '/v1/events/ba/bookings', { section: 'S', quantity: 4 });
    assert.equal(r4.status, 409);
    await recount(s, 'ba');
  });

  test('state machine: reserved -> sold | cancelled; final states are 409', async () => {
    await s.req('POST', '/v1/events', ev('sm', [{ name: 'S', rows: 2, cols: 2, price: 7 }]));
    const a = (await s.req('POST', '/v1/events/sm/bookings', { section: 'S', quantity: 2 })).json;
    const c = await s.req('POST', `/v1/bookings/${a.booking_id}/confirm`);
    assert.equal(c.status, 200);
    assert.equal(c.json.status, 'sold');
    for (const op of ['confirm', 'cancel']) {
      const r = await s.req('POST', `/v1/bookings/${a.booking_id}/${op}`);
      assert.equal(r.status, 409);
      assert.equal(r.json.error.code, 'conflict');
    }
    const b = (await s.req('POST', '/v1/events/sm/bookings', { section: 'S', quantity: 2 })).json;
    const x = await s.req('POST', `/v1/bookings/${b.booking_id}/cancel`);
    assert.equal(x.json.status, 'cancelled');
    assert.equal((await s.req('POST', `/v1/bookings/${b.booking_id}/confirm`)).status, 409);
    assert.equal((await s.req('POST', `/v1/bookings/${b.booking_id}/cancel`)).status, 409);
    assert.equal((await s.req('GET', `/v1/bookings/${b.booking_id}`)).json.status, 'cancelled');
    const e = await recount(s, 'sm');
    assert.deepEqual([e.event_stats.sold, e.event_stats.available], [2, 2]);
    for (const id of ['0', '99999', 'abc', '-1', '18446744073709551616'])
      assert.equal((await s.req('GET', `/v1/bookings/${id}`)).status, 404, id);
  });

  test('sellout timing: first write wins, fully reserved when available first hits 0', async () => {
    await s.req('POST', '/v1/events', ev('so', [{ name: 'S', rows: 1, cols: 3, price: 1 }]));
    const a = (await s.req('POST', '/v1/events/so/bookings', { section: 'S', quantity: 1 })).json;
    await sleep(20);
    const b = (await s.req('POST', '/v1/events/so/bookings', { section: 'S', quantity: 2 })).json;
    let e = (await s.req('GET', '/v1/events/so')).json;
    assert.equal(e.sellout.first_ticket_reserved_at, a.created_at);
    assert.equal(e.sellout.fully_reserved_at, b.created_at);
    assert.ok(Math.abs(e.sellout.duration_seconds - (b.created_at - a.created_at) / 1e6) < 1e-5);
    await s.req('POST', `/v1/bookings/${b.booking_id}/cancel`);
    await s.req('POST', '/v1/events/so/bookings', { section: 'S', quantity: 2 });
    e = (await s.req('GET', '/v1/events/so')).json;
    assert.equal(e.sellout.fully_reserved_at, b.created_at); // set once
  });

  test('Idempotency-Key on booking: a retry never books twice', async () => {
    await s.req('POST', '/v1/events', ev('idem', [{ name: 'S', rows: 1, cols: 10, price: 1 }]));
    const h = { 'idempotency-key': 'cart-42' };
    const rs = await Promise.all(Array.from({ length: 8 }, () => s.req('POST', '/v1/events/idem/bookings', { section: 'S', quantity: 2 }, h)));
    for (const r of rs) assert.deepEqual(r.json, rs[0].json);
    assert.equal((await s.req('GET', '/v1/events/idem')).json.event_stats.reserved, 2);
  });

  test('bad input', async () => {
    const bad = [
      ['/v1/events', {}],
      ['/v1/events', { event_id: 'x y', sections: [{ name: 'A', rows: 1, cols: 1, price: 1 }] }],
      ['/v1/events', { event_id: 'e1', sections: [] }],
      ['/v1/events', { event_id: 'e1', sections: 'A' }],
      ['/v1/events', { event_id: 'e1', sections: [{ name: 'A', rows: 0, cols: 1, price: 1 }] }],
      ['/v1/events', { event_id: 'e1', sections: [{ name: 'A', rows: 1, cols: 1, price: -1 }] }],
      ['/v1/events', { event_id: 'e1', sections: [{ name: 'A', rows: 1.5, cols: 1, price: 1 }] }],
      ['/v1/events', { event_id: 'e1', sections: [{ name: 'A', rows: 1, cols: 1, price: 1 }, { name: 'A', rows: 1, cols: 1, price: 1 }] }],
      ['/v1/events', { event_id: 'e1', sections: [{ name: 'A', rows: 2000, cols: 2000, price: 1 }] }],
      ['/v1/events', { event_id: 'e1', hold_seconds: 0, sections: [{ name: 'A', rows: 1, cols: 1, price: 1 }] }],
      ['/v1/events', { event_id: 'e1', name: 5, sections: [{ name: 'A', rows: 1, cols: 1, price: 1 }] }],
      ['/v1/events/show1/bookings', { section: 'A-1' }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: ['1-1'], quantity: 1 }],
      ['/v1/events/show1/bookings', { section: 'A-1', quantity: 0 }],
      ['/v1/events/show1/bookings', { section: 'A-1', quantity: 101 }],
      ['/v1/events/show1/bookings', { section: 'A-1', quantity: '2' }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: [] }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: ['0-1'] }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: ['26-1'] }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: ['1-21'] }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: ['1-1', '1-1'] }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: ['a-b'] }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: ['-1-1'] }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: [11] }],
      ['/v1/events/show1/bookings', { section: 'A-1', seats: Array.from({ length: 101 }, (_, i) => `2-${i + 1}`) }],
    ];
    for (const [p, body] of bad) {
      const r = await s.req('POST', p, body);
      assert.equal(r.status, 400, `${p} ${JSON.stringify(body).slice(0, 80)}`);
      assert.equal(r.json.error.code, 'invalid_argument');
    }
    assert.equal((await s.req('POST', '/v1/events/show1/bookings', { section: 'ZZ', quantity: 1 })).status, 404);
    assert.equal((await s.req('POST', '/v1/events/none/bookings', { section: 'A-1', quantity: 1 })).status, 404);
    assert.equal((await s.req('GET', '/v1/events/show1/sections/A-1/seats?format=xml')).status, 400);
    assert.equal((await s.req('GET', '/v1/events/show1/sections/ZZ/seats')).status, 404);
    assert.equal((await s.req('POST', '/v1/events/e1/bookings', '{"section":')).status, 400);
    await recount(s, 'show1');
  });

  test('a 1,000,000-seat event: create, book, map', async () => {
    const r = await s.req('POST', '/v1/events', ev('huge', [{ name: 'F', rows: 1000, cols: 1000, price: 1 }]));
    assert.equal(r.status, 201);
    assert.equal(r.json.event_stats.total, 1000000);
    const b = await s.req('POST', '/v1/events/huge/bookings', { section: 'F', quantity: 100 });
    assert.equal(b.status, 201);
    const m = (await s.req('GET', '/v1/events/huge/sections/F/seats')).json;
    assert.equal(Buffer.from(m.seats, 'base64').length, 250000);
    const over = await s.req('POST', '/v1/events', ev('toobig', [{ name: 'F', rows: 1000, cols: 1000, price: 1 }, { name: 'G', rows: 1000, cols: 1001, price: 1 }]));
    assert.equal(over.status, 400);
  });

  test('race to sellout: many clients, overlapping seats, never oversold', async () => {
    await s.req('POST', '/v1/events', ev('race', [{ name: 'A', rows: 10, cols: 20, price: 3 }, { name: 'B', rows: 5, cols: 8, price: 9 }]));
    const cols = { A: 20, B: 8 }, rows = { A: 10, B: 5 };
    const won = [];
    let seed = 7;
    const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
    const worker = async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = 0; i < 400; i++) {
        const sec = rnd(3) ? 'A' : 'B';
        const n = 1 + rnd(4);
        let body;
        if (rnd(2)) body = { section: sec, quantity: n };
        else {
          const r = 1 + rnd(rows[sec]), c = 1 + rnd(cols[sec] - n + 1);
          body = { section: sec, seats: Array.from({ length: n }, (_, k) => `${r}-${c + k}`) };
        }
        const res = await request(s.port, 'POST', '/v1/events/race/bookings', body, {}, agent);
        if (res.status === 201) {
          won.push(res.json);
          if (rnd(4) === 0) {
            const c = await request(s.port, 'POST', `/v1/bookings/${res.json.booking_id}/${rnd(2) ? 'confirm' : 'cancel'}`, undefined, {}, agent);
            assert.equal(c.status, 200);
            res.json.status = c.json.status;
          }
        } else assert.equal(res.status, 409, res.text);
        if (i % 25 === 0) {
          const e = (await request(s.port, 'GET', '/v1/events/race', undefined, {}, agent)).json;
          for (const sec of Object.values(e.sections))
            assert.equal(sec.stats.available + sec.stats.reserved + sec.stats.sold, sec.stats.total);
          if (e.event_stats.available === 0) break;
        }
      }
      agent.destroy();
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    const held = new Map();
    for (const b of won) {
      if (b.status === 'cancelled') continue;
      for (const seat of b.seats) {
        const k = `${b.section}/${seat}`;
        assert.ok(!held.has(k), `seat ${k} held by two bookings`);
        held.set(k, b.status);
      }
    }
    const e = await recount(s, 'race');
    assert.equal(e.event_stats.reserved + e.event_stats.sold, held.size);
    for (const sec of ['A', 'B']) {
      const states = decodeMap((await s.req('GET', `/v1/events/race/sections/${sec}/seats`)).json);
      for (const [k, st] of held) {
        const [ks, seat] = k.split('/');
        if (ks === sec) assert.equal(states[seatIndex(seat, cols[sec])], st === 'sold' ? 2 : 1, k);
      }
    }
  });
});

describe('seats across restarts', () => {
  test('holds expire on time, also while strata is down; bookings survive kill -9', async () => {
    const dir = tempDir('seats');
    let s = await startStrata({ dataDir: dir });
    await s.req('POST', '/v1/events', ev('exp', [{ name: 'S', rows: 4, cols: 5, price: 1 }], { hold_seconds: 1 }));
    await s.req('POST', '/v1/events', ev('keep', [{ name: 'S', rows: 20, cols: 20, price: 1 }], { hold_seconds: 3600 }));
    const short = (await s.req('POST', '/v1/events/exp/bookings', { section: 'S', quantity: 3 })).json;
    await sleep(1600);
    assert.equal((await s.req('GET', `/v1/bookings/${short.booking_id}`)).json.status, 'expired');
    assert.equal((await s.req('GET', '/v1/events/exp')).json.event_stats.available, 20);
    const down = (await s.req('POST', '/v1/events/exp/bookings', { section: 'S', quantity: 4 })).json;
    // book concurrently, then kill -9 mid-stream
    const acked = [];
    let killed = false;
    // a 201, or a 409 once sold out, ends nothing else; only a connection error after the kill
    // ends a worker
    const worker = async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        for (;;) {
          let r;
          try {
            r = await request(s.port, 'POST', '/v1/events/keep/bookings', { section: 'S', quantity: 1 }, {}, agent);
          } catch (e) {
            if (killed) return;
            throw e;
          }
          if (r.status === 409) return;
          assert.equal(r.status, 201, r.text);
          acked.push(r.json);
        }
      } finally {
        agent.destroy();
      }
    };
    const ws = Promise.allSettled(Array.from({ length: 8 }, worker));
    await sleep(300);
    killed = true;
    await s.kill9();
    for (const w of await ws) if (w.status === 'rejected') throw w.reason;
    assert.ok(acked.length > 0);
    await sleep(1200); // the 1 s hold of `down` runs out while strata is down
    s = await startStrata({ dataDir: dir });
    assert.match(s.log(), /seats: rebuilt 2 event\(s\)/);
    await sleep(100);
    assert.equal((await s.req('GET', `/v1/bookings/${down.booking_id}`)).json.status, 'expired');
    assert.equal((await s.req('GET', '/v1/events/exp')).json.event_stats.available, 20);
    const m = decodeMap((await s.req('GET', '/v1/events/keep/sections/S/seats')).json);
    for (const b of acked) {
      assert.equal((await s.req('GET', `/v1/bookings/${b.booking_id}`)).json.status, 'reserved');
      assert.equal(m[seatIndex(b.seats[0], 20)], 1, b.seats[0]);
    }
    const e = await recount(s, 'keep');
    assert.ok(e.event_stats.reserved >= acked.length);
    await s.stop();
    s.cleanup();
  });
});
