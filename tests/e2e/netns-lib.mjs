// SPDX-License-Identifier: MIT
// A replicated group whose members each live in their own network namespace, wired to one
// bridge in the root namespace (the test's clients sit on that bridge), and a nemesis that cuts
// links with iptables inside a member's namespace. Loopback hides what a real network does to a
// group — a member that clients still reach while its peers cannot — so this is where SPEC §8's
// "a cut-off leader answers 307 or 503, never old state" can actually be tested.
//
// Everything is named after this process's PID (namespaces strata-j<pid>-<id>, links sj*<pid>*)
// so parallel runs do not collide; down() removes all of it, and an exit hook does the same if
// the process dies first. No iptables rule is ever added in the root namespace.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { promisify } from 'node:util';
import { BIN, checkExit, sleep, tempDir } from './lib.mjs';

const run = promisify(execFile);
const HTTP_PORT = 8080;
const RAFT_PORT = 7001;

// Last-resort cleanup when the test process ends without reaching its finally blocks (an
// uncaught error, Ctrl-C, a runner's SIGTERM): members are killed by PID, then the namespaces
// and links go. Only SIGKILL of this process leaves anything behind.
const lastResort = new Set();
// Newest first: a group's members die before the namespaces they run in are deleted.
function runLastResort() { for (const f of [...lastResort].reverse()) try { f(); } catch { /* keep going */ } }
let hooked = false;
function hookExit() {
  if (hooked) return;
  hooked = true;
  process.on('exit', runLastResort);
  for (const [sig, n] of [['SIGINT', 2], ['SIGTERM', 15]]) process.once(sig, () => { runLastResort(); process.exit(128 + n); });
}

// Why namespaces cannot be used here, or null when they can. Only a missing capability is a
// reason to skip; anything else that fails is thrown, so a broken setup fails the test.
export async function netnsUnavailable() {
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'network namespaces need root';
  for (const [tool, arg] of [['ip', '-V'], ['iptables', '--version']]) {
    try { await run(tool, [arg]); } catch (e) {
      if (e.code === 'ENOENT') return `${tool} is not installed (tools/install-deps.sh --test installs iproute2 and iptables)`;
      throw e;
    }
  }
  const probe = `strata-jprobe${process.pid}`;
  try {
    await run('ip', ['netns', 'add', probe]);
  } catch (e) {
    if (/Operation not permitted|Permission denied/i.test(e.stderr || '')) return `ip netns add is not permitted here: ${e.stderr.trim()}`;
    throw e;
  }
  try {
    await run('ip', ['netns', 'exec', probe, 'iptables', '-A', 'INPUT', '-s', '192.0.2.1', '-j', 'DROP']);
  } catch (e) {
    if (/Permission denied|Operation not permitted|not supported|Could not fetch rule set/i.test(e.stderr || '')) {
      return `iptables does not work inside a network namespace here: ${e.stderr.trim()}`;
    }
    throw e;
  } finally {
    await run('ip', ['netns', 'del', probe]).catch(() => {});
  }
  return null;
}

// A /24 nobody on this machine uses yet, starting from one the PID picks.
function freeSubnet() {
  const used = execFileSync('ip', ['-4', '-o', 'route', 'show'], { encoding: 'utf8' });
  for (let i = 0; i < 250; i++) {
    const n = 1 + ((process.pid + i) % 250);
    if (!used.includes(`10.213.${n}.`)) return `10.213.${n}`;
  }
  throw new Error('no free 10.213.x.0/24 subnet');
}

export class Netns {
  constructor(n) {
    this.n = n;
    this.tag = String(process.pid);
    this.bridge = `sjb${this.tag}`;
    this.made = { ns: [], links: [] };
    this.onExit = () => this.downSync();
  }

  ns(id) { return `strata-j${this.tag}-${id}`; }
  addr(id) { return `${this.subnet}.${id}`; }

