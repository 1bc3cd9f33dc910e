// SPDX-License-Identifier: MIT
// The README's way to get `import … from '@strata/client'` working in an application, done for
// real: clients/js is built with `npm run build` (the pinned TypeScript), packed with `npm pack`,
// and the tarball — and, the other documented way, the built folder itself — is installed with
// `npm install --offline` into a fresh project with an empty npm cache (no registry is needed:
// the package has no runtime dependencies). An application there imports '@strata/client' by
// name, on this node (Node 18 in the suite), and talks to a real strata: a write, a read, a typed
// error and a live stream.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, test } from 'node:test';
import { startStrata, tempDir } from './lib.mjs';

const ROOT = path.resolve('../..');
const E2E_MODULES = path.resolve('node_modules');
const work = tempDir('client-install');
const cache = path.join(work, 'npm-cache'); // empty: --offline cannot take anything from a registry
after(() => rmSync(work, { recursive: true, force: true }));

function npm(args, cwd) {
  const r = spawnSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd, encoding: 'utf8', env: { ...process.env, npm_config_cache: cache, npm_config_update_notifier: 'false' },
  });
  if (r.error) throw r.error;
  assert.equal(r.status, 0, `npm ${args.join(' ')} in ${cwd}:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

// An application that imports the package by name, given the server's URL, and prints what it saw.
const APP = `
import { Strata, StrataError } from '@strata/client';
const [url, wsModule] = process.argv.slice(2);
const { default: WebSocket } = await import(wsModule);
const db = new Strata({ baseUrl: url, WebSocket });
const out = { incr: await db.incr('installed', 2), read: await db.counter('installed') };
try { await db.incr('bad name'); } catch (e) { out.error = e instanceof StrataError ? e.code : String(e); }
out.streamed = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('no counter frame in 10 s')), 10000);
  const live = db.stream({ topic: 'counter', name: 'installed' }, {
    onCounter: (v) => { if (v === 5) { clearTimeout(timer); live.close(); resolve(v); } },
    onError: (e) => { clearTimeout(timer); reject(new Error(JSON.stringify(e))); },
  });
  setTimeout(() => db.incr('installed', 3), 200);
});
console.log(JSON.stringify(out));
`;

let pkg, tarball;
before(() => {
  // a copy of clients/js, so nothing is built into the source tree; its node_modules stands in
  // for `npm install` there (the same pinned typescript, already installed for the e2e tests)
  pkg = path.join(work, 'js');
  mkdirSync(pkg);
  for (const f of ['package.json', 'tsconfig.json', 'src']) cpSync(path.join(ROOT, 'clients/js', f), path.join(pkg, f), { recursive: true });
  symlinkSync(E2E_MODULES, path.join(pkg, 'node_modules'));
  npm(['run', 'build'], pkg);
  npm(['pack', '--pack-destination', work], pkg);
  const tgz = readdirSync(work).filter((f) => f.endsWith('.tgz'));
  assert.deepEqual(tgz, ['strata-client-0.1.0.tgz']);
  tarball = path.join(work, tgz[0]);
});

async function installAndRun(what, spec, flags = []) {
  const app = path.join(work, `app-${what}`);
  mkdirSync(app);
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: `app-${what}`, private: true, type: 'module' }));
  writeFileSync(path.join(app, 'app.mjs'), APP);
  npm(['install', '--offline', ...flags, spec], app);
  const installed = path.join(app, 'node_modules/@strata/client');
  assert.ok(existsSync(path.join(installed, 'dist/index.js')), 'dist/index.js is installed');
  assert.ok(existsSync(path.join(installed, 'dist/index.d.ts')), 'the types are installed');
  assert.ok(JSON.parse(readFileSync(path.join(app, 'package.json'), 'utf8')).dependencies['@strata/client'], 'a dependency of the app');
  const s = await startStrata();
  try {
    const ws = pathToFileURL(path.join(E2E_MODULES, 'ws/wrapper.mjs')).href;
    const r = spawnSync(process.execPath, ['app.mjs', `http://127.0.0.1:${s.port}`, ws], { cwd: app, encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    assert.deepEqual(JSON.parse(r.stdout), {
      incr: { name: 'installed', value: 2 }, read: { name: 'installed', value: 2 },
      error: 'invalid_argument', streamed: 5,
    });
  } finally {
    await s.stop();
    s.cleanup();
  }
  return installed;
}

test('npm pack, then npm install --offline of the tarball: the app imports @strata/client and talks to strata', async () => {
  const installed = await installAndRun('tarball', tarball);
  assert.ok(!lstatSync(installed).isSymbolicLink(), 'unpacked from the tarball');
  // only what the package declares ships: package.json and dist/
  assert.deepEqual(readdirSync(installed).sort(), ['dist', 'package.json']);
});

// --install-links=false, as the README says: Debian 12's npm (9.2) defaults to install-links=true
// and copies a folder instead of linking it (a newer npm, e.g. 11, links by default)
test('npm install --offline of the built clients/js folder: the same app works through the link', async () => {
  const installed = await installAndRun('folder', pkg, ['--install-links=false']);
  assert.ok(lstatSync(installed).isSymbolicLink(), 'a folder install is a link to it');
});
