#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One node at an app's size (issue 48): for each N in SIZES, a fresh strata is loaded with N users
# x MSGS messages (bench/atsize.lua: pipelined durable posts over HTTP, two conversations a user),
# then everything cools at once (POST /v1/admin/flush), then the node restarts and random users'
# newest 50 (all cold) are read. Per size:
#   load      posts/s of the load;
#   flush     seconds to cool every user, and ms per user (flat = linear), the loop's longest
#             stall meanwhile (strata_loop_stall_max_seconds, a gauge since start) and until the
#             tables have committed every object (GET /v1/admin/tables: pending 0);
#   memory    RssAnon after cooling and after the reads, KiB per cooled user above a node with
#             none; the hot store's bytes and entries (strata_hot_bytes, strata_hot_entries) per
#             cooled, idle user; the cold cache's bytes (bounded by --cold-cache); the tables'
#             committed file sets (strata_table_files_bytes) and the Idempotency-Key index
#             (strata_idempotency_index_bytes), 0 from a binary without those gauges;
#   restart   ms from exec to /healthz 200 on the cooled data, the loop's longest stall over
#             the first RESTART_WATCH s after it (the tables' first tick reads their files);
#   reads     newest-50 of a random cold user (wrk -t1 -c8 for DURATION s, bench/atsize.lua
#             read): answers/s, p50/p99, server CPU per answer, KiB read from the disk (page-cache
#             misses: /proc/PID/io) and the loop's longest turn since the restart.
# ROOM_EVERY=K adds one room for every K users (N/K rooms) of ROOM_MEMBERS (10) members after the
# users, each with MSGS messages (bench/atsize.lua rooms mode); they cool with the users.
# The bars (issue 48): time per user flat across sizes; RssAnon within the flags' sum + 128 MiB
# and the same within 10 % at every size; restart within 2 s; read p99 within 1.5x of the
# smallest size's. Records bench/out/atsize/DATE.json (figures per size; not a README row).
#   SIZES="10000 100000" MSGS=2 DURATION=10 bench/atsize.sh
#   SIZES="10000 1000000" MSGS=10 ROOM_EVERY=10 DURATION=10 bench/atsize.sh   # issue 48's data set
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init atsize
STRATA=${STRATA:-build/strata}
SIZES=${SIZES:-"10000 100000"} MSGS=${MSGS:-2} ROOM_EVERY=${ROOM_EVERY:-0} ROOM_MEMBERS=${ROOM_MEMBERS:-10} CACHE=${CACHE:-32MiB} RESTART_WATCH=${RESTART_WATCH:-15}
echo "# atsize, $(date -u +%F), $(nproc) cores, sizes $SIZES, $MSGS messages a user, commit $(git rev-parse --short HEAD)"

start() {
  port=$(free_port)
  "$STRATA" --listen 127.0.0.1:"$port" --data-dir "$work/data" --map-size 16GiB \
    --flush-interval 86400 --reconcile-interval 86400 --cold-cache "$CACHE" --log-level warn \
    2>>"$work/strata.log" &
  spid=$!
  pids+=("$spid")
  url="http://127.0.0.1:$port"
}
stop() { kill "$spid"; wait "$spid" 2>/dev/null || true; }
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
rss() { awk '/RssAnon/ {print $2}' /proc/"$spid"/status; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b - a}'; }
healthy() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 200 ]; }
pending() { curl -s "$url/v1/admin/tables" | python3 -c 'import json,sys; print(sum(t["pending"] for t in json.load(sys.stdin)["tables"]))'; }
# KiB strata's threads read from the disk itself (page-cache misses), /proc/PID/io
disk_read_kib() { awk '/^read_bytes/ {printf "%d", $2 / 1024}' /proc/"$spid"/io; }
created() { curl -s "$url/metrics" | awk '/^strata_http_requests_total\{/ && /status="201"/ {n += $NF} END {print n + 0}'; }

# One wrk of bench/atsize.lua in MODE until strata has answered TARGET 201s in all: within one
# pipeline of it (wrk builds a batch it never sends) and no longer moving. Sets target to the
# count reached.
load_phase() {
  local mode=$1 want=$2 last=-1 c
  wrk -t1 -c32 -d3600s -s bench/atsize.lua "$url" -- "$mode" "$n" "$MSGS" "$rooms" "$ROOM_MEMBERS" \
    >"$work/wrk-$mode.txt" 2>&1 &
  local wp=$!
  while c=$(created) && { [ "$c" -lt $((want - 16 - MSGS)) ] || [ "$c" != "$last" ]; }; do
    kill -0 "$wp" 2>/dev/null || die "wrk ended early: $(cat "$work/wrk-$mode.txt")"
    last=$c
    sleep 0.5
  done
  target=$c
  kill -INT "$wp"; wait "$wp" || true
  ! grep -q "Non-2xx" "$work/wrk-$mode.txt" || die "the $mode had non-2xx answers: $(cat "$work/wrk-$mode.txt")"
}

