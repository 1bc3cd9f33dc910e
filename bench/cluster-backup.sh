#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Backups of a replicated group (SPEC §8 + §9): durable counter increments (wrk -t1 -c64) against
# the leader of a group of 3 with and without --backup-url (rounds alternated, same run), the
# backup bytes per acknowledged increment, then a kill -9 of the leader: how long until the new
# leader acknowledges a write, until its timeline's snapshot is up, and until it issues sequence
# numbers again (those wait for that snapshot).
#   DURATION=5 ROUNDS=2 bench/cluster-backup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
ROUNDS=${ROUNDS:-2}
BIN=build/strata

# wrk -t1 -c64 against the leader: only its 2xx answers count, and a 307 (the member is no longer
# the leader), any other status or a wrk socket error fails the run (bench/lib.sh's wrk_strata)
incr_run() { wrk_strata "$1" "" -- -t1 -c64 -d"${DURATION}s" -s bench/incr.lua "http://127.0.0.1:$1"; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }

# a group of 3 in $1 (a name), extra flags after it; sets http[] pid[] of that group
declare -A http raft pid
group() {
  local name=$1 spec="" id
  shift
  for id in 1 2 3; do http[$id]=$(free_port); raft[$id]=$(free_port); spec+="${spec:+,}$id=127.0.0.1:${raft[$id]}"; done
  for id in 1 2 3; do
    $BIN --listen 127.0.0.1:${http[$id]} --data-dir "$work/$name-$id" --cluster "$spec" --cluster-self $id \
      --cold-url "file://$work/$name-cold" --log-level warn "$@" &
    pid[$id]=$!
    pids+=(${pid[$id]})
  done
  for id in 1 2 3; do wait_port ${http[$id]}; done
}
leader() {
  for _ in $(seq 400); do
    for id in 1 2 3; do
      [ -n "${pid[$id]:-}" ] || continue
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 -XPOST --json '{}' \
        "http://127.0.0.1:${http[$id]}/v1/counters/probe/incr" || true)
      if [ "$code" = 200 ]; then echo $id; return; fi
    done
    sleep 0.01
  done
  echo "no leader" >&2
  return 1
}
stop_group() { for id in 1 2 3; do [ -n "${pid[$id]:-}" ] && kill ${pid[$id]} && wait ${pid[$id]} 2>/dev/null; pid[$id]=""; done; true; }

sum_off=0; sum_on=0
for round in $(seq "$ROUNDS"); do
  group off$round
  L=$(leader); incr_run ${http[$L]}; r=$W_RPS; sum_off=$(awk -v a="$sum_off" -v b="$r" 'BEGIN{print a+b}')
  echo "round $round, backup off: $r 2xx/s"
  stop_group
  group on$round --backup-url "file://$work/bk$round" --backup-interval 1000
  L=$(leader)
  until [ "$(metric ${http[$L]} strata_backup_snapshots_total)" = 1 ]; do sleep 0.1; done
  b0=$(metric ${http[$L]} strata_backup_bytes_total)
  incr_run ${http[$L]}; r=$W_RPS; n=$W_OK
  sum_on=$(awk -v a="$sum_on" -v b="$r" 'BEGIN{print a+b}')
  sleep 2 # the last interval ships
  b1=$(metric ${http[$L]} strata_backup_bytes_total)
  echo "round $round, backup on:  $r 2xx/s; $(awk -v a="$b0" -v b="$b1" -v n="$n" 'BEGIN{printf "%.2f", (b-a)/n}') backup bytes per acknowledged incr ($n incrs)"
  [ "$round" = "$ROUNDS" ] || stop_group
done
echo "durable incr on the leader, backup on / off: $(ratio "$sum_on" "$sum_off")"

# failover with the backup on (the last group): the store holds the increments above
curl -s -o /dev/null -XPOST --json '{}' "http://127.0.0.1:${http[$L]}/v1/sequences/s/next"
kill -9 ${pid[$L]}; wait ${pid[$L]} 2>/dev/null || true; pid[$L]=""
t0=$(ms); L2=$(leader); t_write=$(( $(ms) - t0 ))
until [ "$(curl -s -o /dev/null -w '%{http_code}' -XPOST --json '{}' "http://127.0.0.1:${http[$L2]}/v1/sequences/s/next")" = 200 ]; do sleep 0.002; done
t_seq=$(( $(ms) - t0 ))
snap=$(ls "$work/bk$ROUNDS/snap" | sort | tail -1)
size=$(du -sb "$work/bk$ROUNDS/snap/$snap" | cut -f1)
echo "kill -9 of the leader -> first write ${t_write} ms, sequence numbers again (the new timeline's snapshot is up) ${t_seq} ms; snapshot $((size / 1024)) KiB"
stop_group
