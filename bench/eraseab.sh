#!/bin/bash
# SPDX-License-Identifier: MIT
# An erasure's loop turns, two binaries alternated: `bench/loopstall.sh erase` per side and round
# (the first side changing every round, bench/lib.sh turns), each with the loop's epoll_wait
# enters and exits traced beside a CPU clock, split into turns by bench/turns.py. Per run: the
# loopstall row (bystander p50/p99/max, the loop's longest stall before and after), the erasure's
# time, the CPU of the loop's 5 dearest turns, the wall (and CPU) of its 5 longest, and the loop
# thread's time waiting for a core. The bench lock (/tmp/bench.lock) is taken for
# each run alone and given back between runs (other engineers' builds go on meanwhile).
# Records bench/out/eraseab/DATE.json (the new binary's erasure time, the loop's longest stall
# and a bystander's p99 against the old binary's, issue 48's bars in the notes), each run's line in
# bench/out/raw/eraseab/. The load gate (bench/lib.sh): the load before is judged once the lock is
# first taken; the CPU outside the bench over the runs' windows under the lock only (gate_hold,
# gate_release: between them other engineers' builds run on purpose, beside no measured run).
# usage: OLD=path/to/strata NEW=path/to/strata ERASE_DATA=DIR [ROUNDS=3] [STACKS=DIR] bench/eraseab.sh
#   ERASE_DATA: a data set kept by `ERASE_DATA=DIR bench/loopstall.sh erase` (copied by each run).
#   STACKS=DIR: each run's 5 dearest turns with their stacks kept in DIR/SIDE-ROUND.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OLD:?OLD=path to the old binary}" "${NEW:?NEW=path to the new binary}"
: "${ERASE_DATA:?ERASE_DATA=a kept data set}"
[ -d "$ERASE_DATA" ] || { echo "ERASE_DATA=$ERASE_DATA: no such data set" >&2; exit 1; }
. bench/lib.sh # $work (removed on exit), turns, the record
ab_bins
STACKS=${STACKS:-}
OPTS="-g -e raw_syscalls:sys_enter --filter id==232||id==281 -e raw_syscalls:sys_exit --filter id==232||id==281 -e cpu-clock/period=250000/ -c 1"
tmp=$work
locked=0
unlock() { if [ "$locked" = 1 ]; then rmdir /tmp/bench.lock; locked=0; fi; }
bench_on_exit unlock
[ -z "$STACKS" ] || mkdir -p "$STACKS"
run() { # ROUND SIDE
  local r=$1 side=$2 bin f out pid top long wait_ms load secs p99 stall total
  bin=$OLD; [ "$side" = new ] && bin=$NEW
  f=$tmp/$side-$r.data
  until mkdir /tmp/bench.lock 2>/dev/null; do sleep 10; done
  locked=1
  [ -n "${raw_dir:-}" ] || record_init eraseab # the load gate's first half, under the lock
  gate_hold
  load=$(load_avg)
  out=$(STRATA=$bin ERASE_PERF=$f ERASE_PERF_OPTS="$OPTS" ERASE_SCHED=$tmp/sched.txt ERASE_DATA=$ERASE_DATA ALLOW_DIRTY=${ALLOW_DIRTY:-} \
    bench/loopstall.sh erase 2>&1 | grep -E '^\| erase|erase: [0-9]+ messages|done in|FAILED' | tr '\n' ' ' || true)
  gate_release
  unlock
  # the figures the record keeps; a run without them (its erasure failed or left something of the
  # user: loopstall.sh dies then) fails the bench
  total=$(sed -nE 's/.*erase: ([0-9]+) messages of the user.*/\1/p' <<<"$out")
  secs=$(sed -nE 's/.*done in ([0-9.]+) s;.*/\1/p' <<<"$out")
  read -r p99 stall < <(awk -F'|' '{ for (i = 1; i <= NF; i++) if ($i ~ /^ erase 1 user/) { gsub(/ /, "", $(i + 3)); gsub(/ /, "", $(i + 6)); print $(i + 3), $(i + 6); exit } }' <<<"$out" || true)
  [ -n "$total" ] && [ -n "$secs" ] && [ -n "${p99:-}" ] && [ -n "${stall:-}" ] && ! grep -q FAILED <<<"$out" ||
    die "$side round $r: no erasure figures in bench/loopstall.sh's output: $out"
  pid=$(perf script -i "$f" -F pid,tid 2>/dev/null | awk -F/ '{print $1 + 0; exit}' || true)
  perf script -i "$f" -F tid,time,event,ip,sym,dso 2>/dev/null >"$tmp/script.txt" || true
  python3 bench/turns.py "$pid" 0 4000 <"$tmp/script.txt" >"$tmp/turns.txt"
  python3 bench/turns.py "$pid" 0 4000 wall <"$tmp/script.txt" >"$tmp/walls.txt"
  top=$(awk '/^== turn/ {print $11 "/" $5}' "$tmp/turns.txt" | sort -t/ -k1 -gr | awk 'NR <= 5' | tr '\n' ' ')
  long=$(awk '/^== turn/ {print $5 "/" $11}' "$tmp/walls.txt" | awk 'NR <= 5' | tr '\n' ' ')
  if [ -n "$STACKS" ]; then
    awk '/^== turn/ {n++} n <= 5' "$tmp/turns.txt" >"$STACKS/$side-$r.txt"
    awk '/^== turn/ {n++} n <= 5' "$tmp/walls.txt" >"$STACKS/$side-$r-wall.txt"
  fi
  rm -f "$f" "$tmp/script.txt"
  # the loop thread's time waiting for a core over the run (ERASE_SCHED: per thread name)
  wait_ms=$(awk '$1 == "loop" {print $6}' "$tmp/sched.txt" 2>/dev/null || true)
  echo "$side r$r load $load | $out| 5 dearest turns, CPU/wall ms: $top| 5 longest turns, wall/CPU ms: $long| loop thread waiting for a core: ${wait_ms:-?} ms"
  echo "$side total=$total secs=$secs stall_ms=$stall p99_ms=$p99 round=$r" >>"$work/out.txt"
  raw_keep "$r" "$side" "$side r$r load $load | $out| 5 dearest turns, CPU/wall ms: $top| 5 longest turns, wall/CPU ms: $long| loop thread waiting for a core: ${wait_ms:-?} ms"
}
side_old() { run "$1" old; }
side_new() { run "$1" new; }
for round in $(seq "$ROUNDS"); do turns "$round" side_old side_new; done