echo '{"sizes":[' >"$work/extra.json"
sep=
for n in $SIZES; do
  rm -rf "$work/data"
  start
  until healthy; do sleep 0.05; done
  sleep 1
  rss0=$(rss)
  rooms=0
  [ "$ROOM_EVERY" = 0 ] || rooms=$((n / ROOM_EVERY))
  t0=$(now)
  load_phase load $((n * MSGS))
  [ "$rooms" = 0 ] || load_phase rooms $((target + rooms * (1 + MSGS)))
  t1=$(now)
  load_s=$(secs "$t0" "$t1")
  # a fresh process, so the stall gauge (max since start) covers the flush and its commits only
  stop
  start
  until healthy; do sleep 0.05; done
  stall0=$(metric strata_loop_stall_max_seconds)
  t0=$(now)
  curl -fsS -XPOST "$url/v1/admin/flush" >/dev/null
  while [ "$(metric strata_flush_passes_total)" = 0 ]; do sleep 0.2; done
  while [ "$(metric strata_flush_running)" != 0 ] || [ "$(metric strata_flush_pending)" != 0 ]; do sleep 0.5; done
  t1=$(now)
  while [ "$(pending)" != 0 ]; do sleep 0.5; done
  t2=$(now)
  flush_s=$(secs "$t0" "$t1") commit_s=$(secs "$t1" "$t2")
  stall_flush=$(metric strata_loop_stall_max_seconds)
  rss_cooled=$(rss) hot_bytes=$(metric strata_hot_bytes) hot_entries=$(metric strata_hot_entries)
  tables_bytes=$(metric strata_table_files_bytes) idem_bytes=$(metric strata_idempotency_index_bytes)
  stop
  t0=$(now)
  start
  until healthy; do sleep 0.01; done
  t1=$(now)
  restart_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", (b - a) * 1000}')
  sleep "$RESTART_WATCH"
  stall_restart=$(metric strata_loop_stall_max_seconds)
  io0=$(disk_read_kib)
  cpu_run "$spid" wrk_strata "$port" "" -- -t1 -c8 -d"${DURATION}s" --latency -s bench/atsize.lua "$url" -- read "$n" "$MSGS"
  read_cpu=$(per_op "$CPU_TICKS" "$W_OK")
  stall_read=$(metric strata_loop_stall_max_seconds) io1=$(disk_read_kib)
  rss_read=$(rss) cache=$(metric 'strata_cold_cache_bytes{part="footers"}')
  stop
  raw_keep "$n" load "$(cat "$work/wrk-load.txt")"
  [ "$rooms" = 0 ] || raw_keep "$n" rooms "$(cat "$work/wrk-rooms.txt")"
  raw_keep "$n" read "$W_OUT"
  line="users=$n rooms=$rooms posts=$target load_s=$load_s posts_per_s=$(awk -v a="$target" -v b="$load_s" 'BEGIN {printf "%.0f", a / b}')"
  line+=" flush_s=$flush_s flush_ms_per_user=$(awk -v a="$flush_s" -v b="$n" 'BEGIN {printf "%.3f", a * 1000 / b}') commit_after_s=$commit_s"
  line+=" stall_at_start_ms=$(awk -v a="$stall0" 'BEGIN {printf "%.1f", a * 1000}') stall_through_commit_ms=$(awk -v a="$stall_flush" 'BEGIN {printf "%.1f", a * 1000}')"
  line+=" rss_empty_kib=$rss0 rss_cooled_kib=$rss_cooled rss_cooled_kib_per_user=$(awk -v a="$rss_cooled" -v b="$rss0" -v n="$n" 'BEGIN {printf "%.3f", (a - b) / n}')"
  line+=" hot_bytes=$hot_bytes hot_bytes_per_user=$(awk -v a="$hot_bytes" -v n="$n" 'BEGIN {printf "%.0f", a / n}') hot_entries=$hot_entries"
  line+=" restart_to_healthz_ms=$restart_ms stall_after_restart_ms=$(awk -v a="$stall_restart" 'BEGIN {printf "%.1f", a * 1000}')"
  line+=" read_rps=$W_RPS read_p50_ms=$W_P50 read_p99_ms=$W_P99 read_cpu_us=$read_cpu read_disk_kib=$((io1 - io0)) stall_through_reads_ms=$(awk -v a="$stall_read" 'BEGIN {printf "%.1f", a * 1000}') rss_after_reads_kib=$rss_read footer_cache_bytes=${cache:-0}"
  line+=" table_files_bytes=${tables_bytes:-0} idempotency_index_bytes=${idem_bytes:-0}"
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$n" summary "$line"
  printf '%s{%s}' "$sep" "$(tr ' ' '\n' <<<"$line" | awk -F= '{printf "%s\"%s\":%s", s, $1, $2; s = ","}')" >>"$work/extra.json"
  sep=,
done
echo ']}' >>"$work/extra.json"
out_write atsize "SIZES=\"$SIZES\" MSGS=$MSGS ROOM_EVERY=$ROOM_EVERY ROOM_MEMBERS=$ROOM_MEMBERS CACHE=$CACHE DURATION=$DURATION bench/atsize.sh" "$work/extra.json"
