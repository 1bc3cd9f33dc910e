// SPDX-License-Identifier: MIT
// Best available (SPEC §4, no orphan seats §4.1) stays exact now that it skips rows by their longest free run: every
// answer on randomly fragmented sections — with cancels and expiries freeing seats between
// searches, and after a restart — equals the plain algorithm (scan every row for q side by
// side, else take runs longest first, the front one among equals), seat for seat and in order.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startStrata } from './lib.mjs';

// The reference: the search as it was (O(quantity x runs)), on a JS copy of the seat states.
// No orphan seats (SPEC §4.1): side by side first in a run that leaves no single free seat
// (its length is q, or q + 2 and more: taken from its start), front row and left first.
// Split over runs, it again leaves none when as many blocks can (see the end of the search).
// ("allow_orphans": true skips both.)
function reference(states, rows, cols, q, allowOrphans = false) {
  if (states.filter((x) => x === 0).length < q) return null;
  for (let r = 0; r < rows && !allowOrphans; r++) {
    for (let c = 0; c < cols;) {
      while (c < cols && states[r * cols + c] !== 0) c++;
      const st = c;
      while (c < cols && states[r * cols + c] === 0) c++;
      const len = c - st;
      if (len === q || len >= q + 2) return Array.from({ length: q }, (_, k) => [r, st + k]);
    }
  }
  for (let r = 0; r < rows; r++) {
    let run = 0;
    for (let c = 0; c < cols; c++) {
      run = states[r * cols + c] === 0 ? run + 1 : 0;
      if (run === q) return Array.from({ length: q }, (_, k) => [r, c - q + 1 + k]);
    }
  }
  const runs = [];
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols;) {
      while (c < cols && states[r * cols + c] !== 0) c++;
      const st = c;
      while (c < cols && states[r * cols + c] === 0) c++;
      if (c > st) runs.push({ r, st, len: c - st });
    }
  }
  const chosen = [];
  const left = runs.map((x) => x.len);
  for (let sum = 0; sum < q;) {
    let best = 0;
    for (let i = 1; i < runs.length; i++) if (left[i] > left[best]) best = i;
    chosen.push(runs[best]);
    sum += runs[best].len;
    left[best] = 0;
  }
  // No orphan (§4.1) among as many blocks: runs holding q + 1 would leave one seat of the last
  // free; swap the last for the front run one shorter, or else a run one longer than the last
  // for the front other run of the last's length (the last then taken whole).
  if (!allowOrphans && chosen.reduce((a, x) => a + x.len, 0) === q + 1) {
    const last = chosen[chosen.length - 1];
    const other = (len) => runs.find((x) => x.len === len && !chosen.includes(x));
    const j = chosen.findLastIndex((x) => x.len === last.len + 1);
    const shorter = other(last.len - 1), same = other(last.len);
    if (shorter) {
      chosen[chosen.length - 1] = shorter;
    } else if (j >= 0 && same) {
      chosen.splice(j, 1);
      chosen.push(same);
    }
  }
  const out = [];
  for (const x of chosen) for (let k = 0; k < x.len && out.length < q; k++) out.push([x.r, x.st + k]);
  return out;
}

const names = (seats) => seats.map(([r, c]) => `${r + 1}-${c + 1}`);

