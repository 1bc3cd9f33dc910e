// SPDX-License-Identifier: MIT
// Backups and point-in-time restore (SPEC §9): every kind of state written, shipped, the machine
// "lost" (kill -9 and the data dir deleted), `strata restore` into a new dir, started again:
// everything is back. Also --to-time in the middle of a run, an S3 target (s3rver), a target that
// is down for a while, and sequence numbers that must not be reissued although the last writes
// never reached the backup.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { S3rver } from './sigv4-proxy.mjs';
import { test } from 'node:test';
import { freePort, sleep, startStrata, tempDir } from './lib.mjs';
import { waitFor } from './cold-lib.mjs';
import { metric, ok, restore, shipped } from './backup-lib.mjs';

// Writes one of each kind of state; returns what must come back.
async function writeAll(s) {
  const w = {};
  for (let i = 0; i < 5; i++) await ok(s, 'POST', '/v1/counters/visits/incr', { by: 3 });
  for (const m of ['ann', 'bob', 'ann', 'cy']) await ok(s, 'POST', '/v1/counters/people/distinct', { member: m });
  w.seq = (await ok(s, 'POST', '/v1/sequences/orders/next', { count: 7 })).json.last;
  await ok(s, 'POST', '/v1/events', { event_id: 'gig', hold_seconds: 3600, sections: [{ name: 'A', rows: 4, cols: 5, price: 100 }, { name: 'floor', capacity: 10, price: 20 }] }, {}, 201);
  w.held = (await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', seats: ['1-1', '1-2'] }, {}, 201)).json;
  const sold = (await ok(s, 'POST', '/v1/events/gig/bookings', { section: 'A', quantity: 3 }, {}, 201)).json;
  w.sold = (await ok(s, 'POST', `/v1/bookings/${sold.booking_id}/confirm`)).json;
  // the cart (SPEC §4.1): several sections, standing places, extended and changed
  const cart = (await ok(s, 'POST', '/v1/events/gig/bookings', { items: [{ section: 'A', seats: ['4-1'] }, { section: 'floor', quantity: 4 }] }, {}, 201)).json;
  await ok(s, 'POST', `/v1/events/gig/bookings/${cart.booking_id}/extend`, { seconds: 600 });
  w.cart = (await ok(s, 'POST', `/v1/events/gig/bookings/${cart.booking_id}/seats`, { add: ['4-3'] })).json;
  assert.equal(w.cart.expires_at, cart.expires_at + 600e6);
  w.idem = (await ok(s, 'POST', '/v1/counters/idem/incr', { by: 5 }, { 'Idempotency-Key': 'k-1' })).json;
  w.cold = [];
  for (let i = 0; i < 4; i++) w.cold.push((await ok(s, 'POST', '/v1/users/u1/messages', { conversation_id: 'c1', from: 'a', content: `cold ${i}` }, {}, 201)).json);
  await ok(s, 'POST', '/v1/admin/flush', undefined, {}, 202);
  await waitFor('the flush', async () => (await s.req('GET', '/v1/users/u1/stats')).json.cold_messages === 4);
  w.hot = [];
  for (let i = 0; i < 3; i++) w.hot.push((await ok(s, 'POST', '/v1/users/u1/messages', { conversation_id: 'c1', from: 'b', content: `hot ${i}` }, {}, 201)).json);
  w.visits = (await ok(s, 'GET', '/v1/counters/visits')).json;
  w.people = (await ok(s, 'GET', '/v1/counters/people')).json;
  w.event = (await ok(s, 'GET', '/v1/events/gig')).json;
  w.messages = (await ok(s, 'GET', '/v1/users/u1/messages?limit=100')).json.messages;
  w.conv = (await ok(s, 'GET', '/v1/users/u1/conversations/c1')).json;
  return w;
}

async function checkAll(s, w) {
  assert.deepEqual((await ok(s, 'GET', '/v1/counters/visits')).json, w.visits);
  assert.deepEqual((await ok(s, 'GET', '/v1/counters/people')).json, w.people);
  assert.equal((await ok(s, 'POST', '/v1/counters/people/distinct', { member: 'bob' })).json.added, false);
  const ev = (await ok(s, 'GET', '/v1/events/gig')).json;
  assert.deepEqual(ev.event_stats.available, w.event.event_stats.available);
  assert.deepEqual(ev.sections, w.event.sections);
  const held = (await ok(s, 'GET', `/v1/bookings/${w.held.booking_id}`)).json;
  assert.equal(held.status, 'reserved');
  assert.equal(held.expires_at, w.held.expires_at, 'a held booking keeps its expiry');
  assert.deepEqual((await ok(s, 'GET', `/v1/bookings/${w.sold.booking_id}`)).json, w.sold);
  assert.deepEqual((await ok(s, 'GET', `/v1/bookings/${w.cart.booking_id}`)).json, w.cart, 'the cart, extended and changed');
  const again = await ok(s, 'POST', '/v1/counters/idem/incr', { by: 5 }, { 'Idempotency-Key': 'k-1' });
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.deepEqual(again.json, w.idem);
  assert.deepEqual((await ok(s, 'GET', '/v1/users/u1/messages?limit=100')).json.messages, w.messages);
  const stats = (await ok(s, 'GET', '/v1/users/u1/stats')).json;
  assert.equal(stats.cold_messages, 4);
  assert.equal(stats.hot_messages, 3);
  assert.deepEqual((await ok(s, 'GET', '/v1/users/u1/conversations/c1')).json, w.conv);
  // nothing is issued twice: the next sequence number and seq are beyond anything issued
  assert.ok((await ok(s, 'POST', '/v1/sequences/orders/next')).json.first > w.seq);
  const m = (await ok(s, 'POST', '/v1/users/u1/messages', { conversation_id: 'c1', from: 'a', content: 'after' }, {}, 201)).json;
  assert.ok(m.seq > w.hot.at(-1).seq);
  assert.ok(BigInt(m.msg_id) > BigInt(w.hot.at(-1).msg_id));
}

async function lostAndRestored(url, args, check) {
  const dir = tempDir('bk');
  const cold = `file://${dir}/cold`;
  const s = await startStrata({ dataDir: path.join(dir, 'data'), args: ['--cold-url', cold, '--backup-url', url, '--backup-interval', '200', ...args] });
  let r;
  try {
    // reservations (sequences, conversation seqs) are refused until the backup takes them
    await waitFor('the first snapshot', async () => (await metric(s, 'strata_backup_snapshots_total')) >= 1);
    const w = await writeAll(s);
    await shipped(s);
    await s.kill9();
    rmSync(path.join(dir, 'data'), { recursive: true, force: true });
    const res = await restore(path.join(dir, 'restored'), url, args);
    assert.equal(res.code, 0, res.err);
    assert.match(res.out, /restored .* from snapshot snap\/[0-9a-f]+\/.* record\(s\)/);
    r = await startStrata({ dataDir: path.join(dir, 'restored'), args: ['--cold-url', cold] });
    await check(r, w);
  } finally {
    await s.kill9();
    if (r) await r.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('every kind of state survives the loss of the machine (file:// backup)', async () => {
  const bk = tempDir('bk-target');
  try {
    await lostAndRestored(`file://${bk}`, [], checkAll);
  } finally {
    rmSync(bk, { recursive: true, force: true });
  }
});

test('restore refuses a non-empty data dir and a backup with nothing in it', async () => {
  const dir = tempDir('bk');
  try {
    const res = await restore(path.join(dir, 'x'), `file://${dir}/nothing`);
    assert.notEqual(res.code, 0);
    assert.match(res.err, /no backup found at file:\/\/\S*nothing/);
    const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', `file://${dir}/b`] });
    await shipped(s);
    await s.stop();
    const busy = await restore(path.join(dir, 'd'), `file://${dir}/b`);
    assert.notEqual(busy.code, 0);
    assert.match(busy.err, /not empty/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--to-time restores the state as of that moment', async () => {
  const dir = tempDir('bk');
  const url = `file://${dir}/b`;
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100'] });
  try {
    await shipped(s);
    for (let i = 0; i < 3; i++) await ok(s, 'POST', '/v1/counters/t/incr', { by: 1 });
    await sleep(20);
    const mid = Date.now() * 1000;
    await sleep(20);
    for (let i = 0; i < 2; i++) await ok(s, 'POST', '/v1/counters/t/incr', { by: 1 });
    await ok(s, 'POST', '/v1/counters/later/incr', { by: 1 });
    await shipped(s);
    await s.kill9();
    const res = await restore(path.join(dir, 'mid'), url, ['--to-time', String(mid)]);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: path.join(dir, 'mid') });
    try {
      assert.equal((await ok(r, 'GET', '/v1/counters/t')).json.value, 3);
      assert.equal((await r.req('GET', '/v1/counters/later')).status, 404);
    } finally {
      await r.stop();
    }
    const all = await restore(path.join(dir, 'all'), url);
    assert.equal(all.code, 0, all.err);
    const a = await startStrata({ dataDir: path.join(dir, 'all') });
    try {
      assert.equal((await ok(a, 'GET', '/v1/counters/t')).json.value, 5);
    } finally {
      await a.stop();
    }
  } finally {
    await s.kill9();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('regression: sequence numbers issued after the last shipped segment are not reissued after a restore', async () => {
  const dir = tempDir('bk');
  const url = `file://${dir}/b`;
  // segments only every 10 minutes: only the reservation (a barrier) reaches the backup
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '600000'] });
  try {
    await waitFor('the first snapshot', async () => (await metric(s, 'strata_backup_snapshots_total')) >= 1);
    let last = 0;
    for (let i = 0; i < 20; i++) last = (await ok(s, 'POST', '/v1/sequences/inv/next', { count: 50 })).json.last;
    assert.ok((await s.req('GET', '/healthz')).json.backup_lag_seconds > 0, 'later writes are still waiting to be shipped');
    await s.kill9();
    rmSync(path.join(dir, 'd'), { recursive: true, force: true });
    const res = await restore(path.join(dir, 'r'), url);
    assert.equal(res.code, 0, res.err);
    assert.match(res.out, /1 sequence\(s\) resume/);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      assert.ok((await ok(r, 'POST', '/v1/sequences/inv/next')).json.first > last);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    rmSync(dir, { recursive: true, force: true });
  }
});

async function s3(dir, port) {
  // from freePort, outside the ephemeral range: a test restarts it on this port, and meanwhile
  // strata's connections to it could be given that port as their own (lib.mjs's freePort)
  port ??= await freePort();
  const server = new S3rver({ address: '127.0.0.1', port, directory: dir, silent: true, configureBuckets: [{ name: 'bk' }] });
  const addr = await server.run();
  return { server, port: addr.port };
}

test('S3 target (s3rver): every kind of state survives the loss of the machine', async () => {
  const dir = tempDir('bk-s3');
  const { server, port } = await s3(dir);
  try {
    await lostAndRestored('s3://bk/strata/backups', ['--s3-endpoint', `http://127.0.0.1:${port}`, '--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER'], checkAll);
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('S3 target down for a while, then back: nothing is missing from the backup', async () => {
  const dir = tempDir('bk-s3');
  let { server, port } = await s3(path.join(dir, 's3'));
  const s3args = ['--s3-endpoint', `http://127.0.0.1:${port}`, '--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER'];
  const url = 's3://bk/p';
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100', ...s3args] });
  try {
    await shipped(s);
    for (let i = 0; i < 10; i++) await ok(s, 'POST', '/v1/counters/before/incr', { by: 1 });
    await shipped(s);
    await server.close();
    for (let i = 0; i < 25; i++) await ok(s, 'POST', '/v1/counters/during/incr', { by: 2 });
    await waitFor('a failed upload', async () => (await metric(s, 'strata_backup_failures_total')) > 0);
    assert.ok((await s.req('GET', '/healthz')).json.backup_lag_seconds > 0);
    // a new reservation cannot reach the backup: that request is refused, the rest go on
    const refused = await s.req('POST', '/v1/sequences/fresh/next');
    assert.equal(refused.status, 503, refused.text);
    await ok(s, 'POST', '/v1/counters/during/incr', { by: 0 });
    ({ server } = await s3(path.join(dir, 's3'), port));
    await waitFor('the reservation to be taken again', async () => (await s.req('POST', '/v1/sequences/fresh/next')).status === 200);
    for (let i = 0; i < 5; i++) await ok(s, 'POST', '/v1/counters/after/incr', { by: 1 });
    await shipped(s);
    await s.kill9();
    const res = await restore(path.join(dir, 'r'), url, s3args);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      assert.equal((await ok(r, 'GET', '/v1/counters/before')).json.value, 10);
      assert.equal((await ok(r, 'GET', '/v1/counters/during')).json.value, 50);
      assert.equal((await ok(r, 'GET', '/v1/counters/after')).json.value, 5);
      assert.ok((await ok(r, 'POST', '/v1/sequences/fresh/next')).json.first > 1);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a hold that ran out while the machine was lost expires at start; its seats are available again', async () => {
  const dir = tempDir('bk');
  const url = `file://${dir}/b`;
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100'] });
  try {
    await ok(s, 'POST', '/v1/events', { event_id: 'quick', hold_seconds: 1, sections: [{ name: 'A', rows: 1, cols: 4, price: 1 }] }, {}, 201);
    const held = (await ok(s, 'POST', '/v1/events/quick/bookings', { section: 'A', seats: ['1-1'] }, {}, 201)).json;
    await shipped(s);
    await s.kill9();
    const res = await restore(path.join(dir, 'r'), url);
    assert.equal(res.code, 0, res.err);
    await waitFor('the hold to run out', async () => Date.now() * 1000 > held.expires_at + 100000);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      await waitFor('the expiry', async () => (await r.req('GET', `/v1/bookings/${held.booking_id}`)).json.status === 'expired');
      assert.equal((await ok(r, 'GET', `/v1/bookings/${held.booking_id}`)).json.expires_at, held.expires_at);
      assert.equal((await ok(r, 'GET', '/v1/events/quick')).json.event_stats.available, 4);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a damaged segment: the restore keeps what came before it and says where it stopped', async () => {
  const dir = tempDir('bk');
  const url = `file://${dir}/b`;
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100'] });
  try {
    await shipped(s);
    await ok(s, 'POST', '/v1/counters/x/incr', { by: 1 });
    await shipped(s);
    await sleep(150);
    await ok(s, 'POST', '/v1/counters/x/incr', { by: 10 });
    await shipped(s);
    await s.kill9();
    const segDir = path.join(dir, 'b', 'seg', readdirSync(path.join(dir, 'b', 'seg'))[0]);
    const segs = readdirSync(segDir).sort();
    assert.ok(segs.length >= 2, segs.join());
    const lastSeg = path.join(segDir, segs.at(-1));
    const bytes = readFileSync(lastSeg);
    bytes[bytes.length - 3] ^= 0x40;
    writeFileSync(lastSeg, bytes);
    const res = await restore(path.join(dir, 'r'), url);
    assert.equal(res.code, 0, res.err);
    assert.match(res.err, /is damaged: stopping at seq/);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      assert.equal((await ok(r, 'GET', '/v1/counters/x')).json.value, 1);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('regression: a conversation seq issued after the last shipped segment is not reissued after a restore', async () => {
  const dir = tempDir('bk');
  const url = `file://${dir}/b`;
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '600000'] });
  try {
    await waitFor('the first snapshot', async () => (await metric(s, 'strata_backup_snapshots_total')) >= 1);
    let last;
    for (let i = 0; i < 30; i++) last = (await ok(s, 'POST', '/v1/users/u9/messages', { conversation_id: 'talk', from: 'a', content: `m${i}` }, {}, 201)).json;
    const other = (await ok(s, 'POST', '/v1/users/u9/messages', { conversation_id: 'new-in-the-window', from: 'a', content: 'x' }, {}, 201)).json;
    await s.kill9();
    const res = await restore(path.join(dir, 'r'), url);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      const next = (await ok(r, 'POST', '/v1/users/u9/messages', { conversation_id: 'talk', from: 'a', content: 'after' }, {}, 201)).json;
      assert.ok(next.seq > last.seq, `seq ${next.seq} after ${last.seq}`);
      assert.ok(BigInt(next.msg_id) > BigInt(last.msg_id));
      const again = (await ok(r, 'POST', '/v1/users/u9/messages', { conversation_id: 'new-in-the-window', from: 'a', content: 'y' }, {}, 201)).json;
      assert.ok(again.seq > other.seq, `seq ${again.seq} after ${other.seq}`);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('snapshots past --backup-keep and the segments they make useless are pruned; the rest restores', async () => {
  const dir = tempDir('bk');
  const url = `file://${dir}/b`;
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '50', '--snapshot-interval', '1', '--backup-keep', '1'] });
  const files = (sub) => {
    try {
      return readdirSync(path.join(dir, 'b', sub), { recursive: true }).filter((f) => f.endsWith('.zst'));
    } catch {
      return [];
    }
  };
  try {
    let n = 0;
    await waitFor('the first segments', async () => {
      await ok(s, 'POST', '/v1/counters/p/incr', { by: 1 });
      n++;
      return files('seg').length >= 2;
    });
    const early = files('seg');
    await waitFor('three snapshots', async () => {
      await ok(s, 'POST', '/v1/counters/p/incr', { by: 1 });
      n++;
      return (await metric(s, 'strata_backup_snapshots_total')) >= 3;
    });
    await ok(s, 'POST', '/v1/counters/p/incr', { by: 1 });
    n++;
    await shipped(s);
    assert.equal(files('snap').length, 1, files('snap').join());
    // segments shipped before the later snapshots are gone (the kept one holds their records)
    const left = new Set(files('seg'));
    for (const g of early) assert.ok(!left.has(g), `${g} outlived the snapshots that cover it`);
    await s.kill9();
    const res = await restore(path.join(dir, 'r'), url);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      assert.equal((await ok(r, 'GET', '/v1/counters/p')).json.value, n);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    rmSync(dir, { recursive: true, force: true });
  }
});
