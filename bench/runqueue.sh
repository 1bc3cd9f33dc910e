#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How long strata's loop thread waited for a CPU during a wrk run (issue 22): the loop's
# run_delay from /proc/PID/task/PID/schedstat before and after `wrk -t1 -c64` with SCRIPT, with
# the loop at NICE (0: as started). Prints 2xx/s (bench/lib.sh's count), p99, the wait, and the loop's longest busy
# stretch (wall time, preemption included). Holds /tmp/strata-bench.lock while it measures.
#   BIN=build/strata SCRIPT=bench/incr.lua NICE=0 SECONDS_=8 bench/runqueue.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
BIN=${BIN:-build/strata} SCRIPT=${SCRIPT:-bench/incr.lua} NICE=${NICE:-0} SECONDS_=${SECONDS_:-8}
port=$(free_port)
"$BIN" --listen 127.0.0.1:"$port" --data-dir "$work/data" --log-level warn &
pid=$!
pids+=($pid)
wait_port "$port"
[ "$NICE" = 0 ] || renice -n "$NICE" -p "$pid" >/dev/null
delay() { awk '{print $2}' /proc/"$pid"/task/"$pid"/schedstat; }
exec 9>/tmp/strata-bench.lock
flock 9
d0=$(delay)
wrk_strata "$port" "" -- -t1 -c64 -d"${SECONDS_}s" --latency -s "$SCRIPT" "http://127.0.0.1:$port"
d1=$(delay)
flock -u 9
stall=$(curl -fsS "127.0.0.1:$port/metrics" | awk '/^strata_loop_stall_max_seconds / {printf "%.1f", $2 * 1000}')
echo "nice $NICE: $W_RPS 2xx/s, p99 $W_P99 ms; loop waited for a CPU $(( (d1 - d0) / 1000000 )) ms of ${SECONDS_} s; longest busy stretch $stall ms"
