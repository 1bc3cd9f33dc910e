#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What GET /v1/admin/tables costs the loop at a large dirty set (issue 48): bench/atsize.sh polls
# it every 0.5 s while the tables commit a flush of a million users, and it read every dirty
# owner's file and provenance records in one loop turn. A data dir with USERS users x MSGS posts
# (bench/atsize.lua load mode), all cooled by one POST /v1/admin/flush and none committed
# (--table-commit-interval 0: no commit at all, so every owner stays dirty), is made once with
# NEW; then, ROUNDS rounds, OLD and NEW in turns (bench/lib.sh's turns), each run copies it, starts
# the binary (commits still off), waits for /healthz, reads strata_loop_stall_max_seconds (the
# start's own stall), then GETS requests of the route 0.5 s apart, each timed by curl
# (time_total: the server idle otherwise, so about the route's loop turn), and the stall gauge
# again (the longest loop turn since start: the route's when above the start's).
#   OLD=/path/to/strata-before NEW=build/strata USERS=50000 MSGS=2 GETS=5 ROUNDS=3 bench/tablesroute.sh
# Records bench/out/tablesroute/DATE.json, raw lines in bench/out/raw/tablesroute/.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init tablesroute
OLD=${OLD:?OLD=path to the binary before the change} NEW=${NEW:-build/strata}
USERS=${USERS:-50000} MSGS=${MSGS:-2} GETS=${GETS:-5}
for b in "$OLD" "$NEW"; do [ -x "$b" ] || die "$b: no such binary"; done
echo "# tablesroute, $(date -u +%F), $(nproc) cores, $USERS users x $MSGS posts, $GETS GETs per run, $ROUNDS rounds, commit $(git rev-parse --short HEAD), old $OLD"
spid= url=
start() { flush_server_start "$1" --table-commit-interval 0; }
stop() { flush_server_stop; }
metric() { flush_metric "$1"; }
created() { curl -s "$url/metrics" | awk '/^strata_http_requests_total\{/ && /status="201"/ {n += $NF} END {print n + 0}'; }
healthy() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 200 ]; }

# the data dir: USERS users' posts, flushed, nothing committed
rm -rf "$work/data"
start "$NEW"
target=$((USERS * MSGS))
wrk -t1 -c32 -d3600s -s bench/atsize.lua "$url" -- load "$USERS" "$MSGS" >"$work/wrk-load.txt" 2>&1 &
wp=$!
pids+=("$wp")
last=-1
while c=$(created) && { [ "$c" -lt $((target - 16)) ] || [ "$c" != "$last" ]; }; do
  kill -0 "$wp" 2>/dev/null || die "wrk ended early: $(cat "$work/wrk-load.txt")"
  last=$c
  sleep 0.5
done
kill -INT "$wp"
wait "$wp" || true
curl -fsS -o /dev/null -XPOST "$url/v1/admin/flush" || die "flush refused"
while [ "$(metric strata_flush_passes_total)" = 0 ]; do sleep 0.2; done
while [ "$(metric strata_flush_running)" != 0 ] || [ "$(metric strata_flush_pending)" != 0 ]; do sleep 0.5; done
objects=$(metric 'strata_flush_total{result="ok"}')
[ "${objects:-0}" -ge "$USERS" ] || die "only ${objects:-0} objects flushed for $USERS users"
stop
mv "$work/data" "$work/template"
echo "# $c posts, $objects objects in the template, none committed"

# one run: ROUND SIDE; appends "SIDE round=R get_ms=… stall_start_ms= stall_after_ms= pending=" to $work/out.txt
run() {
  local round=$1 side=$2 bin s0 s1 i t ms=() p line
  bin=$([ "$side" = old ] && echo "$OLD" || echo "$NEW")
  rm -rf "$work/data"
  cp -a "$work/template" "$work/data"
  start "$bin"
  until healthy; do sleep 0.05; done
  sleep 2
  s0=$(metric strata_loop_stall_max_seconds)
  for i in $(seq "$GETS"); do
    t=$(curl -fsS -o "$work/tables.json" -w '%{time_total}' "$url/v1/admin/tables")
    ms+=("$(awk -v t="$t" 'BEGIN {printf "%.2f", t * 1000}')")
    sleep 0.5
  done
  s1=$(metric strata_loop_stall_max_seconds)
  p=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tables"][0]["pending"])' "$work/tables.json")
  line="$side round=$round get_ms_med=$(med "${ms[@]}") get_ms_max=$(rng "${ms[@]}" | sed 's/.*-//')"
  line+=" stall_start_ms=$(awk -v s="$s0" 'BEGIN {printf "%.1f", s * 1000}')"
  line+=" stall_after_ms=$(awk -v s="$s1" 'BEGIN {printf "%.1f", s * 1000}') pending=$p gets=$(IFS=,; echo "${ms[*]}")"
  stop
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$round" "$side" "$line"
}
old() { run "$1" old; }
new() { run "$1" new; }
for round in $(seq "$ROUNDS"); do turns "$round" old new; done

echo
echo "| side | GET ms per run, median (range of runs' medians) | slowest GET ms per run | loop stall max after the start, ms per run | after the GETs, ms per run | messages pending answered |"
echo "|---|---|---|---|---|---|"
for s in old new; do
  echo "| $s | $(med $(kv $s get_ms_med)) ($(rng $(kv $s get_ms_med))) | $(kv $s get_ms_max)| $(kv $s stall_start_ms)| $(kv $s stall_after_ms)| $(kv $s pending)|"
done
what="GET /v1/admin/tables with $objects objects of $USERS owners flushed and not committed"
row "$what: time per GET, new vs old" "$(kv new get_ms_med)" "ms" "" \
  "main before the change, alternated" "$(kv old get_ms_med)" "" "ms"
row "$what: loop stall max after the GETs, new vs old" "$(kv new stall_after_ms)" "ms" "" \
  "main before the change, alternated" "$(kv old stall_after_ms)" "" "ms"
out_write tablesroute "OLD=$OLD NEW=$NEW USERS=$USERS MSGS=$MSGS GETS=$GETS ROUNDS=$ROUNDS bench/tablesroute.sh"
