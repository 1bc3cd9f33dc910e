#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerates the benchmark table of README.md and bench/RESULTS.md and the README's figures
# outside it: runs each bench script (each runs its pairs interleaved for ROUNDS rounds and
# records them in bench/out/NAME/DATE.json (records accumulate) with date, machine, commit and load, and its tools' output
# in bench/out/raw/NAME/), then bench/table.py writes the table and the figures between their
# marker comments. Nothing in them is typed by hand.
#   bench/report.sh                          (DURATION=10 s per side, ROUNDS=3; every script)
#   DURATION=10 bench/report.sh run chat     (only those; the others keep their last record)
# A full run (DURATION=10, ROUNDS=3, every script) takes about 38 minutes: auth ~1, run ~3, seats ~3,
# chat ~5, streams ~9, cluster ~3, bigroom ~12, plus installing and building once.
# Each script first waits (up to LOAD_WAIT=300 s) for the 1-minute load average to fall to
# LOAD_MAX (0.5 per core), the previous script's own load included, and refuses to record a run
# during which the machine spent above FOREIGN_MAX (10) % of its CPU outside the bench (bench/lib.sh).
# Run it on a quiet machine: the load generator shares the cores with strata and its peers. It
# refuses a tree with uncommitted changes or untracked files (ALLOW_DIRTY=1: smoke tests only; the
# records are marked dirty and `bench/table.py --check` refuses them).
set -euo pipefail
cd "$(dirname "$0")/.."
export DURATION=${DURATION:-10} ROUNDS=${ROUNDS:-3}
# (untracked files count too: CMake globs src/*/*.c, so a new file not yet committed is built in)
if [ -n "$(git status --porcelain -- . ':!bench/out')" ] && [ "${ALLOW_DIRTY:-}" != 1 ]; then
  git status --short -- . ':!bench/out' >&2
  echo "bench/report.sh: the tree has uncommitted changes or untracked files: commit them first, a record names the commit it measured (ALLOW_DIRTY=1 for a smoke test only)" >&2
  exit 1
fi
[ "$ROUNDS" -ge 3 ] || echo "bench/report.sh: ROUNDS=$ROUNDS: fewer than 3 rounds is a smoke run (so marked in the table)" >&2
scripts=("$@")
[ ${#scripts[@]} -gt 0 ] || scripts=(run seats chat streams cluster auth bigroom)
t0=$(date +%s)
for s in "${scripts[@]}"; do
  echo "== bench/$s.sh (DURATION=$DURATION ROUNDS=$ROUNDS), $(date -u +%T)"
  bash "bench/$s.sh"
done
python3 bench/table.py
echo "README.md and bench/RESULTS.md: table and figures rewritten from bench/out/NAME/*.json ($(( $(date +%s) - t0 )) s)"
