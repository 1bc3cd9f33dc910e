#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stream benchmarks (issue 5), all driven by build/strata-wsload (bench/wsload.c) on loopback:
#   latency  insert -> notification, 1,000 subscribers on one conversation, steady post rates
#            (and 1 subscriber as the floor: one durable commit plus one frame);
#   fanout   10,000 subscribers of one counter, frames delivered per second, with 16 and 64
#            changes in flight (more in flight lets strata send several frames per TCP push);
#   memory   RSS per idle stream (one subscription each) at 10,000 streams;
#   follower fan-out: the same 10,000 streams opened on a follower of a group of 3 (the writes go
#            to the leader; a member publishes what it applied, SPEC §8), 16 and 64 in flight.
# The peer is Redis 7 pub/sub (SUBSCRIBE per connection, PUBLISH from one writer) driven by the
# same program with the same counts, interleaved with strata (strata, Redis, strata … for ROUNDS
# rounds; on the follower too, so no row reuses another row's Redis figure). Redis publishes
# without writing anything to disk; strata sends only what is fsync'd, so its figures include a
# durable commit per change. Both sides run for the same DURATION; wsload exits non-zero on any
# answer to a post other than 2xx. Server CPU per frame: strata's process (for the follower rows
# the sum of the group's 3 members) vs redis-server. Records the run in bench/out/streams/DATE.json,
# wsload's output in bench/out/raw/streams/.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
. bench/groupstart.sh # group_start, group_leader
record_init streams
ulimit -n "$(ulimit -Hn)"
LOAD=build/strata-wsload
conns=${CONNS:-10000}

start() {
  port=$(free_port)
  rm -rf "$work/data"
  build/strata --listen 127.0.0.1:"$port" --data-dir "$work/data" --max-connections $((conns + 1000)) \
    --log-level warn 2>>"$work/strata.log" &
  spid=$!
  pids+=("$spid")
  wait_port "$port"
}
stop() { kill "$spid"; wait "$spid" 2>/dev/null || true; }
rss_kib() { awk '/VmRSS/ {print $2}' /proc/"$1"/status; }

redis_pubsub_start "$conns"

# one wsload run: load ROUND SIDE PIDS MODE ARGS… → its output line in $work/out.txt with the
# round and the server CPU per frame appended ("round=R cpu_us_per_frame=X"), kept in raw/
load() {
  local round=$1 side=$2 ps=$3 line frames; shift 3
  cpu_run "$ps" run_wsload "$@"
  frames=$(tr ' ' '\n' <<<"$WS_OUT" | awk -F= '$1 == "frames" {print $2}')
  line="$WS_OUT round=$round"
  [ -z "$frames" ] || line+=" cpu_us_per_frame=$(per_op "$CPU_TICKS" "$frames")"
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$round" "$side" "$line"
}
run_wsload() { WS_OUT=$("$LOAD" "$@") || die "wsload $* failed"; }

echo "# streams, $(date -u +%F), $(nproc) cores, ${DURATION}s per run, $ROUNDS rounds"
start
# each pair in turns, the first side changing every round (bench/lib.sh's turns); kv below picks
# the values by mode and round, whatever ran first
lat_strata() { load "$1" strata "$spid" latency "$port" "$lat_subs" "$DURATION" "$lat_rate"; }
lat_redis() { load "$1" redis "$rpid" redis-latency "$rport" "$lat_subs" "$DURATION" "$lat_rate"; }
fan_strata() { load "$1" strata "$spid" fanout "$port" "$conns" "$DURATION" "$window"; }
fan_redis() { load "$1" redis "$rpid" redis-fanout "$rport" "$conns" "$DURATION" "$window"; }
for round in $(seq "$ROUNDS"); do
  lat_subs=1000
  for lat_rate in 20 100; do turns "$round" lat_strata lat_redis; done
  lat_subs=1 lat_rate=20
  turns "$round" lat_strata lat_redis
done
stop

start
for round in $(seq "$ROUNDS"); do
  for window in 16 64; do turns "$round" fan_strata fan_redis; done
done
stop

for round in $(seq "$ROUNDS"); do
  start
  before=$(rss_kib "$spid")
  "$LOAD" idle "$port" "$conns" 3 >"$work/idle.txt" &
  lp=$!
  for _ in $(seq 200); do grep -q ready "$work/idle.txt" && break; sleep 0.1; done
  sleep 1
  after=$(rss_kib "$spid")
  wait "$lp"
  awk -v b="$before" -v a="$after" -v n="$conns" -v r="$round" \
    'BEGIN { printf "memory conns=%d rss_before_kib=%d rss_after_kib=%d per_conn_kib=%.2f round=%d\n", n, b, a, (a - b) / n, r }' |
    tee -a "$work/out.txt" >>"$raw_dir/$round-strata.txt"
  stop
