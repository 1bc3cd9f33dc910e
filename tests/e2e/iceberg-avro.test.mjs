// SPDX-License-Identifier: MIT
// Two Avro readers we did not write hold strata's Iceberg manifests and manifest lists
// (src/tables/avro.c, manifest.c; SPEC v5 §5.1) to exact values: npm avsc (the Avro project's
// JavaScript implementation, both codecs, longs as BigInt: snapshot ids pass 2^53) and icebird's
// own Avro reader (what icebird reads an Iceberg table with). icebird's 'deflate' path is broken
// (NOTES.md, "Iceberg on this machine"), so it reads the null-codec files, and the deflate files
// re-encoded with codec null by zlib's raw inflate here. The files are written by the test-only
// tool strata-icegen next to the strata binary (tests/tables/icegen.c: the values below are its).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { before, describe, test } from 'node:test';
import avro from 'avsc';
import { avroMetadata, avroRead } from 'icebird';
import { BIN, tempDir } from './lib.mjs';

const ICEGEN = path.join(path.dirname(BIN), 'strata-icegen');
const CODECS = ['deflate', 'null'];
const SNAP = 9007199254740993n; // 2^53 + 1
const PARENT = 9007199254740992n;

// avsc's long as BigInt (its default refuses what a double cannot hold).
const bigLong = avro.types.LongType.__with({
  fromBuffer: (b) => b.readBigInt64LE(),
  toBuffer: (n) => {
    const b = Buffer.alloc(8);
    b.writeBigInt64LE(BigInt(n));
    return b;
  },
  fromJSON: BigInt,
  toJSON: Number,
  isValid: (n) => typeof n === 'bigint',
  compare: (a, b) => (a === b ? 0 : a < b ? -1 : 1),
});
const parseHook = (schema) => avro.Type.forSchema(schema, { registry: { long: bigLong } });

