#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Memory while a snapshot is shipped (issue 15): a store of a few hundred MB (strata-seatgen: one
# 1000 x 1000-seat event with FINISHED + ACTIVE bookings), started without a backup (baseline),
# then with --backup-url file://… until its first snapshot is up; the anonymous memory (RssAnon:
# heap, not LMDB's file-backed map) is sampled every 10 ms and its peak reported.
#   bench/backup-rss.sh                  (OLD=path/to/strata adds the same run of another binary)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
anon_kb() { awk '/^RssAnon:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# peak BIN LABEL [flags]: starts BIN on the store, samples until the first snapshot (or 2 s
# without a backup), prints the peak RssAnon
peak() {
  local bin=$1 label=$2 p; p=$(free_port)
  "$bin" --listen 127.0.0.1:"$p" --data-dir "$work/big" --cold-url "file://$work/cold" "${@:3}" 2>>"$work/strata.log" &
  local pid=$! max=0 a; pids+=($pid)
  local until=$(( $(date +%s%N) + 2000000000 ))
  while :; do
    a=$(anon_kb "$pid"); [ "$a" -gt "$max" ] && max=$a
    if [ $# -gt 2 ]; then [ "$(metric "$p" strata_backup_snapshots_total 2>/dev/null)" = 1 ] && break
    else [ "$(date +%s%N)" -gt "$until" ] && break; fi
    sleep 0.01
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$label: peak RssAnon $((max / 1024)) MiB"
}

build/strata-seatgen "$work/big" "${FINISHED:-500000}" "${ACTIVE:-100000}" >/dev/null
p=$(free_port) # converts the seatgen layout once
build/strata --listen 127.0.0.1:"$p" --data-dir "$work/big" --cold-url "file://$work/cold" 2>>"$work/strata.log" &
pid=$!; pids+=($pid); wait_port "$p"; kill "$pid"; wait "$pid" 2>/dev/null || true
echo "# snapshot memory, $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg); LMDB $(du -sh "$work/big/data.mdb" | cut -f1)"
peak build/strata "no backup"
peak build/strata "backup on, first snapshot" --backup-url "file://$work/bk-new"
echo "  snapshot: $(du -sh "$work/bk-new/snap" | cut -f1) (zstd)"
if [ -n "${OLD:-}" ]; then peak "$OLD" "backup on, first snapshot ($OLD)" --backup-url "file://$work/bk-old"; fi
