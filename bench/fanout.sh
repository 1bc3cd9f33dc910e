#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One strata's streams, for comparing builds (BIN=…, alternate them): fan-out to CONNS streams
# with WINDOW changes in flight (`strata-wsload fanout`, each WINDOWS in turn), then post →
# notify latency with SUBS subscribers at each of RATES posts/s (`strata-wsload latency`) with
# the CPU each strata thread and the load generator spent per post over the middle of that run.
# bench/streams.sh is the table's run against Redis; this one is for A/B (bench/RESULTS.md,
# session 8). Holds /tmp/strata-bench.lock.
#   BIN=build/strata CONNS=10000 WINDOWS="16 64" SUBS=1000 RATES="20 100" DURATION=6 bench/fanout.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
BIN=${BIN:-build/strata} CONNS=${CONNS:-10000} SUBS=${SUBS:-1000} DURATION=${DURATION:-6}
WINDOWS=${WINDOWS-16 64} RATES=${RATES-20 100}
streams_server_start
for w in $WINDOWS; do build/strata-wsload fanout "$port" "$CONNS" "$DURATION" "$w"; done
hz=$(getconf CLK_TCK)
threads() { for t in /proc/"$p"/task/*; do echo "$(cat "$t"/comm) $(ticks "$p/task/${t##*/}")"; done; }
for r in $RATES; do
  build/strata-wsload latency "$port" "$SUBS" "$DURATION" "$r" >"$work/lat.txt" &
  lp=$!
  sleep $((DURATION / 3 + 1)) # the subscribers are open and posts flow
  threads >"$work/a"
  wa=$(ticks "$lp")
  sleep $((DURATION / 3))
  threads >"$work/b"
  wb=$(ticks "$lp")
  wait "$lp"
  cat "$work/lat.txt"
  secs=$((DURATION / 3))
  paste "$work/a" "$work/b" | awk -v r="$r" -v s="$secs" -v hz="$hz" -v wl=$((wb - wa)) '
    { d = $4 - $2; if (d > 0) printf "%s %.2f ", $1, d * 1000 / hz / (r * s) }
    END { printf "wsload %.2f (ms of CPU per post)\n", wl * 1000 / hz / (r * s) }'
done