done

# ---- a group of 3: the streams on a follower, the writes to the leader; Redis in turns ----
group_start build/strata --max-connections $((conns + 1000)) # bench/groupstart.sh
gfan_strata() {
  cpu_run "${gpid[1]} ${gpid[2]} ${gpid[3]}" run_wsload fanout "${http[$follower]}:${http[$leader]}" "$conns" "$DURATION" "$window"
  frames=$(tr ' ' '\n' <<<"$WS_OUT" | awk -F= '$1 == "frames" {print $2}')
  line="follower-$WS_OUT round=$1 cpu_us_per_frame=$(per_op "$CPU_TICKS" "$frames")"
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$1" strata-group "$line"
}
gfan_redis() {
  load "$1" redis-group "$rpid" redis-fanout "$rport" "$conns" "$DURATION" "$window"
  sed -i '$ s/^redis-fanout /redis-follower-fanout /' "$work/out.txt"
}
for round in $(seq "$ROUNDS"); do
  for window in 16 64; do turns "$round" gfan_strata gfan_redis; done
done
for id in 1 2 3; do kill ${gpid[$id]}; done
for id in 1 2 3; do wait ${gpid[$id]} 2>/dev/null || true; done

# rows for bench/table.py: "MODE key=value…" lines of wsload and the memory line above
kv() { # MODE KEY FILTER…: the values of KEY (one per round, in round order) on the MODE lines holding every FILTER token
  local m=$1 k=$2; shift 2
  awk -v m="$m" -v k="$k" -v f="$*" '$1 == m { n = split(f, w, " "); for (j = 1; j <= n; j++) if (!index(" " $0 " ", " " w[j] " ")) next
    for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) printf "%s ", a[2] } }' "$work/out.txt"; }
P="Redis 7 pub/sub (not durable: --appendonly no)"
I="interleaved"
for rate in 20 100; do
  row "post → stream notification, 1,000 subscribers, $rate posts/s: p99" "$(kv latency p99_ms conns=1000 rate=$rate)" "ms" \
    "median p50 $(med $(kv latency p50_ms conns=1000 rate=$rate)) ms; a frame leaves once the post is fsync'd" \
    "$P" "$(kv redis-latency p99_ms conns=1000 rate=$rate)" "median p50 $(med $(kv redis-latency p50_ms conns=1000 rate=$rate)) ms; $I"
done
row "post → stream notification, 1 subscriber: p99" "$(kv latency p99_ms conns=1 rate=20)" "ms" \
  "median p50 $(med $(kv latency p50_ms conns=1 rate=20)) ms; one durable commit plus one frame" \
  "$P" "$(kv redis-latency p99_ms conns=1 rate=20)" "median p50 $(med $(kv redis-latency p50_ms conns=1 rate=20)) ms; $I"
for window in 16 64; do
  row "fan-out to $conns streams, $window changes in flight" "$(kv fanout frames_per_sec conns=$conns window=$window)" "frames/s" \
    "every change durable before its frames" "$P" "$(kv redis-fanout frames_per_sec conns=$conns window=$window)" "$I" "" \
    "$(kv fanout cpu_us_per_frame conns=$conns window=$window)" "$(kv redis-fanout cpu_us_per_frame conns=$conns window=$window)" "frame"
done
for window in 16 64; do
  row "fan-out to $conns streams on a follower of a group of 3, $window changes in flight" \
    "$(kv follower-fanout frames_per_sec conns=$conns window=$window)" "frames/s" \
    "writes to the leader; the follower sends what it applied and made durable; CPU: all 3 members" "$P" \
    "$(kv redis-follower-fanout frames_per_sec conns=$conns window=$window)" "measured in turns with the follower" "" \
    "$(kv follower-fanout cpu_us_per_frame conns=$conns window=$window)" "$(kv redis-follower-fanout cpu_us_per_frame conns=$conns window=$window)" "frame"
done
row "memory per idle stream at $conns streams" "$(kv memory per_conn_kib conns=$conns)" "KiB" "RSS after − before, ÷ streams" "" "" ""
out_write streams "DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$conns bench/streams.sh"
