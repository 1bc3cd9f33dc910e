// SPDX-License-Identifier: MIT
// Finished bookings go cold (SPEC v4 §4.2, §5 "Kinds"): sold, cancelled and expired bookings
// leave the hot store --booking-hot-seconds after they finished, into
// cold/events/{event}/bookings-….parquet (items a LIST of structs, which DuckDB reads as lists);
// GET by id (with and without the event), the nested routes and the listing answer exactly as
// they did while the bookings were hot, during a flush too; a change of a cold booking is 409;
// compaction merges an event's objects; a kill -9 and a restart keep everything and never reissue
// an id; auth rules hold for cold bookings; the hot store stays flat as bookings finish; a restore
// from the backup reads the cold bookings in place; rebuild-meta makes their manifests again from the
// bucket (one writer's), or names the ones it leaves (several writers').
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { copyFileSync, existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { restore, runAsync, shipped } from './backup-lib.mjs';
import { duckQuery, parquetFiles, waitFor } from './cold-lib.mjs';
import { Group, call } from './cluster-lib.mjs';
import { sleep, startStrata, tempDir } from './lib.mjs';

const ok = async (s, method, p, body, headers, status = 200) => {
  const r = await s.req(method, p, body, headers);
  assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
  return r.json;
};

const metric = async (s, name) => Number((await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1] ?? 0);

// Every page of an event's listing (limit per page), each page checked against its next.
async function all(s, ev, q = '', headers, limit = 2) {
  const out = [];
  let cursor = null;
  for (let pages = 0; pages < 2000; pages++) {
    const r = await ok(s, 'GET', `/v1/events/${ev}/bookings?limit=${limit}${q}${cursor ? `&cursor=${cursor}` : ''}`, undefined, headers);
    assert.ok(r.bookings.length <= limit);
    out.push(...r.bookings);
    if (!r.next) return out;
    cursor = r.next;
  }
  throw new Error('too many pages');
}

const bookingFiles = (s, ev) => {
  const d = path.join(s.dir, 'cold', 'events', ev);
  return existsSync(d) ? parquetFiles(d) : [];
};

// Flushes and waits until `rows` more rows went cold.
async function flush(s, rows, headers) {
  const before = await metric(s, 'strata_flush_rows_total');
  assert.equal((await s.req('POST', '/v1/admin/flush', undefined, headers)).status, 202);
  await waitFor(`${rows} bookings flushed`, async () => (await metric(s, 'strata_flush_rows_total')) >= before + rows);
}

test('finished bookings go cold: Parquet DuckDB reads as lists, reads and listings exact hot and cold, 409 on change, compaction, kill -9', async () => {
  const dir = tempDir('bkcold');
  // --table-keep 0: the objects a compaction replaced go at once (no kept snapshot holds them)
  let s = await startStrata({ dataDir: dir, args: ['--booking-hot-seconds', '0', '--table-keep', '0'] });
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', hold_seconds: 3, sections: [{ name: 'A', rows: 5, cols: 20, price: 5 }, { name: 'floor', capacity: 500, price: 2 }] }, {}, 201);
    await ok(s, 'POST', '/v1/events', { event_id: 'other', sections: [{ name: 'A', rows: 1, cols: 5, price: 1 }] }, {}, 201);
    const ids = [];
    const book = async (body, ev = 'gig') => (await ok(s, 'POST', `/v1/events/${ev}/bookings`, body, {}, 201)).booking_id;
    for (let i = 0; i < 8; i++) ids.push(await book({ section: 'A', seats: [`1-${i + 1}`, `2-${i + 1}`] }));
    ids.push(await book({ items: [{ section: 'A', seats: ['3-1', '3-2'] }, { section: 'floor', quantity: 3 }] }));
    ids.push(await book({ section: 'floor', quantity: 2 }));
    const otherId = await book({ section: 'A', seats: ['1-1'] }, 'other');
    await ok(s, 'POST', `/v1/bookings/${otherId}/confirm`);
    for (const i of [0, 2, 4, 8]) await ok(s, 'POST', `/v1/bookings/${ids[i]}/confirm`);
    for (const i of [1, 5, 9]) await ok(s, 'POST', `/v1/bookings/${ids[i]}/cancel`);
    await sleep(3300); // the other holds (3 s: 1 s left a loaded machine too little for the writes above) run out
    for (const i of [3, 6, 7]) assert.equal((await ok(s, 'GET', `/v1/bookings/${ids[i]}`)).status, 'expired');
    const live = await book({ section: 'A', seats: ['5-1'] }); // stays reserved: hot
    // held long enough to outlast the flush and the reads below on a loaded machine (its first
    // hold would run out during them: read then as expired, not as the hot copy kept here)
    await ok(s, 'POST', `/v1/events/gig/bookings/${live}/extend`, { seconds: 600 });
    const hot = {};
    for (const id of [...ids, live]) hot[id] = await ok(s, 'GET', `/v1/bookings/${id}`);
    const listing = await all(s, 'gig');
    assert.deepEqual(listing.map((b) => b.booking_id), [live, ...ids].sort((a, b) => (BigInt(b) > BigInt(a) ? 1 : -1)));
    const sold = await all(s, 'gig', '&status=sold');
    assert.equal(sold.length, 4);

    // the flush, with listings racing it: each is exact, before, during and after
    let racing = true;
    const racer = (async () => {
      let n = 0;
      while (racing) {
        assert.deepEqual(await all(s, 'gig', '', undefined, 3), listing, 'a listing during the flush');
        n++;
      }
      return n;
    })();
    await flush(s, 11); // gig's 10 and other's 1
    racing = false;
    assert.ok((await racer) >= 1);
    const files = bookingFiles(s, 'gig');
    assert.equal(files.length, 1, 'one object for the event');
    assert.match(path.basename(files[0]), /^bookings-\d+-w[0-9a-f]{16}-\d+\.parquet$/);
    assert.equal(bookingFiles(s, 'other').length, 1);

    // reads: the same as hot, with and without the event; a wrong event is 404
    for (const id of [...ids, live]) {
      assert.deepEqual(await ok(s, 'GET', `/v1/bookings/${id}`), hot[id], `booking ${id} read cold`);
      assert.deepEqual(await ok(s, 'GET', `/v1/events/gig/bookings/${id}`), hot[id]);
      assert.equal((await s.req('GET', `/v1/events/other/bookings/${id}`)).status, 404);
    }
    assert.equal((await s.req('GET', '/v1/bookings/123')).status, 404);
    assert.deepEqual(await all(s, 'gig'), listing);
    assert.deepEqual(await all(s, 'gig', '', undefined, 1000), listing);
    assert.deepEqual(await all(s, 'gig', '&status=sold'), sold);
    assert.deepEqual(await all(s, 'gig', '&status=reserved'), [hot[live]]);
    assert.deepEqual(await all(s, 'gig', '&owner=nobody'), []);
    // a change of a cold booking: 409 with the booking as it is
    for (const op of ['confirm', 'cancel']) {
      const r = await s.req('POST', `/v1/bookings/${ids[0]}/${op}`);
      assert.equal(r.status, 409);
      assert.deepEqual(r.json.error.booking, hot[ids[0]]);
      assert.equal((await s.req('POST', `/v1/events/gig/bookings/${ids[1]}/${op}`)).status, 409);
    }
    assert.equal((await s.req('POST', `/v1/events/gig/bookings/${ids[1]}/extend`, { seconds: 10 })).status, 409);

    // DuckDB reads the columns, items as a list of structs, seats as a list of strings
    const desc = await duckQuery(`DESCRIBE SELECT * FROM read_parquet('${files[0]}')`);
    const type = Object.fromEntries(desc.map((r) => [r.column_name, r.column_type]));
    assert.equal(type.booking_id, 'BIGINT');
    assert.equal(type.items, 'STRUCT(section VARCHAR, seats VARCHAR[], quantity BIGINT)[]');
    assert.equal(type.finished_at, 'TIMESTAMP WITH TIME ZONE');
    const rows = await duckQuery(`SELECT booking_id::VARCHAR AS id, event_id, owner, status, items[1].section AS sec, len(items[1].seats) AS nseats,
      items[1].seats[1] AS seat1, len(items) AS nitems, total_price, epoch_us(created_at) AS created, epoch_us(expires_at) AS expires
      FROM read_parquet('${files[0]}') ORDER BY booking_id`);
    assert.deepEqual(rows.map((r) => r.id), ids);
    for (const r of rows) {
      const h = hot[r.id];
      assert.equal(r.event_id, 'gig');
      assert.equal(r.owner, '');
      assert.equal(r.status, h.status);
      assert.equal(r.sec, h.items[0].section);
      assert.equal(Number(r.nseats), h.items[0].seats.length);
      assert.equal(r.seat1 ?? undefined, h.items[0].seats[0]);
      assert.equal(Number(r.nitems), h.items.length);
      assert.equal(Number(r.total_price), h.total_price);
      assert.equal(Number(r.created), h.created_at);
      assert.equal(Number(r.expires), h.expires_at);
    }

    // more bookings finish: a second object; the listing merges hot and two cold objects
    const more = [];
    for (let i = 0; i < 4; i++) more.push(await book({ section: 'A', seats: [`4-${i + 1}`] }));
    for (const id of more) await ok(s, 'POST', `/v1/bookings/${id}/confirm`);
    const live2 = await book({ section: 'A', seats: ['4-10'] });
    await ok(s, 'POST', `/v1/events/gig/bookings/${live2}/extend`, { seconds: 600 }); // as live above
    for (const id of [...more, live2]) hot[id] = await ok(s, 'GET', `/v1/bookings/${id}`);
    const listing2 = await all(s, 'gig');
    await flush(s, 4);
    assert.equal(bookingFiles(s, 'gig').length, 2);
    assert.deepEqual(await all(s, 'gig'), listing2);
    assert.deepEqual(await all(s, 'gig', '&status=sold', undefined, 3), listing2.filter((b) => b.status === 'sold'));
    assert.equal(listing2.length, 16);

    // a major compaction merges the event's objects into one; reads stay the same
    assert.equal((await s.req('POST', '/v1/admin/compact')).status, 202);
    await waitFor('gig compacted', async () => bookingFiles(s, 'gig').length === 1);
    assert.deepEqual(await all(s, 'gig'), listing2);
    for (const id of [...ids, ...more]) assert.deepEqual(await ok(s, 'GET', `/v1/bookings/${id}`), hot[id]);
    const merged = await duckQuery(`SELECT count(*)::INT AS n, count(DISTINCT booking_id)::INT AS d, sum(len(items))::INT AS it FROM read_parquet('${bookingFiles(s, 'gig')[0]}')`);
    assert.deepEqual(merged[0], { n: 14, d: 14, it: 15 });

    // kill -9 and a restart: the same answers; a new booking's id is above every cold one
    await s.kill9();
    s = await startStrata({ dataDir: dir, args: ['--booking-hot-seconds', '0', '--table-keep', '0'] });
    assert.deepEqual(await all(s, 'gig'), listing2);
    for (const id of [...ids, ...more, live, live2]) assert.deepEqual(await ok(s, 'GET', `/v1/bookings/${id}`), hot[id]);
    assert.equal((await ok(s, 'GET', `/v1/bookings/${otherId}`)).event_id, 'other');
    const next = await book({ section: 'A', seats: ['5-5'] });
    assert.ok(BigInt(next) > BigInt(more.at(-1)));

    // the hot store lost, no backup: rebuild-meta --accept-loss makes the cold bookings'
    // manifests again from the bucket (events are hot state: lost), and they read as before
    await s.stop();
    // and a copy of gig's object, as a crash behind a compaction leaves one: deleted, not counted
    const [gigObject] = bookingFiles(s, 'gig');
    const w = path.basename(gigObject).split('-')[2];
    copyFileSync(gigObject, path.join(path.dirname(gigObject), `bookings-1-${w}-999.parquet`));
    const rbDir = tempDir('bkcold-rb');
    const rb = await runAsync(['rebuild-meta', '--data-dir', rbDir, '--cold-url', `file://${dir}/cold`, '--accept-loss']);
    assert.equal(rb.code, 0, rb.err);
    assert.match(rb.err, /2 cold booking object\(s\) \(15 bookings\) back in their events' manifests/);
    assert.match(rb.err, /repeats bookings of a larger object; it will be deleted/);
    s = await startStrata({ dataDir: rbDir, args: ['--cold-url', `file://${dir}/cold`] });
    await waitFor('the copy deleted', async () => parquetFiles(path.join(dir, 'cold', 'events', 'gig')).length === 1);
    for (const id of [...ids, ...more]) assert.deepEqual(await ok(s, 'GET', `/v1/bookings/${id}`), hot[id]);
    assert.equal((await ok(s, 'GET', `/v1/bookings/${otherId}`)).event_id, 'other');
    assert.equal((await s.req('GET', `/v1/bookings/${live}`)).status, 404, 'a hold was hot: lost with the store');
    await s.stop();
    s.cleanup();
    s = { stop: async () => {}, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
  } finally {
    await s.stop();
    s.cleanup();
  }
});

const SECRET = 'bookcold-secret-bookcold-secret-32';
function token(sub, role) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub, ...(role ? { role } : {}), exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return `${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`;
}

test('with auth on, cold bookings: their owner or an admin reads them; a subject lists only its own', async () => {
  const s = await startStrata({ args: ['--jwt-secret', SECRET, '--booking-hot-seconds', '0'] });
  const as = (sub, role) => ({ Authorization: `Bearer ${token(sub, role)}` });
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', sections: [{ name: 'A', rows: 1, cols: 10, price: 5 }] }, as('root', 'admin'), 201);
    const by = { ann: [], bob: [] };
    for (const [sub, seat] of [['ann', '1-1'], ['bob', '1-2'], ['ann', '1-3'], ['bob', '1-4']]) {
      const r = await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', seats: [seat] }, as(sub), 201);
      await ok(s, 'POST', `/v1/bookings/${r.booking_id}/confirm`, undefined, as(sub));
      by[sub].unshift(r.booking_id);
    }
    const annLive = (await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', seats: ['1-9'] }, as('ann'), 201)).booking_id;
    await flush(s, 4, as('root', 'admin'));
    assert.equal(bookingFiles(s, 'gig').length, 1);
    for (const id of by.bob) {
      assert.equal((await s.req('GET', `/v1/bookings/${id}`, undefined, as('ann'))).status, 403);
      assert.equal((await s.req('GET', `/v1/events/gig/bookings/${id}`, undefined, as('ann'))).status, 403);
      assert.equal((await ok(s, 'GET', `/v1/bookings/${id}`, undefined, as('bob'))).booking_id, id);
      assert.equal((await ok(s, 'GET', `/v1/bookings/${id}`, undefined, as('root', 'admin'))).booking_id, id);
    }
    assert.equal((await s.req('GET', `/v1/bookings/${by.bob[0]}`)).status, 401);
    assert.deepEqual((await all(s, 'gig', '', as('ann'))).map((b) => b.booking_id), [annLive, ...by.ann]);
    assert.deepEqual((await all(s, 'gig', '&owner=bob', as('root', 'admin'))).map((b) => b.booking_id), by.bob);
    assert.equal((await all(s, 'gig', '', as('root', 'admin'))).length, 5);
    assert.equal((await s.req('GET', '/v1/events/gig/bookings?owner=bob', undefined, as('ann'))).status, 403);
  } finally {
    await s.stop();
  }
});

test('the hot store stays flat as bookings finish: 21,000 finished bookings take no more room than 1,000 bookings on hold', async (t) => {
  const s = await startStrata({ args: ['--booking-hot-seconds', '0'] });
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'big', sections: [{ name: 'floor', capacity: 100000, price: 3 }] }, {}, 201);
    // the 1,000-booking case: 1,000 bookings on hold (hot, as they must be) the whole time
    await ok(s, 'POST', '/v1/events', { event_id: 'held', hold_seconds: 3600, sections: [{ name: 'floor', capacity: 1000, price: 3 }] }, {}, 201);
    for (let i = 0; i < 1000; i += 50)
      await Promise.all(Array.from({ length: 50 }, () => ok(s, 'POST', '/v1/events/held/bookings', { section: 'floor', quantity: 1 }, {}, 201)));
    const round = async (n = 1000) => {
      const q = Array.from({ length: n }, (_, i) => i);
      const worker = async () => {
        for (let i = q.pop(); i !== undefined; i = q.pop()) {
          const b = await ok(s, 'POST', '/v1/events/big/bookings', { section: 'floor', quantity: 1 }, {}, 201);
          await ok(s, 'POST', `/v1/bookings/${b.booking_id}/${i % 3 ? 'confirm' : 'cancel'}`);
        }
      };
      await Promise.all(Array.from({ length: 32 }, worker));
      await flush(s, n);
    };
    await round();
    await sleep(500);
    const first = await metric(s, 'strata_hot_bytes');
    for (let r = 1; r < 15; r++) await round();
    await round(6000); // more than one flush takes (4,096 rows): two objects, one after the other
    await sleep(500);
    const last = await metric(s, 'strata_hot_bytes');
    assert.ok(first > 0);
    t.diagnostic(`hot bytes: ${first} with 1,000 finished bookings (and 1,000 held), ${last} with 21,000`);
    assert.ok(last <= first * 1.5, `hot bytes: ${first} after 1,000 finished bookings (and 1,000 held), ${last} after 21,000`);
    assert.equal((await all(s, 'held', '&status=reserved', undefined, 1000)).length, 1000);
    const page = await ok(s, 'GET', '/v1/events/big/bookings?limit=1000');
    assert.equal(page.bookings.length, 1000);
    assert.ok(page.next);
    assert.equal((await ok(s, 'GET', `/v1/bookings/${page.bookings[999].booking_id}`)).booking_id, page.bookings[999].booking_id);
  } finally {
    await s.stop();
    s.cleanup();
  }
});

