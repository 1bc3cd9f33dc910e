// SPDX-License-Identifier: MIT
// The read-only Iceberg REST catalog on strata's own port (SPEC v5 §5.1): every route, Iceberg's
// error model under /iceberg, 403 for any change, the OAuth token endpoint's 400, metrics
// reports dropped, HEAD, auth (an admin's token), strict query strings, hostile names, and the
// cache that follows the tables' metadata store: the test writes Iceberg v2 metadata files into
// {cold}/_tables/{table}/metadata/ itself (the committer is not what is tested here) — a hint
// that lags behind, a missing hint, a hint that is garbage, a version that is not JSON — and
// strata serves the newest version within about a second (strata runs with
// --table-commit-interval 0, so its own committer writes nothing beside them; tables.test.mjs reads
// the catalog's answers about strata's own commits). For an S3 cold tier the table config
// names the endpoint and region, never strata's keys.
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { ByteWriter, parquetWriteBuffer } from 'hyparquet-writer';
import { avroWrite, icebergRead } from 'icebird';
import { S3rver } from './sigv4-proxy.mjs';
import { freePort, parseResponses, raw, sleep, startStrata, tempDir } from './lib.mjs';

const NS = '/iceberg/v1/namespaces/strata';
const T = (t) => `${NS}/tables/${t}`;

// A valid Iceberg v2 table metadata file (the spec's required fields), as text: version n has
// n - 1 snapshots, the last one current, and ids past 2^53 (a double would change them).
function metadataText(table, n, location) {
  const snaps = [];
  for (let i = 1; i < n; i++) {
    snaps.push(`{"snapshot-id":${9007199254740990n + BigInt(i)},${i > 1 ? `"parent-snapshot-id":${9007199254740990n + BigInt(i - 1)},` : ''}"sequence-number":${i},"timestamp-ms":${1700000000000 + i},"manifest-list":"${location}/metadata/snap-${i}.avro","summary":{"operation":"append"},"schema-id":0}`);
  }
  const current = n > 1 ? `${9007199254740990n + BigInt(n - 1)}` : '-1';
  return `{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c${n % 10}","location":"${location}",`
    + `"last-sequence-number":${n - 1},"last-updated-ms":${1700000000000 + n},"last-column-id":2,`
    + `"current-schema-id":0,"schemas":[{"type":"struct","schema-id":0,"fields":[`
    + `{"id":1,"name":"user","required":true,"type":"string"},{"id":2,"name":"msg_id","required":true,"type":"long"}]}],`
    + `"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[{"name":"user","transform":"identity","source-id":1,"field-id":1000}]}],`
    + `"last-partition-id":1000,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],`
    + `"properties":{"strata.table":"${table}","strata.version":"${n}"},"current-snapshot-id":${current},`
    + `"refs":{${n > 1 ? `"main":{"snapshot-id":${current},"type":"branch"}` : ''}},`
    + `"snapshots":[${snaps.join(',')}],"snapshot-log":[],"metadata-log":[]}`;
}

