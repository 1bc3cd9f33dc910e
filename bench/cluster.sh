#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Replicated groups (SPEC §8): durable counter increments and 1 KiB message posts (wrk -t1 -c64)
# against one strata and against the leader of a group of 3 on loopback, both up for the whole
# run and measured in turns (one strata, the group, one strata … for ROUNDS rounds); then
# failover: kill -9 of the leader, time until a write is acknowledged by the new one (RUNS runs).
# Only 2xx answers count, from strata's own metrics (bench/lib.sh): a 307 or 503 from the member
# under load fails the run. Server CPU per write: the one strata vs the sum of the group's 3
# members. Records the run in bench/out/cluster/DATE.json, wrk's output in bench/out/raw/cluster/DATE/.
#   DURATION=10 ROUNDS=3 RUNS=10 bench/cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
source bench/groupstart.sh
record_init cluster
RUNS=${RUNS:-10}
BIN=${BIN:-build/strata} # another binary to compare, in the same session

# a metric's value on the member at port $1 (0 if it has none)
metric() { curl -fsS "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {v = $2} END {print v + 0}'; }
# 2xx/s and p99 (ms) of wrk -t1 -c64 against one member: sets M_RPS M_P99; on a group's leader
# also prints how many answers each Raft entry carried, the entries of its own in flight when one
# was proposed, and the mean time from proposing an entry to applying it (committed)
measure() { # port script round side "server pids": also sets M_CPU (µs per 2xx)
  local e0 c0 i0 e
  e0=$(metric "$1" strata_commit_batch_writes_count); c0=$(metric "$1" strata_commit_seconds_sum)
  i0=$(metric "$1" strata_repl_entries_in_flight_sum)
  cpu_run "$5" wrk_strata "$1" "" -- -t1 -c64 -d"${DURATION}s" --latency -s "$2" "http://127.0.0.1:$1"
  raw_keep "$3" "$4-$(basename "$2" .lua)" "$W_OUT"
  M_RPS=$W_RPS; M_P99=$W_P99; M_CPU=$(per_op "$CPU_TICKS" "$W_OK")
  e=$(($(metric "$1" strata_commit_batch_writes_count) - e0))
  if [ "$(metric "$1" strata_repl_leader)" = 1 ] && [ "$e" -gt 0 ]; then
    echo "  $(basename "$2"): $W_OK answers in $e Raft entries ($(ratio "$W_OK" "$e") per entry)," \
      "$(awk -v a="$i0" -v b="$(metric "$1" strata_repl_entries_in_flight_sum)" -v e="$e" 'BEGIN {printf "%.2f", (b - a) / e}') in flight at propose," \
      "propose->commit $(awk -v a="$c0" -v b="$(metric "$1" strata_commit_seconds_sum)" -v e="$e" 'BEGIN {printf "%.2f", (b - a) / e * 1000}') ms"
  fi
}

# ---- one strata and a group of 3, both up the whole time ----
p=$(free_port)
$BIN --listen 127.0.0.1:$p --data-dir "$work/single" --log-level warn &
single=$!
pids+=($single)
wait_port $p
group_start "$BIN" # one cold store for the group (SPEC §8), bench/groupstart.sh
L=$leader
G3="${gpid[1]} ${gpid[2]} ${gpid[3]}"
s_incr=; s_incr_p99=; s_incr_cpu=; s_post=; s_post_p99=; s_post_cpu=
g_incr=; g_incr_p99=; g_incr_cpu=; g_post=; g_post_p99=; g_post_cpu=
incr_single() { measure $p bench/incr.lua "$1" single "$single"; s_incr+=" $M_RPS"; s_incr_p99+=" $M_P99"; s_incr_cpu+=" $M_CPU"; }
incr_group() { measure ${http[$L]} bench/incr.lua "$1" group "$G3"; g_incr+=" $M_RPS"; g_incr_p99+=" $M_P99"; g_incr_cpu+=" $M_CPU"; }
post_single() { measure $p bench/post1.lua "$1" single "$single"; s_post+=" $M_RPS"; s_post_p99+=" $M_P99"; s_post_cpu+=" $M_CPU"; }
post_group() { measure ${http[$L]} bench/post1.lua "$1" group "$G3"; g_post+=" $M_RPS"; g_post_p99+=" $M_P99"; g_post_cpu+=" $M_CPU"; }
for round in $(seq "$ROUNDS"); do
  turns "$round" incr_single incr_group # the first side changes every round (bench/lib.sh)
  stall=$(curl -s "http://127.0.0.1:${http[$L]}/metrics" | awk '/^strata_loop_stall_max_seconds / {print $2}')
  turns "$round" post_single post_group
  echo "round $round: incr one $(awk '{print $NF}' <<<"$s_incr")/s, group $(awk '{print $NF}' <<<"$g_incr")/s; posts one $(awk '{print $NF}' <<<"$s_post")/s, group $(awk '{print $NF}' <<<"$g_post")/s; leader's longest loop stall so far $stall s"
done
kill $single
wait $single 2>/dev/null || true

# ---- failover ----
times=()
for run in $(seq "$RUNS"); do
  group_leader
  L=$leader
  kill -9 ${gpid[$L]}
  wait ${gpid[$L]} 2>/dev/null || true
  gpid[$L]=""
  t0=$(date +%s%N)
  while :; do
    ok=""
    for id in 1 2 3; do
      [ -n "${gpid[$id]}" ] || continue
      code=$(curl -s -L -o /dev/null -w '%{http_code}' --max-time 1 -XPOST --json '{}' \
        "http://127.0.0.1:${http[$id]}/v1/counters/failover/incr" || true)
      if [ "$code" = 200 ]; then ok=1; break; fi
    done
    [ -n "$ok" ] && break
    sleep 0.01
  done
  times+=($(( ($(date +%s%N) - t0) / 1000000 )))
  group_member_start $L
  wait_port ${http[$L]}
  sleep 1
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}' <<<"$sorted")
max=$(tail -1 <<<"$sorted")

echo "failover (kill -9 of the leader -> first acknowledged write), $RUNS runs: median ${median} ms, max ${max} ms (all: ${times[*]})"
G="group of 3 on the same 2 cores: acknowledged once a majority has it on disk; CPU: all 3 members"
O='one strata (fsync per group commit before the answer)'
row 'durable `POST /v1/counters/x/incr`, group of 3 (leader)' "$g_incr" "req/s" "p99 $(med $g_incr_p99) ms; $G" \
  "$O" "$s_incr" "p99 $(med $s_incr_p99) ms; measured in turns with the group" "" "$g_incr_cpu" "$s_incr_cpu" "2xx answer"
row 'durable 1 KiB message post, group of 3 (leader)' "$g_post" "req/s" "p99 $(med $g_post_p99) ms; $G" \
  "$O" "$s_post" "p99 $(med $s_post_p99) ms; measured in turns with the group" "" "$g_post_cpu" "$s_post_cpu" "2xx answer"
row 'failover: `kill -9` of the leader → first acknowledged write' "${times[*]}" "ms" "$RUNS runs" "" "" ""
out_write cluster "DURATION=$DURATION ROUNDS=$ROUNDS RUNS=$RUNS bench/cluster.sh"
