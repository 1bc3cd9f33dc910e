// SPDX-License-Identifier: MIT
// Three independent Parquet readers hold strata's files to exact values: DuckDB, hyparquet (pure
// JS) and arrow-rs (parquet-wasm; it decodes our file into Arrow and writes it back, and that
// copy is read again). The nested file is a booking-shaped one (SPEC §4.2: items a LIST of
// structs with seats a LIST of strings) written by the test-only tool strata-pqgen next to the
// strata binary; the message files are the ones a real server flushes.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { parquetHeader } from 'hyparquet/src/column.js';
import { compressors } from 'hyparquet-compressors';
import * as arrow from 'parquet-wasm';
import { duckQuery, duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { BIN, startStrata, tempDir } from './lib.mjs';

const PQGEN = path.join(path.dirname(BIN), 'strata-pqgen');

function pqgen(...args) {
  assert.ok(existsSync(PQGEN), `${PQGEN} is built with strata (tests/CMakeLists.txt)`);
  const r = spawnSync(PQGEN, args, { encoding: 'utf8', maxBuffer: 1 << 30 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim().split('\n').map((l) => JSON.parse(l));
}

const decoder = new TextDecoder();
// µs timestamps as numbers and JSON as its text: exact, like strata's own values
const parsers = {
  timestampFromMicroseconds: (us) => Number(us),
  jsonFromBytes: (b) => b && decoder.decode(b),
};
const toNum = (v) => (typeof v === 'bigint' || typeof v === 'string' ? Number(v) : v);

async function hyRows(file) {
  const buf = readFileSync(file);
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
  return { rows: await parquetReadObjects({ file: ab, compressors, parsers }), meta: parquetMetadata(ab) };
}

// The data pages of one column chunk, read from their page headers (hyparquet's own reader of
// them): from the chunk's first page (its dictionary page, if any) to the chunk's end.
function dataPages(buf, meta) {
  const start = Number(meta.dictionary_page_offset ?? meta.data_page_offset);
  const end = start + Number(meta.total_compressed_size);
  const reader = { view: new DataView(buf.buffer, buf.byteOffset, buf.length), offset: start };
  const pages = [];
  while (reader.offset < end) {
    const h = parquetHeader(reader);
    reader.offset += h.compressed_page_size;
    if (h.type === 'DATA_PAGE' || h.type === 'DATA_PAGE_V2') pages.push(h);
  }
  assert.equal(reader.offset, end, 'the pages fill the column chunk exactly');
  return pages;
}

// arrow-rs reads the file into Arrow and writes that table back as Parquet: the copy holds what
// arrow-rs decoded, and hyparquet reads it.
async function arrowRows(file, dir) {
  const table = arrow.readParquet(new Uint8Array(readFileSync(file)));
  const copy = path.join(dir, `${path.basename(file)}.arrow-rs.parquet`);
  writeFileSync(copy, arrow.writeParquet(table));
  return hyRows(copy);
}

const bookingOf = (r) => ({
  booking_id: toNum(r.booking_id), event_id: r.event_id, owner: r.owner, status: r.status,
  items: r.items === null || r.items === undefined ? null
    : r.items.map((it) => ({ section: it.section, seats: it.seats, quantity: toNum(it.quantity) })),
  total_price: toNum(r.total_price), created_at: toNum(r.created_at),
  expires_at: r.expires_at === null || r.expires_at === undefined ? null : toNum(r.expires_at),
  finished_at: toNum(r.finished_at),
});

describe('nested Parquet (booking-shaped) read by DuckDB, hyparquet and arrow-rs', () => {
  const dir = tempDir('pqreaders');
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const [what, rows, groupRows] of [['small, five row groups', 3000, 1000],
    ['large, several pages per column', 100000, 0]]) {
    test(`${what}: every reader sees exactly the rows written`, async () => {
      const file = path.join(dir, `bookings-${rows}.parquet`);
      const want = pqgen('write', file, String(rows), '7', String(groupRows));
      assert.equal(want.length, rows);
      // the generator covers what must hold: null and empty lists, empty seats, nulls
      assert.ok(want.some((r) => r.items === null) && want.some((r) => r.items?.length === 0));
      assert.ok(want.some((r) => r.items?.some((it) => it.seats.length === 0)));
      assert.ok(want.some((r) => r.items?.length > 1 && r.items[0].seats.length > 1));
      assert.ok(want.some((r) => r.owner === null) && want.some((r) => r.expires_at === null));
      assert.deepEqual(pqgen('read', file), want, "strata's reader");

      const types = await duckQuery(`DESCRIBE SELECT * FROM read_parquet('${file}')`);
      assert.deepEqual(Object.fromEntries(types.map((t) => [t.column_name, t.column_type])), {
        booking_id: 'BIGINT', event_id: 'VARCHAR', owner: 'VARCHAR', status: 'VARCHAR',
        items: 'STRUCT(section VARCHAR, seats VARCHAR[], quantity BIGINT)[]', total_price: 'BIGINT',
        created_at: 'TIMESTAMP WITH TIME ZONE', expires_at: 'TIMESTAMP WITH TIME ZONE',
        finished_at: 'TIMESTAMP WITH TIME ZONE',
      });
      const duck = await duckQuery(
        `SELECT booking_id, event_id, owner, status, CAST(items AS JSON)::VARCHAR AS items, total_price,
                epoch_us(created_at) AS created_at, epoch_us(expires_at) AS expires_at,
                epoch_us(finished_at) AS finished_at
         FROM read_parquet('${file}') ORDER BY booking_id`);
      assert.deepEqual(duck.map((r) => bookingOf({ ...r, items: JSON.parse(r.items) })), want, 'DuckDB');

      const hy = await hyRows(file);
      assert.deepEqual(hy.rows.map(bookingOf), want, 'hyparquet');
      const groups = hy.meta.row_groups;
      if (groupRows) assert.equal(groups.length, 5); // 3 events, cut every 1000 rows
      else {
        // the seats column of the big event needs more than one 1 MiB page: its page headers say so,
        // and their values add up to the chunk's
        const seats = groups.flatMap((g) => g.columns).filter((c) => c.meta_data.path_in_schema.join('.') === 'items.list.element.seats.list.element');
        const buf = readFileSync(file);
        const pages = seats.map((c) => {
          const ps = dataPages(buf, c.meta_data);
          const values = ps.reduce((n, h) => n + (h.data_page_header ?? h.data_page_header_v2).num_values, 0);
          assert.equal(values, Number(c.meta_data.num_values), 'the data pages hold the chunk\'s values');
          return ps.length;
        });
        assert.ok(Math.max(...pages) > 1, `several pages in a seats chunk (data pages per chunk: ${pages})`);
      }

      const ar = await arrowRows(file, dir);
      assert.deepEqual(ar.rows.map(bookingOf), want, 'arrow-rs (parquet-wasm)');
      // arrow-rs kept items a list of structs and seats a list of strings
      const names = ar.meta.schema.map((e) => `${e.name}:${e.converted_type ?? e.logical_type?.type ?? ''}`);
      assert.ok(names.includes('items:LIST') && names.includes('seats:LIST'), names.join(' '));
    });
  }
});

describe('message files a server flushed, read by hyparquet and arrow-rs', () => {
  let s;
  before(async () => { s = await startStrata({ args: ['--flush-interval', '3600'] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('every reader sees exactly the rows DuckDB and the API see', async () => {
    const u = 'readers';
    for (let i = 0; i < 90; i++) {
      const body = { conversation_id: `c${i % 3}`, from: i % 2 ? 'alice' : 'bob', content: `m${i} ü "q" \\` };
      if (i % 3 === 0) body.metadata = { i, tags: ['x', i % 2 === 0] };
      const r = await s.req('POST', `/v1/users/${u}/messages`, body);
      assert.equal(r.status, 201, r.text);
    }
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('the flush', async () => (await s.req('GET', `/v1/users/${u}/stats`)).json.hot_messages === 0);
    const files = parquetFiles(path.join(s.dir, 'cold', u));
    assert.equal(files.length, 1);
    const want = await duckRows(files);
    assert.equal(want.length, 90);
    const msgOf = (r) => ({
      msg_id: String(r.msg_id), conversation_id: r.conversation_id, from: r.from, ts: toNum(r.timestamp),
      seq: toNum(r.seq), content: r.content, metadata: r.metadata ?? null,
    });
    const byId = (a, b) => (BigInt(a.msg_id) < BigInt(b.msg_id) ? -1 : 1);
    const hy = await hyRows(files[0]);
    assert.deepEqual(hy.rows.map(msgOf).sort(byId), want, 'hyparquet');
    assert.equal(hy.meta.row_groups.length, 3);
    const ar = await arrowRows(files[0], s.dir);
    assert.deepEqual(ar.rows.map(msgOf).sort(byId), want, 'arrow-rs (parquet-wasm)');
  });
});

// SPEC v5 §5.1: the Parquet schema carries the Iceberg tables' field ids (a LIST's "list" group
// and the root none), in every kind of object a server flushes, and every object its owner
// column (bookings: event_id).
describe('field ids in the objects a server flushes', () => {
  let s;
  before(async () => { s = await startStrata({ args: ['--flush-interval', '3600', '--booking-hot-seconds', '0'] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  const ids = async (file) => (await duckQuery(`SELECT name, field_id FROM parquet_schema('${file}')`))
    .map((r) => [r.name, r.field_id === null ? null : Number(r.field_id)]);
  // the owner column first (a user's: user, a room's: room_id; SPEC v5 §5.1), edited_at,
  // deleted_at and edit_history last, the list's element and its fields with ids too (issue 45)
  const message = (owner) => [['schema', null], [owner, 1], ['msg_id', 2], ['conversation_id', 3], ['from', 4],
    ['timestamp', 5], ['seq', 6], ['content', 7], ['metadata', 8], ['edited_at', 9], ['deleted_at', 10],
    ['edit_history', 11], ['list', null], ['element', 12], ['content', 13], ['metadata', 14], ['edited_at', 15]];

  test("a user's, a room's and an event's bookings object", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await s.req('POST', '/v1/users/fid/messages', { conversation_id: 'c', from: 'a', content: `m${i}` });
      assert.equal(r.status, 201, r.text);
    }
    assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'fidroom', members: ['alice', 'bob'] })).status, 201);
    for (let i = 0; i < 3; i++) {
      const r = await s.req('POST', '/v1/rooms/fidroom/messages', { from: 'alice', content: `r${i}`, metadata: { i } });
      assert.equal(r.status, 201, r.text);
    }
    let r = await s.req('POST', '/v1/events', { event_id: 'fidev', sections: [{ name: 'A', rows: 1, cols: 5, price: 1 }, { name: 'floor', capacity: 10, price: 2 }] });
    assert.equal(r.status, 201, r.text);
    r = await s.req('POST', '/v1/events/fidev/bookings', { items: [{ section: 'A', seats: ['1-1', '1-2'] }, { section: 'floor', quantity: 2 }] });
    assert.equal(r.status, 201, r.text);
    assert.equal((await s.req('POST', `/v1/bookings/${r.json.booking_id}/confirm`)).status, 200);

    const dirs = { user: path.join(s.dir, 'cold', 'fid'), room: path.join(s.dir, 'cold', 'shared', 'conversations', 'fidroom'),
      bookings: path.join(s.dir, 'cold', 'events', 'fidev') };
    const files = (d) => (existsSync(d) ? parquetFiles(d) : []);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('the flush of all three', async () => {
      if (Object.values(dirs).every((d) => files(d).length > 0)) return true;
      await s.req('POST', '/v1/admin/flush'); // a kind the last flush found nothing of yet
      return false;
    });
    assert.deepEqual(await ids(files(dirs.user)[0]), message('user'), "a user's messages");
    assert.deepEqual(await ids(files(dirs.room)[0]), message('room_id'), "a room's messages");
    assert.deepEqual(await duckQuery(`SELECT DISTINCT "user" AS o, count(*)::INT AS n FROM '${files(dirs.user)[0]}' GROUP BY 1`),
      [{ o: 'fid', n: 3 }]);
    assert.deepEqual(await duckQuery(`SELECT DISTINCT room_id AS o, count(*)::INT AS n FROM '${files(dirs.room)[0]}' GROUP BY 1`),
      [{ o: 'fidroom', n: 3 }]);
    assert.deepEqual(await ids(files(dirs.bookings)[0]), [['schema', null], ['booking_id', 1], ['event_id', 2],
      ['owner', 3], ['status', 4], ['items', 5], ['list', null], ['element', 6], ['section', 7], ['seats', 8],
      ['list', null], ['element', 9], ['quantity', 10], ['total_price', 11], ['created_at', 12], ['expires_at', 13],
      ['finished_at', 14]], 'bookings');
  });
});
