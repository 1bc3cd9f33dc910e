// SPDX-License-Identifier: MIT
// Helpers for replicated-group tests (SPEC §8): a group of strata members on loopback (free
// ports, temp data dirs, one shared cold directory), requests that follow 307 to the leader and
// retry while no leader is known, and cleanup by PID.
import { cpSync, rmSync } from 'node:fs';
import http from 'node:http';
import { freePort, sleep, startStrata, tempDir } from './lib.mjs';

export { freePort };

export const ELECTION_MS = 1000;

// One request with a timeout (a paused member never answers); resolves {status, headers, json}
// or {status: 0, error} when the connection failed or timed out.
export function call(port, method, p, body, timeoutMs = 2500, headers = {}) {
  return new Promise((resolve) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const r = http.request({ host: '127.0.0.1', port, method, path: p, agent: false, timeout: timeoutMs,
      headers: { ...headers, ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}) } },
    (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        let json;
        try { json = JSON.parse(Buffer.concat(chunks).toString()); } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, json });
      });
      res.on('error', (error) => resolve({ status: 0, error }));
    });
    r.on('timeout', () => r.destroy(new Error('timeout')));
    r.on('error', (error) => resolve({ status: 0, error }));
    if (data) r.write(data);
    r.end();
  });
}

export class Group {
  // extra: flags every member gets; seed: a data dir copied into every member's before its start
  constructor(n, extra = [], { seed } = {}) {
    this.n = n; this.extra = extra; this.seed = seed; this.members = new Map(); this.all = new Set();
  }

  async init() {
    this.cold = tempDir('cluster-cold');
    const spec = [];
    this.conf = [];
    for (let id = 1; id <= this.n; id++) {
      const c = { id, http: await freePort(), raft: await freePort(), dir: tempDir(`cluster-${id}`) };
      if (this.seed) cpSync(this.seed, c.dir, { recursive: true });
      this.conf[id] = c;
      spec.push(`${id}=127.0.0.1:${c.raft}`);
    }
    this.spec = spec.join(',');
    for (let id = 1; id <= this.n; id++) await this.start(id);
  }

  // cold: this member's --cold-url when it is not the group's shared directory
  async start(id, { cold } = {}) {
    const c = this.conf[id];
    const s = await startStrata({ dataDir: c.dir, args: ['--listen', `127.0.0.1:${c.http}`,
      '--cluster', this.spec, '--cluster-self', String(id), '--election-timeout', String(ELECTION_MS),
      '--cold-url', cold || `file://${this.cold}`, ...this.extra] });
    this.members.set(id, s);
    this.all.add(s);
    return s;
  }

  port(id) { return this.conf[id].http; }
  live() { return [...this.members.keys()]; }

  async status(id, timeoutMs = 1000) {
    const r = await call(this.port(id), 'GET', '/v1/cluster', undefined, timeoutMs);
    return r.status === 200 ? r.json : null;
  }

  // The member that serves as leader (answers writes itself), once one does.
  async leader(deadlineMs = 30000) {
    const until = Date.now() + deadlineMs;
    while (Date.now() < until) {
      for (const id of this.live()) {
        const st = await this.status(id, 500);
        if (st && st.leader === id && this.members.has(id)) {
          const r = await call(this.port(id), 'GET', '/v1/counters/__probe');
          if (r.status === 404 || r.status === 200) return id;
        }
      }
      await sleep(50);
    }
    throw new Error('no leader');
  }

  // A request through any member, following 307s; retries 503 no_leader and failed connections
  // (nothing was sent) until the deadline. Other outcomes are returned as they are.
  async req(method, p, body, { via, deadlineMs = 15000, headers } = {}) {
    const until = Date.now() + deadlineMs;
    let port = this.port(via || this.live()[Math.floor(Math.random() * this.live().length)]);
    for (let hops = 0; Date.now() < until;) {
      const r = await call(port, method, p, body, undefined, headers);
      if (r.status === 307 && hops++ < 3) { port = Number(new URL(r.headers.location).port); continue; }
      const refused = r.status === 0 && r.error && r.error.code === 'ECONNREFUSED';
      const noLeader = r.status === 503 && r.json?.error?.code === 'no_leader';
      if (!refused && !noLeader) return r;
      await sleep(50);
      hops = 0;
      const live = this.live();
      port = this.port(live[Math.floor(Math.random() * live.length)]);
    }
    return { status: 0, error: new Error('deadline') };
  }

  // SIGTERM to every member; each must stop cleanly (exit 0, no sanitizer report: lib.mjs's
  // stop() checks, a member killed -9 is exempt).
  async stopAll() {
    const bad = [];
    for (const [id, s] of this.members) {
      s.proc.kill('SIGCONT');
      await s.stop().catch((e) => bad.push(`member ${id}: ${e.message}`));
    }
    this.members.clear();
    if (bad.length) throw new Error(`unclean stop:\n${bad.join('\n')}`);
  }

  // Whatever a failed test left behind (a paused member included) goes by its PID.
  kill() {
    for (const s of this.all) {
      if (s.proc.exitCode !== null || s.proc.signalCode !== null) continue;
      s.proc.kill('SIGKILL');
    }
  }

  cleanup() {
    for (let id = 1; id <= this.n; id++) rmSync(this.conf[id].dir, { recursive: true, force: true });
    rmSync(this.cold, { recursive: true, force: true });
  }
}


export async function allMessages(port, user) {
  const out = [];
  let cursor = null;
  do {
    const q = `/v1/users/${user}/messages?limit=1000${cursor ? `&cursor=${cursor}` : ''}`;
    const r = await call(port, 'GET', q);
    if (r.status !== 200) throw new Error(`messages: ${r.status}`);
    out.push(...r.json.messages);
    cursor = r.json.next;
  } while (cursor);
  return out;
}

// Waits until every live member has applied what the leader committed by now.
export async function converge(g) {
  const leaderId = await g.leader();
  const target = (await g.status(leaderId)).commit_index;
  for (const id of g.live()) {
    for (let i = 0; ; i++) {
      const s = await g.status(id);
      if (s && s.applied_index >= target) break;
      if (i > 600) throw new Error(`member ${id} did not catch up to ${target}`);
      await sleep(50);
    }
  }
  return leaderId;
}
