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
# Records bench/out/tablescommit/DATE.json, raw lines in bench/out/raw/tablescommit/.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init tablescommit
ab_bins
USERS=${USERS:-50000} MSGS=${MSGS:-2}
echo "# tablescommit, $(date -u +%F), $(nproc) cores, $USERS users x $MSGS posts, $ROUNDS rounds, commit $(git rev-parse --short HEAD), old $OLD"
spid= url=
metric() { flush_metric "$1"; }

# the data dir: USERS users' posts, flushed, nothing committed
template_atsize "$USERS" "$MSGS" --table-commit-interval 0
echo "# $posts posts, $objects objects in the template, none committed"

# one run: ROUND SIDE; appends "SIDE round=R commit_s= stall_ms= cpu_s= pending=" to $work/out.txt
pending() { curl -fsS "$url/v1/admin/tables" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tables"][0]["pending"])'; }
measure() {
  local round=$1 side=$2 t0 t1 c0 c1 p line
  ab_start "$side" --table-commit-interval 1
  until flush_healthy; do sleep 0.05; done
  t0=$(date +%s.%N) c0=$(ticks "$spid")
  until [ "$(metric strata_table_commits_total)" != 0 ] && [ "$(metric strata_table_commit_lag_seconds)" = 0 ] &&
    p=$(pending) && [ "$p" = 0 ]; do sleep 0.2; done
  t1=$(date +%s.%N) c1=$(ticks "$spid")
  line="$side round=$round commit_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')"
  line+=" stall_ms=$(awk -v s="$(metric strata_loop_stall_max_seconds)" 'BEGIN {printf "%.1f", s * 1000}')"
  line+=" cpu_s=$(awk -v a="$c0" -v b="$c1" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b - a) / hz}') pending=$p"
  ab_done "$round" "$side" "$line"
}
ab_rounds

echo
echo "| side | seconds to commit everything, median (range) | loop's longest stall ms per run | server CPU s per run |"
echo "|---|---|---|---|"
for s in old new; do
  echo "| $s | $(med $(kv $s commit_s)) ($(rng $(kv $s commit_s))) | $(kv $s stall_ms)| $(kv $s cpu_s)|"
done
what="committing $objects objects of $USERS owners flushed at once"
ab_row "$what: seconds" commit_s s
ab_row "$what: loop's longest stall" stall_ms ms
out_write tablescommit "OLD=$OLD NEW=$NEW USERS=$USERS MSGS=$MSGS ROUNDS=$ROUNDS bench/tablescommit.sh"
