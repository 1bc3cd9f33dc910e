// SPDX-License-Identifier: MIT
// A tables' commit on an S3 tier reads no data file's footer (SPEC §7: no request waits on object
// storage; issue 48): a flush of many owners writes many new files, each file record carrying the
// column stats taken where the file was encoded (src/cold/colstats.c), and the commit that adds
// them builds their manifest entries' column metrics from those records. On the old code the
// commit read every new file's Parquet footer back (a ranged GET of each: ~10 s of commit lag and
// 4,096 GETs for a commit of 4,096 files on S3). The metrics are still exactly those DuckDB reads
// in each file (iceberg-lib.mjs's checkMetrics).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { s3 } from './backup-lib.mjs';
import { waitFor } from './cold-lib.mjs';
import { avroRecords, checkMetrics } from './iceberg-lib.mjs';
import { startStrata, tempDir } from './lib.mjs';

const USERS = 48; // one new file each: a commit of USERS new files

test('tables on S3: a commit of many new files issues no footer GET, and their metrics are right', async () => {
  const dir = tempDir('tables-s3-metrics');
  const { server, port } = await s3(dir);
  const proxy = server.proxy;
  const bucket = path.join(dir, 'bk');
  // an object of the bucket as s3rver keeps it on disk, as a file:// URL (for DuckDB and avsc)
  const local = (uri) => pathToFileURL(path.join(bucket, `${new URL(uri).pathname.replace(/^\//, '')}._S3rver_object`)).href;
  const s = await startStrata({
    args: ['--table-commit-interval', '1', '--cold-url', 's3://bk/cold', '--s3-endpoint', `http://127.0.0.1:${port}`,
      '--s3-access-key', 'S3RVER', '--s3-secret-key', 'S3RVER', '--flush-interval', '3600'],
  });
  try {
    for (let u = 0; u < USERS; u++) {
      for (let i = 0; i < 3; i++) {
        const r = await s.req('POST', `/v1/users/sm${u}/messages`, { conversation_id: `c${i % 2}`, from: 'x', content: `m ${u}/${i}`, ...(i ? { metadata: { i } } : {}) });
        assert.equal(r.status, 201, r.text);
      }
    }
    const before = proxy.log.length;
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    for (let u = 0; u < USERS; u++)
      await waitFor(`sm${u} flushed`, async () => (await s.req('GET', `/v1/users/sm${u}/stats`)).json.cold_messages === 3, 30000);
    await waitFor('the commit of every flushed file', async () => {
      const r = await s.req('GET', '/v1/admin/tables');
      const m = r.json.tables.find((x) => x.table === 'messages');
      return m.snapshot_id !== null && m.pending === 0;
    }, 60000);
    const seen = proxy.log.slice(before);
    const puts = seen.filter((l) => /^PUT (\/bk)?\/cold\/(?!_tables\/)\S*\.parquet/.test(l));
    assert.ok(puts.length >= USERS, `${puts.length} data files put`);
    // a data file's GET (its footer, a ranged read) is what the old commit did once per new file
    const gets = seen.filter((l) => /^GET (\/bk)?\/cold\/(?!_tables\/)\S*\.parquet/.test(l));
    assert.deepEqual(gets, [], 'no data file was read back for the commit');

    // the manifests' metrics: those of each file as DuckDB reads it
    const metaDir = path.join(bucket, 'cold/_tables/messages/metadata');
    const current = () => {
      const v = Number(readFileSync(path.join(metaDir, 'version-hint.text._S3rver_object'), 'utf8'));
      const m = JSON.parse(readFileSync(path.join(metaDir, `v${v}.metadata.json._S3rver_object`), 'utf8'));
      const snap = m.snapshots.find((x) => x['snapshot-id'] === m['current-snapshot-id']);
      const ents = [];
      for (const mf of avroRecords(readFileSync(new URL(local(snap['manifest-list'])))).records) {
        const man = avroRecords(readFileSync(new URL(local(mf.manifest_path))));
        for (const e of man.records)
          if (e.status !== 2) ents.push({ ...e, schema: man.schema, data_file: { ...e.data_file, file_path: local(e.data_file.file_path) } });
      }
      return { m, ents };
    };
    let { m, ents } = current();
    assert.equal(await checkMetrics('messages', m, ents), USERS, 'every file with its metrics');
    assert.ok(ents.every((e) => e.data_file.value_counts?.length > 0), 'no file without metrics');

    // a compaction's merged file carries its stats too: its commit reads it back no more
    for (let i = 0; i < 3; i++)
      assert.equal((await s.req('POST', '/v1/users/sm0/messages', { conversation_id: 'c9', from: 'y', content: `late ${i}` })).status, 201);
    assert.equal((await s.req('POST', '/v1/admin/flush')).status, 202);
    await waitFor('sm0 flushed again', async () => (await s.req('GET', '/v1/users/sm0/stats')).json.cold_messages === 6, 30000);
    const mark = proxy.log.length;
    assert.equal((await s.req('POST', '/v1/admin/compact', { user: 'sm0' })).status, 202);
    const merged = await waitFor('sm0 compacted', () => {
      const put = proxy.log.slice(mark).find((l) => /^PUT (\/bk)?\/cold\/sm0\/\S*\.parquet \d+$/.test(l));
      return put ? put.split(' ')[1].replace(/\?.*$/, '') : null;
    }, 30000);
    await waitFor('the compaction committed', () => {
      ({ m, ents } = current());
      const sm0 = ents.filter((e) => e.data_file.partition?.user === 'sm0' || /\/sm0\//.test(e.data_file.file_path));
      return sm0.length === 1 && sm0[0].data_file.file_path.includes(path.basename(merged)) ? true : null;
    }, 30000);
    const read = proxy.log.slice(mark).filter((l) => l.startsWith(`GET ${merged}`));
    assert.deepEqual(read, [], 'the merged file was not read back for the commit');
    assert.equal(await checkMetrics('messages', m, ents), USERS, 'the merged file with its metrics');
    assert.ok(ents.every((e) => e.data_file.value_counts?.length > 0), 'no file without metrics');
    await s.stop();
  } catch (e) {
    console.error(s.log().slice(-4000));
    throw e;
  } finally {
    if (s.proc.exitCode === null) await s.kill9();
    s.cleanup();
    await server.close();
  }
});
