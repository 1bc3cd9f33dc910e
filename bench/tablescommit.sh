#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What committing a big flush to the Iceberg tables costs (issue 48: the pending count is settled
# on the loop with each commit slice's provenance, one mark read an owner). The data dir of
# bench/tablesroute.sh (USERS users x MSGS posts, all cooled by one flush, none committed) is made
# once with NEW; then, ROUNDS rounds, OLD and NEW in turns, each run copies it, starts the binary
# with --table-commit-interval 1 and waits until the tables hold every object (a commit counted,
# strata_table_commit_lag_seconds 0 and pending 0). Per run: seconds from /healthz to that, the
# loop's longest stall since start (strata_loop_stall_max_seconds: the commit slices' loop turns)
# and the server's CPU seconds.
#   OLD=/path/to/strata-before NEW=build/strata USERS=50000 MSGS=2 ROUNDS=3 bench/tablescommit.sh
# MODE=stall (issue 48, SPEC §7: the loop's longest stall under background work): the template is
# the same posts not flushed (hot); each run starts the binary (--table-commit-interval 10, the
# default), POSTs /v1/admin/flush and waits for the flush to end and then for the tables to hold
# every object, as above: the loop's longest stall through the flush and the commits that follow
# it (the gauge as the flush starts too: the start's own), the flush's and the whole run's seconds.
# KEEP=DIR keeps the template there (made once; a later run with the same KEEP, USERS, MSGS and MODE
# reuses it: loading takes minutes at 50,000 users).
# Records bench/out/tablescommit/DATE.json (tablescommit-stall for MODE=stall), raw lines in
# bench/out/raw/.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
MODE=${MODE:-commit}
name=tablescommit
[ "$MODE" = stall ] && name=tablescommit-stall
[ "$MODE" = stall ] || [ "$MODE" = commit ] || die "MODE=$MODE: commit or stall"
record_init "$name"
OLD=${OLD:?OLD=path to the binary before the change} NEW=${NEW:-build/strata}
USERS=${USERS:-50000} MSGS=${MSGS:-2} KEEP=${KEEP:-}
for b in "$OLD" "$NEW"; do [ -x "$b" ] || die "$b: no such binary"; done
echo "# $name, $(date -u +%F), $(nproc) cores, $USERS users x $MSGS posts, $ROUNDS rounds, commit $(git rev-parse --short HEAD), old $OLD"
spid= url=
start() { flush_server_start "$1" --table-commit-interval "${2:-0}"; }
stop() { flush_server_stop; }
metric() { flush_metric "$1"; }
created() { curl -s "$url/metrics" | awk '/^strata_http_requests_total\{/ && /status="201"/ {n += $NF} END {print n + 0}'; }
healthy() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 200 ]; }

# POST /v1/admin/flush and wait for its end: the objects it wrote in $objects
flush_all() {
  curl -fsS -o /dev/null -XPOST "$url/v1/admin/flush" || die "flush refused"
  while [ "$(metric strata_flush_passes_total)" = 0 ]; do sleep 0.2; done
  while [ "$(metric strata_flush_running)" != 0 ] || [ "$(metric strata_flush_pending)" != 0 ]; do sleep 0.5; done
  objects=$(metric 'strata_flush_total{result="ok"}')
}

# the data dir: USERS users' posts, flushed (MODE=stall: hot), nothing committed
template=${KEEP:-$work/template}
if [ -n "$KEEP" ] && [ -f "$KEEP/bench-posts" ] && [ "$(cat "$KEEP/bench-made")" = "$USERS $MSGS $MODE" ]; then
  echo "# the template kept in $KEEP"
else
  [ -n "$KEEP" ] && rm -rf "$KEEP"
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
  if [ "$MODE" = commit ]; then
    flush_all
    [ "${objects:-0}" -ge "$USERS" ] || die "only ${objects:-0} objects flushed for $USERS users"
  fi
  stop
  echo "$c" >"$work/data/bench-posts"
  mv "$work/data" "$template"
  echo "$USERS $MSGS $MODE" >"$template/bench-made"
fi
c=$(cat "$template/bench-posts")
echo "# $c posts in the template, none committed"

