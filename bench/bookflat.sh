#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hot store stays flat as bookings finish (SPEC §4.2, issue 39): two strata with
# --booking-hot-seconds 0, each with an event of LARGE places (default 1,000,000), one selling
# SMALL of them (default 1,000 or a few more), the other all LARGE, one booking of one place
# each, every one confirmed (wrk, bench/booksold.lua). Then a flush pass until no finished booking
# is hot, and what a user sees is compared: `strata_hot_bytes` (the hot store's size as /metrics
# and /healthz report it, LMDB's free list included: the e2e bound of tests/e2e/booking-cold uses
# it) and the size of data.mdb; the B-tree alone (strata_hot_tree_bytes) and the keys
# (strata_hot_entries) beside them. Then a SECOND sell-out cycle on the LARGE strata (another
# event of LARGE places, LARGE bookings, cooled the same way): if the pages the first cycle's
# cooled bookings freed are reused, data.mdb stays flat.
# Records the run in bench/out/bookflat/DATE.json ("bookflat": every figure; no load gate: it
# measures bytes, which do not depend on the machine's load) and its tools' output in
# bench/out/raw/bookflat/DATE/. Then fails if strata_hot_bytes grew past 1.5x (the e2e bound) or
# data.mdb grew past 1.05x in the second cycle. Not part of the test suite (it takes minutes).
#   bench/bookflat.sh                 (LARGE=1000000, SMALL=LARGE/100)
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_MEASURES=bytes # no load gate (bench/lib.sh)
. bench/lib.sh
record_init bookflat
LARGE=${LARGE:-1000000} # places of the event, sold out in both cases
SMALL=${SMALL:-$((LARGE / 100))} # bookings in the small case: 100 places each (the most one takes)
echo "# bookflat, $(date -u +%F), $(nproc) cores, $LARGE places sold by $SMALL vs $LARGE bookings, then a second cycle of $LARGE, commit $(git rev-parse --short HEAD)"

metric() { curl -fsS "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }

sell() { # port bookings event: an event of LARGE places sold out in both cases (so the seat map,
  # the event's own state, is the same), by `bookings` bookings: LARGE/100 of 100 places each (one
  # at a time), or LARGE of one place each (wrk; the last holds wrk left unconfirmed, at most its
  # 32 connections', stay reserved: hot, as they must be)
  local p=$1 n=$2 ev=$3 B="http://127.0.0.1:$1"
  curl -fsS -XPOST "$B/v1/events" --json '{"event_id":"'"$ev"'","sections":[{"name":"floor","capacity":'"$LARGE"',"price":5}]}' >/dev/null
  local start=$SECONDS sold=0
  if [ "$n" -lt "$LARGE" ]; then # LARGE/100 bookings of 100 places, one at a time
    python3 - "$B" "$n" "$ev" <<'PY'
import json, sys, urllib.request
base, n, ev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
QTY = 100
def post(path, body=None):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else b"",
                                 headers={"Content-Type": "application/json"}, method="POST")
    return json.load(urllib.request.urlopen(req))
for _ in range(n):
    b = post("/v1/events/%s/bookings" % ev, {"section": "floor", "quantity": QTY})
    post("/v1/bookings/%s/confirm" % b["booking_id"])
PY
  fi
  local sold avail
  read -r sold avail < <(curl -fsS "$B/v1/events/$ev" | python3 -c 'import json,sys; s=json.load(sys.stdin)["event_stats"]; print(s["sold"], s["available"])')
  while [ "$avail" -gt 0 ]; do
    local secs=$(( avail / 4000 + 1 )); [ "$secs" -le 10 ] || secs=10
    # strata's own counters: a status other than 2xx and 409, or a wrk socket error, fails the run
    wrk_strata "$p" "409" -- -t1 -c32 -d"${secs}s" -s bench/booksold.lua "$B" -- "$ev"
    raw_keep "$n" "sell-$ev" "$W_OUT"
    grep -q 'errors=0' <<<"$W_OUT" || die "answers other than 201/200/409: $(grep RESULT <<<"$W_OUT")"
    read -r sold avail < <(curl -fsS "$B/v1/events/$ev" | python3 -c 'import json,sys; s=json.load(sys.stdin)["event_stats"]; print(s["sold"], s["available"])')
  done
  echo "sold $sold places of $ev by $n bookings in $((SECONDS - start)) s"
}

cool() { # port: flush passes until the finished bookings all went cold: the rows flushed stop
  # growing for 3 passes in a row with no flush running or pending (the holds still reserved stay
  # hot, as they must: how many a loaded machine's wrk leaves unconfirmed varies)
  local p=$1 B="http://127.0.0.1:$1" prev=-1 same=0 moved
  for _ in $(seq 900); do
    curl -fsS -XPOST "$B/v1/admin/flush" >/dev/null
    sleep 1
    moved=$(metric "$p" strata_flush_rows_total); moved=${moved%.*}
    if [ "$moved" = "$prev" ] && [ "$(metric "$p" strata_flush_running)" = 0 ] && [ "$(metric "$p" strata_flush_pending)" = 0 ]; then
      same=$((same + 1)); [ "$same" -lt 3 ] || { echo "$moved rows flushed in all"; return 0; }
    else
      same=0
    fi
    prev=$moved
  done
  die "the finished bookings never all went cold"
}

