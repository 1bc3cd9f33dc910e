// SPDX-License-Identifier: MIT
// By hand, not in CI (issue 48, the rolling upgrade): one data dir, two binaries in turns. NEW
// writes cold files (two flushes of alice, bob's posts in a room's file); then OLD (a binary from
// before the column stats, 6796198^) runs on the same dir a compaction of alice and an erasure of
// bob (which rewrites the room's file, written by NEW). Prints whether each completed; with NEW a
// session-24 binary (stats appended to the file record) OLD's swaps conflict and neither does.
//   OLD=/tmp/pre-stats/build/strata NEW=build/strata node tools/mixver-cold.mjs
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStrata } from '../tests/e2e/lib.mjs';

const OLD = process.env.OLD, NEW = process.env.NEW;
if (!OLD || !NEW) throw new Error('OLD=binary NEW=binary');
const WAIT_S = Number(process.env.WAIT_S || 30);
const dir = mkdtempSync(path.join(os.tmpdir(), 'mixver-'));
const args = ['--flush-interval', '3600', '--table-commit-interval', '1'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const parquet = (d) => {
  let n = 0;
  const walk = (p) => {
    let names;
    try { names = readdirSync(p); } catch { return; }
    for (const x of names) {
      const q = path.join(p, x);
      if (statSync(q).isDirectory()) walk(q);
      else if (x.endsWith('.parquet')) n++;
    }
  };
  walk(d);
  return n;
};
const until = async (what, fn) => {
  const t0 = Date.now();
  while (Date.now() - t0 < WAIT_S * 1000) {
    if (await fn()) return true;
    await sleep(200);
  }
  return false;
};
const metric = async (s, name) => {
  const text = (await s.req('GET', '/metrics')).text;
  return text.split('\n').filter((l) => l.startsWith(name)).join(' | ');
};

const P = async (s, p, b) => {
  const r = await s.req('POST', p, b);
  if (r.status >= 300) throw new Error(`${p}: ${r.status} ${r.text}`);
  return r.json;
};
let s = await startStrata({ dataDir: dir, bin: NEW, args });
try {
  await P(s, '/v1/rooms', { room_id: 'lobby', members: ['bob', 'amy'] });
  for (let i = 0; i < 3; i++) await P(s, '/v1/rooms/lobby/messages', { from: 'bob', content: `bob-${i}` });
  await P(s, '/v1/rooms/lobby/messages', { from: 'amy', content: 'amy-stays' });
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < 3; i++) await P(s, '/v1/users/alice/messages', { conversation_id: 'c', from: 'x', content: `a${round}-${i}` });
    await P(s, '/v1/admin/flush');
    const want = 3 * (round + 1);
    await until('flushed', async () => (await s.req('GET', '/v1/users/alice/stats')).json.cold_messages === want);
  }
  await until('room flushed', async () => parquet(path.join(dir, 'cold', 'shared')) > 0);
  console.log(`NEW ${NEW}: alice has ${parquet(path.join(dir, 'cold', 'alice'))} files, the room ${parquet(path.join(dir, 'cold', 'shared'))}`);
} finally {
  await s.stop();
}

s = await startStrata({ dataDir: dir, bin: OLD, args });
try {
  await P(s, '/v1/admin/compact', { user: 'alice' });
  // done: a compaction counted ok (the files it replaced are held while a snapshot names them)
  const compacted = await until('alice compacted', async () => /result="ok"} [1-9]/.test(await metric(s, 'strata_compactions_total')));
  console.log(`OLD ${OLD}: compaction of alice ${compacted ? 'done' : `NOT done in ${WAIT_S} s`}`);
  console.log(`  ${await metric(s, 'strata_compactions_total')}`);
  const r = await s.req('DELETE', '/v1/users/bob');
  if (r.status !== 202) throw new Error(`DELETE bob: ${r.status} ${r.text}`);
  let status = '';
  const erased = await until('bob erased', async () => {
    status = (await s.req('GET', `/v1/admin/erasures/${r.json.erasure_id}`)).json.status;
    return status === 'done';
  });
  console.log(`OLD: erasure of bob ${erased ? 'done' : `NOT done in ${WAIT_S} s (status ${status})`}`);
  console.log(`  ${await metric(s, 'strata_compactions_total')}`);
  const log = s.log();
  const failed = log.match(/compaction of \S+ failed \([^)]*\)/g) || [];
  console.log(`  OLD's log: ${failed.length} "compaction of ... failed" lines${failed.length ? `, e.g. ${failed[0]}` : ''}`);
} finally {
  await s.stop();
  rmSync(dir, { recursive: true, force: true });
}
