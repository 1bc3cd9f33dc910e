#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPU per acknowledged write on each member of a group of 3 (issue 24): starts a group on
# loopback, drives the leader with wrk -t1 -c64 (MODE=post: durable 1 KiB posts across 1,000
# conversations, bench/chat.lua; post1: 1 KiB posts to one conversation, bench/post1.lua;
# incr: counter increments, bench/incr.lua) and reads every member's per-thread CPU from
# /proc/PID/task/*/stat before and after. Prints µs of CPU per 2xx answer per member and per
# thread: "loop" (the main thread), "strata-sync"/"strata-apply" (the store's threads), and
# libuv's pool and C-Raft's workers under the binary's own name. Compare CPU per write, not
# throughput: the machine is shared. The wrk run holds /tmp/strata-bench.lock; only 2xx count,
# and any other status or a wrk socket error fails the run (bench/lib.sh's wrk_strata).
#   BIN=build/strata MODE=post DURATION=8 ROUNDS=1 bench/groupcost.sh
#   SINGLE=1: one strata instead of a group (the same figures, for comparison)
#   PERF=1: also `perf record $PERF_OPTS` (default -g; e.g. "--call-graph dwarf,8192 -F 1999")
#   a follower's loop thread into $PERF_OUT (default /tmp/groupcost-perf.data); PERF_WHO=leader:
#   the leader's; PERF_THREAD=strata-apply: that thread instead of the loop
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/strata}
MODE=${MODE:-post}
DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-1}
PERF_OUT=${PERF_OUT:-/tmp/groupcost-perf.data}
. bench/lib.sh # temp dir $work, $pids stopped on exit, free_port, wait_port
# "tid comm ticks" of every thread of a process (the main thread, libuv's loop, as "loop")
threads() { for t in /proc/"$1"/task/*; do
  awk -v id="${t##*/}" -v main="$1" '{ split($0, a, ") "); split(a[2], f, " "); c = substr($0, index($0, "(") + 1); sub(/\).*/, "", c); if (id == main) c = "loop"; print id, c, f[12] + f[13] }' "$t/stat" 2>/dev/null || true
done; }

declare -A http raft pid
N=3; [ -n "${SINGLE:-}" ] && N=1
spec=""
for id in $(seq $N); do
  http[$id]=$(free_port); raft[$id]=$(free_port)
  spec+="${spec:+,}$id=127.0.0.1:${raft[$id]}"
done
cluster() { [ $N = 1 ] || echo --cluster "$spec" --cluster-self "$1"; }
for id in $(seq $N); do
  $BIN --listen 127.0.0.1:${http[$id]} --data-dir "$work/m$id" $(cluster $id) \
    --cold-url "file://$work/cold" --log-level warn &
  pid[$id]=$!; pids+=(${pid[$id]})
done
for id in $(seq $N); do wait_port ${http[$id]}; done
L=""
for _ in $(seq 200); do
  for id in $(seq $N); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 -XPOST --json '{}' "http://127.0.0.1:${http[$id]}/v1/counters/probe/incr" || true)
    if [ "$code" = 200 ]; then L=$id; break 2; fi
  done
  sleep 0.05
done
[ -n "$L" ] || { echo "no leader" >&2; exit 1; }
F=$(( L % N + 1 ))
case $MODE in
post) script=(-s bench/chat.lua "http://127.0.0.1:${http[$L]}" -- post) ;;
post1) script=(-s bench/post1.lua "http://127.0.0.1:${http[$L]}") ;;
incr) script=(-s bench/incr.lua "http://127.0.0.1:${http[$L]}") ;;
*) echo "MODE: post, post1 or incr" >&2; exit 2 ;;
esac
hz=$(getconf CLK_TCK)
for r in $(seq "$ROUNDS"); do
  for id in $(seq $N); do threads ${pid[$id]} >"$work/t0.$id"; done
  who=$F; [ "${PERF_WHO:-follower}" = leader ] && who=$L
  ftid=${pid[$who]}
  [ -z "${PERF_THREAD:-}" ] || ftid=$(awk -v c="$PERF_THREAD" '$2 == c {print $1; exit}' "$work/t0.$who")
  exec 8>/tmp/strata-bench.lock
  flock 8
  perf_pid=
  if [ -n "${PERF:-}" ]; then
    perf record ${PERF_OPTS:--g} -o "$PERF_OUT" -t "$ftid" -- sleep "$DURATION" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  # the leader's own counters: only its 2xx count; any other status (a 307: it is no longer the
  # leader) or a wrk socket error fails the run (bench/lib.sh's wrk_strata)
  wrk_strata "${http[$L]}" "" -- -t1 -c64 -d"${DURATION}s" "${script[@]}"
  [ -z "$perf_pid" ] || wait "$perf_pid" || true
  flock -u 8
  n=$W_OK
  for id in $(seq $N); do threads ${pid[$id]} >"$work/t1.$id"; done
  echo "round $r, $MODE, $BIN: $n 2xx in ${DURATION}s ($(( n / DURATION ))/s), load $(cut -d' ' -f1 /proc/loadavg)"
  tot=0
  for id in $(seq $N); do
    role=follower; [ "$id" = "$L" ] && role=leader; [ $N = 1 ] && role=single
    line=$(join <(sort "$work/t0.$id") <(sort "$work/t1.$id") | awk -v n="$n" -v hz="$hz" '
      { d = $5 - $3; c[$2] += d; s += d }
      END { printf "%.1f", s * 1e6 / hz / n; for (k in c) if (c[k] > 0) printf " %s=%.1f", k, c[k] * 1e6 / hz / n }')
    echo "  member $id ($role): ${line%% *} µs/write [${line#* }]"
    tot=$(awk -v a="$tot" -v b="${line%% *}" 'BEGIN {print a + b}')
  done
  echo "  all members: $tot µs/write"
done