// A small deterministic PRNG, so a failure replays.
function prng(seed) {
  let x = seed >>> 0;
  return () => ((x = (x * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

async function mapStates(s, id, sec) {
  const m = (await s.req('GET', `/v1/events/${id}/sections/${sec}/seats?format=json`)).json;
  return m.seats.flat();
}

describe('best available', () => {
  let s;
  before(async () => { s = await startStrata(); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('best available equals the plain search on fragmented sections, with cancels between', async () => {
    for (const [seed, rows, cols] of [[1, 12, 30], [2, 40, 9], [3, 5, 101], [4, 30, 64]]) {
      const rnd = prng(seed);
      const id = `frag${seed}`;
      assert.equal((await s.req('POST', '/v1/events', { event_id: id, sections: [{ name: 'A', rows, cols, price: 1 }] })).status, 201);
      const states = new Array(rows * cols).fill(0);
      // fragment: explicit bookings of scattered seats at several densities
      for (let b = 0; b < rows; b++) {
        const pick = [];
        for (let i = 0; i < rows * cols && pick.length < 40; i++) if (states[i] === 0 && rnd() < 0.08 + 0.3 * (b % 3 === 0)) pick.push(i);
        if (!pick.length) continue;
        const r = await s.req('POST', `/v1/events/${id}/bookings`, { section: 'A', seats: pick.map((i) => `${Math.floor(i / cols) + 1}-${(i % cols) + 1}`) });
        assert.equal(r.status, 201, r.text);
        for (const i of pick) states[i] = 1;
      }
      const held = [];
      for (let round = 0; round < 60; round++) {
        if (held.length && rnd() < 0.3) { // free seats again: rows change their longest runs
          const [bid, seats] = held.splice(Math.floor(rnd() * held.length), 1)[0];
          assert.equal((await s.req('POST', `/v1/bookings/${bid}/cancel`)).status, 200);
          for (const i of seats) states[i] = 0;
        }
        const q = 1 + Math.floor(rnd() * Math.min(100, cols * 2));
        const ao = rnd() < 0.3;
        const want = reference(states, rows, cols, q, ao);
        const body = ao ? { section: 'A', quantity: q, allow_orphans: true } : { section: 'A', quantity: q };
        const r = await s.req('POST', `/v1/events/${id}/bookings`, body);
        if (!want) { assert.equal(r.status, 409, r.text); continue; }
        assert.equal(r.status, 201, r.text);
        assert.deepEqual(r.json.seats, names(want), `seed ${seed} round ${round} q ${q}`);
        const idx = want.map(([rr, c]) => rr * cols + c);
        for (const i of idx) states[i] = 1;
        held.push([r.json.booking_id, idx]);
      }
      assert.deepEqual(await mapStates(s, id, 'A'), states, 'the seat map is the model');
    }
  });

  // SPEC v4 §4.1: together comes first — side by side in one row, even leaving an orphan, beats
  // a split over rows or runs that would leave none (issue 38, item 8).
  test('best available keeps a group in one row before it avoids an orphan by splitting it', async () => {
    assert.equal((await s.req('POST', '/v1/events', { event_id: 'together', sections: [{ name: 'A', rows: 3, cols: 4, price: 1 }] })).status, 201);
    // row 1: 1-1 taken, a run of 3 (two of them leave 1-4 alone); row 2: 2-1 and 2-3 taken, two
    // single seats (2-2, 2-4: a split taking both leaves no orphan); row 3: 3-1, 3-2 and 3-4 taken
    const r0 = await s.req('POST', '/v1/events/together/bookings', { section: 'A', seats: ['1-1', '2-1', '2-3', '3-1', '3-2', '3-4'] });
    assert.equal(r0.status, 201, r0.text);
    const states = await mapStates(s, 'together', 'A');
    const r = await s.req('POST', '/v1/events/together/bookings', { section: 'A', quantity: 2 });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.json.seats, ['1-2', '1-3'], 'side by side in row 1, though 1-4 is left alone');
    assert.deepEqual(r.json.seats, names(reference(states, 3, 4, 2)));
    // and among rows, one further back that fits without an orphan beats the front one with one
    assert.equal((await s.req('POST', '/v1/events', { event_id: 'together2', sections: [{ name: 'A', rows: 2, cols: 4, price: 1 }] })).status, 201);
    assert.equal((await s.req('POST', '/v1/events/together2/bookings', { section: 'A', seats: ['1-1', '2-1', '2-2'] })).status, 201);
    const r2 = await s.req('POST', '/v1/events/together2/bookings', { section: 'A', quantity: 2 });
    assert.deepEqual(r2.json.seats, ['2-3', '2-4']);
  });

  test('best available on a section with every other seat taken takes the front single seats', async () => {
    const rows = 100, cols = 400;
    assert.equal((await s.req('POST', '/v1/events', { event_id: 'alt', sections: [{ name: 'A', rows, cols, price: 1 }] })).status, 201);
    const states = new Array(rows * cols).fill(0);
    const taken = [];
    for (let i = 1; i < rows * cols; i += 2) taken.push(i);
    // a few longer runs far back: they are taken first, whatever their row
    const free = new Set([rows * cols - 2 * cols + 11, rows * cols - 2 * cols + 13, 57 * cols + 301]);
    const book = taken.filter((i) => !free.has(i));
    for (let k = 0; k < book.length; k += 100) {
      const part = book.slice(k, k + 100);
      const r = await s.req('POST', '/v1/events/alt/bookings', { section: 'A', seats: part.map((i) => `${Math.floor(i / cols) + 1}-${(i % cols) + 1}`) });
      assert.equal(r.status, 201, r.text);
      for (const i of part) states[i] = 1;
    }
    for (const q of [100, 3, 100, 7, 64, 100]) {
      const want = reference(states, rows, cols, q);
      const r = await s.req('POST', '/v1/events/alt/bookings', { section: 'A', quantity: q });
      assert.equal(r.status, 201, r.text);
      assert.deepEqual(r.json.seats, names(want), `q ${q}`);
      for (const [rr, c] of want) states[rr * cols + c] = 1;
    }
  });
});

test('best available stays exact after a restart (longest runs rebuilt from the loaded map)', async () => {
  let s = await startStrata();
  const rows = 20, cols = 50, rnd = prng(9);
  await s.req('POST', '/v1/events', { event_id: 'r', sections: [{ name: 'A', rows, cols, price: 1 }] });
  const states = new Array(rows * cols).fill(0);
  const pick = [];
  for (let i = 0; i < rows * cols; i++) if (rnd() < 0.15 + 0.5 * (i % 7 === 0)) pick.push(i);
  for (let k = 0; k < pick.length; k += 100) {
    const part = pick.slice(k, k + 100);
    const r = await s.req('POST', '/v1/events/r/bookings', { section: 'A', seats: part.map((i) => `${Math.floor(i / cols) + 1}-${(i % cols) + 1}`) });
    assert.equal(r.status, 201, r.text);
    if (k % 200 === 0) assert.equal((await s.req('POST', `/v1/bookings/${r.json.booking_id}/confirm`)).status, 200);
    for (const i of part) states[i] = k % 200 === 0 ? 2 : 1;
  }
  const dir = s.dir;
  await s.stop();
  s = await startStrata({ dataDir: dir });
  assert.deepEqual(await mapStates(s, 'r', 'A'), states);
  for (const q of [30, 50, 51, 100, 2, 100]) {
    const want = reference(states, rows, cols, q);
    const r = await s.req('POST', '/v1/events/r/bookings', { section: 'A', quantity: q });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(r.json.seats, names(want), `q ${q}`);
    for (const [rr, c] of want) states[rr * cols + c] = 1;
  }
  await s.stop();
  s.cleanup();
});
