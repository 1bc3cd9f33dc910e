#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Reconciliation benchmarks (issue 7):
#   throughput  POST /v1/admin/reconcile over every conversation and distinct counter of a
#               loaded store (100 users x 10 conversations, LOAD_SECONDS of posts): keys/s;
#   serving     durable posts/s while passes run every second over the keys the posts dirty,
#               vs the same server build with passes once a day: the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
LOAD_SECONDS=${LOAD_SECONDS:-10}

run_server() { # interval -> sets port, spid
  port=$(free_port)
  rm -rf "$work/data"
  build/strata --listen 127.0.0.1:"$port" --data-dir "$work/data" --map-size 4GiB \
    --reconcile-interval "$1" --flush-interval 86400 --flush-rows 100000000 --log-level warn \
    2>>"$work/strata.log" &
  spid=$!
  pids+=("$spid")
  wait_port "$port"
}
posts() { wrk -t1 -c64 -d"$1s" -s bench/cold.lua "http://127.0.0.1:$port" -- post | awk '/Requests\/sec/ {print $2 * 16}'; }
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

echo "# reconciliation, $(date -u +%F), $(nproc) cores"
run_server 86400
posts "$LOAD_SECONDS" >/dev/null
for i in $(seq 1 200); do curl -s -XPOST "http://127.0.0.1:$port/v1/counters/d$((i % 20))/distinct" \
  -d "{\"member\":\"m$i\"}" >/dev/null; done
t0=$(date +%s.%N)
out=$(curl -s -XPOST "http://127.0.0.1:$port/v1/admin/reconcile")
t1=$(date +%s.%N)
echo "$out" | awk -v a="$t0" -v b="$t1" -F'[:,}]' '{ printf "throughput %s keys in %.3f s = %.0f keys/s (drift %s)\n", $2, b - a, $2 / (b - a), $4 }'
idle=$(posts "$DURATION")
kill "$spid"; wait "$spid" 2>/dev/null || true

run_server 1
posts "$LOAD_SECONDS" >/dev/null
busy=$(posts "$DURATION")
echo "serving posts_per_sec passes_daily=$idle passes_every_second=$busy ratio=$(ratio "$busy" "$idle") reconcile_runs=$(metric strata_reconcile_runs_total) keys=$(metric 'strata_reconcile_keys_total{kind="conversation"}')"
