#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Seat benchmarks (issue 4), side by side on loopback:
#  1. sellout of a 100,000-seat event by wrk -c64 for SELLOUT_SECONDS (default DURATION; book
#     1-4 seats, confirm each win): sellout time, bookings won per second of it (201 answers /
#     sellout time), conflicts (409) apart, p99, oversell check against the seat map;
#  2. durable strata bookings of 2 random seats vs the same logic as a Redis 7 Lua script with
#     appendfsync always and with everysec, each side for the same DURATION: answers per second,
#     wins (201 / a booking id) and conflicts (409 / 0) apart;
#  3. restart time with a 1,000,000-seat event and its bookings.
# Only 2xx and the expected 409 count; any other status fails the run (bench/lib.sh). Records
# the run in bench/out/seats.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

sp=$(free_port)
build/strata --listen 127.0.0.1:"$sp" --data-dir "$work/strata" 2>"$work/strata.log" &
spid=$!; pids+=($spid)
wait_port "$sp"
B="http://127.0.0.1:$sp"
curl -fsS -XPOST "$B/v1/events" -d '{"event_id":"sellout","sections":[
  {"name":"S1","rows":100,"cols":250,"price":100},{"name":"S2","rows":100,"cols":250,"price":100},
  {"name":"S3","rows":100,"cols":250,"price":100},{"name":"S4","rows":100,"cols":250,"price":100}]}' >/dev/null

SELLOUT_SECONDS=${SELLOUT_SECONDS:-$DURATION}
echo "# seats, $(date -u +%F), $(nproc) cores, ${DURATION}s per side, sellout ${SELLOUT_SECONDS}s"
wrk_strata "$sp" "409" -- -t1 -c64 -d"${SELLOUT_SECONDS}s" --latency -s bench/sellout.lua "$B"
res=$(echo "$W_OUT" | grep RESULT)
s_p99=$W_P99
ev=$(curl -fsS "$B/v1/events/sellout")
dur=$(echo "$ev" | python3 -c 'import json,sys; s=json.load(sys.stdin).get("sellout") or {}; print(s.get("duration_seconds") or "")')
stats=$(echo "$ev" | python3 -c 'import json,sys; e=json.load(sys.stdin)["event_stats"]; print(e["available"], e["reserved"], e["sold"], e["total"])')
field() { sed "s/.* $1=\([0-9]*\).*/\1/" <<<"$res"; }
booked=$(field booked); seats_booked=$(field seats_booked); confirmed=$(field confirmed); conflicts=$(field conflicts)
[ "$(field errors)" = 0 ] || die "sellout: $(field errors) answers other than 201/200/409: $res"
# the Lua tally and strata's own counters must agree on the answers
[ $((booked + confirmed)) -le "$W_OK" ] && [ "$W_OK" -le $((booked + confirmed + 64)) ] ||
  die "sellout: strata counted $W_OK 2xx, wrk's script $booked 201 + $confirmed 200"
