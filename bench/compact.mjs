// SPDX-License-Identifier: MIT
// Compaction bench (issue 17): one user after FLUSHES flushes of 5 messages (a simulated week
// of 5-minute flushes is 2,016), with compaction (default --compact-objects 8) and without
// (--compact-objects 1000000), against the same rows flushed once. Objects and bytes in
// storage, rows rewritten per row (write amplification), and the newest-1000 read after a
// restart (footers and row groups fetched cold): median of READS restarts.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const [bin, flushesArg, readsArg] = process.argv.slice(2);
const FLUSHES = Number(flushesArg || 2016), READS = Number(readsArg || 5);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function start(dir, args) {
  const p = spawn(bin, ['--listen', '127.0.0.1:0', '--data-dir', dir, '--flush-interval', '86400', '--flush-rows', '100000000', ...args],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((res, rej) => {
    p.stderr.on('data', (d) => { log += d; const m = /listening on [0-9.]+:(\d+)/.exec(log); if (m) res(Number(m[1])); });
    p.on('exit', (c) => rej(new Error(`exit ${c}: ${log}`)));
  });
  p.removeAllListeners('exit');
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    req: async (m, u, body) => { const r = await fetch(url + u, { method: m, body: body && JSON.stringify(body), headers: { 'content-type': 'application/json' } }); return r.status === 204 ? null : r.json(); },
    metrics: async () => await (await fetch(url + '/metrics')).text(),
    stop: () => new Promise((res) => { p.on('exit', res); p.kill('SIGTERM'); }),
  };
}

const metric = (text, name) => Number(text.split('\n').find((l) => l.startsWith(name + ' '))?.split(' ')[1] ?? 0);
const files = (d) => { try { return readdirSync(d).filter((f) => f.endsWith('.parquet')).map((f) => statSync(path.join(d, f)).size); } catch { return []; } };

async function settle(s) {
  let prev = '';
  for (;;) {
    const m = await s.metrics();
    const cur = [metric(m, 'strata_flush_running'), metric(m, 'strata_compactions_total{result="ok"}'), metric(m, 'strata_cold_objects_deleted_total')].join();
    if (cur === prev && metric(m, 'strata_flush_running') === 0) return m;
    prev = cur;
    await sleep(1500);
  }
}

async function run(mode) {
  const dir = mkdtempSync(path.join(tmpdir(), 'strata-bench-compact-'));
  const args = mode === 'off' ? ['--compact-objects', '1000000'] : mode.startsWith('on') ? ['--compact-objects', mode.slice(2) || '8'] : [];
  let s = await start(dir, args);
  const u = 'week';
  const n = mode === 'single' ? 1 : FLUSHES;
  const per = mode === 'single' ? 5 * FLUSHES : 5;
  let k = 0;
  const t0 = performance.now();
  for (let f = 0; f < n; f++) {
    for (let i = 0; i < per; i += 50)
      await Promise.all(Array.from({ length: Math.min(50, per - i) }, () => s.req('POST', `/v1/users/${u}/messages`, { conversation_id: `c${k % 4}`, from: 'bench', content: `message ${k++} of the week, some text to compress` })));
    await s.req('POST', '/v1/admin/flush');
    while ((await s.req('GET', `/v1/users/${u}/stats`)).hot_messages !== 0) await sleep(1);
  }
  const loadS = (performance.now() - t0) / 1000;
  const m = await settle(s);
  const sizes = files(path.join(dir, 'cold', u));
  const rewritten = metric(m, 'strata_compaction_rows_rewritten_total');
  const compactions = metric(m, 'strata_compactions_total{result="ok"}');
  await s.stop();
  const times = [];
  for (let r = 0; r < READS; r++) {
    s = await start(dir, args);
    const a = performance.now();
    const page = await s.req('GET', `/v1/users/${u}/messages?order=desc&limit=1000`);
    times.push(performance.now() - a);
    if (page.messages.length !== Math.min(1000, k)) throw new Error('short read');
    await s.stop();
  }
  times.sort((x, y) => x - y);
  rmSync(dir, { recursive: true, force: true });
  const bytes = sizes.reduce((x, y) => x + y, 0);
  console.log(`${mode} flushes=${n} rows=${k} objects=${sizes.length} bytes=${bytes} compactions=${compactions} rows_rewritten=${rewritten} write_amplification=${(rewritten / k).toFixed(2)} newest1000_read_ms_median=${times[Math.floor(times.length / 2)].toFixed(2)} load_seconds=${loadS.toFixed(1)}`);
  return { bytes, ms: times[Math.floor(times.length / 2)] };
}

// modes: single (all rows in one flush), on[N] (--compact-objects N, default 8), off
const modes = (process.env.MODES || 'single on off').split(' ');
const res = {};
for (const m of modes) res[m] = await run(m);
if (res.single)
  for (const m of modes.filter((x) => x !== 'single'))
    console.log(`ratio ${m}/single bytes=${(res[m].bytes / res.single.bytes).toFixed(2)} newest1000_read=${(res[m].ms / res.single.ms).toFixed(2)}`);
