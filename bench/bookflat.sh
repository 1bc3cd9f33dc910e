#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hot store stays flat as bookings finish (SPEC §4.2, issue 39): two strata with
# --booking-hot-seconds 0, one selling SMALL places (default 1,000), the other LARGE (default
# 1,000,000), one booking of one place each, every one confirmed (wrk, bench/booksold.lua, until
# the section is sold out). Then a flush pass until no finished booking is hot, and the hot store's
# bytes (strata_hot_bytes: LMDB's pages in use) and its data file's size are compared. Prints the
# ratio; fails past 1.5x. Not part of the test suite (it takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SMALL=${SMALL:-1000}
LARGE=${LARGE:-1000000}
echo "# bookflat, $(date -u +%F), $(nproc) cores, $SMALL vs $LARGE bookings sold, commit $(git rev-parse --short HEAD)"

metric() { curl -fsS "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }

sell() { # port places
  local p=$1 n=$2 B="http://127.0.0.1:$1"
  curl -fsS -XPOST "$B/v1/events" --json '{"event_id":"flat","sections":[{"name":"floor","capacity":'"$n"',"price":5}]}' >/dev/null
  local start=$SECONDS
  while :; do
    local st
    st=$(curl -fsS "$B/v1/events/flat" | python3 -c 'import json,sys; s=json.load(sys.stdin)["event_stats"]; print(s["available"], s["reserved"])')
    [ "$st" = "0 0" ] && break
    if [ "${st% *}" = 0 ]; then sleep 1; continue; fi # the last holds are being confirmed
    out=$(wrk -t1 -c32 -d10s -s bench/booksold.lua "$B" -- flat)
    grep -q 'errors=0' <<<"$out" || die "answers other than 201/200/409: $(grep RESULT <<<"$out")"
  done
  echo "sold $n places in $((SECONDS - start)) s"
}

cool() { # port places: flush passes until every finished booking went cold
  local p=$1 n=$2 B="http://127.0.0.1:$1"
  for _ in $(seq 600); do
    curl -fsS -XPOST "$B/v1/admin/flush" >/dev/null
    sleep 1
    local moved
    moved=$(metric "$p" strata_flush_rows_total)
    [ "${moved%.*}" -ge "$n" ] && [ "$(metric "$p" strata_flush_running)" = 0 ] && return 0
  done
  die "the finished bookings never all went cold"
}

declare -A bytes file
for n in "$SMALL" "$LARGE"; do
  p=$(free_port)
  build/strata --listen 127.0.0.1:"$p" --data-dir "$work/$p" --booking-hot-seconds 0 --max-seats "$LARGE" 2>"$work/$p.log" &
  pids+=($!)
  wait_port "$p"
  sell "$p" "$n"
  cool "$p" "$n"
  sleep 2
  bytes[$n]=$(metric "$p" strata_hot_bytes)
  file[$n]=$(stat -c %s "$work/$p/data.mdb")
  rows=$(find "$work/$p/cold/events" -name '*.parquet' | wc -l)
  echo "$n sold: hot bytes ${bytes[$n]}, data.mdb ${file[$n]} bytes, $rows booking objects in the cold tier"
done
r=$(ratio "${bytes[$LARGE]}" "${bytes[$SMALL]}")
echo "RESULT hot bytes $LARGE/$SMALL sold: $r (${bytes[$LARGE]} / ${bytes[$SMALL]})"
awk -v r="$r" 'BEGIN { exit !(r <= 1.5) }' || die "the hot store grew ${r}x"
