// SPDX-License-Identifier: MIT
// Answers that report state wait for that state to be durable (SPEC §0, issue 11.2): a 409
// "event already exists" raced against the create it reports, then kill -9 — the event must be
// there after the restart whenever a 409 was seen. Run many times to catch the race.
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { startStrata, tempDir } from './lib.mjs';

const LIVES = Number(process.env.STRATA_RACE_LIVES || 200);

function createReq(id) {
  const body = JSON.stringify({ event_id: id, sections: [{ name: 'A', rows: 2, cols: 2, price: 1 }] });
  return `POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

function connect(port) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => resolve(sock));
    sock.setNoDelay(true);
    sock.on('error', reject);
  });
}

// Resolves with the status of the first response line seen on sock.
function firstStatus(sock) {
  return new Promise((resolve) => {
    let buf = '';
    const onData = (d) => {
      buf += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(buf);
      if (m) { sock.off('data', onData); resolve(Number(m[1])); }
    };
    sock.on('data', onData);
    sock.on('close', () => resolve(0));
  });
}

test('409 event already exists is never sent before the event is durable (kill -9 race)', async () => {
  const dir = tempDir('race409');
  let s = await startStrata({ dataDir: dir });
  const seen = []; // event ids a client was told exist (201 or 409)
  let conflicts = 0;
  try {
    for (let life = 0; life < LIVES; life++) {
      const id = `race-${life}`;
      const [a, b] = await Promise.all([connect(s.port), connect(s.port)]);
      const sa = firstStatus(a), sb = firstStatus(b);
      const req = createReq(id);
      a.write(req);
      b.write(req);
      // Kill -9 the moment either answer arrives: a 409 that left before its create was durable
      // is then caught with the create lost.
      const first = await Promise.race([sa, sb]);
      s.proc.kill('SIGKILL');
      await s.exited;
      const [ra, rb] = await Promise.all([sa, sb]);
      a.destroy();
      b.destroy();
      if (first === 409 || ra === 409 || rb === 409) conflicts++;
      if ([ra, rb].some((st) => st === 201 || st === 409)) seen.push({ id, answers: `${ra}/${rb}` });
      s = await startStrata({ dataDir: dir });
      for (const e of seen.slice(-3)) {
        const g = await s.req('GET', `/v1/events/${e.id}`);
        assert.equal(g.status, 200, `${e.id} was answered ${e.answers} but is gone after kill -9`);
      }
    }
    for (const e of seen) assert.equal((await s.req('GET', `/v1/events/${e.id}`)).status, 200, e.id);
    assert.ok(conflicts > 0, 'the race never produced a 409');
  } finally {
    await s.stop();
    s.cleanup();
  }
});
