// SPDX-License-Identifier: MIT
// Rooms across groups (SPEC §10): two strata "groups" behind Debian's nginx running the shipped
// deploy/nginx/strata.conf, each with --route-url = the proxy. A room on one group whose member's
// key (user:{u}) lives on the other reaches that user's room list through the room group's
// durable outbox, within seconds, as {room_id, name, joined_at, remote:true}; a removal takes it
// away; the outbox survives kill -9 of the room's group before delivery and delivers once; a
// replayed Idempotency-Key changes nothing; without --route-url nothing is written to an outbox.
// The other way (SPEC §2.2): erasing a user on its group reaches its rooms on the other group
// through the user's group's outbox (kill -9 before delivery included): its messages there
// become tombstones (rooms it left too) and it leaves them; the room's group's counts leave its
// posts out from that group's erasure on, while the erasure's slices there are held (the rooms'
// author index, src/rooms/authors.c).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, renameSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { request, runStrata, skipIf, sleep, startStrata, tempDir } from './lib.mjs';
import { clientCleanup, loadClient } from './client-lib.mjs';
import { NGINX, freePort, nginxConfig, startProxy } from './proxy-lib.mjs';

async function pending(node) {
  const r = await node.req('GET', '/metrics');
  const m = /^strata_outbox_pending (\d+)/m.exec(r.text);
  assert.ok(m, 'strata_outbox_pending is in /metrics');
  return Number(m[1]);
}

