#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The A/B behind issue 46 ("nothing a user sees changes": explicit owners, registration, the
# split of rooms): durable chat posts, room posts and the reads of both, old and new binaries
# alternated in one run.
#   BINS="LABEL=PATH LABEL=PATH …" DURATION=8 ROUNDS=3 bench/ownerab.sh
# The first binary is the baseline, the others are each compared with it. Each binary gets its own
# strata and data directory, kept up for the whole run, and a room r10 of 10 members (bench among
# them). In each round, for each workload in turn, every binary is measured in turns, the first
# changing every round (bench/lib.sh's turns), wrk -t1 -cCONNS (64) -dDURATION --latency:
#   post      POST /v1/users/u{1..100}/messages, 1 KiB, 10 conversations each (bench/chat.lua post)
#   roompost  POST /v1/rooms/r10/messages, 1 KiB (bench/roompost.lua)
#   read      GET the newest 50 of a random conversation of those (bench/chat.lua messages)
#   roomread  GET /v1/rooms/r10/messages?limit=50&order=desc (the newest 50)
# Reads come after the posts of the same round, so each binary reads what it wrote alike. The
# servers never flush (--flush-rows 100000000, --flush-interval 604800, --map-size 16GiB): every
# message stays hot, so no flush or compaction of the room (10,000 hot rows trigger one by
# default) runs beside a later measure and counts in its CPU (an earlier run of this script did,
# and a read's CPU per answer ranged 40-136 µs by what the tier was doing meanwhile).
# p50/p99 (wrk), 2xx answers/s (strata's own counter; any other status fails the run) and server
# CPU per answer (utime + stime of the strata process over the run). Records
# bench/out/ownerab/DATE.json (not a README table row: bench/RESULTS.md quotes it), wrk's output in
# bench/out/raw/ownerab/. An old binary: a detached worktree at that commit, tools/build.sh release.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init ownerab
BINS=${BINS:-"HEAD=build/strata"} CONNS=${CONNS:-64}
read -ra bins <<<"$BINS"
echo "# ownerab, $(date -u +%F), $(nproc) cores, ${DURATION}s per run, $ROUNDS rounds, commit $(git rev-parse --short HEAD), binaries: $BINS"
declare -A port spid
labels=()
members=$(python3 -c "import json; print(json.dumps({'room_id': 'r10', 'members': ['bench'] + ['m%d' % i for i in range(9)]}))")
for b in "${bins[@]}"; do
  l=${b%%=*} bin=${b#*=}
  [ -x "$bin" ] || die "$bin: no such binary"
  [[ $l =~ ^[A-Za-z0-9_]+$ ]] || die "label $l: letters, digits and _ only"
  labels+=("$l")
  port[$l]=$(free_port)
  "$bin" --listen 127.0.0.1:"${port[$l]}" --data-dir "$work/data-$l" --flush-rows 100000000 \
    --flush-interval 604800 --map-size 16GiB --log-level warn 2>"$work/strata-$l.log" &
  spid[$l]=$!
  pids+=("${spid[$l]}")
  wait_port "${port[$l]}"
  curl -fsS "http://127.0.0.1:${port[$l]}/v1/rooms" --json "$members" >/dev/null
done

roomread_lua=$work/roomread.lua
cat >"$roomread_lua" <<'LUA'
wrk.path = "/v1/rooms/r10/messages?limit=50&order=desc"
LUA
# one run: ROUND LABEL WORKLOAD; appends "LABEL work=W round=R rps= p50= p99= cpu=" to $work/out.txt
measure() {
  local round=$1 l=$2 w=$3 script args=()
  case $w in
    post) script=bench/chat.lua args=(post) ;;
    roompost) script=bench/roompost.lua args=(r10) ;;
    read) script=bench/chat.lua args=(messages) ;;
    roomread) script=$roomread_lua ;;
  esac
  cpu_run "${spid[$l]}" wrk_strata "${port[$l]}" "" -- -t1 -c"$CONNS" -d"${DURATION}s" --latency \
    -s "$script" "http://127.0.0.1:${port[$l]}" -- "${args[@]}"
  local line="$l work=$w round=$round rps=$W_RPS p50=$W_P50 p99=$W_P99 cpu=$(per_op "$CPU_TICKS" "$W_OK")"
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$round" "$l-$w" "$line"$'\n'"$W_OUT"
}
works=(post roompost read roomread)
for round in $(seq "$ROUNDS"); do
  for w in "${works[@]}"; do
    turns_of "$round" "$w" "${labels[@]}"
  done
done

kv() { awk -v l="$1" -v w="work=$2" -v k="$3" '$1 == l && $2 == w { for (i = 3; i <= NF; i++) { split($i, a, "="); if (a[1] == k) printf "%s ", a[2] } }' "$work/out.txt"; }
echo
echo "| binary | workload | answers/s, median (range) | p99 ms, median (range) | server CPU µs per answer, median (range) |"
echo "|---|---|---|---|---|"
for w in "${works[@]}"; do
  for l in "${labels[@]}"; do
    echo "| $l | $w | $(med $(kv "$l" "$w" rps)) ($(rng $(kv "$l" "$w" rps))) | $(med $(kv "$l" "$w" p99)) ($(rng $(kv "$l" "$w" p99))) | $(med $(kv "$l" "$w" cpu)) ($(rng $(kv "$l" "$w" cpu))) |"
  done
done
base=${labels[0]}
declare -A what=([post]="durable chat post, 1 KiB, 1,000 conversations" [roompost]="durable room post, 1 KiB, one room of 10"
  [read]="newest 50 of a conversation" [roomread]="newest 50 of a room")
for l in "${labels[@]:1}"; do
  for w in "${works[@]}"; do
    row "${what[$w]}: answers/s, binary $l" "$(kv "$l" "$w" rps)" "answers/s" \
      "median p99 $(med $(kv "$l" "$w" p99)) ms; wrk -c$CONNS" \
      "binary $base, alternated" "$(kv "$base" "$w" rps)" "median p99 $(med $(kv "$base" "$w" p99)) ms" "" \
      "$(kv "$l" "$w" cpu)" "$(kv "$base" "$w" cpu)" "answer"
  done
done
out_write ownerab "BINS=\"$BINS\" DURATION=$DURATION ROUNDS=$ROUNDS bench/ownerab.sh"
