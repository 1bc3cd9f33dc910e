#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Post → notification latency beside the commit latency of the same run (issue 23): starts one
# strata, runs `strata-wsload latency` (CONNS subscribers of one conversation, RATE posts/s) and
# prints the strata_commit_seconds histogram of exactly that run, so a notify p99 can be told
# apart as the disk's tail (a slow fdatasync delays every subscriber of the posts behind it) or
# the fan-out's. Holds /tmp/strata-bench.lock while it measures.
#   BIN=build/strata CONNS=1000 RATE=20 SECONDS_=10 bench/notifytail.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
BIN=${BIN:-build/strata} CONNS=${CONNS:-1000} RATE=${RATE:-20} SECONDS_=${SECONDS_:-10}
ulimit -n "$(ulimit -Hn)"
port=$(free_port)
"$BIN" --listen 127.0.0.1:"$port" --data-dir "$work/data" --max-connections $((CONNS + 1000)) \
  --log-level warn &
pids+=($!)
wait_port "$port"
hist() { curl -fsS "127.0.0.1:$port/metrics" | grep -E '^strata_commit_seconds_(bucket|count|sum)'; }
exec 9>/tmp/strata-bench.lock
flock 9
hist >"$work/h0"
build/strata-wsload latency "$port" "$CONNS" "$SECONDS_" "$RATE"
hist >"$work/h1"
flock -u 9
echo "commits of this run (histogram bucket: commits, not cumulative from the start):"
paste -d' ' "$work/h0" "$work/h1" | awk '{printf "  %s %g\n", $1, $4 - $2}'
