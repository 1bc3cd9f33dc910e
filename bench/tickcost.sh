#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What the tables' commit tick costs the loop as the tables grow (issues 45 and 48, SPEC v5 §5.1:
# "a commit never runs on the loop"). A data dir holding OWNERS users' objects (one each,
# bench/owners.lua then POST /v1/admin/flush, committed to the tables) is made once with NEW;
# then, ROUNDS rounds, OLD and NEW in turns (bench/lib.sh's turns), each run copies it, starts the
# binary (--table-commit-interval 1), lets its first ticks pass (a start reads every file record
# once, in both), and makes CHANGES changes one after the other: a post to one user, a flush, the
# commit that follows. Per run, over the changes only: the loop probe's lateness
# (strata_loop_lag_seconds, a 10 ms timer: a stall of the loop shows as one late probe) — the
# probes later than 25 ms and the largest bucket any probe reached — and the server's CPU per
# commit (utime + stime of the process, /proc; the flush's CPU included, the same in both).
#   OLD=/path/to/strata-before NEW=build/strata OWNERS=10000 CHANGES=10 ROUNDS=2 bench/tickcost.sh
# Records bench/out/tickcost/DATE.json, raw lines in bench/out/raw/tickcost/.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init tickcost
ab_bins
OWNERS=${OWNERS:-10000} CHANGES=${CHANGES:-10}
echo "# tickcost, $(date -u +%F), $(nproc) cores, $OWNERS owners, $CHANGES changes per run, $ROUNDS rounds, commit $(git rev-parse --short HEAD), old $OLD"
spid= url=
metric() { flush_metric "$1"; }
# strata_loop_lag_seconds's cumulative bucket counts, le= each of BOUNDS in order (+Inf: every
# probe), from one read of /metrics (the probe runs every 10 ms: reads apart would not add up)
BOUNDS="0.0001 0.00025 0.0005 0.001 0.002 0.005 0.01 0.025 0.05 0.1 0.25 1 +Inf"
lag_snap() { curl -s "$url/metrics" | awk 'index($1, "strata_loop_lag_seconds_bucket{") == 1 {printf "%s ", $2}'; }
wait_commit() { # until strata_table_commits_total passes $1 and nothing is pending
  local end=$((SECONDS + 120))
  while [ "$(metric strata_table_commits_total)" = "$1" ] || [ "$(metric strata_table_commit_lag_seconds)" != 0 ]; do
    [ "$SECONDS" -lt "$end" ] || die "no commit within 120 s"
    sleep 0.05
  done
}

# the data dir: OWNERS users with one object each, committed
rm -rf "$work/data"
flush_server_start "$NEW" --table-commit-interval 1
wrk_strata "${url##*:}" "" -- -t1 -c8 -d"$((OWNERS / 2000 + 3))s" -s bench/owners.lua "$url" -- "$OWNERS"
c0=$(metric strata_table_commits_total)
flush_settle
wait_commit "$c0"
objects=$(metric 'strata_flush_total{result="ok"}')
[ "${objects:-0}" -ge "$OWNERS" ] || die "only ${objects:-0} objects flushed for $OWNERS owners"
template_keep
echo "# $objects objects in the template"

# one run: ROUND SIDE; appends "SIDE round=R late25= maxlate_ms= cpu_ms_per_commit= commits= view_files=" to $work/out.txt
measure() {
  local round=$1 side=$2 c0 t0 a b i n commits late5 late max cpu line
  ab_start "$side" --table-commit-interval 1
  sleep 4 # the start's whole view and its tick are past
  a=$(lag_snap)
  c0=$(metric strata_table_commits_total)
  t0=$(ticks "$spid")
  local v0; v0=$(metric strata_table_view_files_total)
  for i in $(seq "$CHANGES"); do
    n=$(metric strata_table_commits_total)
    curl -fsS -o /dev/null -XPOST "$url/v1/users/t$((i * 997 % OWNERS))/messages" \
      -H 'Content-Type: application/json' -d '{"conversation_id":"c","from":"bench","content":"change"}'
    curl -fsS -o /dev/null -XPOST "$url/v1/admin/flush"
    wait_commit "$n"
  done
  cpu=$(($(ticks "$spid") - t0))
  commits=$(($(metric strata_table_commits_total) - c0))
  b=$(lag_snap)
  # probes later than 25 ms: all probes less those within le=0.025; the largest bucket reached
  read -r late5 late max <<<"$(awk -v a="$a" -v b="$b" -v bounds="$BOUNDS" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); split(bounds, bd, " ")
    total = y[n] - x[n]; late5 = total - (y[6] - x[6]); late = total - (y[8] - x[8]); max = "0"
    for (i = 1; i <= n; i++) if ((y[i] - x[i]) == total) { max = bd[i]; break }
    printf "%d %d %s\n", late5, late, max }')"
  local v1; v1=$(metric strata_table_view_files_total)
  line="$side round=$round late5=$late5 late25=$late maxlate_le_s=$max commits=$commits"
  line+=" cpu_ms_per_commit=$(awk -v t="$cpu" -v n="$commits" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", n ? t * 1000 / hz / n : 0}')"
  line+=" view_files=$([ -n "$v0" ] && echo $((v1 - v0)) || echo -)"
  ab_done "$round" "$side" "$line"
}
ab_rounds

echo
echo "| side | probes > 5 ms late per run, median (range) | probes > 25 ms late per run, median (range) | largest lateness bucket (le, s) per run | server CPU ms per commit, median (range) | file records read on the loop per run |"
echo "|---|---|---|---|---|---|"
for s in old new; do
  echo "| $s | $(med $(kv $s late5)) ($(rng $(kv $s late5))) | $(med $(kv $s late25)) ($(rng $(kv $s late25))) | $(kv $s maxlate_le_s)| $(med $(kv $s cpu_ms_per_commit)) ($(rng $(kv $s cpu_ms_per_commit))) | $(kv $s view_files)|"
done
what="$CHANGES one-user changes (post, flush, commit) with $OWNERS owners' objects in the tables"
ab_row "$what: server CPU per commit" cpu_ms_per_commit ms
ab_row "$what: loop probes more than 5 ms late" late5 probes
ab_row "$what: loop probes more than 25 ms late" late25 probes
out_write tickcost "OLD=$OLD NEW=$NEW OWNERS=$OWNERS CHANGES=$CHANGES ROUNDS=$ROUNDS bench/tickcost.sh"
