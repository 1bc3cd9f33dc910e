#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What opening many streams costs (a reconnect storm after a restart or a failover): starts one
# strata, opens CONNS WebSocket streams with one subscription each (`strata-wsload idle`) and
# prints the time until all are open, the CPU strata used meanwhile and its longest loop
# iteration (strata_loop_stall_max_seconds). PERF=1 also records
# strata with `perf record -g` into /tmp/adopt-perf.data. Holds /tmp/strata-bench.lock.
#   BIN=build/strata CONNS=10000 bench/adopt.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
BIN=${BIN:-build/strata} CONNS=${CONNS:-10000}
streams_server_start
a=$(ticks "$p")
t0=$(date +%s%N)
if [ -n "${PERF:-}" ]; then perf record -g -p "$p" -o /tmp/adopt-perf.data -- sleep 3 >/dev/null 2>&1 & fi
build/strata-wsload idle "$port" "$CONNS" 2 >"$work/idle.txt" &
lp=$!
for _ in $(seq 1200); do grep -q ready "$work/idle.txt" && break; sleep 0.05; done
t1=$(date +%s%N)
b=$(ticks "$p")
# while the streams are open: the longest iteration of the storm (their closing comes after)
m=$(curl -fsS "127.0.0.1:$port/metrics")
stall=$(awk '/^strata_loop_stall_max_seconds / {printf "%.1f", $2 * 1000}' <<<"$m")
held=$(awk '/^strata_http_accepts_held_total / {print $2}' <<<"$m")
wait "$lp"
flock -u 9
grep -q ready "$work/idle.txt" || die "the streams did not all open in 60 s"
awk -v n="$CONNS" -v ms=$(((t1 - t0) / 1000000)) -v t=$((b - a)) -v hz="$(getconf CLK_TCK)" -v bin="$BIN" \
  -v stall="$stall" -v held="${held:-n/a}" \
  'BEGIN {printf "%s: %d streams open in %d ms; strata used %.0f ms of CPU (%.0f us per stream); longest loop iteration %s ms; accepts held for a later iteration %s\n", bin, n, ms, t * 1000 / hz, t * 1e6 / hz / n, stall, held}'