// A tiny Iceberg v2 table made by hand under dir (a table location): one Parquet data file of
// rows, a manifest and a manifest list (Avro, codec null), and v1 metadata naming them.
// Returns the metadata file's text.
function tinyTable(dir, rows) {
  const loc = `file://${dir}`;
  mkdirSync(path.join(dir, 'data'), { recursive: true });
  mkdirSync(path.join(dir, 'metadata'), { recursive: true });
  const data = Buffer.from(parquetWriteBuffer({ columnData: [
    { name: 'user', data: rows.map((r) => r.user), type: 'STRING' },
    { name: 'msg_id', data: rows.map((r) => BigInt(r.msg_id)), type: 'INT64' },
  ] }));
  writeFileSync(path.join(dir, 'data', 'f1.parquet'), data);
  const avro = (file, schema, records) => {
    const w = new ByteWriter();
    avroWrite({ writer: w, schema, records });
    writeFileSync(path.join(dir, 'metadata', file), Buffer.from(w.getBuffer()));
  };
  avro('m1.avro', { type: 'record', name: 'manifest_entry', fields: [
    { name: 'status', type: 'int', 'field-id': 0 },
    { name: 'snapshot_id', type: ['null', 'long'], 'field-id': 1 },
    { name: 'sequence_number', type: ['null', 'long'], 'field-id': 3 },
    { name: 'file_sequence_number', type: ['null', 'long'], 'field-id': 4 },
    { name: 'data_file', 'field-id': 2, type: { type: 'record', name: 'r2', fields: [
      { name: 'content', type: 'int', 'field-id': 134 },
      { name: 'file_path', type: 'string', 'field-id': 100 },
      { name: 'file_format', type: 'string', 'field-id': 101 },
      { name: 'record_count', type: 'long', 'field-id': 103 },
      { name: 'file_size_in_bytes', type: 'long', 'field-id': 104 },
    ] } },
  ] }, [{ status: 1, snapshot_id: 7n, sequence_number: 1n, file_sequence_number: 1n,
    data_file: { content: 0, file_path: `${loc}/data/f1.parquet`, file_format: 'PARQUET', record_count: BigInt(rows.length), file_size_in_bytes: BigInt(data.length) } }]);
  const mlen = statSync(path.join(dir, 'metadata', 'm1.avro')).size;
  avro('snap-7.avro', { type: 'record', name: 'manifest_file', fields: [
    { name: 'manifest_path', type: 'string', 'field-id': 500 },
    { name: 'manifest_length', type: 'long', 'field-id': 501 },
    { name: 'partition_spec_id', type: 'int', 'field-id': 502 },
    { name: 'content', type: 'int', 'field-id': 517 },
    { name: 'sequence_number', type: 'long', 'field-id': 515 },
    { name: 'min_sequence_number', type: 'long', 'field-id': 516 },
    { name: 'added_snapshot_id', type: 'long', 'field-id': 503 },
  ] }, [{ manifest_path: `${loc}/metadata/m1.avro`, manifest_length: BigInt(mlen), partition_spec_id: 0, content: 0,
    sequence_number: 1n, min_sequence_number: 1n, added_snapshot_id: 7n }]);
  return JSON.stringify({
    'format-version': 2, 'table-uuid': '5b1f4a1e-7d0c-4c55-8a43-0a9d2b6f1c01', location: loc,
    'last-sequence-number': 1, 'last-updated-ms': 1700000000000, 'last-column-id': 2, 'current-schema-id': 0,
    schemas: [{ type: 'struct', 'schema-id': 0, fields: [{ id: 1, name: 'user', required: true, type: 'string' }, { id: 2, name: 'msg_id', required: true, type: 'long' }] }],
    'default-spec-id': 0, 'partition-specs': [{ 'spec-id': 0, fields: [] }], 'last-partition-id': 999,
    'default-sort-order-id': 0, 'sort-orders': [{ 'order-id': 0, fields: [] }], properties: {},
    'current-snapshot-id': 7, refs: { main: { 'snapshot-id': 7, type: 'branch' } },
    snapshots: [{ 'snapshot-id': 7, 'sequence-number': 1, 'timestamp-ms': 1700000000000, 'manifest-list': `${loc}/metadata/snap-7.avro`, summary: { operation: 'append' }, 'schema-id': 0 }],
    'snapshot-log': [], 'metadata-log': [],
  });
}

// icebird reads with fetch: serve file:// URLs (GET, with Range) while fn runs.
async function withFileFetch(fn) {
  const real = globalThis.fetch;
  globalThis.fetch = async (url, init = {}) => {
    const u = String(url);
    if (!u.startsWith('file://')) return real(url, init);
    const buf = readFileSync(fileURLToPath(u));
    const range = new Headers(init.headers).get('range');
    if (init.method === 'HEAD') return new Response(null, { status: 200, headers: { 'content-length': String(buf.length) } });
    if (!range) return new Response(buf, { status: 200, headers: { 'content-length': String(buf.length) } });
    const m = /bytes=(\d+)-(\d*)/.exec(range);
    const part = buf.subarray(Number(m[1]), m[2] ? Number(m[2]) + 1 : buf.length);
    return new Response(part, { status: 206, headers: { 'content-length': String(part.length) } });
  };
  try { return await fn(); } finally { globalThis.fetch = real; }
}

