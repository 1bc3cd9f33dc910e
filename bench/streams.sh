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
# same program with the same counts. Redis publishes without writing anything to disk; strata
# sends only what is fsync'd, so its figures include a durable commit per change. Both sides run
# for the same DURATION; wsload exits non-zero on any answer to a post other than 2xx. Records
# the run in bench/out/streams.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
. bench/groupstart.sh # group_start, group_leader
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

rport=$(free_port)
redis-server --port "$rport" --save '' --appendonly no --maxclients $((conns + 1000)) --daemonize no \
  --logfile "$work/redis.log" &
pids+=($!)
wait_port "$rport"

echo "# streams, $(date -u +%F), $(nproc) cores, ${DURATION}s per run"
start
for rate in 20 100; do
  "$LOAD" latency "$port" 1000 "$DURATION" "$rate" | tee -a "$work/out.txt"
  "$LOAD" redis-latency "$rport" 1000 "$DURATION" "$rate" | tee -a "$work/out.txt"
done
# the 1-subscriber floor is one durable commit plus one frame: print the commit time of the same run
commits() { curl -s "127.0.0.1:$port/metrics" | awk '/^strata_commit_seconds_(sum|count) / {printf "%s ", $2}'; }
c0=$(commits)
"$LOAD" latency "$port" 1 "$DURATION" 20 | tee -a "$work/out.txt"
c1=$(commits)
awk -v a="$c0" -v b="$c1" 'BEGIN { split(a, x, " "); split(b, y, " "); n = y[2] - x[2];
  if (n > 0) printf "commit during the 1-subscriber run: commits=%d mean_ms=%.3f\n", n, (y[1] - x[1]) * 1000 / n }' |
  tee -a "$work/out.txt"
"$LOAD" redis-latency "$rport" 1 "$DURATION" 20 | tee -a "$work/out.txt"
stop

start
for window in 16 64; do
  "$LOAD" fanout "$port" "$conns" "$DURATION" "$window" | tee -a "$work/out.txt"
  "$LOAD" redis-fanout "$rport" "$conns" "$DURATION" "$window" | tee -a "$work/out.txt"
done
stop

start
before=$(rss_kib "$spid")
"$LOAD" idle "$port" "$conns" 3 >"$work/idle.txt" &
lp=$!
for _ in $(seq 200); do grep -q ready "$work/idle.txt" && break; sleep 0.1; done
sleep 1
after=$(rss_kib "$spid")
wait "$lp"
awk -v b="$before" -v a="$after" -v n="$conns" \
  'BEGIN { printf "memory conns=%d rss_before_kib=%d rss_after_kib=%d per_conn_kib=%.2f\n", n, b, a, (a - b) / n }' |
  tee -a "$work/out.txt"
stop

# ---- a group of 3: the streams on a follower, the writes to the leader ----
group_start build/strata --max-connections $((conns + 1000)) # bench/groupstart.sh
for window in 16 64; do
  "$LOAD" fanout "${http[$follower]}:${http[$leader]}" "$conns" "$DURATION" "$window" |
    sed 's/^fanout /follower-fanout /' | tee -a "$work/out.txt"
done
for id in 1 2 3; do kill ${gpid[$id]}; done
for id in 1 2 3; do wait ${gpid[$id]} 2>/dev/null || true; done

# rows for bench/table.py: "MODE key=value…" lines of wsload and the memory line above
kv() { # MODE KEY FILTER…: the value of KEY on the first MODE line holding every FILTER token
  local m=$1 k=$2; shift 2
  awk -v m="$m" -v k="$k" -v f="$*" '$1 == m { n = split(f, w, " "); for (j = 1; j <= n; j++) if (!index(" " $0 " ", " " w[j] " ")) next
    for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) { print a[2]; exit } } }' "$work/out.txt"; }
P="Redis 7 pub/sub (not durable: --appendonly no)"
for rate in 20 100; do
  row "post → stream notification, 1,000 subscribers, $rate posts/s: p99" "$(kv latency p99_ms conns=1000 rate=$rate)" "ms" \
    "p50 $(kv latency p50_ms conns=1000 rate=$rate) ms; a frame leaves once the post is fsync'd" \
    "$P" "$(kv redis-latency p99_ms conns=1000 rate=$rate)" "p50 $(kv redis-latency p50_ms conns=1000 rate=$rate) ms"
done
row "post → stream notification, 1 subscriber: p99" "$(kv latency p99_ms conns=1 rate=20)" "ms" \
  "p50 $(kv latency p50_ms conns=1 rate=20) ms; one durable commit plus one frame" \
  "$P" "$(kv redis-latency p99_ms conns=1 rate=20)" "p50 $(kv redis-latency p50_ms conns=1 rate=20) ms"
for window in 16 64; do
  row "fan-out to $conns streams, $window changes in flight" "$(kv fanout frames_per_sec conns=$conns window=$window)" "frames/s" \
    "every change durable before its frames" "$P" "$(kv redis-fanout frames_per_sec conns=$conns window=$window)" ""
done
for window in 16 64; do
  row "fan-out to $conns streams on a follower of a group of 3, $window changes in flight" \
    "$(kv follower-fanout frames_per_sec conns=$conns window=$window)" "frames/s" \
    "writes to the leader; the follower sends what it applied and made durable" "$P" \
    "$(kv redis-fanout frames_per_sec conns=$conns window=$window)" "one Redis, as above"
done
row "memory per idle stream at $conns streams" "$(kv memory per_conn_kib conns=$conns)" "KiB" "RSS after − before, ÷ streams" "" "" ""
out_write streams "DURATION=$DURATION CONNS=$conns bench/streams.sh"
