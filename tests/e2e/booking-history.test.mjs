// SPDX-License-Identifier: MIT
// GET /v1/events/{id}/bookings (SPEC v4 §4.2): an event's bookings newest first, by status and
// owner, paged through `next`; with auth on, only an admin sees other subjects' bookings; a data
// dir from before the index (strata-seatgen writes one) is indexed once at start-up.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, sleep, startStrata, tempDir } from './lib.mjs';

const ok = async (s, method, p, body, headers, status = 200) => {
  const r = await s.req(method, p, body, headers);
  assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
  return r.json;
};

async function all(s, q = '', headers) {
  const out = [];
  let cursor = null;
  for (let pages = 0; pages < 100; pages++) {
    const r = await ok(s, 'GET', `/v1/events/gig/bookings?limit=2${q}${cursor ? `&cursor=${cursor}` : ''}`, undefined, headers);
    assert.ok(r.bookings.length <= 2);
    out.push(...r.bookings);
    if (!r.next) return out;
    assert.equal(r.next, r.bookings.at(-1).booking_id);
    cursor = r.next;
  }
  throw new Error('more than 100 pages');
}

test('an event\'s bookings: newest first, by status, paged, every change of a booking indexed', async () => {
  const s = await startStrata();
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', hold_seconds: 3, sections: [{ name: 'A', rows: 2, cols: 10, price: 5 }, { name: 'floor', capacity: 50, price: 2 }] }, {}, 201);
    await ok(s, 'POST', '/v1/events', { event_id: 'other', sections: [{ name: 'A', rows: 1, cols: 5, price: 1 }] }, {}, 201);
    await ok(s, 'POST', '/v1/events/other/bookings', { section: 'A', seats: ['1-1'] }, {}, 201);
    const b = [];
    for (let i = 0; i < 7; i++) {
      const body = i === 6 ? { items: [{ section: 'A', seats: ['2-1'] }, { section: 'floor', quantity: 2 }] } : { section: 'A', seats: [`1-${i + 1}`] };
      b.push(await ok(s, 'POST', '/v1/events/gig/bookings', body, {}, 201));
    }
    const ids = b.map((x) => x.booking_id);
    await ok(s, 'POST', `/v1/bookings/${ids[0]}/confirm`);
    await ok(s, 'POST', `/v1/events/gig/bookings/${ids[1]}/confirm`);
    await ok(s, 'POST', `/v1/bookings/${ids[2]}/cancel`);
    // the others expire after 3 s (1 s left a loaded machine too little for the ten writes
    // before the extends), but for two held longer
    await ok(s, 'POST', `/v1/events/gig/bookings/${ids[5]}/extend`, { seconds: 600 });
    await ok(s, 'POST', `/v1/events/gig/bookings/${ids[6]}/extend`, { seconds: 600 });
    const want = { [ids[0]]: 'sold', [ids[1]]: 'sold', [ids[2]]: 'cancelled', [ids[3]]: 'expired', [ids[4]]: 'expired', [ids[5]]: 'reserved', [ids[6]]: 'reserved' };
    for (let i = 0; i < 300; i++) {
      const st = (await ok(s, 'GET', `/v1/bookings/${ids[3]}`)).status;
      if (st === 'expired' && (await ok(s, 'GET', `/v1/bookings/${ids[4]}`)).status === 'expired') break;
      await sleep(100);
    }
    const every = await all(s);
    assert.deepEqual(every.map((x) => x.booking_id), [...ids].reverse(), 'newest first, this event only');
    assert.deepEqual(Object.fromEntries(every.map((x) => [x.booking_id, x.status])), want);
    for (const x of every) assert.deepEqual(x, await ok(s, 'GET', `/v1/bookings/${x.booking_id}`), 'as GET answers it');
    assert.deepEqual(every[0].items, [{ section: 'A', seats: ['2-1'], quantity: 1 }, { section: 'floor', seats: [], quantity: 2 }]);
    for (const st of ['sold', 'cancelled', 'expired', 'reserved']) {
      const got = await all(s, `&status=${st}`);
      assert.deepEqual(got.map((x) => x.booking_id), [...ids].reverse().filter((id) => want[id] === st), st);
    }
    // one page of everything; a cursor past the oldest: empty; the default limit is 50
    const one = await ok(s, 'GET', '/v1/events/gig/bookings');
    assert.equal(one.bookings.length, 7);
    assert.equal(one.next, null);
    assert.deepEqual(await ok(s, 'GET', `/v1/events/gig/bookings?cursor=${ids[0]}`), { bookings: [], next: null });
    // bad input names what is wrong; an unknown event is 404
    for (const [q, field] of [['status=done', 'status'], ['limit=0', 'limit'], ['limit=1001', 'limit'], ['cursor=abc', 'cursor'], ['cursor=-5', 'cursor'], ['owner=a%20b', 'owner']]) {
      const r = await s.req('GET', `/v1/events/gig/bookings?${q}`);
      assert.equal(r.status, 400, q);
      assert.equal(r.json.error.field, field, q);
    }
    assert.equal((await s.req('GET', '/v1/events/nope/bookings')).status, 404);
    // a restart: the index is in the store
    await s.stop();
    const again = await startStrata({ dataDir: s.dir });
    try {
      assert.deepEqual((await all(again)).map((x) => [x.booking_id, x.status]), every.map((x) => [x.booking_id, x.status]));
    } finally {
      await again.stop();
    }
  } finally {
    if (s.proc.exitCode === null) await s.stop();
  }
});