  async up() {
    hookExit();
    lastResort.add(this.onExit);
    this.subnet = freeSubnet();
    this.hostAddr = `${this.subnet}.254`;
    await run('ip', ['link', 'add', this.bridge, 'type', 'bridge']);
    this.made.links.push(this.bridge);
    await run('ip', ['addr', 'add', `${this.hostAddr}/24`, 'dev', this.bridge]);
    await run('ip', ['link', 'set', this.bridge, 'up']);
    for (let id = 1; id <= this.n; id++) {
      const ns = this.ns(id), host = `sjv${this.tag}m${id}`, peer = `sjp${this.tag}m${id}`;
      await run('ip', ['netns', 'add', ns]);
      this.made.ns.push(ns);
      await run('ip', ['link', 'add', host, 'type', 'veth', 'peer', 'name', peer]);
      this.made.links.push(host);
      await run('ip', ['link', 'set', peer, 'netns', ns]);
      await run('ip', ['link', 'set', host, 'master', this.bridge]);
      await run('ip', ['link', 'set', host, 'up']);
      const inNs = (...a) => run('ip', ['netns', 'exec', ns, ...a]);
      await inNs('ip', 'link', 'set', peer, 'name', 'eth0');
      await inNs('ip', 'addr', 'add', `${this.addr(id)}/24`, 'dev', 'eth0');
      await inNs('ip', 'link', 'set', 'eth0', 'up');
      await inNs('ip', 'link', 'set', 'lo', 'up');
    }
  }

  // This member stops hearing from and talking to the given members; the root namespace (the
  // clients) still reaches it.
  async cut(id, others) {
    for (const o of others) {
      await run('ip', ['netns', 'exec', this.ns(id), 'iptables', '-A', 'INPUT', '-s', this.addr(o), '-j', 'DROP']);
      await run('ip', ['netns', 'exec', this.ns(id), 'iptables', '-A', 'OUTPUT', '-d', this.addr(o), '-j', 'DROP']);
    }
  }

  async heal() {
    for (let id = 1; id <= this.n; id++) await run('ip', ['netns', 'exec', this.ns(id), 'iptables', '-F']);
  }

  async rules(id) {
    return (await run('ip', ['netns', 'exec', this.ns(id), 'iptables', '-S'])).stdout;
  }

  // Deleting a namespace takes its veth end, and with it the pair; the bridge goes by name.
  async down() {
    for (const ns of this.made.ns.splice(0)) await run('ip', ['netns', 'del', ns]).catch(() => {});
    for (const l of this.made.links.splice(0)) await run('ip', ['link', 'del', l]).catch(() => {});
    lastResort.delete(this.onExit);
  }

  downSync() {
    for (const ns of this.made.ns.splice(0)) try { execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' }); } catch { /* gone */ }
    for (const l of this.made.links.splice(0)) try { execFileSync('ip', ['link', 'del', l], { stdio: 'ignore' }); } catch { /* gone */ }
  }

  // What is left of this run on the machine (must be nothing after down()).
  async leftovers() {
    const ns = (await run('ip', ['netns', 'list'])).stdout.split('\n').filter((l) => l.includes(`strata-j${this.tag}-`));
    const links = (await run('ip', ['-o', 'link', 'show'])).stdout.split('\n').filter((l) => l.includes(this.tag) && /sj[bvp]/.test(l));
    return [...ns, ...links];
  }
}

// One HTTP request with a timeout; resolves {status, headers, json} or {status: 0, error}.
export function call(host, port, method, p, body, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const r = http.request({ host, port, method, path: p, agent: false, timeout: timeoutMs,
      headers: data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {} },
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
    r.on('timeout', () => r.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    r.on('error', (error) => resolve({ status: 0, error }));
    if (data) r.write(data);
    r.end();
  });
}

// A group of n members, member i in namespace i, Raft and HTTP on that namespace's address.
export class NsGroup {
  constructor(net, extra = []) {
    this.net = net; this.n = net.n; this.extra = extra;
    this.procs = new Map(); this.all = new Set(); this.dirs = [];
    this.onExit = () => this.kill();
  }

  url(id) { return `http://${this.net.addr(id)}:${HTTP_PORT}`; }

  async init() {
    hookExit();
    lastResort.add(this.onExit);
    // One cold store for the group, outside every member's data dir (a member refuses its own).
    this.cold = tempDir('jepsen-cold');
    this.spec = [];
    for (let id = 1; id <= this.n; id++) {
      this.dirs[id] = tempDir(`jepsen-${id}`);
      this.spec.push(`${id}=${this.net.addr(id)}:${RAFT_PORT}`);
    }
    this.spec = this.spec.join(',');
    for (let id = 1; id <= this.n; id++) await this.start(id);
  }

