// SPDX-License-Identifier: MIT
// /metrics passes Prometheus' own checker (`promtool check metrics`, Debian's prometheus
// package; skipped when absent) after traffic that touches every subsystem, and every metric the
// shipped Grafana dashboard (deploy/grafana/strata.json) queries is one strata exports.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { skipIf, sleep, startStrata, wsConnect } from './lib.mjs';

const PROMTOOL = '/usr/bin/promtool';
const dashboard = JSON.parse(readFileSync(path.resolve('../../deploy/grafana/strata.json'), 'utf8'));

describe('metrics', () => {
  let s, text;
  before(async () => {
    s = await startStrata({ args: ['--reconcile-interval', '1'] });
    await s.req('POST', '/v1/counters/a/incr', { by: 2 });
    await s.req('POST', '/v1/counters/d/distinct', { member: 'm' });
    await s.req('POST', '/v1/users/u/messages', { conversation_id: 'c', from: 'u', content: 'x' });
    await s.req('POST', '/v1/events', { event_id: 'e', sections: [{ name: 'A', rows: 1, cols: 4, price: 1 }] });
    await s.req('POST', '/v1/events/e/bookings', { section: 'A', quantity: 1 });
    await s.req('GET', '/v1/nothing');
    await s.req('POST', '/v1/counters/a/incr', '{bad');
    const ws = await wsConnect(s.port, '/v1/stream');
    ws.send({ type: 'subscribe', id: 'c', topic: 'counter', name: 'a' });
    await ws.next();
    await s.req('POST', '/v1/admin/flush');
    await s.req('POST', '/v1/admin/reconcile');
    await sleep(300);
    text = (await s.req('GET', '/metrics')).text;
    ws.close();
  });
  after(async () => { await s.stop(); s.cleanup(); });

  test('promtool check metrics finds no problem', { skip: skipIf(!existsSync(PROMTOOL) && 'promtool not installed (tools/install-deps.sh --test)') }, () => {
    const r = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    assert.equal(`${r.stdout}${r.stderr}`.trim(), '');
  });

  test('every metric the Grafana dashboard queries is exported', () => {
    const exported = new Set([...text.matchAll(/^# TYPE (\S+) (\S+)/gm)].map((m) => m[1]));
    const panels = dashboard.panels.filter((p) => p.type !== 'row');
    assert.ok(panels.length >= 12);
    assert.equal(new Set(dashboard.panels.map((p) => p.id)).size, dashboard.panels.length, 'panel ids are unique');
    for (const p of panels) {
      assert.ok(p.targets.length > 0, p.title);
      for (const t of p.targets) {
        const names = t.expr.match(/strata_[a-z_]+/g);
        assert.ok(names, `${p.title}: ${t.expr}`);
        for (const n of names) {
          const base = n.replace(/_(bucket|sum|count)$/, '');
          assert.ok(exported.has(base), `${p.title}: ${n} is not exported`);
        }
      }
    }
  });
});