# one run: ROUND SIDE; appends "SIDE round=R commit_s= stall_ms= cpu_s= pending=" to $work/out.txt
pending() { curl -fsS "$url/v1/admin/tables" | python3 -c 'import json,sys; print(sum(t["pending"] for t in json.load(sys.stdin)["tables"]))'; }
run() {
  local round=$1 side=$2 bin t0 t1 c0 c1 p line
  bin=$([ "$side" = old ] && echo "$OLD" || echo "$NEW")
  rm -rf "$work/data"
  cp -a "$template" "$work/data"
  start "$bin" "$([ "$MODE" = stall ] && echo 10 || echo 1)"
  until healthy; do sleep 0.05; done
  t0=$(date +%s.%N) c0=$(ticks "$spid")
  if [ "$MODE" = stall ]; then
    s0=$(metric strata_loop_stall_max_seconds)
    flush_all
    [ "${objects:-0}" -ge "$USERS" ] || die "only ${objects:-0} objects flushed for $USERS users"
    tf=$(date +%s.%N)
  fi
  until [ "$(metric strata_table_commits_total)" != 0 ] && [ "$(metric strata_table_commit_lag_seconds)" = 0 ] &&
    p=$(pending) && [ "$p" = 0 ]; do sleep 0.2; done
  t1=$(date +%s.%N) c1=$(ticks "$spid")
  line="$side round=$round commit_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')"
  [ "$MODE" = stall ] && line+=" flush_s=$(awk -v a="$t0" -v b="$tf" 'BEGIN {printf "%.2f", b - a}')"\
" start_stall_ms=$(awk -v s="$s0" 'BEGIN {printf "%.1f", s * 1000}')"
  line+=" stall_ms=$(awk -v s="$(metric strata_loop_stall_max_seconds)" 'BEGIN {printf "%.1f", s * 1000}')"
  line+=" cpu_s=$(awk -v a="$c0" -v b="$c1" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b - a) / hz}') pending=$p"
  stop
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$round" "$side" "$line"
}
old() { run "$1" old; }
new() { run "$1" new; }
for round in $(seq "$ROUNDS"); do turns "$round" old new; done

echo
if [ "$MODE" = stall ]; then
  echo "| side | loop's longest stall ms per run (flush and commits) | at the flush's start | flush s per run | flush and commits s per run | server CPU s per run |"
  echo "|---|---|---|---|---|---|"
  for s in old new; do
    echo "| $s | $(kv $s stall_ms)| $(kv $s start_stall_ms)| $(kv $s flush_s)| $(kv $s commit_s)| $(kv $s cpu_s)|"
  done
  what="a flush of $USERS users x $MSGS posts and the tables' commits"
  row "$what: loop's longest stall, new vs old" "$(kv new stall_ms)" "ms" "" \
    "main before the change, alternated" "$(kv old stall_ms)" "" "ms"
  row "$what: seconds, new vs old" "$(kv new commit_s)" "s" "" \
    "main before the change, alternated" "$(kv old commit_s)" "" "s"
  out_write "$name" "MODE=stall OLD=$OLD NEW=$NEW USERS=$USERS MSGS=$MSGS ROUNDS=$ROUNDS bench/tablescommit.sh"
  exit 0
fi
echo
echo "| side | seconds to commit everything, median (range) | loop's longest stall ms per run | server CPU s per run |"
echo "|---|---|---|---|"
for s in old new; do
  echo "| $s | $(med $(kv $s commit_s)) ($(rng $(kv $s commit_s))) | $(kv $s stall_ms)| $(kv $s cpu_s)|"
done
what="committing $objects objects of $USERS owners flushed at once"
row "$what: seconds, new vs old" "$(kv new commit_s)" "s" "" \
  "main before the change, alternated" "$(kv old commit_s)" "" "s"
row "$what: loop's longest stall, new vs old" "$(kv new stall_ms)" "ms" "" \
  "main before the change, alternated" "$(kv old stall_ms)" "" "ms"
out_write tablescommit "OLD=$OLD NEW=$NEW USERS=$USERS MSGS=$MSGS ROUNDS=$ROUNDS bench/tablescommit.sh"
