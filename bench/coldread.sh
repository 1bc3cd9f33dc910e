#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a cold read costs when the page cache does not hold it (issue 48: at a million users the
# newest-50 read's p99 followed the disk, bench/RESULTS.md Session 21). A data dir of USERS users
# x MSGS messages and a room of 10 for every 10 users (bench/atsize.lua, as bench/atsize.sh) is
# loaded and cooled once (POST /v1/admin/flush, until GET /v1/admin/tables has nothing pending).
# Then, ROUNDS rounds, for each value V of INODE_RA (ext4's inode_readahead_blks of the file
# system holding the data dir, restored afterwards; root only), in turns:
#   single  the page cache dropped (sync; drop_caches), strata started, one read to warm what
#           every read shares (LMDB's upper pages, the tables' metadata), then SINGLES reads of
#           distinct users one at a time: KiB strata read from the disk for each (/proc/PID/io
#           read_bytes);
#   spread  the page cache dropped again, DURATION s of wrk -t1 -c8 over users in a permutation
#           (bench/coldread.lua: no user twice): reads/s, p50/p99, KiB from the disk per read,
#           server CPU per read.
# Needs root (drop_caches). Records bench/out/coldread/DATE.json (no README row).
#   USERS=20000 MSGS=10 ROUNDS=2 DURATION=2 bench/coldread.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
[ "$(id -u)" = 0 ] || die "needs root: it drops the page cache"
record_init coldread
USERS=${USERS:-20000} MSGS=${MSGS:-10} SINGLES=${SINGLES:-6} INODE_RA=${INODE_RA:-"32 0"}
DATA=$work/data
dev=$(basename "$(df --output=source "$work" | tail -1)")
ra_file=/sys/fs/ext4/$dev/inode_readahead_blks
[ -w "$ra_file" ] || { echo "# $ra_file not writable: only the current setting is measured" >&2; INODE_RA=current; }
ra0=$(cat "$ra_file" 2>/dev/null || echo current)
restore_ra() { [ "$ra0" = current ] || echo "$ra0" >"$ra_file"; }
trap 'rc=$?; restore_ra; (exit $rc); cleanup' EXIT
echo "# coldread, $(date -u +%F), $(nproc) cores, $USERS users x $MSGS, rooms $((USERS / 10)), inode readahead ${INODE_RA} (was $ra0), commit $(git rev-parse --short HEAD)"
spid= url=
start() { flush_server_start build/strata --cold-cache 32MiB; }
stop() { flush_server_stop; }
metric() { flush_metric "$1"; }
created() { curl -s "$url/metrics" | awk '/^strata_http_requests_total\{/ && /status="201"/ {n += $NF} END {print n + 0}'; }
pending() { curl -s "$url/v1/admin/tables" | python3 -c 'import json,sys; print(sum(t["pending"] for t in json.load(sys.stdin)["tables"]))'; }
disk() { awk '/^read_bytes/ {print $2}' /proc/"$spid"/io; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
load() { # MODE TARGET (atsize.sh's load_phase)
  local mode=$1 want=$2 last=-1 c wp
  wrk -t1 -c32 -d3600s -s bench/atsize.lua "$url" -- "$mode" "$USERS" "$MSGS" $((USERS / 10)) 10 >"$work/wrk-$mode.txt" 2>&1 &
  wp=$!
  while c=$(created) && { [ "$c" -lt $((want - 16 - MSGS)) ] || [ "$c" != "$last" ]; }; do
    kill -0 "$wp" 2>/dev/null || die "wrk ended early: $(cat "$work/wrk-$mode.txt")"
    last=$c; sleep 0.5
  done
  target=$c
  kill -INT "$wp"; wait "$wp" || true
}
start
load load $((USERS * MSGS))
load rooms $((target + USERS / 10 * (1 + MSGS)))
curl -fsS -XPOST "$url/v1/admin/flush" >/dev/null
while [ "$(metric strata_flush_passes_total)" = 0 ]; do sleep 0.2; done
while [ "$(metric strata_flush_running)" != 0 ] || [ "$(metric strata_flush_pending)" != 0 ]; do sleep 0.5; done
while [ "$(pending)" != 0 ]; do sleep 0.5; done
stop
echo "# $target posts cooled: data.mdb $(du -m "$DATA/data.mdb" | cut -f1) MiB, cold tier $(du -sm "$DATA/cold" | cut -f1) MiB in $(find "$DATA/cold" -type f | wc -l) files"

run() { # V (inode_readahead_blks)
  local v=$1 kib=() a b u t0 t1 i0 i1 out reqs
  [ "$v" = current ] || echo "$v" >"$ra_file"
  drop; start
  curl -fsS "$url/v1/users/a1/messages?limit=50" >/dev/null
  for u in $(seq 1 "$SINGLES"); do
    a=$(disk)
    curl -fsS "$url/v1/users/a$(((u * 3001 + 17) % USERS))/messages?limit=50" >/dev/null
    b=$(disk); kib+=($(((b - a) / 1024)))
  done
  stop; drop; start
  i0=$(disk); t0=$(ticks "$spid")
  out=$(wrk -t1 -c8 -d"${DURATION}s" --latency -s bench/coldread.lua "$url" -- "$USERS")
  i1=$(disk); t1=$(ticks "$spid")
  stop
  ! grep -q Non-2xx <<<"$out" || die "non-2xx answers: $out"
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  raw_keep "ra$v" spread "$out"
  echo "ra$v single_kib=$(IFS=,; echo "${kib[*]}") single_kib_med=$(med "${kib[@]}") spread_rps=$(awk -v r="$reqs" -v d="$(wrk_secs "$out")" 'BEGIN {printf "%.0f", r / d}') spread_p50_ms=$(wrk_pct "$out" 50%) spread_p99_ms=$(wrk_pct "$out" 99%) spread_kib_per_read=$(awk -v a="$i0" -v b="$i1" -v r="$reqs" 'BEGIN {printf "%.1f", (b - a) / 1024 / r}') spread_cpu_us=$(per_op $((t1 - t0)) "$reqs")" |
    tee -a "$work/out.txt"
}
sides=(); for v in $INODE_RA; do sides+=("$v"); done
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then order=("${sides[@]}"); else order=(); for ((i = ${#sides[@]} - 1; i >= 0; i--)); do order+=("${sides[i]}"); done; fi
  for v in "${order[@]}"; do run "$v"; done
done
restore_ra
echo
echo "| inode_readahead_blks | KiB from disk per single cold read, median of rounds | spread: KiB per read | p50 / p99 ms | reads/s | CPU µs per read |"
echo "|---|---|---|---|---|---|"
for v in "${sides[@]}"; do
  echo "| $v | $(med $(kv "ra$v" single_kib_med)) | $(med $(kv "ra$v" spread_kib_per_read)) ($(rng $(kv "ra$v" spread_kib_per_read))) | $(med $(kv "ra$v" spread_p50_ms)) / $(med $(kv "ra$v" spread_p99_ms)) ($(rng $(kv "ra$v" spread_p99_ms))) | $(med $(kv "ra$v" spread_rps)) | $(med $(kv "ra$v" spread_cpu_us)) |"
done
if [ "${#sides[@]}" = 2 ]; then
  row "KiB from the disk per cold read of one user, inode readahead ${sides[0]} vs ${sides[1]} blocks" "$(kv "ra${sides[0]}" single_kib_med)" "KiB" "" \
    "inode_readahead_blks=${sides[1]}, alternated" "$(kv "ra${sides[1]}" single_kib_med)" "" "KiB"
fi
out_write coldread "USERS=$USERS MSGS=$MSGS ROUNDS=$ROUNDS DURATION=$DURATION INODE_RA=\"$INODE_RA\" bench/coldread.sh"