recount=$(for s in S1 S2 S3 S4; do curl -fsS "$B/v1/events/sellout/sections/$s/seats"; echo; done | python3 -c '
import base64, json, sys
taken = 0
for line in sys.stdin:
    m = json.loads(line); b = base64.b64decode(m["seats"])
    taken += sum(1 for i in range(m["rows"] * m["cols"]) if (b[i >> 2] >> ((i & 3) * 2)) & 3)
print(taken)')
oversold=$(( seats_booked > 100000 ? seats_booked - 100000 : 0 ))
[ "$recount" -eq "$seats_booked" ] || die "sellout: $recount seats taken in the bitmap, $seats_booked in 201 answers"
[ "$oversold" -eq 0 ] || die "sellout: $oversold seats oversold"
echo "sellout: $res"
echo "sellout: event stats (available reserved sold total) = $stats; seats taken in the bitmap = $recount; seats in 201 answers = $seats_booked"
if [ -n "$dur" ]; then
  bps=$(awk -v b="$booked" -v d="$dur" 'BEGIN{ printf "%.0f", b/d }')
  echo "sellout: oversold seats = 0; sellout time = ${dur} s; bookings won = $booked (201), $bps/s of sellout time; conflicts (409) = $conflicts; confirms (200) = $confirmed"
  row 'sell out 100,000 seats (book 1–4 + confirm), 64 connections' "$dur" "s" \
    "$booked bookings won (201) in that time = $bps/s; $conflicts conflicts (409) apart; 0 oversold; p99 $s_p99 ms" "" "" ""
else
  echo "sellout: not sold out in ${SELLOUT_SECONDS}s ($stats); bookings won = $booked"
  row 'sell out 100,000 seats (book 1–4 + confirm), 64 connections' "" "" \
    "not sold out in ${SELLOUT_SECONDS}s: $booked bookings won (201), $conflicts conflicts (409); 0 oversold" "" "" ""
fi

# 2. bookings vs Redis Lua, appendfsync always and everysec, each for DURATION
curl -fsS -XPOST "$B/v1/events" -d '{"event_id":"bench2","sections":[{"name":"F","rows":1000,"cols":1000,"price":1}]}' >/dev/null
wrk_strata "$sp" "409" -- -t1 -c64 -d"${DURATION}s" --latency -s bench/book2.lua "$B"
s_won=$W_OK; s_lost=$W_EXPECTED; s_ans=$(awk -v a="$W_RPS" -v b="$W_EXP_RPS" 'BEGIN {print a + b}'); s_p99=$W_P99
s_won_rps=$W_RPS
redis_book() { # fsync-policy -> sets r_ans r_won r_lost
  local rp; rp=$(free_port); mkdir -p "$work/redis-$1"
  redis-server --port "$rp" --dir "$work/redis-$1" --save '' --appendonly yes --appendfsync "$1" --daemonize no --logfile "$work/redis-$1.log" &
  pids+=($!)
  wait_port "$rp"
  local sha; sha=$(redis-cli -p "$rp" SCRIPT LOAD "$(cat bench/book.redis.lua)")
  redis-cli -p "$rp" HSET stats available 1000000 reserved 0 >/dev/null
  redis_timed "$rp" evalsha -- -c 64 -r 999999 EVALSHA "$sha" 2 seats stats __rand_int__ 2
  r_ans=$R_RPS; r_won=$(redis-cli -p "$rp" GET booking:seq); r_won=${r_won:-0}; r_lost=$((R_OK - r_won))
  r_won_rps=$(awk -v n="$r_won" -v s="$R_SECS" 'BEGIN {printf "%.0f", n / s}')
}
D="strata: fsync per group commit before the answer"
redis_book always
ra_ans=$r_ans; ra_won=$r_won; ra_lost=$r_lost
row 'durable booking of 2 random seats (answers: wins + conflicts)' "$s_ans" "req/s" \
  "$s_won won (201), $s_lost conflicts (409); p99 $s_p99 ms; $D" \
  'Redis 7 Lua script (BITFIELD + HINCRBY + HSET), `appendfsync always` (fsync before the answer)' "$r_ans" "$r_won won, $r_lost conflicts; same ${DURATION}s"
redis_book everysec
row 'durable booking of 2 random seats (answers: wins + conflicts)' "$s_ans" "req/s" \
  "$s_won won (201), $s_lost conflicts (409); p99 $s_p99 ms; $D" \
  'Redis 7 Lua script, `appendfsync everysec` (answers before the fsync)' "$r_ans" "$r_won won, $r_lost conflicts; same ${DURATION}s"
printf '\n| book 2 random seats | strata | Redis 7 Lua always | Redis 7 Lua everysec |\n|---|---:|---:|---:|\n'
printf '| answers/s | %s | %s | %s |\n' "$s_ans" "$ra_ans" "$r_ans"
printf '| won / conflicts | %s / %s | %s / %s | %s / %s |\n' "$s_won" "$s_lost" "$ra_won" "$ra_lost" "$r_won" "$r_lost"
printf '| ratio strata / peer (answers/s) | | %sx | %sx |\n' "$(ratio "$s_ans" "$ra_ans")" "$(ratio "$s_ans" "$r_ans")"

# 3. restart time: 1,000,000 seats plus everything above
curl -fsS -XPOST "$B/v1/events" -d '{"event_id":"million","sections":[{"name":"F","rows":1000,"cols":1000,"price":1}]}' >/dev/null
rss=$(awk '/VmHWM/ {print $2 " " $3}' /proc/$spid/status)
kill "$spid"; wait "$spid" 2>/dev/null || true
t0=$(date +%s%N)
build/strata --listen 127.0.0.1:"$sp" --data-dir "$work/strata" 2>"$work/strata2.log" &
pids+=($!)
wait_port "$sp"
t1=$(date +%s%N)
echo
echo "restart: $(grep 'seats: rebuilt' "$work/strata2.log" | sed 's/.*seats: //'); process start to listening: $(( (t1 - t0) / 1000000 )) ms"
echo "peak RSS of strata during the runs: $rss"
restart_ms=$(( (t1 - t0) / 1000000 ))
row 'restart with a 1,000,000-seat event and the bookings above' "$restart_ms" "ms" \
  "process start to listening; $(grep 'seats: rebuilt' "$work/strata2.log" | sed 's/.*seats: //')" "" "" ""
out_write seats "DURATION=$DURATION SELLOUT_SECONDS=$SELLOUT_SECONDS bench/seats.sh"