declare -A bytes file tree entries objs
measure() { # port key dir
  sleep 2
  bytes[$2]=$(metric "$1" strata_hot_bytes)
  tree[$2]=$(metric "$1" strata_hot_tree_bytes)
  entries[$2]=$(metric "$1" strata_hot_entries)
  file[$2]=$(stat -c %s "$3/data.mdb")
  objs[$2]=$(find "$3/cold/events" -name '*.parquet' | wc -l)
  raw_keep "$2" metrics "$(curl -fsS "http://127.0.0.1:$1/metrics" | grep -E '^strata_(hot|flush_rows|compact)')"$'\n'"data.mdb ${file[$2]} bytes; ${objs[$2]} booking objects"
  echo "$2: ${entries[$2]} keys, strata_hot_bytes ${bytes[$2]}, tree ${tree[$2]} bytes, data.mdb ${file[$2]} bytes, ${objs[$2]} booking objects in the cold tier"
}

for n in "$SMALL" "$LARGE"; do
  p=$(free_port)
  # room for two events of LARGE places: the LARGE strata sells a second one
  build/strata --listen 127.0.0.1:"$p" --data-dir "$work/$p" --booking-hot-seconds 0 --max-seats $((2 * LARGE)) 2>"$work/$p.log" &
  pids+=($!)
  wait_port "$p"
  sell "$p" "$n" flat
  cool "$p"
  measure "$p" "$n" "$work/$p"
  [ "$n" = "$LARGE" ] || continue
  # the second cycle: as many bookings again, on a new event, cooled the same way
  sell "$p" "$n" flat2
  cool "$p"
  measure "$p" "$n-second" "$work/$p"
done
L=$LARGE S=$SMALL L2=$LARGE-second
hot_r=$(ratio "${bytes[$L]}" "${bytes[$S]}")
tree_r=$(ratio "${tree[$L]}" "${tree[$S]}")
file_r=$(ratio "${file[$L]}" "${file[$S]}")
cycle_r=$(ratio "${file[$L2]}" "${file[$L]}")
hot2_r=$(ratio "${bytes[$L2]}" "${bytes[$L]}")
echo "RESULT strata_hot_bytes $L/$S bookings: ${hot_r}x (${bytes[$L]} / ${bytes[$S]}); B-tree alone ${tree_r}x (${tree[$L]} / ${tree[$S]}); keys ${entries[$L]} / ${entries[$S]}; data.mdb ${file_r}x (${file[$L]} / ${file[$S]})"
echo "RESULT second cycle of $L bookings: data.mdb ${file[$L]} -> ${file[$L2]} bytes (${cycle_r}x); strata_hot_bytes ${bytes[$L]} -> ${bytes[$L2]} (${hot2_r}x)"
python3 - "$work/extra.json" <<PY
import json, sys
def side(k, b, t, e, f, o): return {"bookings": k, "strata_hot_bytes": int(float(b)), "strata_hot_tree_bytes": int(float(t)),
                                     "strata_hot_entries": int(float(e)), "data_mdb_bytes": int(f), "booking_objects": int(o)}
json.dump({"bookflat": {"large_places": $LARGE, "small": side($S, "${bytes[$S]}", "${tree[$S]}", "${entries[$S]}", "${file[$S]}", "${objs[$S]}"),
  "large": side($L, "${bytes[$L]}", "${tree[$L]}", "${entries[$L]}", "${file[$L]}", "${objs[$L]}"),
  "large_second_cycle": side(2 * $L, "${bytes[$L2]}", "${tree[$L2]}", "${entries[$L2]}", "${file[$L2]}", "${objs[$L2]}"),
  "hot_bytes_ratio": float("$hot_r"), "tree_bytes_ratio": float("$tree_r"), "data_mdb_ratio": float("$file_r"),
  "second_cycle_data_mdb_ratio": float("$cycle_r"), "second_cycle_hot_bytes_ratio": float("$hot2_r"),
  "bounds": {"hot_bytes_ratio": 1.5, "second_cycle_data_mdb_ratio": 1.05}}}, open(sys.argv[1], "w"), indent=1)
PY
cmd="bench/bookflat.sh"; [ "$LARGE" = 1000000 ] || cmd="LARGE=$LARGE SMALL=$SMALL $cmd"
out_write bookflat "$cmd" "$work/extra.json"
fail=
awk -v r="$hot_r" 'BEGIN { exit !(r <= 1.5) }' || fail+="strata_hot_bytes grew ${hot_r}x (bound 1.5x); "
awk -v r="$cycle_r" 'BEGIN { exit !(r <= 1.05) }' || fail+="data.mdb grew ${cycle_r}x in the second cycle (bound 1.05x: freed pages not reused); "
[ -z "$fail" ] || die "$fail(recorded all the same)"