// Both readers' values in one shape: plain objects, null for an absent union branch (icebird
// gives undefined), bytes as {bytes: their UTF-8 text}.
function plain(v) {
  if (v === undefined || v === null) return null;
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v).toString('utf8') };
  if (Array.isArray(v)) return v.map(plain);
  if (typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

const DATA = [
  {
    status: 1, snapshot_id: SNAP, sequence_number: 5n, file_sequence_number: 5n,
    data_file: {
      content: 0, file_path: 'file:///tables/messages/data/user=alice/00001.parquet', file_format: 'PARQUET',
      partition: { user: 'alice' }, record_count: 10n, file_size_in_bytes: 2048n,
      // column metrics: maps with int keys, as Avro arrays of key/value records (icegen.c)
      value_counts: [{ key: 2, value: 10n }], null_value_counts: [{ key: 2, value: 0n }],
      lower_bounds: [{ key: 2, value: { bytes: '\x01\0\0\0\0\0\0\0' } }],
      upper_bounds: [{ key: 2, value: { bytes: '\x09\0\0\0\0\0\0\0' } }],
    },
  },
  {
    status: 0, snapshot_id: 1234567890123456789n, sequence_number: 2n, file_sequence_number: 2n,
    data_file: {
      content: 0, file_path: 'file:///tables/messages/data/user=bob/00002.parquet', file_format: 'PARQUET',
      partition: { user: 'bob' }, record_count: 3n, file_size_in_bytes: 999n,
      value_counts: null, null_value_counts: null, lower_bounds: null, upper_bounds: null,
    },
  },
  { // inherits snapshot id and sequence numbers from the manifest list (nulls)
    status: 1, snapshot_id: null, sequence_number: null, file_sequence_number: null,
    data_file: {
      content: 0, file_path: 'file:///tables/messages/data/user=zo%C3%AB/00003.parquet', file_format: 'PARQUET',
      partition: { user: 'zoë' }, record_count: 1n, file_size_in_bytes: 100n,
      value_counts: null, null_value_counts: null, lower_bounds: null, upper_bounds: null,
    },
  },
];
const DELETES = [
  {
    status: 1, snapshot_id: SNAP, sequence_number: 5n, file_sequence_number: 5n,
    data_file: {
      content: 1, file_path: 'file:///tables/messages/data/user=alice/delete-00001.parquet',
      file_format: 'PARQUET', partition: { user: 'alice' }, record_count: 2n, file_size_in_bytes: 512n,
      value_counts: null, null_value_counts: null, lower_bounds: null, upper_bounds: null,
    },
  },
];
function listRecords(dir, codec) {
  const summary = (lo, hi) => [{ contains_null: false, contains_nan: null, lower_bound: { bytes: lo }, upper_bound: { bytes: hi } }];
  const common = { partition_spec_id: 0, sequence_number: 5n, added_snapshot_id: SNAP, deleted_files_count: 0, deleted_rows_count: 0n };
  const file = (name) => path.join(dir, `${name}.${codec}.avro`);
  return [
    {
      manifest_path: `file://${file('data')}`, manifest_length: BigInt(statSync(file('data')).size), ...common,
      content: 0, min_sequence_number: 2n, added_files_count: 2, existing_files_count: 1,
      added_rows_count: 11n, existing_rows_count: 3n, partitions: summary('alice', 'zoë'),
    },
    {
      manifest_path: `file://${file('deletes')}`, manifest_length: BigInt(statSync(file('deletes')).size), ...common,
      content: 1, min_sequence_number: 5n, added_files_count: 1, existing_files_count: 0,
      added_rows_count: 2n, existing_rows_count: 0n, partitions: summary('alice', 'alice'),
    },
  ].map((r) => ({ // in the schema's order
    manifest_path: r.manifest_path, manifest_length: r.manifest_length, partition_spec_id: r.partition_spec_id,
    content: r.content, sequence_number: r.sequence_number, min_sequence_number: r.min_sequence_number,
    added_snapshot_id: r.added_snapshot_id, added_files_count: r.added_files_count,
    existing_files_count: r.existing_files_count, deleted_files_count: r.deleted_files_count,
    added_rows_count: r.added_rows_count, existing_rows_count: r.existing_rows_count,
    deleted_rows_count: r.deleted_rows_count, partitions: r.partitions,
  }));
}
const BIG = Array.from({ length: 3000 }, (_, i) => ({
  status: 1, snapshot_id: SNAP + BigInt(i), sequence_number: BigInt(i), file_sequence_number: BigInt(i),
  data_file: {
    content: 0, file_path: `s3://bucket/tables/messages/data/user=user${i % 50}/${String(i).padStart(8, '0')}.parquet`,
    file_format: 'PARQUET', partition: { user: `user${i % 50}` }, record_count: BigInt(i * 3),
    file_size_in_bytes: BigInt(i * 1000 + 1),
    value_counts: null, null_value_counts: null, lower_bounds: null, upper_bounds: null,
  },
}));
const TABLE_SCHEMA = { type: 'struct', 'schema-id': 0, fields: [
  { id: 1, name: 'user', required: true, type: 'string' },
  { id: 2, name: 'id', required: true, type: 'long' },
] };

// Every id attribute of an Avro schema, by kind ('field-id', 'element-id', …), and record names.
function schemaIds(schema) {
  const ids = { 'field-id': [], 'element-id': [], 'key-id': [], 'value-id': [], names: [] };
  (function walk(t) {
    if (Array.isArray(t)) return t.forEach(walk);
    if (!t || typeof t !== 'object') return;
    for (const k of ['element-id', 'key-id', 'value-id']) if (k in t) ids[k].push(t[k]);
    if (t.type === 'record') {
      ids.names.push(t.name);
      for (const f of t.fields) {
        assert.ok('field-id' in f, `field ${f.name} has a field-id`);
        ids['field-id'].push(f['field-id']);
        walk(f.type);
      }
    } else if (t.type === 'array') walk(t.items);
    else if (t.type === 'map') walk(t.values);
  })(schema);
  for (const k of Object.keys(ids)) ids[k].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return ids;
}
// Iceberg's data_file ids, the metrics' maps' key and value ids included (k119_v120, …)
const MANIFEST_IDS = [0, 1, 2, 3, 4, 100, 101, 102, 103, 104, 109, 110, 119, 120, 121, 122, 125, 126, 127, 128, 129, 130, 134, 1000];
const LIST_IDS = [500, 501, 502, 503, 504, 505, 506, 507, 509, 510, 511, 512, 513, 514, 515, 516, 517, 518];

// avsc: the header (codec, metadata as text, the schema as text) and every record.
function avscRead(file) {
  return new Promise((resolve, reject) => {
    const records = [];
    let head;
    avro.createFileDecoder(file, { parseHook })
      .on('metadata', (type, codec, header) => {
        const meta = Object.fromEntries(Object.entries(header.meta).map(([k, v]) => [k, v.toString('utf8')]));
        head = { codec, meta, sync: header.sync };
      })
      .on('data', (r) => records.push(plain(r)))
      .on('error', reject)
      .on('end', () => resolve({ ...head, records }));
  });
}

// Reads a zigzag varint at r.off of buf.
function zz(buf, r) {
  let z = 0n;
  for (let shift = 0n; ; shift += 7n) {
    const b = buf[r.off++];
    z |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return Number((z >> 1n) ^ -(z & 1n));
}
function zzBytes(n) {
  const out = [];
  let z = (BigInt(n) << 1n) ^ (BigInt(n) < 0n ? -1n : 0n);
  while (z >= 0x80n) {
    out.push(Number(z & 0x7fn) | 0x80);
    z >>= 7n;
  }
  out.push(Number(z));
  return Buffer.from(out);
}
const avroStr = (s) => { const b = Buffer.from(s); return Buffer.concat([zzBytes(b.length), b]); };

// The container's layout, walked by hand: metadata pairs, sync marker, and each block's record
// count and (inflated) data.
function layout(buf) {
  assert.equal(buf.subarray(0, 4).toString('latin1'), 'Obj\x01');
  const r = { off: 4 };
  const meta = [];
  for (let n; (n = zz(buf, r)) !== 0;) {
    assert.ok(n > 0, 'the writer writes the metadata map without block sizes');
    for (let i = 0; i < n; i++) {
      const kl = zz(buf, r); const key = buf.subarray(r.off, r.off + kl).toString(); r.off += kl;
      const vl = zz(buf, r); const value = buf.subarray(r.off, r.off + vl).toString(); r.off += vl;
      meta.push([key, value]);
    }
  }
  const sync = buf.subarray(r.off, r.off + 16);
  r.off += 16;
  const codec = Object.fromEntries(meta)['avro.codec'];
  const blocks = [];
  while (r.off < buf.length) {
    const count = zz(buf, r);
    const size = zz(buf, r);
    const raw = buf.subarray(r.off, r.off + size);
    r.off += size;
    assert.deepEqual(buf.subarray(r.off, r.off + 16), sync, 'each block ends with the sync marker');
    r.off += 16;
    blocks.push({ count, data: codec === 'deflate' ? inflateRawSync(raw) : raw });
  }
  assert.equal(r.off, buf.length);
  return { meta, sync, codec, blocks };
}

// The same file with codec null: same metadata otherwise, same records, same sync marker.
function toNullCodec(buf) {
  const { meta, sync, blocks } = layout(buf);
  const parts = [Buffer.from('Obj\x01', 'latin1'), zzBytes(meta.length)];
  for (const [k, v] of meta) parts.push(avroStr(k), avroStr(k === 'avro.codec' ? 'null' : v));
  parts.push(zzBytes(0), sync);
  for (const b of blocks) parts.push(zzBytes(b.count), zzBytes(b.data.length), b.data, sync);
  return Buffer.concat(parts);
}

function icebirdRead(buf) {
  const reader = { view: new DataView(buf.buffer, buf.byteOffset, buf.length), offset: 0 };
  const { metadata, syncMarker } = avroMetadata(reader);
  return { metadata, records: avroRead({ reader, metadata, syncMarker }).map(plain) };
}

describe('Iceberg manifests and manifest lists read by avsc and icebird', () => {
  let dir;
  before(() => {
    assert.ok(existsSync(ICEGEN), `${ICEGEN} is built with strata (tests/CMakeLists.txt)`);
    dir = tempDir('iceavro');
    const r = spawnSync(ICEGEN, [dir], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  });
  const file = (name) => path.join(dir, name);

  for (const codec of CODECS) {
    test(`avsc: data manifest (${codec})`, async () => {
      const f = await avscRead(file(`data.${codec}.avro`));
      assert.equal(f.codec, codec);
      assert.deepEqual(f.records, DATA);
      assert.deepEqual(JSON.parse(f.meta.schema), TABLE_SCHEMA);
      assert.equal(f.meta['schema-id'], '0');
      assert.deepEqual(JSON.parse(f.meta['partition-spec']),
        [{ name: 'user', transform: 'identity', 'source-id': 1, 'field-id': 1000 }]);
      assert.equal(f.meta['partition-spec-id'], '0');
      assert.equal(f.meta['format-version'], '2');
      assert.equal(f.meta.content, 'data');
      const ids = schemaIds(JSON.parse(f.meta['avro.schema']));
      assert.deepEqual(ids['field-id'], MANIFEST_IDS);
      assert.deepEqual(ids.names, ['k119_v120', 'k121_v122', 'k126_v127', 'k129_v130', 'manifest_entry', 'r102', 'r2']);
    });

    test(`avsc: delete manifest (${codec})`, async () => {
      const f = await avscRead(file(`deletes.${codec}.avro`));
      assert.equal(f.codec, codec);
      assert.deepEqual(f.records, DELETES);
      assert.equal(f.meta.content, 'deletes');
      assert.deepEqual(schemaIds(JSON.parse(f.meta['avro.schema']))['field-id'], MANIFEST_IDS);
    });

    test(`avsc: manifest list (${codec})`, async () => {
      const f = await avscRead(file(`list.${codec}.avro`));
      assert.equal(f.codec, codec);
      assert.deepEqual(f.records, listRecords(dir, codec));
      assert.equal(f.meta['snapshot-id'], String(SNAP));
      assert.equal(f.meta['parent-snapshot-id'], String(PARENT));
      assert.equal(f.meta['sequence-number'], '5');
      assert.equal(f.meta['format-version'], '2');
      const ids = schemaIds(JSON.parse(f.meta['avro.schema']));
      assert.deepEqual(ids['field-id'], LIST_IDS);
      assert.deepEqual(ids['element-id'], [508]);
      assert.deepEqual(ids.names, ['manifest_file', 'r508']);
      for (const m of f.records) assert.ok(existsSync(new URL(m.manifest_path)), m.manifest_path);
    });
  }

  test('avsc: an empty manifest list, without a parent', async () => {
    const f = await avscRead(file('empty-list.null.avro'));
    assert.deepEqual(f.records, []);
    assert.equal(f.meta['parent-snapshot-id'], 'null');
    assert.equal(f.meta['snapshot-id'], '42');
    assert.equal(layout(readFileSync(file('empty-list.null.avro'))).blocks.length, 0);
  });

  test('avsc: 3000 entries in blocks of about 64 KiB of data each', async () => {
    const f = await avscRead(file('big.deflate.avro'));
    assert.deepEqual(f.records, BIG);
    const { blocks } = layout(readFileSync(file('big.deflate.avro')));
    assert.ok(blocks.length >= 4, `${blocks.length} blocks`);
    assert.equal(blocks.reduce((s, b) => s + b.count, 0), 3000);
    for (const b of blocks.slice(0, -1)) {
      assert.ok(b.data.length >= 64 * 1024 && b.data.length < 64 * 1024 + 256, `a block of ${b.data.length} bytes`);
    }
  });

  test('the two codecs differ only in the blocks and the sync marker', () => {
    for (const name of ['data', 'deletes']) {
      const d = layout(readFileSync(file(`${name}.deflate.avro`)));
      const n = layout(readFileSync(file(`${name}.null.avro`)));
      assert.deepEqual(d.meta.filter(([k]) => k !== 'avro.codec'), n.meta.filter(([k]) => k !== 'avro.codec'));
      assert.deepEqual(d.meta.map(([k]) => k).slice(0, 2), ['avro.schema', 'avro.codec']);
      assert.deepEqual(Buffer.concat(d.blocks.map((b) => b.data)), Buffer.concat(n.blocks.map((b) => b.data)));
      assert.notDeepEqual(d.sync, n.sync);
    }
  });

  test('icebird: the null-codec manifest list and manifests', () => {
    const list = icebirdRead(readFileSync(file('list.null.avro')));
    assert.equal(list.metadata['avro.codec'], 'null');
    assert.deepEqual(list.records, listRecords(dir, 'null'));
    const [data, deletes] = list.records.map((m) => icebirdRead(readFileSync(new URL(m.manifest_path))));
    assert.deepEqual(data.records, DATA);
    assert.deepEqual(data.metadata.schema, TABLE_SCHEMA);
    assert.equal(data.metadata.content, 'data');
    assert.deepEqual(deletes.records, DELETES);
    assert.equal(deletes.metadata.content, 'deletes');
  });

  test('icebird: the deflate files, re-encoded with codec null', () => {
    for (const [name, want] of [['data', DATA], ['deletes', DELETES], ['big', BIG]]) {
      const f = icebirdRead(toNullCodec(readFileSync(file(`${name}.deflate.avro`))));
      assert.deepEqual(f.records, want, name);
    }
    assert.deepEqual(icebirdRead(toNullCodec(readFileSync(file('list.deflate.avro')))).records,
      listRecords(dir, 'deflate'));
  });
});
