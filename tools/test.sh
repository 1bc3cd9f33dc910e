#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One command from a fresh Debian 12 to a passing test suite: installs what is missing, builds,
# runs the unit and end-to-end tests (ctest) on Node 18 (Debian 12's, what a fresh machine has),
# the same suite again under ASan+UBSan on the machine's own node, and each libFuzzer target
# briefly.  FUZZ_SECONDS=0 skips fuzzing; QUICK=1 skips the sanitizer pass.  In CI (CI=true)
# every warning is an error and every other build flavour a user may pick is compiled too.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${FUZZ_SECONDS:-20}
# CI runs every test: there a skipped e2e test fails instead (tests/e2e/lib.mjs, skipIf/skipNow)
if [ "${CI:-}" = true ]; then export STRATA_NO_SKIP=1; fi

echo "== every internal (st__) name is defined in one file only; no file over 800 lines, no function over 150 but main"
tools/check-names.sh

tools/install-deps.sh --test
# the e2e tests' npm packages (DuckDB to read our Parquet files, s3rver as the S3 service),
# pinned by tests/e2e/package-lock.json
(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)

if [ "${CI:-}" = true ]; then
  export ST_WERROR=ON
  echo "== build flavours (warnings are errors)"
  tools/build.sh flavours
fi

echo "== the README's benchmark table matches the recorded runs (bench/out/NAME/*.json), figures in prose too"
python3 bench/table.py --check
echo "== what the benchmark figures rest on: table rules, wins, turns, the bookflat record (bench/test_bench.py)"
python3 bench/test_bench.py

echo "== release build: unit + e2e on Node 18"
STRATA_TEST_NODE=$(tools/node18.sh) tools/build.sh release
(cd build && ctest --output-on-failure --timeout 600)

if [ "${QUICK:-0}" != 1 ]; then
  echo "== ASan+UBSan build: unit + e2e"
  STRATA_TEST_NODE=$(command -v node) tools/build.sh asan
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure --timeout 900)
fi

if [ "$fuzz_seconds" -gt 0 ]; then
  echo "== fuzzing ${fuzz_seconds}s per target"
  tools/build.sh fuzz
  # a crash, a leak or undefined behaviour (the fuzz build halts on UBSan) makes the fuzzer exit
  # non-zero: that fails the run and shows the end of its report; a clean run prints two lines
  for t in http json_body ws parquet jwt tables_meta avro_read; do
    work=$(mktemp -d)
    mkdir "$work/corpus"
    rc=0
    (cd "$work" && "$OLDPWD/build-fuzz/fuzz/fuzz_$t" -max_total_time="$fuzz_seconds" -max_len=8192 \
        -print_final_stats=0 corpus "$OLDPWD/fuzz/corpus/${t%_body}" >fuzz.log 2>&1) || rc=$?
    if [ "$rc" -ne 0 ]; then
      tail -n 60 "$work/fuzz.log"
      echo "fuzz_$t failed (exit $rc); its log and the failing input are in $work" >&2
      exit 1
    fi
    tail -n 2 "$work/fuzz.log"
    rm -rf "$work"
  done
fi
echo "== all tests passed"
