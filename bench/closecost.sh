#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a mass disconnect costs: starts one strata (--max-connections CONNS+1000), opens CONNS
# WebSocket streams with one subscription each (`strata-wsload idle`), lets them all close at
# once and prints the CPU strata used from the moment they were open until 1.5 s after the last
# closed, and the soft open files limit it ran with (bench/RESULTS.md, session 7). Holds
# /tmp/strata-bench.lock.
#   BIN=build/strata CONNS=10000 bench/closecost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
BIN=${BIN:-build/strata} CONNS=${CONNS:-10000}
streams_server_start
build/strata-wsload idle "$port" "$CONNS" 2 >"$work/idle.txt" &
lp=$!
for _ in $(seq 1200); do grep -q ready "$work/idle.txt" && break; sleep 0.05; done
sleep 0.5
a=$(ticks "$p")
wait "$lp"
sleep 1.5
b=$(ticks "$p")
hz=$(getconf CLK_TCK)
soft=$(awk '/^Max open files/ {print $4}' /proc/"$p"/limits)
echo "$BIN: $CONNS streams closing at once took $(((b - a) * 1000 / hz)) ms of strata CPU (soft open files limit $soft)"
