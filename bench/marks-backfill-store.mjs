// SPDX-License-Identifier: MIT
// Session 25 (issue 48): the template for bench/marks-backfill.sh. Usage: BIN=strata node bench/marks-backfill-store.mjs DIR [N]
// Makes a store from before the marks (STRATA_TEST_NO_MARKS=1): owner "big" with N objects
// (one flush each, compaction off), each with rows of 2 conversations, plus 40 small owners.
import { startStrata } from '../tests/e2e/lib.mjs';
const [dir, nArg] = process.argv.slice(2);
const N = Number(nArg || 2000);
const s = await startStrata({ dataDir: dir, bin: process.env.BIN, env: { STRATA_TEST_NO_MARKS: '1' },
  args: ['--flush-interval', '3600', '--flush-rows', '100000000', '--compact-objects', '1000000'] });
const post = (u, c) => s.req('POST', `/v1/users/${u}/messages`, { conversation_id: c, from: u, content: 'x' });
const t0 = Date.now();
for (let i = 0; i < 40; i++) await post(`small${String(i).padStart(2, '0')}`, 'c');
for (let f = 0; f < N; f++) {
  await post('big', `c${f % 500}`);
  await post('big', `d${f % 7}`);
  await s.req('POST', '/v1/admin/flush');
  while ((await s.req('GET', '/v1/users/big/stats')).json.hot_messages !== 0) await new Promise((r) => setTimeout(r, 2));
  if (f % 200 === 0) console.log(f, (Date.now() - t0) / 1000);
}
console.log('objects', (await s.req('GET', '/v1/users/big/stats')).json, (Date.now() - t0) / 1000);
await s.stop();
