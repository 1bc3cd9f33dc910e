// SPDX-License-Identifier: MIT
// Helpers for the cold-tier tests: find the Parquet objects strata wrote (local directory or
// s3rver's store) and read them with DuckDB.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { sleep } from './lib.mjs';

// Every Parquet file under dir (recursively). A folder that is not there (a local cold tier's
// folder goes with its last object) or goes while it is walked holds none.
export function parquetFiles(dir) {
  const out = [];
  const walk = (d) => {
    let entries;
    try { entries = readdirSync(d, { withFileTypes: true }); } catch (e) {
      if (e.code === 'ENOENT' || e.code === 'ENOTDIR') return;
      throw e;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.parquet') || e.name.endsWith('.parquet._S3rver_object')) out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

// Every file under dir (recursively); a folder or file renamed or removed while it is walked is
// left out.
export function filesUnder(dir) {
  const out = [];
  const walk = (d) => {
    let names;
    try { names = readdirSync(d); } catch { return; }
    for (const n of names) {
      const p = path.join(d, n);
      let st;
      try { st = statSync(p); } catch { continue; } // renamed or removed while we walk
      if (st.isDirectory()) walk(p); else out.push(p);
    }
  };
  walk(dir);
  return out;
}

// The bytes of file f, or null when it is gone (a commit's expiry, a compaction or a flush's
// rename removed it between a walk that listed it and this read): a file that is gone holds
// nothing. Any other error is thrown.
export function readIfThere(f) {
  try {
    return readFileSync(f);
  } catch (e) {
    if (e.code === 'ENOENT') return null;
    throw e;
  }
}

// The files under dir (filesUnder) that hold text, as bytes; a file gone before it is read holds
// nothing (readIfThere).
export const filesHolding = (dir, text) => filesUnder(dir).filter((f) => readIfThere(f)?.includes(text));

let duck;
export async function duckQuery(sql) {
  duck ??= await (await DuckDBInstance.create(':memory:')).connect();
  return (await duck.runAndReadAll(sql)).getRowObjectsJson();
}

// Every row of the files, in msg_id order, with the columns as the API names them.
export async function duckRows(files) {
  const list = files.map((f) => `'${f}'`).join(',');
  const r = await duckQuery(
    `SELECT msg_id::VARCHAR AS msg_id, conversation_id, "from", epoch_us(timestamp) AS ts, seq, content, metadata::VARCHAR AS metadata
     FROM read_parquet([${list}]) ORDER BY msg_id::BIGINT`);
  return r.map((x) => ({ ...x, ts: Number(x.ts), seq: Number(x.seq) }));
}


export async function waitFor(what, fn, ms = 15000) {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// Waits until GET /v1/admin/erasures/{id} on s says the erasure is 'done' (each answer must be a
// 200: the DELETE that named the id made it readable; `headers`: an admin's token where the server
// checks them) for up to `ms`. Resolves the erasure's JSON.
export async function erasureDone(s, id, { ms = 60000, headers } = {}) {
  return waitFor(`the erasure ${id} done`, async () => {
    const r = await s.req('GET', `/v1/admin/erasures/${id}`, undefined, headers);
    assert.equal(r.status, 200, `GET /v1/admin/erasures/${id}: ${r.text}`);
    return r.json.status === 'done' ? r.json : null;
  }, ms);
}
