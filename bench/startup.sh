#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Start-up time and peak RSS with many finished bookings (issue 11.9). Writes a data dir with one
# 1000 x 1000-seat event, FINISHED finished bookings (sold, cancelled, expired) and ACTIVE
# reserved ones (bench/seatgen.c, in the layout from before seat-map chunks), then starts each
# binary on a fresh copy and times spawn -> "listening on". The new binary converts such a data
# dir once on its first start; its second start is the steady state.
#
# usage: bench/startup.sh [OLD_BIN]    (FINISHED=1000000 ACTIVE=100000 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
FINISHED=${FINISHED:-1000000}
ACTIVE=${ACTIVE:-100000}
OLD_BIN=${1:-}
NEW_BIN=$PWD/build/strata
tools/build.sh release >/dev/null
work=$(mktemp -d /tmp/strata-startup-XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

build/strata-seatgen "$work/base" "$FINISHED" "$ACTIVE"

# start BIN DIR LABEL: prints the time to "listening on", the seats line and peak RSS, then stops.
start() {
  local log="$work/log" t0 t1
  t0=$(date +%s%N)
  "$1" --listen 127.0.0.1:0 --data-dir "$2" --cold-url "file://$2/cold" >"$log" 2>&1 &
  pid=$!
  until grep -q "listening on" "$log"; do
    kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.002
  done
  t1=$(date +%s%N)
  local hwm seats
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  seats=$(grep -o 'seats: rebuilt.*' "$log" | head -1)
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
  printf '%-34s start-up %7.0f ms  peak RSS %6.1f MB  | %s\n' "$3" \
    "$(echo "($t1 - $t0) / 1000000" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$seats"
}

echo "data: $FINISHED finished + $ACTIVE active bookings ($(du -sh "$work/base" | cut -f1))"
if [ -n "$OLD_BIN" ]; then
  for i in 1 2; do
    rm -rf "$work/old" && cp -a "$work/base" "$work/old"
    start "$OLD_BIN" "$work/old" "before (replays every booking) #$i"
  done
fi
rm -rf "$work/new" && cp -a "$work/base" "$work/new"
start "$NEW_BIN" "$work/new" "after, first start (converts once)"
for i in 1 2; do
  start "$NEW_BIN" "$work/new" "after, steady state #$i"
done
