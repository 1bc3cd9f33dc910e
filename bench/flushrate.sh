#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Flush throughput: LOAD_SECONDS of pipelined posts (bench/cold.lua: 100 users x 10
# conversations), a restart, then one POST /v1/admin/flush timed until no flush is running or
# pending. Prints rows, flushes (objects), wall seconds, rows/s of wall time, rows/s per worker
# (strata_flush_seconds: snapshot to manifest) and the loop's longest stall.
# usage: [STRATA=path/to/strata] [ROUNDS=1] bench/flushrate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
STRATA=${STRATA:-build/strata}
LOAD_SECONDS=${LOAD_SECONDS:-20}
ROUNDS=${ROUNDS:-1}
spid= url=
start() { flush_server_start "$STRATA"; }
stop() { flush_server_stop; }
metric() { flush_metric "$1"; }
echo "# flush rate, $(date -u +%F), $(nproc) cores, $STRATA, load $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$ROUNDS"); do
  rm -rf "$work/data"
  start
  wrk_strata "${url##*:}" "" -- -t1 -c32 -d"${LOAD_SECONDS}s" -s bench/cold.lua "$url" -- post # 2xx only
  stop; start
  t0=$(date +%s.%N)
  curl -s -o /dev/null -XPOST "$url/v1/admin/flush"
  while [ "$(metric strata_flush_passes_total)" = 0 ]; do sleep 0.1; done
  while [ "$(metric strata_flush_running)" != 0 ] || [ "$(metric strata_flush_pending)" != 0 ]; do sleep 0.1; done
  t1=$(date +%s.%N)
  awk -v r="$(metric strata_flush_rows_total)" -v n="$(metric 'strata_flush_total{result="ok"}')" \
    -v s="$(metric strata_flush_seconds_sum)" -v st="$(metric strata_loop_stall_max_seconds)" \
    -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" 'BEGIN {
    printf "flush rows=%d objects=%d wall_s=%.2f rows_per_s=%.0f rows_per_worker_s=%.0f max_stall_ms=%.1f\n",
      r, n, w, r / w, r / s, st * 1000 }'
  stop
done
