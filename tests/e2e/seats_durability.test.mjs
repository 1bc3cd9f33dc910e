// SPDX-License-Identifier: MIT
// Answers that report state wait for that state to be durable (SPEC §0, issue 11.2). Each life
// races, on two connections each, a create of an event against its duplicate (409 "already
// exists"), a distinct-counter member against itself (added:false) and a booking of one seat
// against the same seat (409 seats_unavailable); the server is killed -9 the moment the first
// answer arrives. After the restart, whatever any answer reported must be there. Many lives,
// to catch the race.
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { startStrata, tempDir } from './lib.mjs';

const LIVES = Number(process.env.STRATA_RACE_LIVES || 200);

function post(path, obj) {
  const body = JSON.stringify(obj);
  return `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

function connect(port) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => resolve(sock));
    sock.setNoDelay(true);
    sock.on('error', reject);
  });
}

// Resolves with {status, body} of the first response on sock ({status: 0} if it closes first).
function firstAnswer(sock) {
  return new Promise((resolve) => {
    let buf = '';
    const onData = (d) => {
      buf += d.toString('latin1');
      const he = buf.indexOf('\r\n\r\n');
      if (he < 0) return;
      const len = Number(/content-length: *(\d+)/i.exec(buf.slice(0, he))?.[1] || 0);
      if (buf.length < he + 4 + len) return;
      sock.off('data', onData);
      resolve({ status: Number(buf.slice(9, 12)), body: buf.slice(he + 4, he + 4 + len) });
    };
    sock.on('data', onData);
    sock.on('close', () => resolve({ status: 0, body: '' }));
  });
}

test('a 409, added:false or seats_unavailable is never sent before the state it reports is durable (kill -9 race)', async () => {
  const dir = tempDir('race409');
  let s = await startStrata({ dataDir: dir });
  assert.equal((await s.req('POST', '/v1/events', { event_id: 'hall', sections: [{ name: 'A', rows: 1, cols: LIVES, price: 1 }] })).status, 201);
  const told = []; // {what, id, check} for every answer that reported state
  const reported = { conflict: 0, added_false: 0, seats_unavailable: 0 };
  try {
    for (let life = 0; life < LIVES; life++) {
      const races = [
        { what: 'event', req: post('/v1/events', { event_id: `race-${life}`, sections: [{ name: 'A', rows: 1, cols: 1, price: 1 }] }) },
        { what: 'member', req: post('/v1/counters/racers/distinct', { member: `m${life}` }) },
        { what: 'seat', req: post('/v1/events/hall/bookings', { section: 'A', seats: [`1-${life + 1}`] }) },
      ];
      const socks = await Promise.all(races.flatMap(() => [connect(s.port), connect(s.port)]));
      const answers = socks.map(firstAnswer);
      races.forEach((r, i) => { socks[2 * i].write(r.req); socks[2 * i + 1].write(r.req); });
      await Promise.race(answers);
      s.proc.kill('SIGKILL');
      await s.exited;
      const got = await Promise.all(answers);
      socks.forEach((k) => k.destroy());
      races.forEach((r, i) => {
        const pair = [got[2 * i], got[2 * i + 1]];
        if (pair.some((a) => a.status === 409 && r.what !== 'member')) reported[r.what === 'event' ? 'conflict' : 'seats_unavailable']++;
        if (pair.some((a) => a.status === 200 && a.body.includes('"added":false'))) reported.added_false++;
        if (pair.some((a) => a.status >= 200 && a.status < 500)) told.push({ what: r.what, life, answers: pair.map((a) => a.status).join('/') });
      });
      s = await startStrata({ dataDir: dir });
      for (const t of told.filter((x) => x.life === life)) {
        const why = `life ${life}: ${t.what} answered ${t.answers} is gone after kill -9`;
        if (t.what === 'event') {
          assert.equal((await s.req('GET', `/v1/events/race-${life}`)).status, 200, why);
        } else if (t.what === 'member') {
          const r = await s.req('POST', '/v1/counters/racers/distinct', { member: `m${life}` });
          assert.equal(r.json.added, false, why);
        } else {
          const r = await s.req('POST', '/v1/events/hall/bookings', { section: 'A', seats: [`1-${life + 1}`] });
          assert.equal(r.status, 409, why);
        }
      }
    }
    console.log('# reported', JSON.stringify(reported), 'over', LIVES, 'lives');
    assert.ok(reported.conflict > 0, 'the race never produced a 409');
  } finally {
    await s.stop();
    s.cleanup();
  }
});
