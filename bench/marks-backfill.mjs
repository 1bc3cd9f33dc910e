// SPDX-License-Identifier: MIT
// Session 25 (issue 48): node bench/marks-backfill.mjs BIN TEMPLATE [again]; prints one JSON line.
// One start of BIN on a copy of TEMPLATE (an owner of 2,000 objects and 40 small owners from
// before the marks): until strata_marks_backfill_done is 1, then the loop's longest stall.
import { cpSync, rmSync, mkdtempSync } from 'node:fs';
import { startStrata } from '../tests/e2e/lib.mjs';
const [bin, tmpl, again] = process.argv.slice(2);
const dir = mkdtempSync('/tmp/strata-bfbench-');
cpSync(tmpl, dir, { recursive: true });
const metric = (t, n) => Number(t.match(new RegExp(`^${n} ([0-9.e+-]+)`, 'm'))?.[1] ?? -1);
const args = ['--flush-interval', '3600', '--flush-rows', '100000000', '--compact-objects', '1000000'];
const out = {};
for (const round of again ? ['first', 'restart'] : ['first']) {
  const s = await startStrata({ dataDir: dir, bin, args });
  const t0 = Date.now();
  const stall0 = metric((await s.req('GET', '/metrics')).text, 'strata_loop_stall_max_seconds');
  let m;
  for (;;) {
    m = (await s.req('GET', '/metrics')).text;
    if (metric(m, 'strata_marks_backfill_done') === 1 || Date.now() - t0 > 180000) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  out[round] = { done_s: (Date.now() - t0) / 1000, stall0_ms: stall0 * 1e3, stall_ms: metric(m, 'strata_loop_stall_max_seconds') * 1e3,
    backfilled: metric(m, 'strata_marks_backfilled_total'), checked: metric(m, 'strata_marks_backfill_checked_total') };
  await s.stop();
}
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify(out));
