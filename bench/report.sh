#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerates the benchmark table of README.md and bench/RESULTS.md: runs each bench script
# (each records its run in bench/out/NAME.json, with date, machine, commit and load), then
# bench/table.py writes the table between the marker comments. Nothing in it is typed by hand.
#   bench/report.sh                          (DURATION=10; every script)
#   DURATION=10 bench/report.sh run chat     (only those; the others keep their last record)
# Run it on a quiet machine: the load generator shares the cores with strata and its peers.
set -euo pipefail
cd "$(dirname "$0")/.."
export DURATION=${DURATION:-10}
scripts=("$@")
[ ${#scripts[@]} -gt 0 ] || scripts=(run seats chat streams cluster)
for s in "${scripts[@]}"; do
  echo "== bench/$s.sh (DURATION=$DURATION)"
  bash "bench/$s.sh"
done
python3 bench/table.py
echo "README.md and bench/RESULTS.md: table rewritten from bench/out/*.json"