test('a restore from the backup reads the cold bookings where they are, and the flush goes on', async () => {
  const dir = tempDir('bkcold-restore');
  const cold = `file://${dir}/cold`, url = `file://${dir}/backup`;
  const s = await startStrata({ dataDir: path.join(dir, 'data'), args: ['--cold-url', cold, '--backup-url', url, '--backup-interval', '200', '--booking-hot-seconds', '0'] });
  let r;
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', sections: [{ name: 'A', rows: 2, cols: 10, price: 5 }] }, {}, 201);
    const ids = [];
    for (let i = 1; i <= 6; i++) ids.push((await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', seats: [`1-${i}`] }, {}, 201)).booking_id);
    for (const id of ids.slice(0, 4)) await ok(s, 'POST', `/v1/bookings/${id}/${id === ids[1] ? 'cancel' : 'confirm'}`);
    await flush(s, 4);
    const want = {};
    for (const id of ids) want[id] = await ok(s, 'GET', `/v1/bookings/${id}`);
    const listing = await all(s, 'gig');
    await shipped(s);
    await s.kill9();
    rmSync(path.join(dir, 'data'), { recursive: true, force: true });
    const res = await restore(path.join(dir, 'restored'), url, ['--cold-url', cold]);
    assert.equal(res.code, 0, res.err);
    r = await startStrata({ dataDir: path.join(dir, 'restored'), args: ['--cold-url', cold, '--booking-hot-seconds', '0'] });
    assert.deepEqual(await all(r, 'gig'), listing);
    for (const id of ids) assert.deepEqual(await ok(r, 'GET', `/v1/bookings/${id}`), want[id]);
    // the restored node flushes on under its own writer incarnation, beside the old objects
    await ok(r, 'POST', `/v1/bookings/${ids[4]}/confirm`);
    await flush(r, 1);
    const files = parquetFiles(path.join(dir, 'cold', 'events', 'gig'));
    assert.equal(files.length, 2);
    assert.notEqual(path.basename(files[0]).split('-')[2], path.basename(files[1]).split('-')[2], 'two writers');
    assert.equal((await ok(r, 'GET', `/v1/bookings/${ids[4]}`)).status, 'sold');
    assert.equal((await all(r, 'gig')).length, 6);
    // rebuild-meta from the bucket alone: two writers' objects (the node and its restored copy),
    // so which were the lost store's cannot be told; it names them and leaves them alone
    await r.stop();
    const rb = await runAsync(['rebuild-meta', '--data-dir', path.join(dir, 'rb'), '--cold-url', cold, '--accept-loss']);
    assert.equal(rb.code, 0, rb.err);
    assert.match(rb.err, /cold bookings of several writers/);
    assert.match(rb.err, /0 cold booking object\(s\) \(0 bookings\) back in their events' manifests; 2 of other writers left alone/);
    assert.equal(parquetFiles(path.join(dir, 'cold', 'events', 'gig')).length, 2, 'left where they are');
  } finally {
    await s.kill9();
    if (r) await r.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bookings that finish out of order make objects overlapping in ids: listings stay exact and paging ends, filters that match few included', async () => {
  const s = await startStrata({ args: ['--jwt-secret', SECRET, '--booking-hot-seconds', '0'] });
  const as = (sub, role) => ({ Authorization: `Bearer ${token(sub, role)}` });
  const admin = as('root', 'admin');
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'gig', sections: [{ name: 'floor', capacity: 10000, price: 1 }] }, admin, 201);
    const ids = [];
    for (let i = 0; i < 6000; i += 100) {
      const batch = await Promise.all(Array.from({ length: 100 }, (_, j) => ok(s, 'POST', '/v1/events/gig/bookings',
        { section: 'floor', quantity: 1 }, as((i + j) % 401 === 5 ? 'rare' : 'many'), 201)));
      ids.push(...batch.map((b, j) => ({ id: b.booking_id, owner: (i + j) % 401 === 5 ? 'rare' : 'many' })));
    }
    // finished in a shuffled order, over three flushes: every object spans the whole id range, in
    // two row groups (1,024 rows at most), so a page's budget (2,048 rows) ends among them
    let seed = 7;
    const order = ids.map((x) => x).sort(() => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5);
    for (let r = 0; r < 3; r++) {
      const part = order.slice(r * 2000, (r + 1) * 2000);
      for (let i = 0; i < part.length; i += 50)
        await Promise.all(part.slice(i, i + 50).map((x, k) => ok(s, 'POST', `/v1/bookings/${x.id}/${(i + k) % 4 ? 'confirm' : 'cancel'}`, undefined, admin)));
      await flush(s, 2000, admin);
    }
    assert.equal(bookingFiles(s, 'gig').length, 3);
    const desc = ids.map((x) => x.id).sort((a, b) => (BigInt(b) > BigInt(a) ? 1 : -1));
    const rare = ids.filter((x) => x.owner === 'rare').map((x) => x.id).sort((a, b) => (BigInt(b) > BigInt(a) ? 1 : -1));
    assert.ok(rare.length >= 7);
    assert.deepEqual((await all(s, 'gig', '', admin, 1000)).map((b) => b.booking_id), desc);
    assert.deepEqual((await all(s, 'gig', '', admin, 7)).map((b) => b.booking_id), desc);
    assert.deepEqual((await all(s, 'gig', '&owner=rare', admin, 5)).map((b) => b.booking_id), rare);
    assert.deepEqual((await all(s, 'gig', '', as('rare'), 3)).map((b) => b.booking_id), rare);
    const sold = await all(s, 'gig', '&status=cancelled&owner=rare', admin, 2);
    assert.ok(sold.every((b) => b.status === 'cancelled' && rare.includes(b.booking_id)));
    const cancelled = (await all(s, 'gig', '&status=cancelled', admin, 1000)).length;
    assert.equal(cancelled, 1500);
  } finally {
    await s.stop();
  }
});

