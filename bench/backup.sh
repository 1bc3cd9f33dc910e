#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Backups (issue 15): durable incr throughput with --backup-url on vs off (the same minute,
# alternating runs), backup bytes per acknowledged write, and the time `strata restore` takes for
# a store of seats (strata-seatgen: one 1000 x 1000-seat event), counters and hot messages
# (written over HTTP for GEN seconds each; scaled down from 1M each, see bench/RESULTS.md).
#   bench/backup.sh          (DURATION=5 s per throughput run, CONNS=64, GEN=8 s per data kind)
#   N=1000000 RESTORE_ONLY=1 bench/backup.sh   full size: 1M counters + 1M messages (each run
#                            stops after N answers, at most 300 s), no throughput runs
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-64}
DURATION=${DURATION:-5}
GEN=${GEN:-8}
. bench/lib.sh

metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
wrk_run() { wrk -t1 -c"$CONNS" -d"$1s" "${@:2}" > "$work/wrk.out"; }
wrk_rps() { awk '/Requests\/sec/ {print $2}' "$work/wrk.out"; }
wrk_reqs() { awk '/requests in/ {print $1}' "$work/wrk.out"; }
start() { # start PORT DIR [flags]: a server in the background, pid in $last
  build/strata --listen 127.0.0.1:"$1" --data-dir "$2" --cold-url "file://$2/cold" "${@:3}" 2>>"$work/strata.log" &
  last=$!; pids+=($last); wait_port "$1"
}

if [ -z "${RESTORE_ONLY:-}" ]; then
echo "# backup on vs off, $(date -u +%F), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), wrk -t1 -c$CONNS -d${DURATION}s"
off=$(free_port); on=$(free_port)
start "$off" "$work/off"; poff=$last
start "$on" "$work/on" --backup-url "file://$work/bk-on"; pon=$last
sleep 1
b0=$(metric "$on" strata_backup_bytes_total); n_on=0; sum_off=0; sum_on=0
for round in 1 2; do
  wrk_run "$DURATION" -s bench/incr.lua "http://127.0.0.1:$off"; r=$(wrk_rps); sum_off=$(awk -v a="$sum_off" -v b="$r" 'BEGIN{print a+b}')
  echo "round $round off: $r req/s"
  wrk_run "$DURATION" -s bench/incr.lua "http://127.0.0.1:$on"; r=$(wrk_rps); sum_on=$(awk -v a="$sum_on" -v b="$r" 'BEGIN{print a+b}')
  n_on=$((n_on + $(wrk_reqs)))
  echo "round $round on:  $r req/s"
done
sleep 2 # the last interval ships
b1=$(metric "$on" strata_backup_bytes_total)
echo "durable incr, backup on / off: $(ratio "$sum_on" "$sum_off")"
echo "backup bytes per acknowledged incr: $(awk -v a="$b0" -v b="$b1" -v n="$n_on" 'BEGIN{printf "%.1f", (b-a)/n}') ($n_on incrs, $((b1 - b0)) bytes of segments)"
kill "$poff" "$pon"; wait "$poff" "$pon" 2>/dev/null || true
fi

echo "# restore time"
build/strata-seatgen "$work/big" "${FINISHED:-500000}" "${ACTIVE:-100000}" >/dev/null
p=$(free_port)
start "$p" "$work/big"  # converts the seatgen layout once
kill "$last"; wait "$last" 2>/dev/null || true
start "$p" "$work/big" --backup-url "file://$work/bk" --backup-interval 1000
for mode in counters messages; do
  if [ -n "${N:-}" ]; then wrk_run 300 -s bench/backup.lua "http://127.0.0.1:$p" -- "$mode" "$N"
  else wrk_run "$GEN" -s bench/backup.lua "http://127.0.0.1:$p" -- "$mode"; fi
  echo "$mode: $(wrk_reqs) written"
done
kill "$last"; wait "$last" 2>/dev/null || true   # SIGTERM: the last interval ships
# a fresh snapshot of everything, then restore from it plus nothing, and from the older one +
# every segment
start "$p" "$work/big" --backup-url "file://$work/bk" --backup-keep 5
until [ "$(metric "$p" strata_backup_snapshots_total)" = 1 ]; do sleep 0.2; done
kill "$last"; wait "$last" 2>/dev/null || true
du -sh "$work/big/data.mdb" "$work/bk/snap" "$work/bk/seg" | sed 's/^/  /'
t0=$(date +%s%N)
build/strata restore --backup-url "file://$work/bk" --data-dir "$work/r1"
t1=$(date +%s%N)
echo "restore from the newest snapshot: $(( (t1 - t0) / 1000000 )) ms"
newest=$(find "$work/bk/snap" -type f | sed 's/.*-0*\([0-9]*\)\.zst/\1/' | sort -n | tail -1)
t0=$(date +%s%N)
build/strata restore --backup-url "file://$work/bk" --data-dir "$work/r2" --to-time $((newest - 1))
t1=$(date +%s%N)
echo "restore from the first snapshot + every segment: $(( (t1 - t0) / 1000000 )) ms"
