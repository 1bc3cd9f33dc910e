// SPDX-License-Identifier: MIT
// Reading strata's Iceberg tables (SPEC v5 §5.1) with readers we did not write: icebird (tables),
// DuckDB (a data file against its manifest entry's column metrics)
// and avsc (Avro manifests). icebird reads with fetch, so file:// URLs are served here (HEAD with
// content-length, GET with Range), and its Avro "deflate" path is broken (NOTES.md): Avro files
// are handed to it re-encoded with codec "null" (each block inflated, same records and sync).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inflateRawSync } from 'node:zlib';
import avro from 'avsc';
import { duckQuery } from './cold-lib.mjs';
import { sleep } from './lib.mjs';

function readLong(buf, at) {
  let n = 0n, shift = 0n, b;
  do {
    b = buf[at.pos++];
    n |= BigInt(b & 0x7f) << shift;
    shift += 7n;
  } while (b & 0x80);
  return Number((n >> 1n) ^ -(n & 1n));
}
function writeLong(v) {
  let n = (BigInt(v) << 1n) ^ (BigInt(v) >> 63n);
  const out = [];
  do {
    let b = Number(n & 0x7fn);
    n >>= 7n;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return Buffer.from(out);
}
const bytes = (b) => Buffer.concat([writeLong(b.length), b]);

// The newest version of the table whose metadata folder is dir. version-hint.text is a hint, not
// the truth (SPEC v5 §5.1: readers probe upward from it): a commit creates v{N+1}, deletes what
// that version expired (the manifest lists and manifests of snapshots v{N} still names), and only
// then rewrites the hint, so v{hint} may name files that are already gone.
export function newestVersion(dir) {
  let v = Number(readFileSync(path.join(dir, 'version-hint.text'), 'utf8'));
  while (existsSync(path.join(dir, `v${v + 1}.metadata.json`))) v++;
  return v;
}

// The newest metadata document of the table whose metadata folder is dir.
export const newestMetadata = (dir) =>
  JSON.parse(readFileSync(path.join(dir, `v${newestVersion(dir)}.metadata.json`), 'utf8'));

// read() (sync or async) reads a table's newest metadata and the files it names. A commit that
// lands between its reads deletes files the version it read names (ENOENT): it reads again after
// a pause, from the newest version. A file still missing after `tries` reads is named by a
// snapshot the table keeps (a server defect, SPEC v5 §5.1): that ENOENT is thrown.
export async function readSettled(read, { tries = 40, pause = 50 } = {}) {
  for (let i = 1; ; i++) {
    try {
      return await read();
    } catch (e) {
      if (e.code !== 'ENOENT' || i >= tries) throw e;
    }
    await sleep(pause);
  }
}

// The header's metadata map and where its blocks start.
export function avroHeader(buf) {
  if (buf.subarray(0, 4).toString('latin1') !== 'Obj\x01') throw new Error('not an Avro container');
  const at = { pos: 4 };
  const meta = {};
  for (;;) {
    let n = readLong(buf, at);
    if (n === 0) break;
    if (n < 0) { n = -n; readLong(buf, at); }
    for (let i = 0; i < n; i++) {
      const kl = readLong(buf, at);
      const k = buf.subarray(at.pos, at.pos + kl).toString();
      at.pos += kl;
      const vl = readLong(buf, at);
      meta[k] = buf.subarray(at.pos, at.pos + vl);
      at.pos += vl;
    }
  }
  const sync = buf.subarray(at.pos, at.pos + 16);
  return { meta, sync, start: at.pos + 16 };
}

// The same records with codec "null".
export function avroToNull(buf) {
  const { meta, sync, start } = avroHeader(buf);
  if (meta['avro.codec']?.toString() !== 'deflate') return buf;
  const parts = [buf.subarray(0, 4)];
  const keys = Object.keys(meta);
  parts.push(writeLong(keys.length));
  for (const k of keys) parts.push(bytes(Buffer.from(k)), bytes(k === 'avro.codec' ? Buffer.from('null') : meta[k]));
  parts.push(writeLong(0), sync);
  const at = { pos: start };
  while (at.pos < buf.length) {
    const count = readLong(buf, at);
    const size = readLong(buf, at);
    const data = inflateRawSync(buf.subarray(at.pos, at.pos + size));
    at.pos += size + 16;
    parts.push(writeLong(count), writeLong(data.length), data, sync);
  }
  return Buffer.concat(parts);
}

// Every record of an Avro file (avsc, longs as BigInt: snapshot ids pass 2^53).
export function avroRecords(buf) {
  const { meta } = avroHeader(buf);
  const longType = avro.types.LongType.__with({
    fromBuffer: (b) => b.readBigInt64LE(),
    toBuffer: (n) => { const b = Buffer.alloc(8); b.writeBigInt64LE(BigInt(n)); return b; },
    fromJSON: BigInt,
    toJSON: Number,
    isValid: (n) => typeof n === 'bigint',
    compare: (a, b) => (a < b ? -1 : a > b ? 1 : 0),
  });
  const schema = JSON.parse(meta['avro.schema'].toString());
  const type = avro.Type.forSchema(schema, { registry: { long: longType }, wrapUnions: false });
  const body = avroToNull(buf);
  const { start } = avroHeader(body);
  const at = { pos: start };
  const out = [];
  while (at.pos < body.length) {
    const count = readLong(body, at);
    const size = readLong(body, at);
    let tap = body.subarray(at.pos, at.pos + size);
    at.pos += size + 16;
    for (let i = 0; i < count; i++) {
      const r = type.decode(tap, 0);
      out.push(r.value);
      tap = tap.subarray(r.offset);
    }
  }
  return { meta, schema, records: out };
}

// globalThis.fetch serving file:// (Avro re-encoded for icebird); other URLs pass through.
export function serveFiles() {
  const real = globalThis.fetch;
  globalThis.fetch = async (url, init = {}) => {
    const u = String(url);
    if (!u.startsWith('file://')) return real(url, init);
    const p = fileURLToPath(u);
    let body;
    try {
      body = p.endsWith('.avro') ? avroToNull(readFileSync(p)) : readFileSync(p);
    } catch {
      return new Response('not found', { status: 404 });
    }
    if (init.method === 'HEAD') return new Response(null, { status: 200, headers: { 'content-length': String(body.length) } });
    const range = new Headers(init.headers || {}).get('range');
    if (range) {
      const m = /bytes=(\d+)-(\d*)/.exec(range);
      const from = Number(m[1]), to = m[2] ? Number(m[2]) + 1 : body.length;
      return new Response(body.subarray(from, to), { status: 206 });
    }
    return new Response(body, { status: 200 });
  };
  return () => { globalThis.fetch = real; };
}

export const fileSize = (p) => statSync(p).size;

// The columns that keep no metrics at all (text, user ids) and those whose bounds the Parquet
// writer's statistics give (SPEC v5 §5.1; src/tables/metrics.c).
export const NONE = { messages: ['user', 'from', 'content', 'metadata', 'edit_history'], room_messages: ['from', 'content', 'metadata', 'edit_history'], bookings: ['owner', 'items'] };
export const BOUNDED = { messages: ['msg_id', 'timestamp', 'seq'], room_messages: ['msg_id', 'timestamp', 'seq'], bookings: ['booking_id', 'finished_at'] };

// Iceberg's binary single-value serialization of a bound, as text (long and timestamptz: 8 bytes
// little-endian, µs for a timestamp; int: 4; boolean: 1).
function bound(type, b) {
  if (type === 'boolean') { assert.equal(b.length, 1); return b[0] ? 'true' : 'false'; }
  if (type === 'int' || type === 'date') { assert.equal(b.length, 4); return String(b.readInt32LE()); }
  assert.equal(b.length, 8, `${type}: 8 bytes`);
  return b.readBigInt64LE().toString();
}

// Every data file of table t's manifest entries all (with data_file and the manifest's Avro
// schema; m: the table's metadata): its entry's value_counts, null_value_counts,
// lower_bounds and upper_bounds are exactly the rows, nulls, min and max DuckDB reads in that
// Parquet file, for every top-level primitive column that keeps metrics; the NONE columns and
// nested ones have none, strings no bounds, and the BOUNDED columns have bounds.
export async function checkMetrics(t, m, all) {
  const fields = m.schemas.find((x) => x['schema-id'] === m['current-schema-id']).fields;
  const ents = all.filter((e) => e.data_file.content === 0 && e.status !== 2);
  assert.ok(ents.length > 0, `${t}: data files`);
  for (const e of ents) {
    const df = e.data_file;
    const file = fileURLToPath(df.file_path);
    const map = (a) => new Map((a ?? []).map(({ key, value }) => [key, value]));
    const vc = map(df.value_counts), nc = map(df.null_value_counts), lo = map(df.lower_bounds), hi = map(df.upper_bounds);
    const what = (f) => `${t} ${path.basename(file)} ${f.name}`;
    for (const f of fields) {
      if (typeof f.type !== 'string' || NONE[t].includes(f.name)) {
        assert.ok(!vc.has(f.id) && !nc.has(f.id) && !lo.has(f.id) && !hi.has(f.id), `${what(f)}: no metrics`);
        continue;
      }
      const ts = f.type.startsWith('timestamp');
      const v = (fn) => (ts ? `epoch_us(${fn}("${f.name}"))::VARCHAR` : `${fn}("${f.name}")::VARCHAR`);
      const [r] = await duckQuery(`SELECT count(*)::VARCHAR AS n, count("${f.name}")::VARCHAR AS nn, ${v('min')} AS lo, ${v('max')} AS hi FROM read_parquet('${file}')`);
      assert.equal(String(df.record_count), r.n, `${what(f)}: record_count`);
      assert.equal(String(vc.get(f.id)), r.n, `${what(f)}: value_counts`);
      assert.equal(String(nc.get(f.id)), String(BigInt(r.n) - BigInt(r.nn)), `${what(f)}: null_value_counts`);
      if (f.type === 'string' || !BOUNDED[t].includes(f.name)) {
        assert.ok(!lo.has(f.id) && !hi.has(f.id), `${what(f)}: no bounds`);
        continue;
      }
      assert.equal(bound(f.type, lo.get(f.id)), r.lo, `${what(f)}: lower_bounds`);
      assert.equal(bound(f.type, hi.get(f.id)), r.hi, `${what(f)}: upper_bounds`);
    }
  }
  // the manifest schema's maps: arrays of key/value records with Iceberg's field ids
  const sc = JSON.stringify(ents[0].schema);
  for (const [name, id, k, v] of [['value_counts', 109, 119, 120], ['null_value_counts', 110, 121, 122], ['lower_bounds', 125, 126, 127], ['upper_bounds', 128, 129, 130]])
    assert.ok(sc.includes(`{"name":"${name}","type":["null",{"type":"array","items":{"type":"record","name":"k${k}_v${v}","fields":[{"name":"key","type":"int","field-id":${k}},{"name":"value","type":"${id < 125 ? 'long' : 'bytes'}","field-id":${v}}]},"logicalType":"map"}],"default":null,"field-id":${id}}`), `${name} in the manifest schema`);
  return ents.length;
}

// The manifest entries of the current snapshot of the table whose metadata is m (avsc), each
// with its manifest's Avro schema.
export function currentEntries(m) {
  const snap = m.snapshots.find((x) => x['snapshot-id'] === m['current-snapshot-id']);
  const out = [];
  for (const mf of avroRecords(readFileSync(new URL(snap['manifest-list']))).records) {
    const man = avroRecords(readFileSync(new URL(mf.manifest_path)));
    out.push(...man.records.map((e) => ({ ...e, schema: man.schema })));
  }
  return out;
}
