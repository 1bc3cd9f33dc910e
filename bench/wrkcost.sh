#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a wrk Lua response() callback (counting statuses inside wrk) costs: GET /v1/counters/x by
# wrk -t1 -c64 with bench/get.lua and with bench/getcount.lua (the same plus the callback),
# alternated ROUNDS times, DURATION seconds each. Why the bench scripts read strata's /metrics
# instead (bench/RESULTS.md, "Counting").
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
. bench/lib.sh
sp=$(free_port)
build/strata --listen 127.0.0.1:"$sp" --data-dir "$work/strata" --log-level warn 2>"$work/strata.log" &
pids+=($!)
wait_port "$sp"
curl -fsS -XPOST "http://127.0.0.1:$sp/v1/counters/bench/incr" >/dev/null
echo "# wrk response() cost, $(date -u '+%F %H:%M UTC'), $(nproc) cores, load $(load_avg), ${DURATION}s per run"
for r in $(seq "$ROUNDS"); do
  for s in get getcount; do
    wrk_strata "$sp" "" -- -t1 -c64 -d"${DURATION}s" -s "bench/$s.lua" "http://127.0.0.1:$sp"
    printf 'round %d %-8s %s 2xx/s\n' "$r" "$s" "$W_RPS"
  done
done
echo "load at the end $(load_avg)"
