// SPDX-License-Identifier: MIT
// A cold object the manifest lists is missing from storage: only the pages that need its rows
// fail (503 cold_unavailable, SPEC §1 and §7; src/chat/cold_rows.c), for a user's messages and
// a room's alike. Four objects a..d (a the oldest, one flush each) and a few hot messages; a
// gone, strata restarted so that nothing of any object is in memory. The newest pages, and the
// pages after a cursor that lies in b..d, are answered with exactly the messages posted there
// (before any read has seen a fail, and after); the oldest page, and a page reaching into a, answer
// 503. Once a is back every page is whole again.
import assert from 'node:assert/strict';
import { renameSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { parquetFiles, waitFor } from './cold-lib.mjs';
import { roomsApi } from './rooms-lib.mjs';
import { FLUSH_ON_ASK, startStrata } from './lib.mjs';

const SECRET = 'cold-missing-pages-secret';
const { bearer, admin, ok } = roomsApi(SECRET);
const ENV = { STRATA_JWT_SECRET: SECRET };
const PARTS = ['a', 'b', 'c', 'd'];
const PER = 8; // messages per object
const HOT = 3;
const ROOM = 'mp';

// the two owners: where their objects are, how they post, where they are read
const OWNERS = {
  user: {
    folder: ['mia'],
    say: (s, i) => ok(s, 'POST', '/v1/users/mia/messages', { conversation_id: 'c', from: 'mia', content: `u${i}` }, bearer('mia')),
    read: (s, q) => s.req('GET', `/v1/users/mia/messages?${new URLSearchParams(q)}`, undefined, bearer('mia')),
  },
  room: {
    folder: ['shared', 'conversations', ROOM],
    say: (s, i) => ok(s, 'POST', `/v1/rooms/${ROOM}/messages`, { from: 'ann', content: `r${i}` }, bearer('ann')),
    read: (s, q) => s.req('GET', `/v1/rooms/${ROOM}/messages?${new URLSearchParams(q)}`, undefined, admin),
  },
};

const objectsOf = (dir, o) => parquetFiles(path.join(dir, 'cold', ...o.folder)).filter((f) => !path.basename(f).startsWith('delta-'));

describe('a missing cold object fails only the pages that need it', () => {
  test('users and rooms: the newest pages and those after a cursor past it are answered; those reaching into it 503', async () => {
    let s = await startStrata({ args: FLUSH_ON_ASK, env: ENV });
    try {
      await ok(s, 'POST', '/v1/rooms', { room_id: ROOM, members: ['ann'] });
      const ids = { user: [], room: [] };
      const first = {}; // owner -> the object written by the first flush (the oldest)
      for (const part of PARTS) {
        const had = Object.fromEntries(Object.entries(OWNERS).map(([k, o]) => [k, new Set(objectsOf(s.dir, o))]));
        for (const [k, o] of Object.entries(OWNERS)) {
          for (let i = 0; i < PER; i++) ids[k].push((await o.say(s, ids[k].length)).msg_id);
        }
        await ok(s, 'POST', '/v1/admin/flush');
        for (const [k, o] of Object.entries(OWNERS)) {
          const fresh = await waitFor(`object ${part} of the ${k}`, async () => {
            const f = objectsOf(s.dir, o).filter((x) => !had[k].has(x));
            return f.length === 1 && /^strata_flush_running 0$/m.test((await s.req('GET', '/metrics', undefined, admin)).text) && f;
          }, 60000);
          if (part === 'a') first[k] = fresh[0];
        }
      }
      for (const [k, o] of Object.entries(OWNERS)) {
        for (let i = 0; i < HOT; i++) ids[k].push((await o.say(s, ids[k].length)).msg_id);
        assert.equal(objectsOf(s.dir, o).length, PARTS.length, `one object per flush for the ${k}`);
      }
      await s.stop();
      // the oldest objects gone; nothing of any object in memory
      for (const k of Object.keys(OWNERS)) renameSync(first[k], `${first[k]}.away`);
      s = await startStrata({ dataDir: s.dir, args: FLUSH_ON_ASK, env: ENV });

      for (const [k, o] of Object.entries(OWNERS)) {
        const all = ids[k]; // a: [0, PER), b: [PER, 2 PER), ... hot last
        const n = all.length;
        const answered = async (q, want, next, what) => {
          const r = await o.read(s, q);
          assert.equal(r.status, 200, `${k} ${what}: ${r.text}`);
          assert.deepEqual(r.json.messages.map((m) => m.msg_id), want, `${k} ${what}`);
          assert.equal(r.json.next, next, `${k} ${what}: next`);
          return r.json;
        };
        const refused = async (q, what) => {
          const r = await o.read(s, q);
          assert.equal(r.status, 503, `${k} ${what}: ${r.text}`);
          assert.equal(r.json.error.code, 'cold_unavailable', `${k} ${what}`);
        };
        const servedPages = async (when) => {
          // the newest 10: the hot ones and d's (one of c's tells there is more)
          await answered({ order: 'desc', limit: '10' }, all.slice(n - 10).reverse(), all[n - 10], `newest 10 ${when}`);
          // the newest 26: hot, d, c and all of b but its oldest (that one tells there is more)
          const p = await answered({ order: 'desc', limit: '26' }, all.slice(n - 26).reverse(), all[n - 26], `newest 26 ${when}`);
          // the page after that cursor holds b's oldest, then a's: it needs a
          await refused({ order: 'desc', limit: '26', cursor: p.next }, `the page after the newest 26 ${when}`);
          // the newest 27 end at b's oldest: that there is more the manifest tells (a's ids are
          // all older), a itself is not needed
          await answered({ order: 'desc', limit: '27' }, all.slice(n - 27).reverse(), all[n - 27], `newest 27 ${when}`);
          // oldest first, after a's last id: b's and c's
          await answered({ after: all[PER - 1], limit: '10' }, all.slice(PER, PER + 10), all[PER + 9], `after a ${when}`);
          // a cursor in b, then the next page from its next
          const q = await answered({ limit: '5', cursor: all[PER + 3] }, all.slice(PER + 4, PER + 9), all[PER + 8], `after a cursor in b ${when}`);
          await answered({ limit: '5', cursor: q.next }, all.slice(PER + 9, PER + 14), all[PER + 13], `the page after that ${when}`);
          // just before an id in c (walked back, listed oldest first): c's and b's
          await answered({ before: all[2 * PER + 4], limit: '6' }, all.slice(2 * PER - 2, 2 * PER + 4), all[2 * PER - 2], `before an id in c ${when}`);
        };
        await servedPages('before any read needed a');
        // the pages that need a: the oldest first, the one just before b, one that ends in a
        await refused({}, 'the oldest page');
        await refused({ before: all[PER], limit: '3' }, 'the page just before b');
        await refused({ after: all[PER - 3], limit: '5' }, 'a page that starts in a');
        await refused({ order: 'desc', limit: String(n) }, 'every message, newest first');
        await servedPages('after reads that needed a');
        if (k === 'user') {
          const r = await o.read(s, { conversation_id: 'c', order: 'desc', limit: '4' });
          assert.equal(r.status, 200, r.text);
          assert.deepEqual(r.json.messages.map((m) => m.msg_id), all.slice(n - 4).reverse());
        }
      }

      // a back: every message, oldest first, in one page
      for (const [k, o] of Object.entries(OWNERS)) {
        renameSync(`${first[k]}.away`, first[k]);
        const r = await waitFor(`the ${k}'s oldest object read again`, async () => {
          const x = await o.read(s, { limit: '1000' });
          return x.status === 200 && x;
        });
        assert.deepEqual(r.json.messages.map((m) => m.msg_id), ids[k], `${k}: every message once a is back`);
        assert.equal(r.json.next, null);
      }
    } finally {
      await s.stop();
      s.cleanup();
    }
  });
});