const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
function jwt(secret, payload) {
  const h = b64({ alg: 'HS256', typ: 'JWT' });
  const p = b64({ exp: Math.floor(Date.now() / 1000) + 600, ...payload });
  return `${h}.${p}.${createHmac('sha256', secret).update(`${h}.${p}`).digest('base64url')}`;
}

// An Iceberg error: {"error":{"message","type","code"}} and nothing else.
function iceError(r, status, type) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json && r.json.error, r.text);
  assert.deepEqual(Object.keys(r.json).sort(), ['error'], r.text);
  assert.deepEqual(Object.keys(r.json.error).sort(), ['code', 'message', 'type'], r.text);
  assert.equal(r.json.error.code, status, r.text);
  assert.equal(r.json.error.type, type, r.text);
  assert.equal(typeof r.json.error.message, 'string');
}

async function until(what, fn, ms = 5000) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return Date.now() - t0;
    if (Date.now() - t0 > ms) assert.fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('the Iceberg REST catalog on a local cold tier, auth off', () => {
  let s;
  let meta; // {dataDir}/cold/_tables
  const write = (table, name, text) => {
    mkdirSync(path.join(meta, table, 'metadata'), { recursive: true });
    // as the committer does: a complete file linked into place (never seen half-written)
    const tmp = path.join(meta, table, 'metadata', `.tmp-${name}`);
    writeFileSync(tmp, text);
    renameSync(tmp, path.join(meta, table, 'metadata', name));
  };
  const version = (table, n) => write(table, `v${n}.metadata.json`, metadataText(table, n, `file://${meta}/${table}`));
  const served = async (table) => {
    const r = await s.req('GET', T(table));
    return r.status === 200 ? Number(r.json.metadata.properties['strata.version']) : 0;
  };

  before(async () => {
    const dir = tempDir('iceberg');
    s = await startStrata({ dataDir: dir, args: ['--max-body', '4096', '--table-commit-interval', '0'] });
    meta = path.join(realpathSync(dir), 'cold', '_tables');
  });
  after(async () => { if (s) { await s.stop(); s.cleanup(); } });

  test('before any metadata: no table, but the namespace and config are there', async () => {
    iceError(await s.req('GET', T('messages')), 404, 'NoSuchTableException');
    assert.deepEqual((await s.req('GET', `${NS}/tables`)).json, { identifiers: [] });
    const head = await s.req('HEAD', T('messages'));
    assert.equal(head.status, 404);
    assert.equal(head.text, '');
  });

  test('GET /iceberg/v1/config lists exactly the routes served, with no prefix; warehouse is ignored', async () => {
    // Iceberg's endpoint format: the verb and the REST spec's path template, `{prefix}` included,
    // which is what Iceberg Java's Endpoint.V1_LOAD_TABLE and PyIceberg's Capability compare
    // against (a list without it reads to them as "loadTable not served")
    const want = {
      defaults: {},
      overrides: {},
      endpoints: [
        'GET /v1/{prefix}/namespaces',
        'GET /v1/{prefix}/namespaces/{namespace}',
        'HEAD /v1/{prefix}/namespaces/{namespace}',
        'GET /v1/{prefix}/namespaces/{namespace}/tables',
        'GET /v1/{prefix}/namespaces/{namespace}/tables/{table}',
        'HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}',
        'POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics',
      ],
    };
    for (const q of ['', '?warehouse=x', '?warehouse=s3%3A%2F%2Fanything']) {
      const r = await s.req('GET', `/iceberg/v1/config${q}`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers['content-type'], 'application/json');
      assert.deepEqual(r.json, want);
    }
  });

  test('namespaces: one, strata, with no properties and nothing under it', async () => {
    assert.deepEqual((await s.req('GET', '/iceberg/v1/namespaces')).json, { namespaces: [['strata']] });
    assert.deepEqual((await s.req('GET', '/iceberg/v1/namespaces?pageToken=&pageSize=10')).json, { namespaces: [['strata']] });
    assert.deepEqual((await s.req('GET', '/iceberg/v1/namespaces?parent=strata')).json, { namespaces: [] });
    iceError(await s.req('GET', '/iceberg/v1/namespaces?parent=other'), 404, 'NoSuchNamespaceException');
    assert.deepEqual((await s.req('GET', NS)).json, { namespace: ['strata'], properties: {} });
    const head = await s.req('HEAD', NS);
    assert.equal(head.status, 204);
    for (const p of ['/iceberg/v1/namespaces/other', '/iceberg/v1/namespaces/other/tables',
      '/iceberg/v1/namespaces/other/tables/messages', '/iceberg/v1/namespaces/strata%1Fx/tables',
      '/iceberg/v1/namespaces/..', '/iceberg/v1/namespaces/%2E%2E/tables/messages'])
      iceError(await s.req('GET', p), 404, 'NoSuchNamespaceException');
    assert.equal((await s.req('HEAD', '/iceberg/v1/namespaces/other')).status, 404);
  });

  test('a table appears once v1 is written, then follows a hint that lags behind within ~1 s', async () => {
    version('messages', 1);
    write('messages', 'version-hint.text', '1');
    await until('v1 of messages', async () => (await served('messages')) === 1);
    const r = await s.req('GET', T('messages'));
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(Object.keys(r.json).sort(), ['config', 'metadata', 'metadata-location']);
    assert.equal(r.json['metadata-location'], `file://${meta}/messages/metadata/v1.metadata.json`);
    assert.deepEqual(r.json.metadata, JSON.parse(metadataText('messages', 1, `file://${meta}/messages`)));
    assert.deepEqual(r.json.config, {});
    assert.deepEqual((await s.req('GET', `${NS}/tables`)).json,
      { identifiers: [{ namespace: ['strata'], name: 'messages' }] });
    // v2 and v3 while strata runs; the hint still says 1
    version('messages', 2);
    version('messages', 3);
    const took = await until('v3 of messages', async () => (await served('messages')) === 3, 3000);
    assert.ok(took < 2500, `served v3 after ${took} ms`);
    const v3 = await s.req('GET', T('messages'));
    assert.equal(v3.json['metadata-location'], `file://${meta}/messages/metadata/v3.metadata.json`);
    // the metadata's text as written: snapshot ids past 2^53 unchanged
    assert.ok(v3.text.includes('"current-snapshot-id":9007199254740992'), v3.text.slice(0, 300));
    assert.ok(v3.text.includes('"snapshot-id":9007199254740991'));
    const head = await s.req('HEAD', T('messages'));
    assert.equal(head.status, 204);
    assert.equal(head.text, '');
  });

  test('a hint that is garbage, a missing hint, a version that is not JSON', async () => {
    // room_messages: v1 and v2, no hint at all (strata lists metadata/)
    version('room_messages', 1);
    version('room_messages', 2);
    // bookings: a hint that is not a version, and a hint naming a version not there
    version('bookings', 1);
    write('bookings', 'version-hint.text', 'not a number\n');
    await until('room_messages v2 and bookings v1', async () => (await served('room_messages')) === 2 && (await served('bookings')) === 1);
    write('bookings', 'version-hint.text', '7');
    version('bookings', 2);
    await until('bookings v2', async () => (await served('bookings')) === 2);
    // messages: v4 is not JSON, v5 is: v5 is served, never v4
    write('messages', 'v4.metadata.json', '{"format-version":2, garbage');
    write('messages', 'version-hint.text', 'zz');
    await sleep(1500);
    assert.equal(await served('messages'), 3);
    version('messages', 5);
    await until('messages v5', async () => (await served('messages')) === 5);
    assert.deepEqual((await s.req('GET', `${NS}/tables`)).json.identifiers.map((i) => i.name),
      ['messages', 'room_messages', 'bookings']);
  });

  test('the snapshots query (all, refs) and X-Iceberg-Access-Delegation are accepted', async () => {
    for (const q of ['?snapshots=all', '?snapshots=refs', '']) {
      const r = await s.req('GET', `${T('messages')}${q}`, undefined, { 'x-iceberg-access-delegation': 'vended-credentials' });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.metadata['current-snapshot-id'] > 0, true);
    }
    iceError(await s.req('GET', `${T('messages')}?snapshots=some`), 400, 'BadRequestException');
  });

  test('strict query strings: an unknown parameter is 400 BadRequestException naming it', async () => {
    for (const p of ['/iceberg/v1/config?bye=1', '/iceberg/v1/namespaces?bye=1', `${NS}?bye=1`,
      `${NS}/tables?pageToken=&bye=1`, `${T('messages')}?snapshots=all&bye=1`, `${T('messages')}/metrics?bye=1`]) {
      const r = await s.req(p.endsWith('/metrics?bye=1') ? 'POST' : 'GET', p, p.endsWith('/metrics?bye=1') ? {} : undefined);
      iceError(r, 400, 'BadRequestException');
      assert.match(r.json.error.message, /^unknown query parameter "bye"/, p);
    }
    const twice = await s.req('GET', '/iceberg/v1/config?warehouse=a&warehouse=b');
    iceError(twice, 400, 'BadRequestException');
    assert.match(twice.json.error.message, /given twice/);
  });

  test('any change is 403 ForbiddenException', async () => {
    const writes = [
      ['POST', '/iceberg/v1/namespaces', { namespace: ['x'] }],
      ['DELETE', NS],
      ['POST', `${NS}/properties`, { updates: { a: 'b' } }],
      ['POST', `${NS}/tables`, { name: 't', schema: { type: 'struct', fields: [] } }],
      ['POST', `${NS}/register`, { name: 't', 'metadata-location': 'file:///x' }],
      ['POST', T('messages'), { requirements: [], updates: [] }],
      ['DELETE', T('messages')],
      ['DELETE', `${T('messages')}?purgeRequested=true`],
      ['PUT', T('messages'), {}],
      ['PATCH', T('messages'), {}],
      ['POST', '/iceberg/v1/tables/rename', { source: { namespace: ['strata'], name: 'messages' }, destination: { namespace: ['strata'], name: 'm2' } }],
      ['POST', '/iceberg/v1/transactions/commit', { 'table-changes': [] }],
      ['POST', `${NS}/views`, {}],
      ['POST', '/iceberg/v1/config', {}],
      ['OPTIONS', T('messages')],
      ['DELETE', T('nosuch')],
    ];
    for (const [m, p, body] of writes) {
      const r = await s.req(m, p, body);
      iceError(r, 403, 'ForbiddenException');
      assert.equal(r.headers.allow, undefined, `${m} ${p}`);
    }
    assert.equal(await served('messages'), 5, 'nothing changed');
  });

  test('POST /iceberg/v1/oauth/tokens is 400 unsupported_grant_type, whatever the body', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    for (const [body, h] of [['grant_type=client_credentials&client_id=a&client_secret=b&scope=catalog', form], [undefined, {}], [{}, {}]]) {
      const r = await s.req('POST', '/iceberg/v1/oauth/tokens', body, h);
      assert.equal(r.status, 400, r.text);
      // exactly the SPEC's body (v5 §5.1), no other member
      assert.deepEqual(r.json, { error: 'unsupported_grant_type' });
    }
    iceError(await s.req('GET', '/iceberg/v1/oauth/tokens'), 403, 'ForbiddenException');
  });

  test('metrics reports: 204 and dropped, bounded by --max-body', async () => {
    const report = { 'report-type': 'scan-report', 'table-name': 'strata.messages', 'snapshot-id': 1, filter: { type: 'true' }, 'schema-id': 0, 'projected-field-ids': [1], 'projected-field-names': ['user'], metrics: {} };
    const r = await s.req('POST', `${T('messages')}/metrics`, report);
    assert.equal(r.status, 204, r.text);
    assert.equal(r.text, '');
    assert.equal((await s.req('POST', `${T('messages')}/metrics`)).status, 204);
    iceError(await s.req('POST', `${T('nosuch')}/metrics`, report), 404, 'NoSuchTableException');
    iceError(await s.req('POST', `/iceberg/v1/namespaces/x/tables/messages/metrics`, report), 404, 'NoSuchNamespaceException');
    const big = await s.req('POST', `${T('messages')}/metrics`, { ...report, pad: 'x'.repeat(8000) });
    assert.equal(big.status, 413);
  });

  test('hostile names: 10 KB, dot-dot, escapes, NUL; unknown paths under /iceberg', async () => {
    const long = await s.req('GET', T('m'.repeat(10240)));
    iceError(long, 404, 'NoSuchTableException');
    assert.ok(long.text.length < 400, long.text.slice(0, 400));
    for (const name of ['..', '%2E%2E', '..%2F..%2Fmessages', '..%2Fmessages%2Fmetadata%2Fv1.metadata.json',
      'messages%00', 'MESSAGES', 'messages%20', '%ff%fe', 'version-hint.text'])
      iceError(await s.req('GET', T(name)), 404, 'NoSuchTableException');
    iceError(await s.req('GET', T('%zz')), 400, 'BadRequestException');
    for (const p of ['/iceberg', '/iceberg/', '/iceberg/v1', '/iceberg/v1/nope', `${T('messages')}/../messages`,
      `${T('messages')}/snapshots`, '/iceberg/v2/config', '/iceberg/v1/strata/namespaces'])
      iceError(await s.req('GET', p), 404, 'NotFoundException');
    // the rest of strata keeps its own error shape
    const v1 = await s.req('GET', '/v1/nope');
    assert.equal(v1.status, 404);
    assert.equal(v1.json.error.code, 'not_found');
    assert.equal((await s.req('GET', '/icebergs')).json.error.code, 'not_found');
    // pipelined: the catalog's answers in order on one connection
    const out = parseResponses(await raw(s.port, `GET ${NS} HTTP/1.1\r\nHost: x\r\n\r\nHEAD ${T('messages')} HTTP/1.1\r\nHost: x\r\n\r\nGET ${T('nosuch')} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    assert.deepEqual(out.map((r) => r.status), [200, 204, 404]);
  });

  test('what the HTTP layer refuses before routing is in Iceberg\'s shape under /iceberg/, strata\'s elsewhere (issue 47)', async () => {
    const one = async (bytes) => {
      const [r] = parseResponses(await raw(s.port, bytes, { idleMs: 500 }));
      assert.ok(r, `no answer to ${JSON.stringify(bytes.slice(0, 80))}`);
      return { status: r.status, text: r.body, json: r.json };
    };
    const body = 'x'.repeat(5000); // --max-body 4096
    const cases = [
      // 413: the body is over --max-body (known from Content-Length, and from a chunked body)
      [(p) => `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 413, 'BadRequestException'],
      [(p) => `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`, 413, 'BadRequestException'],
      // 431: a header over --max-header (16 KiB), and a request target over it
      [(p) => `GET ${p} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`, 431, 'BadRequestException'],
      [(p) => `GET ${p}/${'a'.repeat(20000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431, 'BadRequestException'],
      // 501: a method no one knows; 400: a Content-Length that is not a number
      [(p) => `BREW ${p} HTTP/1.1\r\nHost: x\r\n\r\n`, 501, 'UnsupportedOperationException'],
      [(p) => `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n`, 400, 'BadRequestException'],
    ];
    for (const [req, status, type] of cases) {
      for (const p of [`${T('messages')}/metrics`, '/iceberg/v1/config'])
        iceError(await one(req(p)), status, type);
      const v1 = await one(req('/v1/counters/c/incr'));
      assert.equal(v1.status, status, v1.text);
      assert.equal(typeof v1.json.error.code, 'string', `strata's own shape outside /iceberg: ${v1.text}`);
    }
  });
});

