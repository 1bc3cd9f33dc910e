// SPDX-License-Identifier: MIT
// Backups at their edges (SPEC §9): a reservation the backup target cannot take while it stops
// answering, Retry-After on the 503s that pass, snapshots larger than one upload part.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { startStrata, tempDir } from './lib.mjs';
import { waitFor } from './cold-lib.mjs';
import { metric, ok, restore, s3, shipped, stallingProxy, within } from './backup-lib.mjs';

const S3KEYS = ['--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER'];

test('regression: a reservation waiting when the backup target stops answering holds no other acknowledgement', async () => {
  const dir = tempDir('bk-stall');
  let { server, port } = await s3(path.join(dir, 's3'));
  const proxy = await stallingProxy(port);
  const s3args = ['--s3-endpoint', `http://127.0.0.1:${proxy.port}`, ...S3KEYS];
  const url = 's3://bk/stall';
  const s = await startStrata({
    dataDir: path.join(dir, 'd'),
    args: ['--backup-url', url, '--backup-interval', '100', '--cold-timeout-ms', '3000', '--cold-retries', '0',
      '--backup-barrier-timeout-ms', '500', ...s3args],
  });
  try {
    await shipped(s);
    // use up the first reserved range of a sequence exactly: the next number needs a new one
    const first = (await ok(s, 'POST', '/v1/sequences/inv/next')).json;
    let last = first.last;
    while (last < first.last + 100000) last = (await ok(s, 'POST', '/v1/sequences/inv/next', { count: 10000 })).json.last;
    assert.equal(last, first.last + 100000);
    await ok(s, 'POST', '/v1/counters/c/incr', { by: 1 });
    await shipped(s);

    proxy.pause(); // the target stops answering; nothing has failed yet, so barriers are taken
    const resv = within(10000, 'the request needing a new reservation', s.req('POST', '/v1/sequences/inv/next'));
    const during = within(10000, 'an increment sent behind it', s.req('POST', '/v1/counters/c/incr', { by: 1 }));
    const r = await resv;
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.error.code, 'unavailable');
    assert.ok(Number(r.headers['retry-after']) >= 1, `Retry-After: ${r.headers['retry-after']}`);
    const d = await during; // answered within the bound: acknowledged, or refused with the reservation
    assert.ok(d.status === 200 || d.status === 503, d.text);
    if (d.status === 503) assert.equal(d.headers['retry-after'], '1');
    let acked = 0;
    for (let i = 0; i < 20; i++) {
      const c = await within(10000, 'an increment while the target is down', s.req('POST', '/v1/counters/c/incr', { by: 1 }));
      assert.equal(c.status, 200, c.text);
      acked++;
      // the exhausted range is never issued from while its reservation is not in the backup
      const n = await within(10000, 'a sequence number while the target is down', s.req('POST', '/v1/sequences/inv/next'));
      assert.equal(n.status, 503, n.text);
      assert.equal(n.headers['retry-after'], '1', 'a refused reservation passes once the target is back');
    }
    assert.equal(acked, 20);
    assert.equal((await ok(s, 'GET', '/v1/sequences/inv')).json.last, last, 'nothing of a refused request is applied');

    proxy.resume();
    let next;
    await waitFor('the reservation to be taken again', async () => {
      const n = await s.req('POST', '/v1/sequences/inv/next');
      if (n.status === 200) next = n.json;
      return n.status === 200;
    });
    assert.equal(next.first, last + 1);
    for (let i = 0; i < 3; i++) await ok(s, 'POST', '/v1/sequences/inv/next', { count: 5 });
    const issued = (await ok(s, 'GET', '/v1/sequences/inv')).json.last;
    const counted = (await ok(s, 'GET', '/v1/counters/c')).json.value;
    await shipped(s);
    await s.kill9();
    const res = await restore(path.join(dir, 'r'), url, s3args);
    assert.equal(res.code, 0, res.err);
    const rs = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      assert.equal((await ok(rs, 'GET', '/v1/counters/c')).json.value, counted);
      assert.ok((await ok(rs, 'POST', '/v1/sequences/inv/next')).json.first > issued);
    } finally {
      await rs.stop();
    }
  } finally {
    await s.kill9();
    await proxy.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('regression: a reservation the backup never took is not trusted after a restore from it', async () => {
  // the group that raised the reservation failed (503): a restore resumes after what the backup
  // holds, and the numbers issued since are above it too
  const dir = tempDir('bk-ahead');
  const url = `file://${dir}/b`;
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '600000'] });
  try {
    await waitFor('the first snapshot', async () => (await metric(s, 'strata_backup_snapshots_total')) >= 1);
    let last = 0;
    for (let i = 0; i < 25; i++) last = (await ok(s, 'POST', '/v1/sequences/big/next', { count: 10000 })).json.last;
    assert.ok((await s.req('GET', '/healthz')).json.backup_lag_seconds > 0, 'later writes are still waiting to be shipped');
    await s.kill9();
    const res = await restore(path.join(dir, 'r'), url);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      assert.ok((await ok(r, 'POST', '/v1/sequences/big/next')).json.first > last);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    rmSync(dir, { recursive: true, force: true });
  }
});

