#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The rooms' sweep of their author index (src/rooms/sweep.c, issue 48): a room of SWEEP_N
# (100,000) posts by SWEEP_AUTHORS (100) authors, cooled, all dropped by retention with the sweep
# held (STRATA_TEST_ROOMS_SWEEP_SLICES=0): a template. Then each round starts a copy twice, the
# first side alternating: `sweep` (the sweep resumes from its durable queue at start; the window
# runs until strata_rooms_index_unswept is 0) and `held` (the sweep held, the same window as the
# round's sweep, or 5 s in the first round if it goes first), each window from the launch: the
# loop's longest turn (strata_loop_stall_max_seconds, a gauge since start: both sides start the
# same way), the process's CPU since its launch (/proc/PID/stat utime+stime) and the entries
# swept. The sweep's CPU per entry: (sweep's CPU - held's) / entries.
# usage: [STRATA=build/strata] [SWEEP_N=100000] [SWEEP_AUTHORS=100] [ROUNDS=3] bench/roomsweep.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
STRATA=${STRATA:-build/strata}
N=${SWEEP_N:-100000}
AUTHORS=${SWEEP_AUTHORS:-100}
ROUNDS=${ROUNDS:-3}
[ -n "${ALLOW_DIRTY:-}" ] || ! bench_dirty || die "uncommitted changes: commit first (ALLOW_DIRTY=1 to explore)"
work=$(mktemp -d /tmp/roomsweep.XXXXXX)
trap 'for p in ${spid:-}; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

spid=
start() { # data dir, env assignments... -> port, url, spid
  local dir=$1
  shift
  port=$(free_port)
  env "$@" "$STRATA" --listen 127.0.0.1:"$port" --data-dir "$dir" --map-size 8GiB \
    --flush-interval 86400 --flush-rows 100000000 --reconcile-interval 86400 --table-keep 0 \
    --log-level warn ${EXTRA_ARGS:-} 2>>"$work/strata.log" &
  spid=$!
  wait_port "$port"
  url="http://127.0.0.1:$port"
}
stop() { kill "$spid"; wait "$spid" 2>/dev/null || true; spid=; }
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

echo "load before: $(load_avg)"
t0=$(date +%s)
EXTRA_ARGS="--retention-seconds 5" start "$work/tmpl" STRATA_TEST_ROOMS_SWEEP_SLICES=0
node bench/roomsweep.mjs "$url" big "$N" "$AUTHORS"
curl -s -XPOST "$url/v1/admin/flush" >/dev/null
until [ "$(metric strata_flush_running)" = 0 ] &&
  ls "$work"/tmpl/cold/shared/conversations/big/*.parquet >/dev/null 2>&1; do sleep 0.5; done
sleep 6
until [ "$(metric strata_retention_deleted_messages_total)" -ge "$N" ] 2>/dev/null; do
  curl -s -XPOST "$url/v1/admin/flush" >/dev/null
  sleep 1
done
unswept=$(metric strata_rooms_index_unswept)
[ "$unswept" = "$N" ] || die "unswept $unswept after the drop, want $N"
stop
echo "template: $N posts dropped in $(($(date +%s) - t0)) s; load $(load_avg)"

window=5
hz=$(getconf CLK_TCK)
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then sides="sweep held"; else sides="held sweep"; fi
  for side in $sides; do
    rm -rf "$work/data"
    cp -a "$work/tmpl" "$work/data"
    s0=$(date +%s.%N) # from the launch: the sweep starts 100 ms after it (the erasure timer)
    if [ "$side" = held ]; then
      start "$work/data" STRATA_TEST_ROOMS_SWEEP_SLICES=0
    else
      start "$work/data"
    fi
    c0=0
    if [ "$side" = sweep ]; then
      until [ "$(metric strata_rooms_index_unswept)" = 0 ]; do sleep 0.02; done
      s1=$(date +%s.%N)
      window=$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.2f", b - a }')
    else
      sleep "$window"
      s1=$(date +%s.%N)
    fi
    c1=$(cpu_ticks "$spid")
    stall=$(metric strata_loop_stall_max_seconds)
    swept=$(metric strata_rooms_index_swept_total)
    printf 'round %d %-5s window_s %.2f cpu_s %.2f stall_ms %.2f swept %s load %s\n' "$r" "$side" \
      "$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')" \
      "$(awk -v a="$c0" -v b="$c1" -v h="$hz" 'BEGIN { print (b - a) / h }')" \
      "$(awk -v s="$stall" 'BEGIN { print s * 1000 }')" "$swept" "$(load_avg)"
    stop
  done
done
