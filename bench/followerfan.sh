#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fan-out on a follower (issue 23), with where its CPU goes: starts a group of 3 on loopback,
# opens CONNS streams on a follower (one counter subscription each) and drives the leader with
# `strata-wsload fanout` (WINDOW changes in flight). Prints wsload's line, the follower's
# syscalls over the run (perf stat), its parallel-send writes (strata_ws_fanout_writes_total)
# and frames sent, and the CPU each member and the load generator used over 3 s of the run.
# Alternate binaries with BIN= to compare. Holds /tmp/strata-bench.lock while it measures.
# PERF=1: `perf record -g` of the follower's process over the run into $PERF_OUT (default
# /tmp/followerfan-perf.data) instead of counting its syscalls.
#   BIN=build/strata CONNS=10000 WINDOW=16 DURATION=6 bench/followerfan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
. bench/groupstart.sh # group_start, group_leader
BIN=${BIN:-build/strata} CONNS=${CONNS:-10000} WINDOW=${WINDOW:-16} DURATION=${DURATION:-6}
ulimit -n "$(ulimit -Hn)"
group_start "$BIN" --max-connections $((CONNS + 1000))
fp=${gpid[$follower]}
ws_metrics() { curl -fsS "127.0.0.1:${http[$follower]}/metrics" |
  awk '/^strata_(ws_(frames_sent|fanout_writes)_total|repl_applied_index)/ {v[$1] = $2} END {for (k in v) printf "%s=%s ", k, v[k]; print ""}'; }

exec 9>/tmp/strata-bench.lock
flock 9
m0=$(ws_metrics)
if [ -n "${PERF:-}" ]; then
  perf record -g -p "$fp" -o "${PERF_OUT:-/tmp/followerfan-perf.data}" -- sleep $((DURATION + 3)) >/dev/null 2>&1 &
else
  perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_sendto,syscalls:sys_enter_epoll_ctl -p "$fp" -o "$work/perf" -- sleep $((DURATION + 3)) &
fi
pp=$!
build/strata-wsload fanout "${http[$follower]}:${http[$leader]}" "$CONNS" "$DURATION" "$WINDOW" >"$work/wl.txt" &
wp=$!
# CPU over 3 s once every stream is open (wsload measures after they all are)
for _ in $(seq 600); do [ "$(curl -fsS "127.0.0.1:${http[$follower]}/metrics" | awk '/^strata_ws_connections / {print $2}')" = "$CONNS" ] && break; sleep 0.05; done
sleep 1
for id in 1 2 3; do a[$id]=$(ticks ${gpid[$id]}); done
aw=$(ticks $wp)
sleep 3
for id in 1 2 3; do b[$id]=$(ticks ${gpid[$id]}); done
bw=$(ticks $wp)
wait "$wp"
wait "$pp"
flock -u 9
cat "$work/wl.txt"
echo "follower metrics before: $m0"
echo "follower metrics after:  $(ws_metrics)"
[ -n "${PERF:-}" ] || echo "follower syscalls during the run: $(awk '/raw_syscalls|sys_enter_/ {printf "%s %s  ", $2, $1}' "$work/perf")"
hz=$(getconf CLK_TCK)
for id in 1 2 3; do
  r=follower; [ "$id" = "$leader" ] && r=leader; [ "$id" = "$follower" ] && r="follower with the streams"
  awk -v t=$((b[$id] - a[$id])) -v hz="$hz" -v r="$r" -v id="$id" 'BEGIN {printf "member %d (%s): %.0f %% of a core\n", id, r, t * 100 / hz / 3}'
done
awk -v t=$((bw - aw)) -v hz="$hz" 'BEGIN {printf "strata-wsload: %.0f %% of a core\n", t * 100 / hz / 3}'
