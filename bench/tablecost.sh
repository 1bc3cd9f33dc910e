#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What the Iceberg tables cost a flush (issue 45, SPEC v5 §5.1: "a commit never runs on the
# loop"): the same flush measured three ways, in turns (bench/lib.sh's turns), ROUNDS rounds:
#   on   this build, tables committing (--table-commit-interval COMMIT, default 10 as shipped)
#   off  this build, --table-commit-interval 0 (objects written, no snapshot committed)
#   rel  REL, the last release before the tables (26db5c8, SPEC v4), as it runs by default
# Each run: a fresh data dir, LOAD_SECONDS of pipelined posts (bench/cold.lua: 100 users x 10
# conversations, wrk -t1 -c32, 2xx only), a restart (the loop's stall gauge starts at 0), then
# POST /v1/admin/flush timed until no flush runs or waits; for `on`, also until the tables hold
# every flushed object (strata_table_commit_lag_seconds 0 after a commit counted past the flush).
# Per run: rows flushed, rows/s of wall time, the loop's longest stall
# (strata_loop_stall_max_seconds, read once the commit too is done) and server CPU per row (the
# process's utime + stime from the flush request to the end, commit included for `on`).
#   REL=/path/to/strata-26db5c8 LOAD_SECONDS=10 ROUNDS=3 bench/tablecost.sh
# Records bench/out/tablecost/DATE.json (bench/RESULTS.md quotes it), raw lines in
# bench/out/raw/tablecost/. REL is built as bench/roomlist.sh says for another commit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init tablecost
STRATA=${STRATA:-build/strata} REL=${REL:?REL=path to the release build to compare with}
LOAD_SECONDS=${LOAD_SECONDS:-10} COMMIT=${COMMIT:-10}
[ -x "$REL" ] || die "$REL: no such binary"
echo "# tablecost, $(date -u +%F), $(nproc) cores, ${LOAD_SECONDS}s of posts per run, $ROUNDS rounds, commit $(git rev-parse --short HEAD), rel $REL"
spid= url=
start() { flush_server_start "$@"; }
stop() { flush_server_stop; }
metric() { flush_metric "$1"; }
# one run: ROUND SIDE; appends "SIDE round=R rows= rows_per_s= stall_ms= cpu_us_per_row= commit_s=" to
# $work/out.txt
run() {
  local round=$1 side=$2 bin=$STRATA args=() t0 t1 t2 c0 commits
  case $side in
  on) args=(--table-commit-interval "$COMMIT") ;;
  off) args=(--table-commit-interval 0) ;;
  rel) bin=$REL ;;
  esac
  rm -rf "$work/data"
  start "$bin" "${args[@]}"
  wrk_strata "${url##*:}" "" -- -t1 -c32 -d"${LOAD_SECONDS}s" -s bench/cold.lua "$url" -- post
  stop
  start "$bin" "${args[@]}"
  commits=$(metric strata_table_commits_total)
  c0=$(ticks "$spid")
  t0=$(date +%s.%N)
  curl -fsS -o /dev/null -XPOST "$url/v1/admin/flush" || die "$side: flush refused"
  while [ "$(metric strata_flush_passes_total)" = 0 ]; do sleep 0.05; done
  while [ "$(metric strata_flush_running)" != 0 ] || [ "$(metric strata_flush_pending)" != 0 ]; do sleep 0.05; done
  t1=$(date +%s.%N)
  t2=$t1
  if [ "$side" = on ]; then
    local end=$((SECONDS + COMMIT * 3 + 60))
    while [ "$(metric strata_table_commits_total)" = "$commits" ] ||
      [ "$(metric strata_table_commit_lag_seconds)" != 0 ]; do
      [ "$SECONDS" -lt "$end" ] || die "on: the tables did not catch up within $((COMMIT * 3 + 60)) s"
      sleep 0.05
    done
    t2=$(date +%s.%N)
  fi
  local cpu rows stall line
  cpu=$(($(ticks "$spid") - c0))
  rows=$(metric strata_flush_rows_total)
  stall=$(metric strata_loop_stall_max_seconds)
  [ "${rows:-0}" -gt 0 ] || die "$side: nothing flushed"
  line="$side round=$round rows=$rows rows_per_s=$(awk -v r="$rows" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", r / (b - a)}')"
  line+=" stall_ms=$(awk -v s="$stall" 'BEGIN {printf "%.2f", s * 1000}') cpu_us_per_row=$(per_op "$cpu" "$rows")"
  line+=" commit_s=$(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.2f", b - a}')"
  stop
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$round" "$side" "$line"
}
on() { run "$1" on; }
off() { run "$1" off; }
rel() { run "$1" rel; }
for round in $(seq "$ROUNDS"); do turns "$round" on off rel; done

echo
echo "| side | rows flushed | rows/s (wall), median (range) | loop's longest stall ms, median (range) | server CPU µs per row | commit after the flush, s |"
echo "|---|---|---|---|---|---|"
for s in on off rel; do
  echo "| $s | $(med $(kv $s rows)) | $(med $(kv $s rows_per_s)) ($(rng $(kv $s rows_per_s))) | $(med $(kv $s stall_ms)) ($(rng $(kv $s stall_ms))) | $(med $(kv $s cpu_us_per_row)) | $(med $(kv $s commit_s)) |"
done
what="flush after ${LOAD_SECONDS}s of posts (bench/cold.lua), POST /v1/admin/flush"
for peer in rel off; do
  pname=$([ $peer = rel ] && echo "the last release before the tables (26db5c8), alternated" || echo "this build with --table-commit-interval 0, alternated")
  row "$what: rows/s, tables committing every ${COMMIT}s vs $peer" "$(kv on rows_per_s)" "rows/s" \
    "the commit after it took median $(med $(kv on commit_s)) s (not in the rate)" \
    "$pname" "$(kv $peer rows_per_s)" "" "rows/s" \
    "$(kv on cpu_us_per_row)" "$(kv $peer cpu_us_per_row)" "flushed row (the commit's CPU included for on)"
  row "$what: the loop's longest stall, tables committing vs $peer" "$(kv on stall_ms)" "ms" "" \
    "$pname" "$(kv $peer stall_ms)" "" "ms"
done
out_write tablecost "REL=$REL LOAD_SECONDS=$LOAD_SECONDS COMMIT=$COMMIT ROUNDS=$ROUNDS bench/tablecost.sh"
