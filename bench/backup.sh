#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Backups (issue 15): durable incr throughput with --backup-url on vs off (the same minute,
# alternating runs; only 2xx answers count and a wrk socket error fails the run, bench/lib.sh),
# backup bytes per acknowledged (2xx) write, and the time `strata restore` takes for
# a store of seats (strata-seatgen: one 1000 x 1000-seat event), counters and hot messages
# (written over HTTP for GEN seconds each; scaled down from 1M each, see bench/RESULTS.md).
#   bench/backup.sh          (DURATION=5 s per throughput run, CONNS=64, GEN=8 s per data kind)
#   (OLD=path/to/strata: the snapshot's memory of another binary on the same store, for comparison)
#   N=1000000 RESTORE_ONLY=1 bench/backup.sh   full size: 1M counters + 1M messages (each kind
#                            written until N are acknowledged, at most 300 s), no throughput runs
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-64}
DURATION=${DURATION:-5}
GEN=${GEN:-8}
. bench/lib.sh

metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
# wrk_run PORT SECONDS ARGS…: wrk -t1 -c$CONNS, only strata's 2xx count and any other status or a
# wrk socket error fails the run (bench/lib.sh's wrk_strata); sets W_OK, W_RPS …
wrk_run() { wrk_strata "$1" "" -- -t1 -c"$CONNS" -d"$2s" "${@:3}"; }
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
  wrk_run "$off" "$DURATION" -s bench/incr.lua "http://127.0.0.1:$off"; r=$W_RPS; sum_off=$(awk -v a="$sum_off" -v b="$r" 'BEGIN{print a+b}')
  echo "round $round off: $r 2xx/s"
  wrk_run "$on" "$DURATION" -s bench/incr.lua "http://127.0.0.1:$on"; r=$W_RPS; sum_on=$(awk -v a="$sum_on" -v b="$r" 'BEGIN{print a+b}')
  n_on=$((n_on + W_OK))
  echo "round $round on:  $r 2xx/s"
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
acked() { # acked PORT ROUTE STATUS: answers so far
  curl -s "http://127.0.0.1:$1/metrics" | awk -v k="strata_http_requests_total{route=\"$2\",status=\"$3\"} " 'index($0, k) == 1 {print $NF}' # the route holds a space
}
for mode in counters messages; do
  if [ -n "${N:-}" ]; then # until N are acknowledged (wrk stops on SIGINT and reports; a status
    # other than 2xx or a wrk socket error fails the run)
    route='POST /v1/counters/{name}/incr'; st=200
    [ "$mode" = messages ] && route='POST /v1/users/{user}/messages' && st=201
    base=$(acked "$p" "$route" "$st"); base=${base:-0}
    before=$(st_statuses "$p")
    wrk -t1 -c"$CONNS" -d300s -s bench/backup.lua "http://127.0.0.1:$p" -- "$mode" > "$work/wrk.out" &
    w=$!
    until n=$(acked "$p" "$route" "$st"); [ "${n:-0}" -ge $((base + N)) ] || ! kill -0 "$w" 2>/dev/null; do sleep 0.2; done
    kill -INT "$w" 2>/dev/null || true; wait "$w" || true
    W_OUT=$(cat "$work/wrk.out"); wrk_socket_check "-d300s -s bench/backup.lua -- $mode"
    # only 2xx may appear (bench/lib.sh's st_count), as in the timed runs below
    st_count "$before" "$(st_statuses "$p")" "" "wrk -d300s -s bench/backup.lua -- $mode"
    echo "$mode: $(( $(acked "$p" "$route" "$st") - base )) written ($st answers)"
  else
    wrk_run "$p" "$GEN" -s bench/backup.lua "http://127.0.0.1:$p" -- "$mode"
    echo "$mode: $W_OK written (2xx answers)"
  fi
done
kill "$last"; wait "$last" 2>/dev/null || true   # SIGTERM: the last interval ships
# a fresh snapshot of everything, then restore from it plus nothing, and from the older one +
# every segment
# (its anonymous memory, heap not LMDB's map, sampled every 10 ms while it ships: RSS_PEAK)
anon_kb() { awk '/^RssAnon:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
snap_peak() { # snap_peak BIN BACKUP_DIR: prints the peak RssAnon until the first snapshot is up
  local bin=$1 max=0 a; p=$(free_port)
  "$bin" --listen 127.0.0.1:"$p" --data-dir "$work/big" --cold-url "file://$work/big/cold" --backup-url "file://$2" --backup-keep 5 2>>"$work/strata.log" &
  last=$!; pids+=($last)
  until [ "$(metric "$p" strata_backup_snapshots_total 2>/dev/null)" = 1 ]; do
    a=$(anon_kb "$last"); [ "$a" -gt "$max" ] && max=$a; sleep 0.01
  done
  kill "$last"; wait "$last" 2>/dev/null || true
  echo $((max / 1024))
}
echo "peak RssAnon while the snapshot ships: $(snap_peak build/strata "$work/bk") MiB"
if [ -n "${OLD:-}" ]; then echo "  the same with $OLD: $(snap_peak "$OLD" "$work/bk-old") MiB"; rm -rf "$work/bk-old"; fi
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