  async start(id) {
    const addr = this.net.addr(id);
    // ip netns exec execs the binary, so the PID we hold is strata's own (SIGSTOP/SIGKILL hit it).
    const proc = spawn('ip', ['netns', 'exec', this.net.ns(id), BIN, '--listen', `${addr}:${HTTP_PORT}`,
      '--advertise', this.url(id), '--data-dir', this.dirs[id], '--cluster', this.spec,
      '--cluster-self', String(id), '--cold-url', `file://${this.cold}`,
      '--insecure', // a namespace address is not loopback; these tests run without auth
      ...this.extra],
    { stdio: ['ignore', 'pipe', 'pipe'] });
    this.all.add(proc);
    let log = '';
    const onData = (d) => { log = (log + d).slice(-200000); };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.log = () => log;
    const exited = new Promise((resolve) => proc.on('close', (code, sig) => resolve({ code, sig })));
    proc.exited = exited;
    const until = Date.now() + 10000;
    while (!/listening on /.test(log)) {
      if (proc.exitCode !== null) throw new Error(`member ${id} exited with ${proc.exitCode}:\n${log}`);
      if (Date.now() > until) throw new Error(`member ${id} did not start:\n${log}`);
      await sleep(20);
    }
    const exe = readFileSync(`/proc/${proc.pid}/cmdline`, 'utf8').split('\0')[0];
    if (exe !== BIN) throw new Error(`PID ${proc.pid} runs ${exe}, not strata`);
    this.procs.set(id, proc);
    return proc;
  }

  pid(id) { return this.procs.get(id).pid; }
  signal(id, sig) { this.procs.get(id).kill(sig); }

  async kill9(id) {
    const p = this.procs.get(id);
    p.kill('SIGKILL');
    await p.exited;
    this.procs.delete(id);
  }

  async status(id, timeoutMs = 800) {
    const r = await call(this.net.addr(id), HTTP_PORT, 'GET', '/v1/cluster', undefined, timeoutMs);
    return r.status === 200 ? r.json : null;
  }

  // The member that leads and serves writes itself, once one does.
  async leader(deadlineMs = 15000, { not } = {}) {
    const until = Date.now() + deadlineMs;
    while (Date.now() < until) {
      for (const id of this.procs.keys()) {
        if (id === not) continue;
        const st = await this.status(id, 500);
        if (st && st.leader === id) {
          const r = await call(this.net.addr(id), HTTP_PORT, 'GET', '/v1/counters/__probe', undefined, 800);
          if (r.status === 404 || r.status === 200) return id;
        }
      }
      await sleep(50);
    }
    throw new Error('no leader');
  }

  // Every running member has applied the same index, the leader's commit index (announcements
  // and other background writes may still arrive: poll until it holds at one moment).
  async converged(deadlineMs = 20000) {
    const until = Date.now() + deadlineMs;
    let last;
    while (Date.now() < until) {
      const sts = await Promise.all([...this.procs.keys()].map((id) => this.status(id)));
      last = sts;
      if (sts.every(Boolean)) {
        const lead = sts.find((s) => s.leader === s.self);
        const applied = new Set(sts.map((s) => s.applied_index));
        if (lead && applied.size === 1 && lead.commit_index === sts[0].applied_index) return sts;
      }
      await sleep(100);
    }
    throw new Error(`members did not converge: ${JSON.stringify(last && last.map((s) => s && { self: s.self, leader: s.leader, commit: s.commit_index, applied: s.applied_index }))}`);
  }

  // SIGTERM, then SIGKILL by PID for whatever does not stop in 5 s (a paused member gets SIGCONT
  // first). Every member must have stopped cleanly: exit 0 and no sanitizer report (lib.mjs's
  // checkExit); throws otherwise, after all of them are down.
  async stopAll() {
    const bad = [];
    for (const [id, p] of this.procs) {
      let stuck = false;
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGCONT');
        p.kill('SIGTERM');
      }
      const t = setTimeout(() => { stuck = true; p.kill('SIGKILL'); }, 5000);
      const ex = await p.exited;
      clearTimeout(t);
      try {
        if (stuck) throw new Error(`member ${id} did not stop within 5 s of SIGTERM:\n${p.log().slice(-6000)}`);
        checkExit(`member ${id}`, ex, p.log());
      } catch (e) { bad.push(e.message); }
    }
    this.procs.clear();
    if (bad.length) throw new Error(`unclean stop:\n${bad.join('\n')}`);
  }

  kill() {
    for (const p of this.all) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    lastResort.delete(this.onExit);
  }

  cleanup() {
    for (let id = 1; id <= this.n; id++) if (this.dirs[id]) rmSync(this.dirs[id], { recursive: true, force: true });
    if (this.cold) rmSync(this.cold, { recursive: true, force: true });
  }
}
