// An erasure is done only once no object holds the user's text (SPEC §2.2, v5 §5.1): its own
// objects deleted with their folder, and the room messages it posted — tombstones now — folded
// into the rooms' objects, with the delta objects that held an earlier version merged away.
// Every Parquet file under the cold tier is read with DuckDB, not with strata.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { duckRows, parquetFiles, waitFor } from './cold-lib.mjs';
import { startStrata } from './lib.mjs';

const walk = (d) => {
  let names;
  try { names = readdirSync(d); } catch { return []; }
  return names.flatMap((n) => {
    const p = path.join(d, n);
    let st;
    try { st = statSync(p); } catch { return []; }
    return st.isDirectory() ? [p + '/', ...walk(p)] : [p];
  });
};
const json = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? String(x) : x));

describe('an erasure reaches every cold object', () => {
  let s;
  before(async () => { s = await startStrata({ args: ['--flush-interval', '3600'] }); });
  after(async () => { await s.stop(); s.cleanup(); });

  test('its room messages are folded out of the room objects and deltas before it is done', async () => {
    const P = async (p, b) => { const r = await s.req('POST', p, b); assert.ok(r.status < 300, `${p}: ${r.text}`); return r.json; };
    await P('/v1/rooms', { room_id: 'lobby', members: ['bob', 'amy'] });
    for (let i = 0; i < 3; i++) await P('/v1/rooms/lobby/messages', { from: 'bob', content: `bob-secret-${i}` });
    await P('/v1/rooms/lobby/messages', { from: 'amy', content: 'amy-stays' });
    await P('/v1/users/bob/messages', { conversation_id: 'diary', from: 'bob', content: 'bob-own-secret' });
    await P('/v1/admin/flush');
    const cold = path.join(s.dir, 'cold');
    const pf = (d) => { try { return parquetFiles(d); } catch { return []; } };
    await waitFor('both cooled', () => pf(path.join(cold, 'shared', 'conversations', 'lobby')).length > 0 && pf(path.join(cold, 'bob')).length > 0);
    // an edit of a cold room message: its earlier text goes into a delta object's edit_history
    const first = (await s.req('GET', '/v1/rooms/lobby/messages?limit=1')).json.messages[0];
    assert.equal((await s.req('PATCH', `/v1/rooms/lobby/messages/${first.msg_id}`, { content: 'bob-edited-secret' })).status, 200);
    await P('/v1/admin/flush');
    await waitFor('the delta object', () => pf(path.join(cold, 'shared', 'conversations', 'lobby')).some((f) => path.basename(f).startsWith('delta-')));

    const r = await s.req('DELETE', '/v1/users/bob');
    assert.equal(r.status, 202, r.text);
    await waitFor('the erasure done', async () => (await s.req('GET', `/v1/admin/erasures/${r.json.erasure_id}`)).json.status === 'done', 60000);
    // the moment it says done, nothing of bob's text is in any object
    const files = pf(cold);
    assert.ok(files.length > 0);
    let amy = 0;
    for (const f of files) {
      const rows = await duckRows([f]);
      const text = json(rows);
      assert.doesNotMatch(text, /secret/, `${path.relative(cold, f)} holds bob's text: ${text.slice(0, 400)}`);
      amy += rows.filter((x) => x.content === 'amy-stays').length;
    }
    assert.equal(amy, 1, "amy's message is still there, once");
    // bob's own folder went with its objects
    assert.equal(existsSync(path.join(cold, 'bob')), false, walk(cold).join('\n'));
    // the room reads as tombstones for bob's posts, amy's intact
    const msgs = (await s.req('GET', '/v1/rooms/lobby/messages?limit=10')).json.messages;
    assert.deepEqual(msgs.map((m) => m.content), [null, null, null, 'amy-stays']);
  });
});
