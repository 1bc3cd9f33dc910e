#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures and builds one flavour of strata into its own directory.
#   tools/build.sh [release|asan|fuzz|flavours]
#     release  -> build/       RelWithDebInfo, the binary tools/run.sh starts and the tests use
#     asan     -> build-asan/  Debug with ASan+UBSan
#     fuzz     -> build-fuzz/  clang, libFuzzer targets
#     flavours -> build-check-*/  the other flavours a user or packager may pick, compiled only:
#                 Release with gcc and jemalloc required, Release with clang and glibc's malloc,
#                 Debug with clang (gcc RelWithDebInfo is `release`, gcc Debug is `asan`)
# ST_JEMALLOC=AUTO|ON|OFF picks the allocator of `release` (AUTO, the default: jemalloc when
# found; ON: the configure fails without it, as the Dockerfile's build does). Sanitizer and fuzz
# builds never link it.
# ST_WERROR=ON makes every warning an error (CI sets it; a user's build never fails on a warning
# from a newer or older compiler).  STRATA_TEST_NODE=PATH registers the e2e tests with that node.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
jobs=$(nproc 2>/dev/null || echo 2)
werror=(-DST_WERROR="${ST_WERROR:-OFF}")
jemalloc=(-DST_JEMALLOC="${ST_JEMALLOC:-AUTO}")
node=()
[ -n "${STRATA_TEST_NODE:-}" ] && node=(-DNODE_EXE="$STRATA_TEST_NODE")
case "$flavour" in
  release) cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${werror[@]}" "${jemalloc[@]}" \
               "${node[@]}" >/dev/null
           cmake --build build -j"$jobs" ;;
  asan)    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DST_SANITIZE=address,undefined \
               -DST_JEMALLOC=OFF "${werror[@]}" "${node[@]}" >/dev/null
           cmake --build build-asan -j"$jobs" ;;
  fuzz)    CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DST_FUZZ=ON \
               -DST_JEMALLOC=OFF "${werror[@]}" >/dev/null
           cmake --build build-fuzz -j"$jobs" --target fuzz_http fuzz_json_body fuzz_ws fuzz_parquet fuzz_jwt fuzz_tables_meta fuzz_avro_read ;;
  flavours)
    for f in gcc:Release:ON clang:Release:OFF clang:Debug:AUTO; do
      IFS=: read -r cc type jem <<<"$f"
      dir=build-check-$cc-$type
      echo "== $cc $type, ST_JEMALLOC=$jem"
      CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DST_JEMALLOC="$jem" "${werror[@]}" \
          >/dev/null
      cmake --build "$dir" -j"$jobs" >/dev/null
    done ;;
  *) echo "usage: tools/build.sh [release|asan|fuzz|flavours]" >&2; exit 2 ;;
esac
