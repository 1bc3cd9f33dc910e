#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Failover alone (bench/cluster.sh's last part, for A/B runs of two binaries): a group of 3;
# RUNS times, kill -9 the leader and time until a write is acknowledged through any member,
# then start the killed member again.   BIN=build/strata RUNS=6 bench/failover.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-6}
. bench/lib.sh
. bench/groupstart.sh
group_start "${BIN:-build/strata}"
times=()
for _ in $(seq "$RUNS"); do
  group_leader
  kill -9 ${gpid[$leader]}
  wait ${gpid[$leader]} 2>/dev/null || true
  t0=$(date +%s%N)
  until for id in 1 2 3; do
      [ "$id" != "$leader" ] || continue
      code=$(curl -s -L -o /dev/null -w '%{http_code}' --max-time 1 -XPOST --json '{}' \
        "http://127.0.0.1:${http[$id]}/v1/counters/failover/incr" || true)
      [ "$code" = 200 ] && break
    done && [ "${code:-}" = 200 ]; do sleep 0.01; done
  times+=($(( ($(date +%s%N) - t0) / 1000000 )))
  group_member_start $leader
  wait_port ${http[$leader]}
  sleep 1
done
echo "failover (kill -9 of the leader -> first acknowledged write), $RUNS runs (ms): ${times[*]}"