// About 12 MB of messages that do not compress: a snapshot of several 5 MiB parts.
async function bigMessages(s, n = 48) {
  const sent = [];
  for (let i = 0; i < n; i += 8) {
    const batch = [];
    for (let j = i; j < i + 8 && j < n; j++) {
      const content = randomBytes(192 * 1024).toString('base64');
      batch.push(ok(s, 'POST', '/v1/users/big/messages', { conversation_id: `c${j % 3}`, from: 'a', content }, {}, 201)
        .then((r) => ({ id: r.json.msg_id, content })));
    }
    sent.push(...await Promise.all(batch));
  }
  return sent;
}

async function checkBig(r, sent) {
  const got = new Map();
  for (const m of (await ok(r, 'GET', '/v1/users/big/messages?limit=100')).json.messages) got.set(m.msg_id, m.content);
  assert.equal(got.size, sent.length);
  for (const m of sent) assert.equal(got.get(m.id), m.content);
}

test('a snapshot larger than one part goes up as an S3 multipart upload (a part answered 500 is retried) and restores whole', async () => {
  const dir = tempDir('bk-mp');
  const { server, port } = await s3(path.join(dir, 's3'));
  const proxy = await stallingProxy(port);
  const s3args = ['--s3-endpoint', `http://127.0.0.1:${proxy.port}`, ...S3KEYS];
  const url = 's3://bk/mp';
  const s = await startStrata({
    dataDir: path.join(dir, 'd'),
    args: ['--backup-url', url, '--backup-interval', '100', '--snapshot-interval', '2', '--backup-part-mb', '5', ...s3args],
  });
  try {
    await shipped(s);
    proxy.failOnce(/^PUT \/bk\/mp\/snap\/.*[?&]partNumber=2&/);
    const sent = await bigMessages(s);
    const before = await metric(s, 'strata_backup_snapshots_total');
    await waitFor('a snapshot holding the messages', async () => (await metric(s, 'strata_backup_snapshots_total')) > before, 30000);
    await shipped(s);
    await s.kill9();
    const parts = proxy.requests.filter((q) => /^PUT \/bk\/mp\/snap\/.*[?&]partNumber=2&/.test(q));
    assert.ok(parts.length >= 1, proxy.requests.filter((q) => q.includes('/snap/')).join('\n'));
    assert.ok(proxy.requests.some((q) => /^POST \/bk\/mp\/snap\/.*\?uploads=/.test(q)), 'CreateMultipartUpload');
    assert.ok(proxy.requests.some((q) => /^POST \/bk\/mp\/snap\/.*\?uploadId=/.test(q)), 'CompleteMultipartUpload');
    // the part that got a 500 went again within the same upload: nothing aborted, nothing failed
    const firstUpload = /uploadId=([^&\s]+)/.exec(parts[0])[1];
    assert.equal(parts.filter((q) => q.includes(firstUpload)).length, 2, parts.join('\n'));
    assert.ok(!proxy.requests.some((q) => /^DELETE \/bk\/mp\/snap\/.*\?uploadId=/.test(q)), 'no upload aborted');
    const res = await restore(path.join(dir, 'r'), url, s3args);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      await checkBig(r, sent);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    await proxy.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a snapshot upload whose part fails is aborted, and the next try ships it whole', async () => {
  const dir = tempDir('bk-mpa');
  const { server, port } = await s3(path.join(dir, 's3'));
  const proxy = await stallingProxy(port);
  const s3args = ['--s3-endpoint', `http://127.0.0.1:${proxy.port}`, ...S3KEYS];
  const url = 's3://bk/mpa';
  const s = await startStrata({
    dataDir: path.join(dir, 'd'),
    // no retries: the part's 500 fails the upload
    args: ['--backup-url', url, '--backup-interval', '100', '--snapshot-interval', '2', '--backup-part-mb', '5', '--cold-retries', '0', ...s3args],
  });
  try {
    await shipped(s);
    proxy.failOnce(/^PUT \/bk\/mpa\/snap\/.*[?&]partNumber=2&/);
    const sent = await bigMessages(s);
    const before = await metric(s, 'strata_backup_snapshots_total');
    await waitFor('a snapshot holding the messages', async () => (await metric(s, 'strata_backup_snapshots_total')) > before, 30000);
    await shipped(s);
    assert.ok((await metric(s, 'strata_backup_failures_total')) >= 1, 'the failed upload is counted');
    await s.kill9();
    const aborts = proxy.requests.filter((q) => /^DELETE \/bk\/mpa\/snap\/.*\?uploadId=/.test(q));
    assert.equal(aborts.length, 1, proxy.requests.filter((q) => q.includes('/snap/')).join('\n'));
    const res = await restore(path.join(dir, 'r'), url, s3args);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      await checkBig(r, sent);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    await proxy.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a snapshot larger than one part is streamed to a file:// target and restores whole', async () => {
  const dir = tempDir('bk-mpf');
  const url = `file://${dir}/b`;
  const s = await startStrata({
    dataDir: path.join(dir, 'd'),
    args: ['--backup-url', url, '--backup-interval', '100', '--snapshot-interval', '2', '--backup-part-mb', '5'],
  });
  try {
    await shipped(s);
    const sent = await bigMessages(s);
    const before = await metric(s, 'strata_backup_snapshots_total');
    await waitFor('a snapshot holding the messages', async () => (await metric(s, 'strata_backup_snapshots_total')) > before, 30000);
    await shipped(s);
    await s.kill9();
    const snaps = readdirSync(path.join(dir, 'b', 'snap'), { recursive: true }).filter((f) => f.endsWith('.zst'));
    assert.ok(snaps.some((f) => statSync(path.join(dir, 'b', 'snap', f)).size > 5 * 1024 * 1024), snaps.join());
    assert.ok(!readdirSync(path.join(dir, 'b', 'snap'), { recursive: true }).some((f) => f.includes('.tmp-')), 'no temporary file left');
    const res = await restore(path.join(dir, 'r'), url);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      await checkBig(r, sent);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a backlog past --backup-backlog-mb is dropped for a snapshot: the loss window stays in /healthz until it ships, nothing is missing after', async () => {
  const dir = tempDir('bk-drop');
  let { server, port } = await s3(path.join(dir, 's3'));
  let serving = true; // server is up and not yet closed
  const s3args = ['--s3-endpoint', `http://127.0.0.1:${port}`, ...S3KEYS];
  const url = 's3://bk/drop';
  const s = await startStrata({ dataDir: path.join(dir, 'd'), args: ['--backup-url', url, '--backup-interval', '100', '--backup-backlog-mb', '1', ...s3args] });
  try {
    await shipped(s);
    // the conversation's seq reservation is in the backup: posts while the target is down need no new one
    const sent = [{ id: (await ok(s, 'POST', '/v1/users/big/messages', { conversation_id: 'c', from: 'a', content: 'first' }, {}, 201)).json.msg_id, content: 'first' }];
    await shipped(s);
    serving = false;
    await server.close(); // fails if the SigV4 proxy refused a request
    const since = Date.now();
    for (let i = 0; i < 16; i++) {
      const content = randomBytes(96 * 1024).toString('base64');
      sent.push({ id: (await ok(s, 'POST', '/v1/users/big/messages', { conversation_id: 'c', from: 'a', content }, {}, 201)).json.msg_id, content });
    }
    await waitFor('the backlog to be dropped', async () => (await s.req('GET', '/healthz')).json.reasons.includes('backup_backlog_dropped'));
    await new Promise((r) => setTimeout(r, 300));
    const h = (await s.req('GET', '/healthz')).json;
    assert.equal(h.status, 'ok', 'writes are still safe on the local disk');
    // the loss window counts from the first write the backup does not hold, dropped or not
    assert.ok(h.backup_lag_seconds >= (Date.now() - since) / 1000 - 0.5, JSON.stringify(h));
    await ok(s, 'POST', '/v1/counters/after-drop/incr', { by: 7 });
    ({ server } = await s3(path.join(dir, 's3'), port));
    serving = true;
    await waitFor('the snapshot that holds it', async () => {
      const j = (await s.req('GET', '/healthz')).json;
      return !j.reasons.includes('backup_backlog_dropped') && j.backup_lag_seconds === 0;
    }, 30000);
    await s.kill9();
    const res = await restore(path.join(dir, 'r'), url, s3args);
    assert.equal(res.code, 0, res.err);
    const r = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      await checkBig(r, sent);
      assert.equal((await ok(r, 'GET', '/v1/counters/after-drop')).json.value, 7);
    } finally {
      await r.stop();
    }
  } finally {
    await s.kill9();
    try {
      if (serving) await server.close(); // fails if the SigV4 proxy refused a request
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

// A single node logs a reservation only once the backup holds it (it goes ahead of its group),
// so after a restart every reservation in its store is in the backup: numbers from them are
// issued at once, even with the target down — they used to wait (503) for the first snapshot of
// the new timeline, which for a large store is a whole compact copy and upload.
test('regression: after a restart with the target down, a single node issues numbers from the reservations it holds', async () => {
  const dir = tempDir('bk-restart');
  const { server, port } = await s3(path.join(dir, 's3'));
  const proxy = await stallingProxy(port);
  const s3args = ['--s3-endpoint', `http://127.0.0.1:${proxy.port}`, ...S3KEYS];
  const url = 's3://bk/restart';
  const args = ['--backup-url', url, '--backup-interval', '100', '--cold-timeout-ms', '2000', '--cold-retries', '0', ...s3args];
  let s = await startStrata({ dataDir: path.join(dir, 'd'), args });
  try {
    await shipped(s);
    const a = (await ok(s, 'POST', '/v1/sequences/r/next')).json;
    await ok(s, 'POST', '/v1/users/u/messages', { conversation_id: 'c', from: 'a', content: 'one' }, undefined, 201);
    await shipped(s);
    await s.kill9();
    proxy.pause(); // the new timeline's snapshot cannot go up
    s = await startStrata({ dataDir: path.join(dir, 'd'), args });
    const b = await within(10000, 'a number after the restart', s.req('POST', '/v1/sequences/r/next'));
    assert.equal(b.status, 200, b.text);
    assert.equal(b.json.first, a.last + 1);
    const m = await within(10000, 'a post after the restart', s.req('POST', '/v1/users/u/messages', { conversation_id: 'c', from: 'a', content: 'two' }));
    assert.equal(m.status, 201, m.text);
    assert.equal(m.json.seq, 2);
    proxy.resume();
    await shipped(s);
    const issued = (await ok(s, 'GET', '/v1/sequences/r')).json.last;
    await s.kill9();
    const res = await restore(path.join(dir, 'r'), url, s3args);
    assert.equal(res.code, 0, res.err);
    const rs = await startStrata({ dataDir: path.join(dir, 'r') });
    try {
      assert.ok((await ok(rs, 'POST', '/v1/sequences/r/next')).json.first > issued);
    } finally {
      await rs.stop();
    }
  } finally {
    await s.kill9();
    await proxy.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
