#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Reconciliation benchmarks (issue 7):
#   throughput  POST /v1/admin/reconcile over every conversation and distinct counter of a
#               loaded store (100 users x 10 conversations, LOAD_SECONDS of posts): keys/s;
#   serving     durable posts/s (2xx only) while passes run every INTERVAL seconds (default 1, the
#               harshest; strata's default is 20) over the keys the posts dirty, vs the same
#               build with passes once a day: the ratio.
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
# posts SECONDS: sets W_RPS, 2xx posts per second (bench/lib.sh's wrk_strata: any other status or
# a wrk socket error fails the run)
posts() { wrk_strata "$port" "" -- -t1 -c64 -d"$1s" -s bench/cold.lua "http://127.0.0.1:$port" -- post; }
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

echo "# reconciliation, $(date -u +%F), $(nproc) cores"
run_server 86400
posts "$LOAD_SECONDS"
for i in $(seq 1 200); do curl -s -XPOST "http://127.0.0.1:$port/v1/counters/d$((i % 20))/distinct" \
  --json "{\"member\":\"m$i\"}" >/dev/null; done
# the pass answers 202 and runs in slices (a quarter of the loop): time it to its last key
keys() { echo $(( $(metric 'strata_reconcile_keys_total{kind="conversation"}') + $(metric 'strata_reconcile_keys_total{kind="distinct"}') )); }
k0=$(keys)
t0=$(date +%s.%N)
pass=$(curl -s -XPOST "http://127.0.0.1:$port/v1/admin/reconcile" | sed 's/[^0-9]//g')
while [ "$(metric strata_reconcile_all_passes_total)" -lt "$pass" ]; do sleep 0.01; done
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v k="$(( $(keys) - k0 ))" 'BEGIN { printf "throughput %s keys in %.3f s = %.0f keys/s (in slices)\n", k, b - a, k / (b - a) }'
kill "$spid"; wait "$spid" 2>/dev/null || true

# serving: three alternating rounds (this machine drifts by +-15 % between runs), medians
for round in 1 2 3; do
  for interval in 86400 "${INTERVAL:-1}"; do
    run_server "$interval"
    posts "$LOAD_SECONDS"
    posts "$DURATION"
    echo "$interval $W_RPS $(metric strata_reconcile_runs_total) $(metric 'strata_reconcile_keys_total{kind="conversation"}')" >>"$work/serve.txt"
    kill "$spid"; wait "$spid" 2>/dev/null || true
  done
done
cat "$work/serve.txt"
awk -v busy="${INTERVAL:-1}" '
  function med(x, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
                                  return x[int((n + 1) / 2)] }
  $1 == 86400 { d[++nd] = $2 + 0 } $1 == busy { b[++nb] = $2 + 0 }
  END { md = med(d, nd); mb = med(b, nb)
        printf "serving median posts_per_sec passes_daily=%.0f passes_every_%ss=%.0f ratio=%.2f\n", md, busy, mb, mb / md }' "$work/serve.txt"