describe('the Iceberg REST catalog with auth on', () => {
  let s;
  const SECRET = 'iceberg-catalog-secret';
  const ADMIN = { authorization: `Bearer ${jwt(SECRET, { sub: 'ops', role: 'admin' })}` };
  const USER = { authorization: `Bearer ${jwt(SECRET, { sub: 'alice' })}` };
  before(async () => {
    const dir = tempDir('iceberg-auth');
    const md = path.join(dir, 'cold', '_tables', 'bookings', 'metadata');
    mkdirSync(md, { recursive: true });
    writeFileSync(path.join(md, 'v1.metadata.json'), metadataText('bookings', 1, 'file:///x'));
    writeFileSync(path.join(md, 'version-hint.text'), '1');
    // messages: its first versions expired, and no hint: found by listing metadata/
    const mm = path.join(dir, 'cold', '_tables', 'messages', 'metadata');
    mkdirSync(mm, { recursive: true });
    for (const n of [4, 5]) writeFileSync(path.join(mm, `v${n}.metadata.json`), metadataText('messages', n, 'file:///x'));
    writeFileSync(path.join(mm, 'v6.metadata.json.tmp-1'), 'half a file');
    s = await startStrata({ dataDir: dir, args: ['--jwt-secret', SECRET, '--table-commit-interval', '0'] });
  });
  after(async () => { if (s) { await s.stop(); s.cleanup(); } });

  test('an admin token reads; none is 401 NotAuthorizedException; a user\'s is 403 ForbiddenException', async () => {
    await until('bookings v1', async () => (await s.req('GET', T('bookings'), undefined, ADMIN)).status === 200);
    const m = await s.req('GET', T('messages'), undefined, ADMIN);
    assert.equal(m.status, 200, m.text);
    assert.equal(m.json.metadata.properties['strata.version'], '5');
    assert.match(m.json['metadata-location'], /\/messages\/metadata\/v5\.metadata\.json$/);
    for (const p of ['/iceberg/v1/config', '/iceberg/v1/namespaces', NS, `${NS}/tables`, T('bookings')]) {
      assert.equal((await s.req('GET', p, undefined, ADMIN)).status, 200, p);
      const none = await s.req('GET', p);
      iceError(none, 401, 'NotAuthorizedException');
      assert.match(none.headers['www-authenticate'], /^Bearer/);
      iceError(await s.req('GET', p, undefined, { authorization: 'Bearer nope' }), 401, 'NotAuthorizedException');
      iceError(await s.req('GET', p, undefined, USER), 403, 'ForbiddenException');
    }
    assert.equal((await s.req('HEAD', T('bookings'), undefined, ADMIN)).status, 204);
    assert.equal((await s.req('HEAD', T('bookings'))).status, 401);
    assert.equal((await s.req('POST', `${T('bookings')}/metrics`, {}, ADMIN)).status, 204);
    iceError(await s.req('POST', `${T('bookings')}/metrics`, {}), 401, 'NotAuthorizedException');
    iceError(await s.req('POST', `${T('bookings')}/metrics`, {}, USER), 403, 'ForbiddenException');
    // a change is refused whoever asks
    iceError(await s.req('DELETE', T('bookings'), undefined, ADMIN), 403, 'ForbiddenException');
    iceError(await s.req('POST', '/iceberg/v1/namespaces', { namespace: ['x'] }), 403, 'ForbiddenException');
    // the token endpoint needs no token, and gives none
    const tok = await s.req('POST', '/iceberg/v1/oauth/tokens', 'grant_type=client_credentials', { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(tok.status, 400);
    assert.equal(tok.json.error, 'unsupported_grant_type');
  });

  test('a reader of Iceberg tables (icebird) reads a table from what the catalog answers', async () => {
    const dir = path.join(realpathSync(s.dir), 'cold', '_tables', 'room_messages');
    const rows = [{ user: 'alice', msg_id: 1 }, { user: 'bob', msg_id: 2 }, { user: 'alice', msg_id: 3 }];
    const text = tinyTable(dir, rows);
    writeFileSync(path.join(dir, 'metadata', '.tmp-v1'), text);
    renameSync(path.join(dir, 'metadata', '.tmp-v1'), path.join(dir, 'metadata', 'v1.metadata.json'));
    await until('room_messages v1', async () => (await s.req('GET', T('room_messages'), undefined, ADMIN)).status === 200);
    const r = await s.req('GET', `${T('room_messages')}?snapshots=refs`, undefined, ADMIN);
    assert.equal(r.json['metadata-location'], `file://${dir}/metadata/v1.metadata.json`);
    const got = await withFileFetch(() => icebergRead({ tableUrl: r.json.metadata.location, metadata: r.json.metadata }));
    assert.deepEqual(got.map((x) => [x.user, Number(x.msg_id)]), rows.map((x) => [x.user, x.msg_id]));
    // and from the metadata file the location names, as an engine given only the location would
    const again = await withFileFetch(() => icebergRead({ tableUrl: r.json.metadata.location, metadataFileName: path.basename(r.json['metadata-location']) }));
    assert.equal(again.length, 3);
  });
});

describe('the Iceberg REST catalog on an S3 cold tier', () => {
  let s;
  let server;
  let port;
  let dir;
  const SECRET_KEY = 'S3RVER';
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'strata-ice-s3-'));
    server = new S3rver({ address: '127.0.0.1', port: await freePort(), directory: dir, silent: true, configureBuckets: [{ name: 'cold' }] });
    port = (await server.run()).port;
    // v1 of messages, put as the committer would (signed)
    const key = 'strata/prefix/_tables/messages/metadata/v1.metadata.json';
    const body = metadataText('messages', 2, 's3://cold/strata/prefix/_tables/messages');
    const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: { accessKeyId: 'S3RVER', secretAccessKey: SECRET_KEY }, sha256: Hash.bind(null, 'sha256') });
    const req = await signer.sign({
      method: 'PUT', protocol: 'http:', hostname: '127.0.0.1', port, path: `/cold/${key}`,
      headers: { host: `127.0.0.1:${port}`, 'x-amz-content-sha256': createHash('sha256').update(body).digest('hex'), 'content-length': String(Buffer.byteLength(body)) },
      body,
    });
    const put = await fetch(`http://127.0.0.1:${port}/cold/${key}`, { method: 'PUT', headers: req.headers, body });
    assert.equal(put.status, 200, await put.text());
    s = await startStrata({
      args: ['--cold-url', 's3://cold/strata/prefix/', '--s3-endpoint', `http://127.0.0.1:${port}`, '--s3-region', 'eu-west-3',
        '--s3-access-key', 'S3RVER', '--s3-secret-key', SECRET_KEY, '--flush-interval', '3600', '--table-commit-interval', '0'],
    });
  });
  after(async () => {
    if (s) { await s.stop(); s.cleanup(); }
    if (server) await server.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('the table config names the endpoint, path style and region; no answer carries the keys', async () => {
    await until('messages on S3', async () => (await s.req('GET', T('messages'))).status === 200, 10000);
    const r = await s.req('GET', T('messages'));
    assert.equal(r.json['metadata-location'], 's3://cold/strata/prefix/_tables/messages/metadata/v1.metadata.json');
    assert.deepEqual(r.json.config, { 's3.endpoint': `http://127.0.0.1:${port}`, 's3.path-style-access': 'true', 'client.region': 'eu-west-3' });
    assert.equal(r.json.metadata['current-snapshot-id'], 9007199254740991);
    const answers = [r];
    for (const p of ['/iceberg/v1/config', '/iceberg/v1/namespaces', NS, `${NS}/tables`, T('nosuch')])
      answers.push(await s.req('GET', p));
    for (const a of answers) {
      assert.ok(!a.text.includes(SECRET_KEY), a.text.slice(0, 300));
      assert.ok(!JSON.stringify(a.headers).includes(SECRET_KEY));
    }
  });
});