const SECRET = 'history-secret-history-secret-32';
function token(sub, role) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub, ...(role ? { role } : {}), exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
}

test('with auth on, a subject lists only its own bookings; an admin lists anyone\'s', async () => {
  const s = await startStrata({ args: ['--jwt-secret', SECRET] });
  const as = (sub, role) => ({ Authorization: `Bearer ${token(sub, role)}` });
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', sections: [{ name: 'A', rows: 1, cols: 10, price: 5 }] }, as('root', 'admin'), 201);
    const mine = [];
    for (const [sub, seat] of [['ann', '1-1'], ['bob', '1-2'], ['ann', '1-3']]) {
      const r = await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', seats: [seat] }, as(sub), 201);
      if (sub === 'ann') mine.unshift(r.booking_id);
    }
    assert.deepEqual((await all(s, '', as('ann'))).map((x) => x.booking_id), mine);
    assert.deepEqual((await all(s, '&owner=ann', as('ann'))).map((x) => x.booking_id), mine);
    const r = await s.req('GET', '/v1/events/gig/bookings?owner=bob', undefined, as('ann'));
    assert.equal(r.status, 403);
    assert.equal((await all(s, '', as('root', 'admin'))).length, 3);
    assert.deepEqual((await all(s, '&owner=ann', as('root', 'admin'))).map((x) => x.booking_id), mine);
    assert.equal((await s.req('GET', '/v1/events/gig/bookings')).status, 401);
  } finally {
    await s.stop();
  }
});

test('a data dir from before the index is indexed once at start-up', async () => {
  const dir = tempDir('history-legacy');
  // strata-seatgen (built beside strata) writes bookings straight into a store, as before the index
  const g = spawnSync(path.join(path.dirname(BIN), 'strata-seatgen'), [dir, '40', '10'], { encoding: 'utf8' });
  assert.equal(g.status, 0, g.stderr);
  const s = await startStrata({ dataDir: dir });
  try {
    assert.match(s.log(), /indexed 50 booking\(s\) by event \(once\)/);
    const page = await ok(s, 'GET', '/v1/events/startup/bookings?limit=1000');
    assert.equal(page.bookings.length, 50);
    const got = page.bookings.map((x) => BigInt(x.booking_id));
    assert.deepEqual(got, [...got].sort((x, y) => (x > y ? -1 : x < y ? 1 : 0)), 'newest first');
    assert.equal((await ok(s, 'GET', '/v1/events/startup/bookings?status=sold&limit=1000')).bookings.length, 20);
    assert.equal((await ok(s, 'GET', '/v1/events/startup/bookings?status=reserved&limit=1000')).bookings.length, 10);
    await s.stop();
    const again = await startStrata({ dataDir: dir });
    assert.doesNotMatch(again.log(), /indexed .* booking/, 'once');
    await again.stop();
  } finally {
    if (s.proc.exitCode === null) await s.stop();
  }
});

// A filter that matches few of many bookings never holds the loop (hostile test: an owner's
// listing walked every booking of the event): a page looks at a bounded number of entries, so
// it may hold fewer than `limit`, and following `next` still gives every match exactly once.
test('a rare owner or status among thousands: bounded pages, every match exactly once', async () => {
  const s = await startStrata({ args: ['--jwt-secret', SECRET] });
  const as = (sub, role) => ({ Authorization: `Bearer ${token(sub, role)}` });
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', sections: [{ name: 'floor', capacity: 5000, price: 1 }] }, as('root', 'admin'), 201);
    const rare = [], cancelled = [];
    for (let i = 0; i < 3000; i += 100) {
      const batch = await Promise.all(Array.from({ length: 100 }, (_, j) => ok(s, 'POST', '/v1/events/gig/bookings',
        { section: 'floor', quantity: 1 }, as((i + j) % 1000 === 7 ? 'rare' : 'many'), 201)));
      for (const b of batch) if (b.booking_id && (i + batch.indexOf(b)) % 1000 === 7) rare.push(b.booking_id);
    }
    for (const b of (await ok(s, 'GET', '/v1/events/gig/bookings?limit=3', undefined, as('root', 'admin'))).bookings) {
      await ok(s, 'POST', `/v1/bookings/${b.booking_id}/cancel`, undefined, as('root', 'admin'));
      cancelled.push(b.booking_id);
    }
    const walk = async (q, who) => {
      const got = [];
      let cursor = null, pages = 0;
      for (; pages < 200; pages++) {
        const r = await ok(s, 'GET', `/v1/events/gig/bookings?limit=1000${q}${cursor ? `&cursor=${cursor}` : ''}`, undefined, who);
        got.push(...r.bookings.map((x) => x.booking_id));
        if (!r.next) break;
        cursor = r.next;
      }
      return { got, pages: pages + 1 };
    };
    const byId = (x, y) => (BigInt(x) > BigInt(y) ? -1 : 1);
    let w = await walk('&owner=rare', as('root', 'admin'));
    assert.deepEqual(w.got, [...rare].sort(byId));
    assert.ok(w.pages > 1, 'pages were bounded');
    w = await walk('', as('rare')); // the owner's own listing, the same
    assert.deepEqual(w.got, [...rare].sort(byId));
    w = await walk('&status=cancelled', as('root', 'admin'));
    assert.deepEqual(w.got, cancelled);
    w = await walk('', as('root', 'admin'));
    assert.equal(w.got.length, 3000);
    assert.equal(new Set(w.got).size, 3000);
  } finally {
    await s.stop();
  }
});
