#!/bin/bash
# SPDX-License-Identifier: MIT
# An erasure's loop turns, two binaries alternated: `bench/loopstall.sh erase` per side and round
# (the first side changing every round, bench/lib.sh turns), each with the loop's epoll_wait
# enters and exits traced beside a CPU clock, split into turns by bench/turns.py. Per run: the
# loopstall row (bystander p50/p99/max, the loop's longest stall before and after), the erasure's
# time, the CPU of the loop's 5 dearest turns, the wall (and CPU) of its 5 longest, and the loop
# thread's time waiting for a core. The bench lock (/tmp/bench.lock) is taken for
# each run alone and given back between runs (other engineers' builds go on meanwhile).
# usage: OLD=path/to/strata NEW=path/to/strata ERASE_DATA=DIR [ROUNDS=3] [STACKS=DIR] bench/eraseab.sh
#   ERASE_DATA: a data set kept by `ERASE_DATA=DIR bench/loopstall.sh erase` (copied by each run).
#   STACKS=DIR: each run's 5 dearest turns with their stacks kept in DIR/SIDE-ROUND.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OLD:?OLD=path to the old binary}" "${NEW:?NEW=path to the new binary}"
: "${ERASE_DATA:?ERASE_DATA=a kept data set}"
ROUNDS=${ROUNDS:-3}
STACKS=${STACKS:-}
OPTS="-g -e raw_syscalls:sys_enter --filter id==232||id==281 -e raw_syscalls:sys_exit --filter id==232||id==281 -e cpu-clock/period=250000/ -c 1"
tmp=$(mktemp -d /tmp/eraseab-XXXXXX)
locked=0
unlock() { if [ "$locked" = 1 ]; then rmdir /tmp/bench.lock; locked=0; fi; }
trap 'unlock; rm -rf "$tmp"' EXIT
[ -z "$STACKS" ] || mkdir -p "$STACKS"
turns() { # as bench/lib.sh's (sourcing it would build and take a temp dir of its own)
  local r=$1 n i; shift
  n=$#
  local fns=("$@")
  for ((i = 0; i < n; i++)); do "${fns[$(((r - 1 + i) % n))]}" "$r"; done
}
run() { # ROUND SIDE
  local r=$1 side=$2 bin f out pid top
  bin=$OLD; [ "$side" = new ] && bin=$NEW
  f=$tmp/$side-$r.data
  until mkdir /tmp/bench.lock 2>/dev/null; do sleep 10; done
  locked=1
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  out=$(STRATA=$bin ERASE_PERF=$f ERASE_PERF_OPTS="$OPTS" ERASE_SCHED=$tmp/sched.txt ERASE_DATA=$ERASE_DATA ALLOW_DIRTY=${ALLOW_DIRTY:-} \
    bench/loopstall.sh erase 2>&1 | grep -E '^\| erase|done in|FAILED' | tr '\n' ' ' || true)
  unlock
  pid=$(perf script -i "$f" -F pid,tid 2>/dev/null | awk -F/ '{print $1 + 0; exit}' || true)
  perf script -i "$f" -F tid,time,event,ip,sym,dso 2>/dev/null >"$tmp/script.txt" || true
  python3 bench/turns.py "$pid" 0 4000 <"$tmp/script.txt" >"$tmp/turns.txt"
  python3 bench/turns.py "$pid" 0 4000 wall <"$tmp/script.txt" >"$tmp/walls.txt"
  top=$(awk '/^== turn/ {print $11 "/" $5}' "$tmp/turns.txt" | sort -t/ -k1 -gr | awk 'NR <= 5' | tr '\n' ' ')
  long=$(awk '/^== turn/ {print $5 "/" $11}' "$tmp/walls.txt" | awk 'NR <= 5' | tr '\n' ' ')
  if [ -n "$STACKS" ]; then
    awk '/^== turn/ {n++} n <= 5' "$tmp/turns.txt" >"$STACKS/$side-$r.txt"
    awk '/^== turn/ {n++} n <= 5' "$tmp/walls.txt" >"$STACKS/$side-$r-wall.txt"
  fi
  rm -f "$f" "$tmp/script.txt"
  # the loop thread's time waiting for a core over the run (ERASE_SCHED: per thread name)
  wait_ms=$(awk '$1 == "loop" {print $6}' "$tmp/sched.txt" 2>/dev/null || true)
  echo "$side r$r load $load | $out| 5 dearest turns, CPU/wall ms: $top| 5 longest turns, wall/CPU ms: $long| loop thread waiting for a core: ${wait_ms:-?} ms"
}
side_old() { run "$1" old; }
side_new() { run "$1" new; }
for r in $(seq "$ROUNDS"); do turns "$r" side_old side_new; done
