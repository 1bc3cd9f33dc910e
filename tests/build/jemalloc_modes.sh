#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ST_JEMALLOC (CMakeLists.txt) is AUTO, ON or OFF, resolved at every configure: this configures
# the tree in one scratch directory, one setting after the other, and reads the allocator each
# configure chose ("-- allocator: ..."). A cached ON/OFF kept the first configure's choice: a
# sanitizer build directory turned back into a plain one stayed on glibc's malloc.
#   tests/build/jemalloc_modes.sh SOURCE_DIR [CMAKE]
set -uo pipefail
src=$1
cmake=${2:-cmake}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
# the allocator line of a configure with these arguments, or "configure failed"
alloc() {
  local out
  if out=$("$cmake" -S "$src" -B "$tmp/b" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" 2>&1); then
    sed -n 's/^-- allocator: //p' <<<"$out"
  else
    echo "configure failed"
  fi
}
expect() { # what want got
  if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "FAILED - $1: want '$2', got '$3'"; failed=1; fi
}
found=no
pkg-config --exists jemalloc && found=yes

expect "AUTO with a sanitizer: glibc's malloc" "glibc's malloc (ST_JEMALLOC=AUTO)" \
  "$(alloc -DST_SANITIZE=address,undefined -DST_JEMALLOC=AUTO)"
expect "ON with a sanitizer: the configure fails" "configure failed" \
  "$(alloc -DST_SANITIZE=address,undefined -DST_JEMALLOC=ON)"
if [ $found = yes ]; then
  expect "AUTO again, in the same directory, without the sanitizer: jemalloc" \
    "jemalloc (ST_JEMALLOC=AUTO)" "$(alloc -DST_SANITIZE= -DST_JEMALLOC=AUTO)"
  expect "ON, found: jemalloc" "jemalloc (ST_JEMALLOC=ON)" "$(alloc -DST_SANITIZE= -DST_JEMALLOC=ON)"
else
  expect "AUTO without jemalloc installed: glibc's malloc" "glibc's malloc (ST_JEMALLOC=AUTO)" \
    "$(alloc -DST_SANITIZE= -DST_JEMALLOC=AUTO)"
  expect "ON without jemalloc installed: the configure fails" "configure failed" \
    "$(alloc -DST_SANITIZE= -DST_JEMALLOC=ON)"
fi
expect "OFF: glibc's malloc" "glibc's malloc (ST_JEMALLOC=OFF)" "$(alloc -DST_JEMALLOC=off)"
expect "anything else: the configure fails" "configure failed" "$(alloc -DST_JEMALLOC=maybe)"
exit $failed
