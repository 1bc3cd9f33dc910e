// SPDX-License-Identifier: MIT
// Reading strata's Iceberg tables (SPEC v5 §5.1) with readers we did not write: icebird (tables)
// and avsc (Avro manifests). icebird reads with fetch, so file:// URLs are served here (HEAD with
// content-length, GET with Range), and its Avro "deflate" path is broken (NOTES.md): Avro files
// are handed to it re-encoded with codec "null" (each block inflated, same records and sync).
import { readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { inflateRawSync } from 'node:zlib';
import avro from 'avsc';

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
