// SPDX-License-Identifier: MIT
// The TypeScript client (clients/js) compiled with the pinned tsc (strict) into a temporary
// folder, for the tests that drive it against the real server. load() compiles once per process
// and imports it; cleanup() removes the folder (call it from an after hook).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from './lib.mjs';

const ROOT = path.resolve('../..');
const TSC = path.resolve('node_modules/.bin/tsc');
let out, lib;

export async function loadClient() {
  if (lib) return lib;
  out = tempDir('client-dist');
  const r = spawnSync(TSC, ['-p', path.join(ROOT, 'clients/js'), '--outDir', out], { encoding: 'utf8' });
  assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
  // The compiled files are ES modules, as clients/js/package.json ("type": "module") declares for
  // its dist/. Node 18 (Debian 12's) does not detect module syntax in a .js file, so the folder
  // they are loaded from needs the same declaration.
  writeFileSync(path.join(out, 'package.json'), JSON.stringify({ type: 'module' }));
  lib = await import(path.join(out, 'index.js'));
  return lib;
}

// The folder holding the compiled client (after loadClient).
export const clientDir = () => out;

export function clientCleanup() {
  if (out) rmSync(out, { recursive: true, force: true });
  out = lib = undefined;
}