test('a replicated group: the leader flushes finished bookings, every member and the next leader read them', async () => {
  const g = new Group(3, ['--booking-hot-seconds', '0', '--flush-interval', '3600']);
  try {
    await g.init();
    for (const id of [1, 2, 3])
      await waitFor(`member ${id} to be healthy`, async () => (await call(g.port(id), 'GET', '/healthz')).status === 200);
    const req = async (method, p, body, status = 200) => {
      const r = await g.req(method, p, body);
      assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
      return r.json;
    };
    await req('POST', '/v1/events', { event_id: 'gig', sections: [{ name: 'A', rows: 1, cols: 10, price: 5 }] }, 201);
    const ids = [];
    for (let i = 1; i <= 5; i++) ids.push((await req('POST', '/v1/events/gig/bookings', { section: 'A', seats: [`1-${i}`] }, 201)).booking_id);
    for (const id of ids.slice(0, 4)) await req('POST', `/v1/bookings/${id}/${id === ids[0] ? 'cancel' : 'confirm'}`, {});
    const want = {};
    for (const id of ids) want[id] = await req('GET', `/v1/bookings/${id}`);
    const listing = (await req('GET', '/v1/events/gig/bookings?limit=100')).bookings;
    await waitFor('the flush', async () => {
      await g.req('POST', '/v1/admin/flush', {});
      return parquetFiles(g.cold).some((f) => f.includes(`${path.sep}events${path.sep}gig${path.sep}bookings-`));
    });
    for (const id of [1, 2, 3]) { // through every member (a follower answers or sends to its leader)
      for (const bid of ids) assert.deepEqual(await waitFor(`member ${id} reads ${bid}`, async () => {
        const r = await g.req('GET', `/v1/bookings/${bid}`, undefined, { via: id });
        return r.status === 200 ? r.json : null;
      }), want[bid]);
    }
    // the leader dies: the next one reads the cold bookings from the shared store
    const l1 = await g.leader();
    g.members.get(l1).proc.kill('SIGKILL');
    await g.members.get(l1).exited;
    g.members.delete(l1);
    assert.notEqual(await g.leader(), l1);
    assert.deepEqual((await req('GET', '/v1/events/gig/bookings?limit=100')).bookings, listing);
    for (const bid of ids) assert.deepEqual(await req('GET', `/v1/bookings/${bid}`), want[bid]);
    assert.equal((await g.req('POST', `/v1/bookings/${ids[1]}/cancel`, {})).status, 409);
    await g.stopAll();
  } finally {
    g.kill();
    g.cleanup();
  }
});
