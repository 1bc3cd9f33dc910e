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
ab_bins
USERS=${USERS:-50000} MSGS=${MSGS:-2} KEEP=${KEEP:-}
echo "# $name, $(date -u +%F), $(nproc) cores, $USERS users x $MSGS posts, $ROUNDS rounds, commit $(git rev-parse --short HEAD), old $OLD"
spid= url=
metric() { flush_metric "$1"; }

# the data dir: USERS users' posts, flushed (MODE=stall: hot), nothing committed
hot=
[ "$MODE" = stall ] && hot=--hot
if [ -n "$KEEP" ] && [ -f "$KEEP/bench-made" ] && [ "$(cat "$KEEP/bench-made")" = "$USERS $MSGS $MODE" ]; then
  echo "# the template kept in $KEEP"
  rm -rf "$work/template"
  cp -a "$KEEP" "$work/template"
else
  template_atsize $hot "$USERS" "$MSGS" --table-commit-interval 0
  echo "$USERS $MSGS $MODE" >"$work/template/bench-made"
  echo "${objects:-0}" >"$work/template/bench-objects"
  if [ -n "$KEEP" ]; then
    rm -rf "$KEEP"
    cp -a "$work/template" "$KEEP"
  fi
fi
objects=$(cat "$work/template/bench-objects" 2>/dev/null || echo 0) # 0: kept before the count was
echo "# $(du -sh "$work/template" | cut -f1) template of $USERS users x $MSGS posts, none committed"

# one run: ROUND SIDE; appends "SIDE round=R commit_s= stall_ms= cpu_s= pending=" to $work/out.txt
pending() { curl -fsS "$url/v1/admin/tables" | python3 -c 'import json,sys; print(sum(t["pending"] for t in json.load(sys.stdin)["tables"]))'; }
measure() {
  local round=$1 side=$2 t0 t1 tf c0 c1 p s0 line
  ab_start "$side" --table-commit-interval "$([ "$MODE" = stall ] && echo 10 || echo 1)"
  until flush_healthy; do sleep 0.05; done
  t0=$(date +%s.%N) c0=$(ticks "$spid")
  if [ "$MODE" = stall ]; then
    s0=$(metric strata_loop_stall_max_seconds)
    flush_settle
    objects=$(metric 'strata_flush_total{result="ok"}')
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
  ab_done "$round" "$side" "$line"
}
ab_rounds

echo
if [ "$MODE" = stall ]; then
  echo "| side | loop's longest stall ms per run (flush and commits) | at the flush's start | flush s per run | flush and commits s per run | server CPU s per run |"
  echo "|---|---|---|---|---|---|"
  for s in old new; do
    echo "| $s | $(kv $s stall_ms)| $(kv $s start_stall_ms)| $(kv $s flush_s)| $(kv $s commit_s)| $(kv $s cpu_s)|"
  done
  what="a flush of $USERS users x $MSGS posts and the tables' commits"
  ab_row "$what: loop's longest stall" stall_ms ms
  ab_row "$what: seconds" commit_s s
  out_write "$name" "MODE=stall OLD=$OLD NEW=$NEW USERS=$USERS MSGS=$MSGS ROUNDS=$ROUNDS bench/tablescommit.sh"
  exit 0
fi
echo "| side | seconds to commit everything, median (range) | loop's longest stall ms per run | server CPU s per run |"
echo "|---|---|---|---|"
for s in old new; do
  echo "| $s | $(med $(kv $s commit_s)) ($(rng $(kv $s commit_s))) | $(kv $s stall_ms)| $(kv $s cpu_s)|"
done
what="committing $objects objects of $USERS owners flushed at once"
ab_row "$what: seconds" commit_s s
ab_row "$what: loop's longest stall" stall_ms ms
out_write tablescommit "OLD=$OLD NEW=$NEW USERS=$USERS MSGS=$MSGS ROUNDS=$ROUNDS bench/tablescommit.sh"
