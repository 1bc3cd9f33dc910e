// SPDX-License-Identifier: MIT
// What the cold cache costs at many users (issue 48: footers were kept up to 4,096 outside
// --cold-cache). Starts build/strata (or $STRATA_BIN) with --cold-cache $CACHE (default 32MiB),
// posts USERS users x 2 conversations x 1 message, flushes all of them, reads every user's
// newest messages once (all cold), and prints RssAnon after cooling and after the reads, with
// the cache's gauges (absent before the byte-bounded cache).
//   node bench/cold-cache-rss.mjs [users]
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStrata } from '../tests/e2e/lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.env.STRATA_BIN || path.join(here, '../build/strata');
const USERS = Number(process.argv[2] || 20000);
const CACHE = process.env.CACHE || '32MiB';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const s = await startStrata({ bin, args: ['--flush-interval', '3600', '--cold-cache', CACHE] });
const req = s.req;
const rssAnon = () => Number(/RssAnon:\s+(\d+)/.exec(readFileSync(`/proc/${s.proc.pid}/status`, 'utf8'))[1]);
const metric = async (name) => {
  const m = new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec((await req('GET', '/metrics')).text);
  return m ? Number(m[1]) : null;
};
async function each(n, width, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) await fn(next++);
  }));
}

const t0 = Date.now();
await each(USERS * 2, 32, async (i) => {
  const u = i >> 1;
  const r = await req('POST', `/v1/users/rss${u}/messages`, { conversation_id: `c${i & 1}`, from: 'x', content: `message ${i} of rss${u}` });
  if (r.status !== 201) throw new Error(`${r.status} ${r.text}`);
});
const tPosted = Date.now();
await req('POST', '/v1/admin/flush');
while ((await metric('strata_flush_passes_total')) === 0) await sleep(100);
while ((await metric('strata_flush_running')) !== 0 || (await metric('strata_flush_pending')) !== 0) await sleep(200);
const tFlushed = Date.now();
const cooled = rssAnon();
await each(USERS, 16, async (u) => {
  const r = await req('GET', `/v1/users/rss${u}/messages?limit=50`);
  if (r.status !== 200 || r.json.messages.length !== 2) throw new Error(`rss${u}: ${r.status} ${r.text}`);
});
const tRead = Date.now();
const read = rssAnon();
const g = {};
for (const n of ['strata_cold_cache_bytes{part="footers"}', 'strata_cold_cache_bytes{part="row_groups"}',
  'strata_cold_cache_entries{part="footers"}', 'strata_cold_cache_entries{part="row_groups"}'])
  g[n] = await metric(n);
console.log(JSON.stringify({ bin, users: USERS, cache: CACHE, post_s: (tPosted - t0) / 1000,
  flush_s: (tFlushed - tPosted) / 1000, read_s: (tRead - tFlushed) / 1000,
  rss_anon_kib_after_cooling: cooled, rss_anon_kib_after_reads: read, ...g }));
await s.stop();
s.cleanup();