# the rows: the new binary's figures, the old one's beside them (ratio new/old: below 1.0 the new
# one is ahead)
total=$(kv new total | awk '{print $1}')
what="erasure of one user's $(python3 -c "print(f'{$total:,}')") messages (hot and cold)"
peer="main before the change, alternated"
row "$what: done in" "$(kv new secs)" s "bar: < 60 s" "$peer" "$(kv old secs)" "" s "" "" "" "" "" ratio
row "$what: the loop's longest stall" "$(kv new stall_ms)" ms "bar: < 5 ms (strata_loop_stall_max_seconds after the erasure)" \
  "$peer" "$(kv old stall_ms)" "" ms "" "" "" "" "" ratio
row "$what: a bystander's p99" "$(kv new p99_ms)" ms "bar: < 10 ms (hot GET every 2 ms, one keep-alive connection)" \
  "$peer" "$(kv old p99_ms)" "" ms "" "" "" "" "" ratio
for k in secs stall_ms p99_ms; do
  echo "$k: new $(med "$(kv new $k)") ($(rng "$(kv new $k)")), old $(med "$(kv old $k)") ($(rng "$(kv old $k)"))"
done
# a run lasts until its erasure is done, not DURATION seconds (bench/table.py: "each until done")
echo '{"duration_s": null}' >"$work/extra.json"
out_write eraseab "OLD=$OLD NEW=$NEW ERASE_DATA=$ERASE_DATA ROUNDS=$ROUNDS bench/eraseab.sh" "$work/extra.json"
