// SPDX-License-Identifier: MIT
// The flush pass (POST /v1/admin/flush, the interval, the hot store at 80 %) runs in slices per
// loop turn (issue 13): requests are answered while it runs, a pass asked for meanwhile runs
// after it, and every user with hot rows is flushed exactly once.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { parseResponses, raw, startStrata } from './lib.mjs';

const metric = async (s, name) => Number((await s.req('GET', '/metrics')).text.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1] ?? 0);
const req = (method, p) => `${method} ${p} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`;

test('regression: the flush pass runs in slices (it scanned every user, counter and conversation in one callback): a request is answered mid-pass, one more pass asked for meanwhile follows, counters keep their values', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600'] });
  const N = 20000;
  let load = '';
  for (let i = 0; i < N; i++) load += req('POST', `/v1/counters/k${i}/incr`);
  const made = parseResponses(await raw(s.port, load, { idleMs: 3000 }));
  assert.equal(made.length, N);
  assert.ok(made.every((r) => r.status === 200), 'every increment answered');
  // pipelined on one connection: the metrics are read right behind the request that starts the
  // pass, and a second pass is asked for while the first still runs
  const out = parseResponses(await raw(s.port, req('POST', '/v1/admin/flush') + req('GET', '/metrics') + req('POST', '/v1/admin/flush')));
  assert.deepEqual(out.map((r) => r.status), [202, 200, 202]);
  assert.ok(Number.isInteger(out[0].json.flushing), out[0].body);
  assert.match(out[1].body, /^strata_flush_passes_total 0$/m, 'the pass is still running when the next request is answered');
  await waitFor('both passes', async () => (await metric(s, 'strata_flush_passes_total')) === 2);
  for (let i = 0; i < N; i += 997) assert.equal((await s.req('GET', `/v1/counters/k${i}`)).json.value, 1, `k${i}`);
  assert.equal((await s.req('POST', '/v1/counters/k5/incr')).json.value, 2);
  await s.stop();
  s.cleanup();
});

test('a flush pass queues every user with hot rows once, and one more pass after posts made during it leaves every message in the files exactly once', async () => {
  // --table-keep 0: objects a compaction replaced go at once instead of being held for kept
  // snapshots, so the files under each user's folder are the ones the manifest names
  const s = await startStrata({ args: ['--flush-interval', '3600', '--table-keep', '0'] });
  const U = 300;
  const want = new Map();
  const post = async (u, content) => {
    const r = await s.req('POST', `/v1/users/${u}/messages`, { conversation_id: `c${content % 3}`, from: 'a', content: `m${content}` });
    assert.equal(r.status, 201, r.text);
    want.get(u).push(r.json.msg_id);
  };
  for (let u = 0; u < U; u++) want.set(`u${u}`, []);
  for (let i = 0; i < 2; i++) await Promise.all([...want.keys()].map((u) => post(u, i)));
  const r = await s.req('POST', '/v1/admin/flush');
  assert.equal(r.status, 202, r.text);
  await waitFor('the pass', async () => (await metric(s, 'strata_flush_passes_total')) === 1);
  await waitFor('every flush', async () => (await metric(s, 'strata_flush_total\\{result="ok"\\}')) === U, 60000);
  // posts while a second pass runs: before or behind its cursor, a third pass takes them
  const during = Promise.all([...want.keys()].filter((_, i) => i % 7 === 0).map((u) => post(u, 2)));
  await s.req('POST', '/v1/admin/flush');
  await during;
  await waitFor('the second pass', async () => (await metric(s, 'strata_flush_passes_total')) === 2);
  await s.req('POST', '/v1/admin/flush');
  await waitFor('the third pass', async () => (await metric(s, 'strata_flush_passes_total')) === 3);
  for (const u of want.keys())
    await waitFor(`${u} flushed`, async () => (await s.req('GET', `/v1/users/${u}/stats`)).json.hot_messages === 0, 60000);
  assert.equal(await metric(s, 'strata_flush_total\\{result="error"\\}'), 0);
  const files = [...want.keys()].flatMap((u) => parquetFiles(path.join(s.dir, 'cold', u)));
  const all = [...want.values()].flat().sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
  assert.deepEqual((await duckRows(files)).map((x) => x.msg_id), all, 'each message in the files once');
  await s.stop();
  s.cleanup();
});

test('a flush of every user holds a bounded queue (it queued a node per hot user at once: a million users held ~90 MB of names) and still flushes every user exactly once', async () => {
  const s = await startStrata({ args: ['--flush-interval', '3600', '--flush-rows', '1000000'] });
  const N = 5000; // over the queue's bound (4,096 owners waiting)
  const post = (u) => {
    const body = JSON.stringify({ conversation_id: 'c', from: 'a', content: `hi ${u}` });
    return `POST /v1/users/u${u}/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  };
  for (let at = 0; at < N; at += 2500) {
    let load = '';
    for (let i = at; i < at + 2500; i++) load += post(i);
    const made = parseResponses(await raw(s.port, load, { idleMs: 3000 }));
    assert.equal(made.length, 2500);
    assert.ok(made.every((r) => r.status === 201), 'every post answered 201');
  }
  assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
  let most = 0;
  for (;;) {
    const m = (await s.req('GET', '/metrics')).text;
    const num = (name) => Number(m.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1] ?? 0);
    most = Math.max(most, num('strata_flush_pending'));
    if (num('strata_flush_passes_total') === 1 && num('strata_flush_pending') === 0 && num('strata_flush_running') === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.ok(most > 1000, `the queue was used (${most} at most)`);
  assert.ok(most <= 4096 + 64, `at most the bound and one page waited at once, not every user (${most})`);
  assert.equal(await metric(s, 'strata_flush_total\\{result="ok"\\}'), N, 'every user flushed once');
  assert.equal(await metric(s, 'strata_flush_total\\{result="error"\\}'), 0);
  // the census of objects walks the file records in pages across ticks: every object once
  await waitFor('the census', async () => (await metric(s, 'strata_cold_objects\\{tier="small"\\}')) === N, 30000);
  // a major compaction of every owner walks them in pages too, never more than the bound queued
  const out = parseResponses(await raw(s.port, req('POST', '/v1/admin/compact') + req('GET', '/metrics')));
  assert.deepEqual(out.map((r) => r.status), [202, 200]);
  const queued = Number(out[1].body.match(/^strata_compactions_pending (\d+)/m)[1]);
  assert.ok(out[0].json.compacting >= 1, out[0].body);
  assert.ok(queued <= 4096 + 256, `at most the bound and one page queued for compaction at once, not every owner (${queued})`);
  await waitFor('the compaction of every owner', async () => (await metric(s, 'strata_compactions_pending')) === 0, 60000);
  assert.equal(await metric(s, 'strata_compactions_total\\{result="error"\\}'), 0);
  for (let i = 0; i < N; i += 977) {
    const st = (await s.req('GET', `/v1/users/u${i}/stats`)).json;
    assert.equal(st.hot_messages, 0, `u${i} cooled`);
    const page = (await s.req('GET', `/v1/users/u${i}/messages?conversation_id=c`)).json;
    assert.deepEqual(page.messages.map((x) => x.content), [`hi ${i}`], `u${i} reads its message back from the cold tier`);
  }
  await s.stop();
  s.cleanup();
});
