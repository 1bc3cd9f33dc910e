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
ab_bins
USERS=${USERS:-50000} MSGS=${MSGS:-2} GETS=${GETS:-5}
echo "# tablesroute, $(date -u +%F), $(nproc) cores, $USERS users x $MSGS posts, $GETS GETs per run, $ROUNDS rounds, commit $(git rev-parse --short HEAD), old $OLD"
spid= url=
metric() { flush_metric "$1"; }

# the data dir: USERS users' posts, flushed, nothing committed
template_atsize "$USERS" "$MSGS" --table-commit-interval 0
echo "# $posts posts, $objects objects in the template, none committed"

# one run: ROUND SIDE; appends "SIDE round=R get_ms=… stall_start_ms= stall_after_ms= pending=" to $work/out.txt
measure() {
  local round=$1 side=$2 s0 s1 i t ms=() p line
  ab_start "$side" --table-commit-interval 0
  until flush_healthy; do sleep 0.05; done
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
  ab_done "$round" "$side" "$line"
}
ab_rounds

echo
echo "| side | GET ms per run, median (range of runs' medians) | slowest GET ms per run | loop stall max after the start, ms per run | after the GETs, ms per run | messages pending answered |"
echo "|---|---|---|---|---|---|"
for s in old new; do
  echo "| $s | $(med $(kv $s get_ms_med)) ($(rng $(kv $s get_ms_med))) | $(kv $s get_ms_max)| $(kv $s stall_start_ms)| $(kv $s stall_after_ms)| $(kv $s pending)|"
done
what="GET /v1/admin/tables with $objects objects of $USERS owners flushed and not committed"
ab_row "$what: time per GET" get_ms_med ms
ab_row "$what: loop stall max after the GETs" stall_after_ms ms
out_write tablesroute "OLD=$OLD NEW=$NEW USERS=$USERS MSGS=$MSGS GETS=$GETS ROUNDS=$ROUNDS bench/tablesroute.sh"
