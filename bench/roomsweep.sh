#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The rooms' sweep of their author index (src/rooms/sweep.c, issue 48): a room of SWEEP_N
# (100,000) posts by SWEEP_AUTHORS (100) authors, cooled, all dropped by retention with the sweep
# held (STRATA_TEST_ROOMS_SWEEP_SLICES=0): a template. Then each round starts a copy twice, the
# first side alternating (bench/lib.sh's turns): `sweep` (the sweep resumes from its durable queue
# at start; the window runs until strata_rooms_index_unswept is 0) and `held` (the sweep held, the
# same window as the round's sweep, or 5 s in the first round if it goes first), each window from
# the launch: the loop's longest turn (strata_loop_stall_max_seconds, a gauge since start: both
# sides start the same way), the process's CPU since its launch (/proc/PID/stat utime+stime) and
# the entries swept. The sweep's CPU per entry: (sweep's CPU - held's) / entries.
# usage: [STRATA=build/strata] [SWEEP_N=100000] [SWEEP_AUTHORS=100] [ROUNDS=3] bench/roomsweep.sh
# Records bench/out/roomsweep/DATE.json (outside the README's table), raw lines in
# bench/out/raw/roomsweep/.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init roomsweep
STRATA=${STRATA:-build/strata}
N=${SWEEP_N:-100000}
AUTHORS=${SWEEP_AUTHORS:-100}
ARGS=(--table-keep 0)
spid= url=
metric() { flush_metric "$1"; }

echo "load before: $(load_avg)"
t0=$(date +%s)
rm -rf "$work/data"
STRATA_TEST_ROOMS_SWEEP_SLICES=0 flush_server_start "$STRATA" "${ARGS[@]}" --retention-seconds 5
node bench/roomsweep.mjs "$url" big "$N" "$AUTHORS"
curl -s -XPOST "$url/v1/admin/flush" >/dev/null
until [ "$(metric strata_flush_running)" = 0 ] &&
  ls "$work"/data/cold/shared/conversations/big/*.parquet >/dev/null 2>&1; do sleep 0.5; done
sleep 6
until [ "$(metric strata_retention_deleted_messages_total)" -ge "$N" ] 2>/dev/null; do
  curl -s -XPOST "$url/v1/admin/flush" >/dev/null
  sleep 1
done
unswept=$(metric strata_rooms_index_unswept)
[ "$unswept" = "$N" ] || die "unswept $unswept after the drop, want $N"
template_keep
echo "template: $N posts dropped in $(($(date +%s) - t0)) s; load $(load_avg)"

window=5
hz=$(getconf CLK_TCK)
# one side of ROUND: a fresh copy of the template, the window from the launch; its line
# ("SIDE round=R window_s= cpu_s= stall_ms= swept=") to $work/out.txt and raw
side() {
  local r=$1 which=$2 s0 s1 c1 stall swept line
  s0=$(date +%s.%N) # from the launch: the sweep starts 100 ms after it (the erasure timer)
  if [ "$which" = held ]; then
    STRATA_TEST_ROOMS_SWEEP_SLICES=0 template_start "$STRATA" "${ARGS[@]}"
  else
    template_start "$STRATA" "${ARGS[@]}"
  fi
  if [ "$which" = sweep ]; then
    until [ "$(metric strata_rooms_index_unswept)" = 0 ]; do sleep 0.02; done
    s1=$(date +%s.%N)
    window=$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.2f", b - a }')
  else
    sleep "$window"
    s1=$(date +%s.%N)
  fi
  c1=$(ticks "$spid")
  stall=$(metric strata_loop_stall_max_seconds)
  swept=$(metric strata_rooms_index_swept_total)
  line=$(printf '%s round=%d window_s=%.2f cpu_s=%.2f stall_ms=%.2f swept=%s load=%s' "$which" "$r" \
    "$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')" "$(awk -v t="$c1" -v h="$hz" 'BEGIN { print t / h }')" \
    "$(awk -v s="$stall" 'BEGIN { print s * 1000 }')" "$swept" "$(load_avg)")
  ab_done "$r" "$which" "$line"
}
side_sweep() { side "$1" sweep; }
side_held() { side "$1" held; }
for r in $(seq 1 "$ROUNDS"); do turns "$r" side_sweep side_held; done

# per round: the sweep's CPU less the held side's, per entry swept (µs)
per_entry=$(paste <(kv sweep cpu_s | tr ' ' '\n') <(kv held cpu_s | tr ' ' '\n') <(kv sweep swept | tr ' ' '\n') |
  awk 'NF == 3 && $3 > 0 { printf "%.3f ", ($1 - $2) * 1e6 / $3 }')
what="room sweep of $N dropped posts' author index entries ($AUTHORS authors)"
row "$what: the loop's longest turn, sweep vs held" "$(kv sweep stall_ms)" ms "" "the sweep held, the same window" "$(kv held stall_ms)" "" ms
row "$what: from the launch until none is left" "$(kv sweep window_s)" s "" "" "" ""
row "$what: process CPU per entry swept (sweep less held)" "$per_entry" µs "10 ms ticks of /proc" "" "" ""
echo "the loop's longest turn, ms: sweep $(med $(kv sweep stall_ms)) ($(rng $(kv sweep stall_ms))), held $(med $(kv held stall_ms)) ($(rng $(kv held stall_ms)))"
echo "CPU per entry swept, µs: $(med $per_entry) ($(rng $per_entry))"
out_write roomsweep "SWEEP_N=$N SWEEP_AUTHORS=$AUTHORS ROUNDS=$ROUNDS bench/roomsweep.sh"
