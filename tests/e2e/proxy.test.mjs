// SPDX-License-Identifier: MIT
// Scale-out (SPEC §10): three strata behind Debian's nginx, and behind HAProxy, each running the
// shipped configuration (deploy/nginx/strata.conf, deploy/haproxy/haproxy.cfg) with only its
// ports templated. Every key's data lands on exactly one node, reads and writes through the
// proxy are exact, bookings through the nested routes reach their event's node, a
// percent-encoded key reaches the same node, and streams opened through the proxy with ?route=
// see the live changes of their key. A proxy that is not installed is
// skipped (tools/install-deps.sh --test installs both).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { request, skipIf, sleep, startStrata, tempDir, wsConnect } from './lib.mjs';
import { HAPROXY, NGINX, freePort, haproxyConfig, nginxConfig, startProxy } from './proxy-lib.mjs';

const KEYS = 24; // per kind

for (const [name, bin, config] of [['nginx', NGINX, nginxConfig], ['HAProxy', HAPROXY, haproxyConfig]]) {
  describe(`three strata behind ${name}`, { skip: skipIf(!existsSync(bin) && `${bin} not installed (tools/install-deps.sh --test)`) }, () => {
    let nodes = [], proxy, port, dir;
    const via = (method, p, body, headers) => request(port, method, p, body, headers);
    before(async () => {
      nodes = await Promise.all([1, 2, 3].map((id) => startStrata({ args: ['--node-id', String(id)] })));
      dir = tempDir('proxy');
      port = await freePort();
      proxy = await startProxy(name, config(dir, port, nodes.map((n) => n.port)), port);
    });
    after(async () => {
      if (proxy) await proxy.stop();
      for (const n of nodes) { await n.stop(); n.cleanup(); }
    });

    // Which nodes hold a key, asked of each node directly.
    async function owners(p, holds) {
      const out = [];
      for (let i = 0; i < nodes.length; i++) if (holds(await nodes[i].req('GET', p))) out.push(i);
      return out;
    }

    test('every key lives on exactly one node, and reads through the proxy are exact', async () => {
      const spread = [new Set(), new Set(), new Set(), new Set()];
      const bookings = [];
      for (let i = 1; i <= KEYS; i++) {
        assert.equal((await via('POST', `/v1/counters/k${i}/incr`, { by: i })).status, 200);
        assert.equal((await via('POST', `/v1/counters/k${i}/incr`, { by: 1000 })).status, 200);
        const m = await via('POST', `/v1/users/u${i}/messages`, { conversation_id: 'c', from: `u${i}`, content: `hi ${i}` });
        assert.equal(m.status, 201);
        assert.equal((await via('POST', `/v1/sequences/q${i}/next`, { count: i })).status, 200);
        const ev = { event_id: `e${i}`, sections: [{ name: 'A', rows: 2, cols: 5, price: 10 }] };
        assert.equal((await via('POST', `/v1/events?route=event:e${i}`, ev)).status, 201);
        const b = await via('POST', `/v1/events/e${i}/bookings`, { section: 'A', quantity: 2 });
        assert.equal(b.status, 201);
        bookings[i] = b.json.booking_id;
      }
      for (let i = 1; i <= KEYS; i++) {
        const c = await owners(`/v1/counters/k${i}`, (r) => r.status === 200);
        const u = await owners(`/v1/users/u${i}/stats`, (r) => r.json.total_messages > 0);
        const q = await owners(`/v1/sequences/q${i}`, (r) => r.status === 200 && r.json.last > 0);
        const e = await owners(`/v1/events/e${i}`, (r) => r.status === 200);
        for (const [kind, o] of Object.entries({ counter: c, user: u, sequence: q, event: e }))
          assert.equal(o.length, 1, `${kind} ${i} is on nodes ${o}`);
        [c, u, q, e].forEach((o, k) => spread[k].add(o[0]));
        assert.deepEqual((await via('GET', `/v1/counters/k${i}`)).json, { name: `k${i}`, value: i + 1000 });
        assert.equal((await via('GET', `/v1/users/u${i}/messages?conversation_id=c`)).json.messages[0].content, `hi ${i}`);
        assert.equal((await via('GET', `/v1/sequences/q${i}`)).json.last, i);
        const st = (await via('GET', `/v1/events/e${i}`)).json.event_stats;
        assert.deepEqual([st.reserved, st.available], [2, 8], 'the booking landed on its event\'s node');
        // The nested booking routes reach the event's node too (the flat /v1/bookings/{id} cannot).
        const nested = `/v1/events/e${i}/bookings/${bookings[i]}`;
        assert.equal((await via('GET', nested)).json.status, 'reserved');
        if (i % 2) assert.equal((await via('POST', `${nested}/confirm`)).json.status, 'sold');
        else assert.equal((await via('POST', `${nested}/cancel`)).json.status, 'cancelled');
        const owner = nodes[e[0]];
        const after = (await owner.req('GET', `/v1/events/e${i}`)).json.event_stats;
        assert.deepEqual([after.sold, after.reserved], i % 2 ? [2, 0] : [0, 0]);
      }
      for (const s of spread) assert.equal(s.size, 3, 'consistent hashing uses all three nodes');
    });

    test('a percent-encoded key reaches the same node', async () => {
      assert.equal((await via('POST', '/v1/counters/k%31/incr', { by: 5 })).status, 200);
      assert.equal((await via('GET', '/v1/counters/k1')).json.value, 1006);
      assert.equal((await owners('/v1/counters/k1', (r) => r.status === 200)).length, 1);
    });

    test('streams through the proxy follow their key (?route=, also with %3A)', async () => {
      for (const [i, route] of [[5, 'user:u5'], [6, 'user%3Au6']]) {
        const ws = await wsConnect(port, `/v1/stream?route=${route}`);
        assert.equal(ws.status, 101, `${name} upgrades`);
        ws.send({ type: 'subscribe', id: 'm', topic: 'messages', user: `u${i}`, after: '0' });
        const seen = [];
        for (;;) { const f = (await ws.next(5000)).json; seen.push(f); if (f.type === 'replay_done') break; }
        assert.equal(seen.filter((f) => f.type === 'message').length, 1, 'the replay came from the key\'s node');
        await via('POST', `/v1/users/u${i}/messages`, { conversation_id: 'c', from: 'x', content: 'live' });
        let f;
        do f = (await ws.next(5000)).json; while (f.type !== 'message');
        assert.equal(f.message.content, 'live');
        ws.close();
      }
      const ws = await wsConnect(port, '/v1/stream?route=counter:k9');
      ws.send({ type: 'subscribe', id: 'c', topic: 'counter', name: 'k9' });
      let f;
      do f = (await ws.next(5000)).json; while (f.type !== 'counter');
      assert.equal(f.value, 1009);
      await via('POST', '/v1/counters/k9/incr', { by: 1 });
      do f = (await ws.next(5000)).json; while (f.type !== 'counter');
      assert.equal(f.value, 1010);
      ws.close();
      const seats = await wsConnect(port, '/v1/stream?route=event:e4');
      seats.send({ type: 'subscribe', id: 's', topic: 'seats', event_id: 'e4' });
      do f = (await seats.next(5000)).json; while (f.type !== 'seats');
      assert.equal(f.snapshot.event_stats.total, 10);
      await via('POST', '/v1/events/e4/bookings', { section: 'A', seats: ['2-5'] });
      do f = (await seats.next(5000)).json; while (f.type !== 'seats');
      assert.deepEqual(f.changes, [{ seat: '2-5', state: 'reserved' }]);
      seats.close();
    });

    test('keyless routes answer for the node they reach', async () => {
      const r = await via('GET', '/v1/events?limit=1000');
      assert.equal(r.status, 200);
      assert.ok(r.json.events.length >= 1 && r.json.events.length < KEYS);
    });
  });
}