async function until(what, fn, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('rooms across two groups behind nginx', { skip: skipIf(!existsSync(NGINX) && `${NGINX} not installed (tools/install-deps.sh --test)`) }, () => {
  let nodes = [], ports = [], proxy, port, dir;
  const via = (method, p, body, headers) => request(port, method, p, body, headers);
  const start = (i, dataDir) => startStrata({
    dataDir,
    args: ['--listen', `127.0.0.1:${ports[i]}`, '--node-id', String(i + 1),
      '--route-url', `http://127.0.0.1:${port}`],
  });
  const startNginx = async () => { proxy = await startProxy('nginx', nginxConfig(dir, port, ports), port); };

  before(async () => {
    dir = tempDir('outbox-proxy');
    port = await freePort();
    ports = [await freePort(), await freePort()];
    nodes = [await start(0), await start(1)];
    await startNginx();
  });
  after(async () => {
    if (proxy) await proxy.stop();
    for (const n of nodes) { await n.stop(); n.cleanup(); }
    clientCleanup();
  });

  // Where a key lives, asked of each node directly.
  async function roomNode(room) {
    const at = [];
    for (let i = 0; i < nodes.length; i++) if ((await nodes[i].req('GET', `/v1/rooms/${room}`)).status === 200) at.push(i);
    assert.equal(at.length, 1, `room ${room} is on nodes ${at}`);
    return at[0];
  }
  async function userNode(user) {
    assert.equal((await via('POST', `/v1/users/${user}/messages`, { conversation_id: 'c', from: user, content: 'x' })).status, 201);
    const at = [];
    for (let i = 0; i < nodes.length; i++) if ((await nodes[i].req('GET', `/v1/users/${user}/stats`)).json.total_messages > 0) at.push(i);
    assert.equal(at.length, 1);
    return at[0];
  }
  // A new room (through the proxy) on node `want`, created with members.
  async function roomOn(want, tag, members, name) {
    for (let i = 0; i < 40; i++) {
      const id = `${tag}${i}`;
      const r = await via('POST', `/v1/rooms?route=room:${id}`, { room_id: id, name, members: ['probe'] });
      assert.equal(r.status, 201);
      if (await roomNode(id) === want) {
        if (members.length) assert.equal((await via('POST', `/v1/rooms/${id}/members`, { add: members })).status, 200);
        return id;
      }
    }
    throw new Error('no room hashed to the node');
  }
  async function userOn(want, tag) {
    for (let i = 0; i < 40; i++) if (await userNode(`${tag}${i}`) === want) return `${tag}${i}`;
    throw new Error('no user hashed to the node');
  }
  const listOf = async (user, q = '') => {
    const r = await via('GET', `/v1/users/${user}/rooms${q}`);
    assert.equal(r.status, 200);
    return r.json;
  };

  test('a room on one group reaches its member\'s list on the other, and leaves it', async () => {
    const u = await userOn(1, 'amy');
    const room = await roomOn(0, 'lobby', [u], 'The Lobby');
    const row = await until('the remote room in the list', async () => (await listOf(u)).rooms.find((x) => x.room_id === room));
    const members = (await via('GET', `/v1/rooms/${room}/members`)).json.members;
    const joined = members.find((m) => m.user === u).joined_at;
    assert.deepEqual(row, { room_id: room, name: 'The Lobby', joined_at: joined, remote: true });
    // The client library reads a remote room's activity from the room (SPEC §10).
    assert.equal((await via('POST', `/v1/rooms/${room}/messages`, { from: u, content: 'hello' })).status, 201);
    const { Strata } = await loadClient();
    const db = new Strata({ baseUrl: `http://127.0.0.1:${port}` });
    const seen = (await db.userRooms(u)).rooms.find((x) => x.room_id === room);
    const truth = (await via('GET', `/v1/rooms/${room}`)).json;
    assert.equal(seen.remote, true);
    assert.equal(seen.total_messages, 1);
    assert.equal(seen.last_msg_id, truth.last_msg_id);
    assert.equal(seen.updated, truth.updated);
    await until('the outbox emptied', async () => (await pending(nodes[0])) === 0);
    // A local room of the user's group too: one list, paged exactly, each room once.
    const home = await roomOn(1, 'home', [u], 'Home');
    const all = (await listOf(u)).rooms;
    assert.deepEqual(all.map((x) => x.room_id).sort(), [home, room].sort());
    assert.equal(all.find((x) => x.room_id === home).remote, undefined, 'the local room is exact');
    assert.equal(typeof all.find((x) => x.room_id === home).total_messages, 'number');
    const p1 = await listOf(u, '?limit=1');
    assert.equal(p1.rooms.length, 1);
    assert.ok(p1.next);
    const p2 = await listOf(u, `?limit=1&cursor=${encodeURIComponent(p1.next)}`);
    assert.equal(p2.rooms.length, 1);
    assert.equal(p2.next, null);
    assert.deepEqual([p1.rooms[0].room_id, p2.rooms[0].room_id], all.map((x) => x.room_id));
    // A member whose key is on the room's own group sees it once, as a local room.
    const v = await userOn(0, 'val');
    assert.equal((await via('POST', `/v1/rooms/${room}/members`, { add: [v] })).status, 200);
    await until('the outbox emptied', async () => (await pending(nodes[0])) === 0);
    const vl = (await listOf(v)).rooms.filter((x) => x.room_id === room);
    assert.equal(vl.length, 1);
    assert.equal(vl[0].remote, undefined);
    // Removing the member takes the room out of its list.
    assert.equal((await via('POST', `/v1/rooms/${room}/members`, { remove: [u] })).status, 200);
    await until('the remote room gone', async () => !(await listOf(u)).rooms.some((x) => x.room_id === room));
    assert.deepEqual((await listOf(u)).rooms.map((x) => x.room_id), [home]);
  });

  test('the outbox survives kill -9 before delivery and delivers once', async () => {
    const u = await userOn(1, 'kim');
    const room = await roomOn(0, 'den', [], 'Den');
    await proxy.stop(); // the route is down: nothing can be delivered
    assert.equal((await nodes[0].req('POST', `/v1/rooms/${room}/members`, { add: [u] })).status, 200);
    assert.equal((await nodes[0].req('POST', `/v1/rooms/${room}/members`, { add: ['kim-friend'] })).status, 200);
    await sleep(300);
    assert.ok(await pending(nodes[0]) >= 2, 'the changes wait in the outbox');
    await nodes[0].kill9();
    nodes[0] = await start(0, nodes[0].dir);
    assert.ok(await pending(nodes[0]) >= 2, 'the outbox came back after kill -9');
    await startNginx();
    const row = await until('delivered after the restart', async () => (await listOf(u)).rooms.find((x) => x.room_id === room), 20000);
    assert.equal(row.remote, true);
    assert.equal(row.name, 'Den');
    await until('the outbox emptied', async () => (await pending(nodes[0])) === 0, 20000);
    assert.equal((await listOf(u)).rooms.filter((x) => x.room_id === room).length, 1, 'no duplicate');
  });

  // The room's messages as the room's group holds them, by author.
  const byAuthor = async (node, room) => {
    const r = await node.req('GET', `/v1/rooms/${room}/messages?limit=100`);
    assert.equal(r.status, 200, r.text);
    return (u) => r.json.messages.filter((m) => m.from === u);
  };
  const memberOf = async (node, room, u) => (await node.req('GET', `/v1/rooms/${room}/members`)).json.members.some((m) => m.user === u);
  const say = async (room, from, content) => assert.equal((await via('POST', `/v1/rooms/${room}/messages`, { from, content })).status, 201);

  test('an erasure on the user\'s group reaches its rooms on the other group', async () => {
    const u = await userOn(0, 'eve');
    const room = await roomOn(1, 'hall', [u, 'hall-friend'], 'Hall');
    await say(room, u, 'secret one');
    await say(room, 'hall-friend', 'kept');
    await say(room, u, 'secret two');
    // a room it posted in and then left: its list keeps the room's tombstone ('J'), so the
    // erasure reaches it too
    const nook = await roomOn(1, 'nook', [u], 'Nook');
    await say(nook, u, 'secret three');
    assert.equal((await via('POST', `/v1/rooms/${nook}/members`, { remove: [u] })).status, 200);
    await until('both changes delivered', async () => (await pending(nodes[1])) === 0 &&
      (await listOf(u)).rooms.some((x) => x.room_id === room));
    const er = await via('DELETE', `/v1/users/${u}`);
    assert.equal(er.status, 202, er.text);
    const t0 = Date.now();
    // its tombstones carry from null (SPEC §2.2 v5): no message names it any more
    await until('its messages on the room\'s group are tombstones', async () => {
      const [a, b] = [(await byAuthor(nodes[1], room))(null), (await byAuthor(nodes[1], nook))(null)];
      return a.length === 2 && b.length === 1 && [...a, ...b].every((m) => m.deleted_at && m.content === null);
    });
    assert.equal((await byAuthor(nodes[1], room))(u).length + (await byAuthor(nodes[1], nook))(u).length, 0);
    assert.ok(Date.now() - t0 < 10000);
    const kept = (await byAuthor(nodes[1], room))('hall-friend');
    assert.equal(kept.length, 1);
    assert.equal(kept[0].content, 'kept', 'the others\' messages stay');
    assert.equal(await memberOf(nodes[1], room, u), false, 'it is no longer a member');
    assert.equal((await via('GET', `/v1/rooms/${room}`)).json.members, 2, 'probe and hall-friend');
    assert.equal((await via('POST', `/v1/rooms/${room}/messages`, { from: u, content: 'back?' })).status, 403);
    for (const r of [room, nook]) {
      const body = (await nodes[1].req('GET', `/v1/rooms/${r}/messages?limit=100`)).text;
      assert.ok(!body.includes('secret'), 'no content of it is left in the rooms');
    }
    // the user's own group finishes its erasure; every outbox empties (the room's group's
    // removal coming back changes nothing: the user is erased)
    await until('the erasure done', async () => (await nodes[0].req('GET', `/v1/admin/erasures/${er.json.erasure_id}`)).json.status === 'done');
    await until('the outboxes emptied', async () => (await pending(nodes[0])) === 0 && (await pending(nodes[1])) === 0);
    assert.equal((await via('GET', `/v1/users/${u}/rooms`)).json.rooms.length, 0);
  });

  test('an erasure reaches the other groups\' rooms first, whatever holds its own group\'s walk', async () => {
    const u = await userOn(0, 'zed');
    const far = await roomOn(1, 'far', [u], 'Far');
    await say(far, u, 'secret far');
    // a room on its own group with its posts all cold, and then its objects away: the walk of
    // this room cannot go on (its pages cannot be read) until they are back
    const cave = await roomOn(0, 'cave', [u, 'cave-friend'], 'Cave');
    for (let i = 0; i < 40; i++) await say(cave, u, `secret cave ${i}`);
    await say(cave, 'cave-friend', 'kept');
    const roomDir = `${nodes[0].dir}/cold/shared/conversations/${cave}`;
    assert.equal((await nodes[0].req('POST', '/v1/admin/flush')).status, 202);
    await until('the cave flushed', async () => existsSync(roomDir) &&
      readdirSync(roomDir).some((f) => f.endsWith('.parquet')) &&
      /^strata_flush_running 0$/m.test((await nodes[0].req('GET', '/metrics')).text), 30000);
    await until('the far room in its list', async () => (await pending(nodes[1])) === 0 &&
      (await listOf(u)).rooms.some((x) => x.room_id === far));
    // its pages out of reach (and out of memory: a restart)
    await nodes[0].stop();
    renameSync(roomDir, `${roomDir}.away`);
    nodes[0] = await start(0, nodes[0].dir);
    const er = await nodes[0].req('DELETE', `/v1/users/${u}`);
    assert.equal(er.status, 202, er.text);
    const status = async () => (await nodes[0].req('GET', `/v1/admin/erasures/${er.json.erasure_id}`)).json.status;
    // the other group hears of it although this group's walk is held (it went after this
    // group's rooms before: never while the room's objects were away)
    try {
      await until('its post on the other group a tombstone', async () => {
        const m = (await byAuthor(nodes[1], far))(null);
        return m.length === 1 && m[0].deleted_at && m[0].content === null;
      }, 20000);
      assert.equal(await status(), 'pending', 'its own group\'s room is not walked yet');
    } finally {
      renameSync(`${roomDir}.away`, roomDir);
    }
    // the objects back: its own group's room is walked and the erasure ends
    await until('the erasure done', async () => (await status()) === 'done', 60000);
    const caveMsgs = (await nodes[0].req('GET', `/v1/rooms/${cave}/messages?limit=100`)).json.messages;
    assert.equal(caveMsgs.filter((m) => m.from === null && m.deleted_at && m.content === null).length, 40);
    assert.deepEqual(caveMsgs.filter((m) => m.from !== null).map((m) => [m.from, m.content]), [['cave-friend', 'kept']]);
    assert.equal(await memberOf(nodes[0], cave, u), false, 'it left its own group\'s room too');
  });

  test('on the room\'s group, the counts leave the erased user\'s posts out while its erasure there is held', async () => {
    // u's posts in a room of the other group: that group's erasure of u (from the outbox) takes
    // them from the room's author index, and its counts subtract them from its 202 on
    const u = await userOn(0, 'kay');
    const hall = await roomOn(1, 'kayhall', [u, 'kay-friend'], 'Kay hall');
    // the room that holds that erasure: u's first room there by name, its objects away below
    const hold = await roomOn(1, 'akayhold', [u], 'Hold');
    assert.ok(hold < hall);
    await say(hold, u, 'secret held');
    for (let i = 0; i < 3; i++) await say(hall, 'kay-friend', `kept ${i}`);
    await say(hall, u, 'secret one');
    await say(hall, 'kay-friend', 'kept 3');
    await say(hall, u, 'secret two');
    const holdDir = `${nodes[1].dir}/cold/shared/conversations/${hold}`;
    assert.equal((await nodes[1].req('POST', '/v1/admin/flush')).status, 202);
    await until('the hold room flushed', async () => existsSync(holdDir) &&
      readdirSync(holdDir).some((f) => f.endsWith('.parquet')) &&
      /^strata_flush_running 0$/m.test((await nodes[1].req('GET', '/metrics')).text), 30000);
    await until('the rooms in its list', async () => (await pending(nodes[1])) === 0 &&
      (await listOf(u)).rooms.filter((x) => x.room_id === hall || x.room_id === hold).length === 2);
    const counts = async () => {
      const room = (await nodes[1].req('GET', `/v1/rooms/${hall}`)).json;
      const probe = (await nodes[1].req('GET', `/v1/rooms/${hall}/members`)).json.members.find((m) => m.user === 'probe');
      return [room.total_messages, probe.unread];
    };
    assert.deepEqual(await counts(), [6, 6]);
    await nodes[1].stop();
    renameSync(holdDir, `${holdDir}.away`);
    nodes[1] = await start(1, nodes[1].dir);
    try {
      const er = await nodes[0].req('DELETE', `/v1/users/${u}`);
      assert.equal(er.status, 202, er.text);
      // once the erasure reaches the room's group, at once: the friend's 4 messages only (the
      // old walk, held at the hold room, would count u's 2 posts until it got past it)
      await until('the room\'s counts without u\'s posts', async () => {
        const [total, unread] = await counts();
        return total === 4 && unread === 4;
      }, 20000);
      assert.equal(await memberOf(nodes[1], hall, u), false, 'out of the listing from the erasure on');
    } finally {
      renameSync(`${holdDir}.away`, holdDir);
    }
    await until('its posts there tombstones', async () => (await byAuthor(nodes[1], hall))(null).length === 2, 60000);
    await until('its post in the hold room a tombstone', async () => (await byAuthor(nodes[1], hold))(null).length === 1, 60000);
    assert.deepEqual(await counts(), [4, 4], 'the same once its posts are tombstones');
  });

  test('an erasure waits in the outbox across kill -9 of the user\'s group and is delivered', async () => {
    const u = await userOn(0, 'ivy');
    const room = await roomOn(1, 'attic', [u], 'Attic');
    await say(room, u, 'secret four');
    await until('the room in its list', async () => (await pending(nodes[1])) === 0 &&
      (await listOf(u)).rooms.some((x) => x.room_id === room));
    await proxy.stop(); // the route is down: nothing can be delivered
    assert.equal((await nodes[0].req('DELETE', `/v1/users/${u}`)).status, 202);
    await until('the erasure staged in the outbox', async () => (await pending(nodes[0])) >= 1);
    await nodes[0].kill9();
    nodes[0] = await start(0, nodes[0].dir);
    assert.ok(await pending(nodes[0]) >= 1, 'the erasure came back after kill -9');
    const before = (await byAuthor(nodes[1], room))(u);
    assert.equal(before[0].content, 'secret four', 'the room\'s group has not heard yet');
    assert.equal(await memberOf(nodes[1], room, u), true);
    await startNginx();
    await until('delivered after the restart', async () => {
      const m = (await byAuthor(nodes[1], room))(null); // its tombstone: from null (SPEC §2.2 v5)
      return m.length === 1 && m[0].deleted_at && m[0].content === null;
    }, 20000);
    assert.equal(await memberOf(nodes[1], room, u), false);
    await until('the outbox emptied', async () => (await pending(nodes[0])) === 0, 20000);
  });

  test('the erasure route: a resend joins the pending erasure; strict', async () => {
    const b = nodes[1];
    const post = (body, key, q = '') => b.req('POST', `/v1/rooms/nowhere/erasures${q}`, body, key ? { 'Idempotency-Key': key } : {});
    const r1 = await post({ user: 'nobody-else' }, 'outbox-test-e1', '?route=room:nowhere');
    assert.equal(r1.status, 202, r1.text);
    assert.match(r1.json.erasure_id, /^\d+$/);
    const r2 = await post({ user: 'nobody-else' }, 'outbox-test-e1');
    assert.equal(r2.headers['idempotent-replayed'], 'true');
    assert.equal(r2.json.erasure_id, r1.json.erasure_id);
    for (const bad of [{}, { user: 'a b' }, { user: 'x', room_id: 'nowhere' }]) {
      const r = await post(bad);
      assert.equal(r.status, 400, JSON.stringify(bad));
      assert.equal(r.json.error.code, 'invalid_argument');
    }
    assert.equal((await post({ user: 'x' }, null, '?route=room:other')).status, 400);
  });

  test('the receiving route: idempotent, ordered by joined_at, strict', async () => {
    const b = nodes[1];
    const post = (body, key) => b.req('POST', '/v1/users/zed/rooms/remote', body, key ? { 'Idempotency-Key': key } : {});
    const add = { room_id: 'far', name: 'Far', joined_at: 1000, change: 'added' };
    const r1 = await post(add, 'outbox-test-1');
    assert.equal(r1.status, 200);
    assert.equal(r1.json.applied, true);
    const r2 = await post(add, 'outbox-test-1');
    assert.equal(r2.status, 200);
    assert.equal(r2.headers['idempotent-replayed'], 'true');
    assert.equal((await b.req('GET', '/v1/users/zed/rooms')).json.rooms.length, 1);
    // an older removal does not take a newer membership away
    const old = await post({ room_id: 'far', joined_at: 999, change: 'removed' });
    assert.equal(old.json.applied, false);
    assert.equal((await b.req('GET', '/v1/users/zed/rooms')).json.rooms.length, 1);
    assert.equal((await post({ room_id: 'far', joined_at: 1000, change: 'removed' })).json.applied, true);
    assert.equal((await b.req('GET', '/v1/users/zed/rooms')).json.rooms.length, 0);
    // a late copy of the addition it removed does not bring it back; a newer one does
    assert.equal((await post(add)).json.applied, false);
    assert.equal((await b.req('GET', '/v1/users/zed/rooms')).json.rooms.length, 0);
    assert.equal((await post({ ...add, joined_at: 2000 })).json.applied, true);
    assert.deepEqual((await b.req('GET', '/v1/users/zed/rooms')).json.rooms,
      [{ room_id: 'far', name: 'Far', joined_at: 2000, remote: true }]);
    for (const bad of [{ ...add, change: 'moved' }, { ...add, joined_at: -1 }, { ...add, room_id: 'a b' },
      { room_id: 'far', change: 'added' }, { ...add, extra: 1 }]) {
      const r = await post(bad);
      assert.equal(r.status, 400, JSON.stringify(bad));
      assert.equal(r.json.error.code, 'invalid_argument');
    }
    assert.equal((await b.req('POST', '/v1/users/zed/rooms/remote?route=user:other', add)).status, 400);
  });
});

describe('one group (no --route-url)', () => {
  test('a bad --route-url, or one with auth on and no --cluster-secret, is refused at start', () => {
    const d = tempDir('outbox-flags');
    const bad = runStrata(['--listen', '127.0.0.1:0', '--data-dir', d, '--route-url', 'ftp://x'], { expect: 2 });
    assert.match(bad.stderr, /--route-url must be an http/);
    const noSecret = runStrata(['--listen', '127.0.0.1:0', '--data-dir', d, '--route-url', 'http://127.0.0.1:1',
      '--jwt-secret', 'a-client-secret'], { expect: 2 });
    assert.match(noSecret.stderr, /needs --cluster-secret/);
  });

  test('no outbox record is written', async () => {
    const s = await startStrata();
    try {
      assert.equal((await s.req('POST', '/v1/rooms', { room_id: 'solo', name: 'Solo', members: ['a', 'b'] })).status, 201);
      assert.equal((await s.req('POST', '/v1/rooms/solo/members', { add: ['c'], remove: ['b'] })).status, 200);
      await sleep(100);
      assert.equal(await pending(s), 0);
      const rows = (await s.req('GET', '/v1/users/c/rooms')).json.rooms;
      assert.equal(rows.length, 1);
      assert.equal(rows[0].remote, undefined);
      assert.equal(typeof rows[0].unread, 'number');
    } finally {
      await s.stop();
      s.cleanup();
    }
  });
});
