#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stream benchmarks (issue 5), all driven by build/strata-wsload (bench/wsload.c) on loopback:
#   latency  insert -> notification, 1,000 subscribers on one conversation, steady post rates
#            (and 1 subscriber as the floor: one durable commit plus one frame);
#   fanout   10,000 subscribers of one counter, frames delivered per second, with 16 and 64
#            changes in flight (more in flight lets strata send several frames per TCP push);
#   memory   RSS per idle stream (one subscription each) at 10,000 streams.
# The peer is Redis 7 pub/sub (SUBSCRIBE per connection, PUBLISH from one writer) driven by the
# same program with the same counts. Redis publishes without writing anything to disk; strata
# sends only what is fsync'd, so its figures include a durable commit per change.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
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
  "$LOAD" latency "$port" 1000 "$DURATION" "$rate"
  "$LOAD" redis-latency "$rport" 1000 "$DURATION" "$rate"
done
# the 1-subscriber floor is one durable commit plus one frame: print the commit time of the same run
commits() { curl -s "127.0.0.1:$port/metrics" | awk '/^strata_commit_seconds_(sum|count) / {printf "%s ", $2}'; }
c0=$(commits)
"$LOAD" latency "$port" 1 "$DURATION" 20
c1=$(commits)
awk -v a="$c0" -v b="$c1" 'BEGIN { split(a, x, " "); split(b, y, " "); n = y[2] - x[2];
  if (n > 0) printf "commit during the 1-subscriber run: commits=%d mean_ms=%.3f\n", n, (y[1] - x[1]) * 1000 / n }'
"$LOAD" redis-latency "$rport" 1 "$DURATION" 20
stop

start
for window in 16 64; do
  "$LOAD" fanout "$port" "$conns" "$DURATION" "$window"
  "$LOAD" redis-fanout "$rport" "$conns" "$DURATION" "$window"
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
  'BEGIN { printf "memory conns=%d rss_before_kib=%d rss_after_kib=%d per_conn_kib=%.2f\n", n, b, a, (a - b) / n }'
stop
