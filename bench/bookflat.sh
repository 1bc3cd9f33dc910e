#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hot store stays flat as bookings finish (SPEC §4.2, issue 39): two strata with
# --booking-hot-seconds 0, each with an event of LARGE places (default 1,000,000), one selling
# SMALL of them (default 1,000 or a few more), the other all LARGE, one booking of one place
# each, every one confirmed (wrk, bench/booksold.lua). Then a flush pass until no finished booking is hot, and the hot store's
# B-tree bytes and keys (strata_hot_tree_bytes, strata_hot_entries) are compared; strata_hot_bytes
# (which also counts LMDB's free list: the freed pages' numbers, until they are reused) and the
# data file's size are printed beside them. Fails past 1.5x. Not part of the test suite (it takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
LARGE=${LARGE:-1000000} # places of the event, sold out in both cases
SMALL=${SMALL:-$((LARGE / 100))} # bookings in the small case: 100 places each (the most one takes)
echo "# bookflat, $(date -u +%F), $(nproc) cores, $LARGE places sold by $SMALL vs $LARGE bookings, commit $(git rev-parse --short HEAD)"

metric() { curl -fsS "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }

sell() { # port bookings: an event of LARGE places sold out in both cases (so the seat map, the
  # event's own state, is the same), by `bookings` bookings: LARGE/100 of 100 places each (one at a
  # time), or LARGE of one place each (wrk; the last holds wrk left unconfirmed, at most its 32
  # connections', stay reserved: hot, as they must be)
  local p=$1 n=$2 B="http://127.0.0.1:$1"
  curl -fsS -XPOST "$B/v1/events" --json '{"event_id":"flat","sections":[{"name":"floor","capacity":'"$LARGE"',"price":5}]}' >/dev/null
  local start=$SECONDS sold=0
  if [ "$n" -lt "$LARGE" ]; then # LARGE/100 bookings of 100 places, one at a time
    python3 - "$B" "$n" <<'PY'
import json, sys, urllib.request
base, n = sys.argv[1], int(sys.argv[2])
QTY = 100
def post(path, body=None):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else b"",
                                 headers={"Content-Type": "application/json"}, method="POST")
    return json.load(urllib.request.urlopen(req))
for _ in range(n):
    b = post("/v1/events/flat/bookings", {"section": "floor", "quantity": QTY})
    post("/v1/bookings/%s/confirm" % b["booking_id"])
PY
  fi
  local sold avail
  read -r sold avail < <(curl -fsS "$B/v1/events/flat" | python3 -c 'import json,sys; s=json.load(sys.stdin)["event_stats"]; print(s["sold"], s["available"])')
  while [ "$avail" -gt 0 ]; do
    local secs=$(( avail / 4000 + 1 )); [ "$secs" -le 10 ] || secs=10
    # strata's own counters: a status other than 2xx and 409, or a wrk socket error, fails the run
    wrk_strata "$p" "409" -- -t1 -c32 -d"${secs}s" -s bench/booksold.lua "$B" -- flat
    grep -q 'errors=0' <<<"$W_OUT" || die "answers other than 201/200/409: $(grep RESULT <<<"$W_OUT")"
    read -r sold avail < <(curl -fsS "$B/v1/events/flat" | python3 -c 'import json,sys; s=json.load(sys.stdin)["event_stats"]; print(s["sold"], s["available"])')
  done
  echo "sold $sold places by $n bookings in $((SECONDS - start)) s"
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

declare -A bytes file tree entries
for n in "$SMALL" "$LARGE"; do
  p=$(free_port)
  build/strata --listen 127.0.0.1:"$p" --data-dir "$work/$p" --booking-hot-seconds 0 --max-seats "$LARGE" 2>"$work/$p.log" &
  pids+=($!)
  wait_port "$p"
  sell "$p" "$n"
  cool "$p" "$((n - 64))" # all but the last holds wrk may have left
  sleep 2
  bytes[$n]=$(metric "$p" strata_hot_bytes)
  tree[$n]=$(metric "$p" strata_hot_tree_bytes)
  entries[$n]=$(metric "$p" strata_hot_entries)
  file[$n]=$(stat -c %s "$work/$p/data.mdb")
  rows=$(find "$work/$p/cold/events" -name '*.parquet' | wc -l)
  echo "$n bookings: ${entries[$n]} keys, tree ${tree[$n]} bytes, hot bytes ${bytes[$n]} (with LMDB's free list), data.mdb ${file[$n]} bytes, $rows booking objects in the cold tier"
done
r=$(ratio "${tree[$LARGE]}" "${tree[$SMALL]}")
echo "RESULT hot tree bytes, $LARGE/$SMALL bookings: $r (${tree[$LARGE]} / ${tree[$SMALL]}); keys ${entries[$LARGE]} / ${entries[$SMALL]}; with LMDB's free list $(ratio "${bytes[$LARGE]}" "${bytes[$SMALL]}")x"
awk -v r="$r" 'BEGIN { exit !(r <= 1.5) }' || die "the hot store grew ${r}x"
