#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures and builds one flavour of strata into its own directory.
#   tools/build.sh [release|asan|fuzz]   (default release -> build/, asan -> build-asan/, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
jobs=$(nproc 2>/dev/null || echo 2)
case "$flavour" in
  release) cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
           cmake --build build -j"$jobs" ;;
  asan)    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DST_SANITIZE=address,undefined >/dev/null
           cmake --build build-asan -j"$jobs" ;;
  fuzz)    CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DST_FUZZ=ON >/dev/null
           cmake --build build-fuzz -j"$jobs" --target fuzz_http fuzz_json_body fuzz_ws fuzz_parquet ;;
  *) echo "usage: tools/build.sh [release|asan|fuzz]" >&2; exit 2 ;;
esac
