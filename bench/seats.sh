#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Seat benchmarks (issue 4), side by side on loopback, ROUNDS rounds:
#  1. sellout of a fresh 100,000-seat event each round by wrk -c64 for SELLOUT_SECONDS (default
#     DURATION; book 1-4 seats, confirm each win): sellout time, bookings won per second of it
#     (201 answers / sellout time), conflicts (409) apart, p99, oversell check against the seat map;
#  2. durable bookings of 2 random seats, interleaved: strata, then the same logic as a Redis 7 Lua
#     script with appendfsync always and with everysec, each for the same DURATION, each side on a
#     fresh 1,000,000-seat event (a new event in strata, new keys in Redis) every round, on a server
#     that holds only the earlier rounds' bookings (the sellouts run on another strata), the
#     sides in turns with a different one first each round (lib.sh's turns): bookings WON per
#     second (strata's 201s from its own counters; Redis: the script's booking:seq, as since the
#     first version of bench/book.redis.lua) — the throughput and the ratio; conflicts (409 / a 0
#     from the script) per second in their own column, never added to it; server CPU per answer;
#  3. restart time with a 1,000,000-seat event and the bookings of 2., once per round: from the
#     spawn to the time stamp of strata's own "listening on" log line.
# Only 2xx and the expected 409 count; any other status fails the run (bench/lib.sh). Records
# the run in bench/out/seats/DATE.json, the tools' output in bench/out/raw/seats/DATE/.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init seats
SELLOUT_SECONDS=${SELLOUT_SECONDS:-$DURATION}
echo "# seats, $(date -u +%F), $(nproc) cores, ${DURATION}s per side, sellout ${SELLOUT_SECONDS}s, $ROUNDS rounds"

# 1. sellouts, on a strata of their own
sp=$(free_port)
build/strata --listen 127.0.0.1:"$sp" --data-dir "$work/sellout" 2>"$work/sellout.log" &
pids+=($!)
wait_port "$sp"
B="http://127.0.0.1:$sp"
field() { sed "s/.* $1=\([0-9]*\).*/\1/" <<<"$res"; }
so_dur=; so_won=; so_bps=; so_conf=; so_p99=; so_missed=0
for round in $(seq "$ROUNDS"); do
  ev=sellout$round
  curl -fsS -XPOST "$B/v1/events" --json '{"event_id":"'$ev'","sections":[
    {"name":"S1","rows":100,"cols":250,"price":100},{"name":"S2","rows":100,"cols":250,"price":100},
    {"name":"S3","rows":100,"cols":250,"price":100},{"name":"S4","rows":100,"cols":250,"price":100}]}' >/dev/null
  wrk_strata "$sp" "409" -- -t1 -c64 -d"${SELLOUT_SECONDS}s" --latency -s bench/sellout.lua "$B" -- "$ev"
  raw_keep "$round" strata-sellout "$W_OUT"
  res=$(echo "$W_OUT" | grep RESULT)
  booked=$(field booked); seats_booked=$(field seats_booked); confirmed=$(field confirmed); conflicts=$(field conflicts)
  [ "$(field errors)" = 0 ] || die "sellout: $(field errors) answers other than 201/200/409: $res"
  # the Lua tally and strata's own counters must agree on the answers
  [ $((booked + confirmed)) -le "$W_OK" ] && [ "$W_OK" -le $((booked + confirmed + 64)) ] ||
    die "sellout: strata counted $W_OK 2xx, wrk's script $booked 201 + $confirmed 200"
  recount=$(for s in S1 S2 S3 S4; do curl -fsS "$B/v1/events/$ev/sections/$s/seats"; echo; done | python3 -c '
import base64, json, sys
taken = 0
for line in sys.stdin:
    m = json.loads(line); b = base64.b64decode(m["seats"])
    taken += sum(1 for i in range(m["rows"] * m["cols"]) if (b[i >> 2] >> ((i & 3) * 2)) & 3)
print(taken)')
  # every seat of a 201 is taken; at most the 64 bookings (4 seats each) in flight when wrk stopped
  # took seats that no one was told of
  [ "$recount" -ge "$seats_booked" ] && [ "$recount" -le $((seats_booked + 64 * 4)) ] ||
    die "sellout: $recount seats taken in the bitmap, $seats_booked in 201 answers (+ at most 256 in flight)"
  [ "$recount" -le 100000 ] || die "sellout: $((recount - 100000)) seats oversold"
  dur=$(curl -fsS "$B/v1/events/$ev" | python3 -c 'import json,sys; s=json.load(sys.stdin).get("sellout") or {}; print(s.get("duration_seconds") or "")')
  if [ -n "$dur" ]; then
    so_dur+=" $dur"; so_won+=" $booked"; so_conf+=" $conflicts"; so_p99+=" $W_P99"
    so_bps+=" $(awk -v b="$booked" -v d="$dur" 'BEGIN{ printf "%.0f", b/d }')"
    echo "round $round: sold out in $dur s; $booked bookings won (201), $conflicts conflicts (409), $confirmed confirms; 0 oversold"
  else
    so_missed=$((so_missed + 1))
    echo "round $round: not sold out in ${SELLOUT_SECONDS}s; $booked bookings won, $recount seats taken"
  fi
done
S="bookings won (201) per second of sellout"
if [ -n "$so_dur" ]; then
  row 'sell out 100,000 seats (book 1–4 + confirm), 64 connections' "$so_dur" "s" \
    "median of the rounds that sold out ($((ROUNDS - so_missed)) of $ROUNDS): $(med $so_won) bookings won (201) = $(med $so_bps)/s of sellout time; $(med $so_conf) conflicts (409) apart; 0 oversold; p99 $(med $so_p99) ms" "" "" ""
else
  row 'sell out 100,000 seats (book 1–4 + confirm), 64 connections' "" "s" \
    "not sold out in ${SELLOUT_SECONDS}s in any of $ROUNDS rounds; 0 oversold" "" "" ""
fi

# 2. bookings vs Redis Lua, appendfsync always and everysec, interleaved
bp=$(free_port)
build/strata --listen 127.0.0.1:"$bp" --data-dir "$work/strata" 2>"$work/strata.log" &
bpid=$!; pids+=($bpid)
redis_start() { # fsync-policy -> sets rport rpid
  rport=$(free_port); mkdir -p "$work/redis-$1"
  redis-server --port "$rport" --dir "$work/redis-$1" --save '' --appendonly yes --appendfsync "$1" --daemonize no --logfile "$work/redis-$1.log" &
  rpid=$!; pids+=($rpid)
  wait_port "$rport"
}
redis_start always; ra=$rport; rapid=$rpid
redis_start everysec; re=$rport; repid=$rpid
wait_port "$bp"
sha=$(redis-cli -p "$ra" SCRIPT LOAD "$(cat bench/book.redis.lua)")
[ "$(redis-cli -p "$re" SCRIPT LOAD "$(cat bench/book.redis.lua)")" = "$sha" ] || die "SCRIPT LOAD differs"
redis_book() { # PORT PID ROUND -> R_* of redis_timed, r_won r_lost r_cpu r_won_rps r_lost_rps; fresh keys each round
  local w0 w1
  redis-cli -p "$1" HSET "stats:$3" available 1000000 reserved 0 >/dev/null
  w0=$(redis-cli -p "$1" GET booking:seq); w0=${w0:-0}
  cpu_run "$2" redis_timed "$1" evalsha -- -c 64 -r 999999 EVALSHA "$sha" 2 "seats:$3" "stats:$3" __rand_int__ 2
  w1=$(redis-cli -p "$1" GET booking:seq); w1=${w1:-0}
  r_won=$((w1 - w0)); r_lost=$((R_OK - r_won)); r_cpu=$(per_op "$CPU_TICKS" "$R_OK")
  r_won_rps=$(awk -v n="$r_won" -v s="$R_SECS" 'BEGIN {printf "%.0f", n / s}')
  r_lost_rps=$(awk -v n="$r_lost" -v s="$R_SECS" 'BEGIN {printf "%.0f", n / s}')
}
# per round: s_* strata, a_* Redis always, e_* Redis everysec; *_wps bookings won per second (the
# throughput), *_cps conflicts per second (their own column), *_won / *_lost the counts
s_wps=; s_cps=; s_cpu=; s_won=; s_lost=; s_p99=; a_wps=; a_cps=; a_cpu=; a_won=; a_lost=; e_wps=; e_cps=; e_cpu=; e_won=; e_lost=
book_strata() {
  cpu_run "$bpid" wrk_strata "$bp" "409" -- -t1 -c64 -d"${DURATION}s" --latency -s bench/book2.lua "http://127.0.0.1:$bp" -- "book$1"
  raw_keep "$1" strata-book "$W_OUT"$'\n'"strata's counters: won (201) $W_OK, conflicts (409) $W_EXPECTED in $W_SECS s"
  s_wps+=" $W_RPS"; s_cps+=" $W_EXP_RPS"; s_won+=" $W_OK"; s_lost+=" $W_EXPECTED"; s_p99+=" $W_P99"
  s_cpu+=" $(per_op "$CPU_TICKS" $((W_OK + W_EXPECTED)))"
}
book_always() {
  redis_book "$ra" "$rapid" "$1"
  raw_keep "$1" redis-always-book "$R_OUT"$'\n'"won $r_won, conflicts $r_lost"
  a_wps+=" $r_won_rps"; a_cps+=" $r_lost_rps"; a_won+=" $r_won"; a_lost+=" $r_lost"; a_cpu+=" $r_cpu"
}
book_everysec() {
  redis_book "$re" "$repid" "$1"
  raw_keep "$1" redis-everysec-book "$R_OUT"$'\n'"won $r_won, conflicts $r_lost"
  e_wps+=" $r_won_rps"; e_cps+=" $r_lost_rps"; e_won+=" $r_won"; e_lost+=" $r_lost"; e_cpu+=" $r_cpu"
}
for round in $(seq "$ROUNDS"); do
  curl -fsS -XPOST "http://127.0.0.1:$bp/v1/events" --json '{"event_id":"book'$round'","sections":[{"name":"F","rows":1000,"cols":1000,"price":1}]}' >/dev/null
  turns "$round" book_strata book_always book_everysec
  echo "round $round: bookings won/s strata $(awk '{print $NF}' <<<"$s_wps"), Redis Lua always $(awk '{print $NF}' <<<"$a_wps"), everysec $(awk '{print $NF}' <<<"$e_wps"); conflicts/s $(awk '{print $NF}' <<<"$s_cps"), $(awk '{print $NF}' <<<"$a_cps"), $(awk '{print $NF}' <<<"$e_cps")"
done
D="strata: fsync per group commit before the answer"
SN="median $(med $s_won) won (201), $(med $s_lost) conflicts (409); p99 $(med $s_p99) ms (all answers); $D"
BK='durable booking of 2 random seats, a fresh event each round (bookings won; conflicts apart)'
row "$BK" "$s_wps" "bookings won/s" "$SN" \
  'Redis 7 Lua script (BITFIELD + HINCRBY + HSET), `appendfsync always` (fsync before the answer)' "$a_wps" \
  "median $(med $a_won) won, $(med $a_lost) conflicts; same ${DURATION}s, in turns" "" "$s_cpu" "$a_cpu" "answer (won or conflict)" \
  "$s_cps" "$a_cps"
row "$BK" "$s_wps" "bookings won/s" "$SN" \
  'Redis 7 Lua script, `appendfsync everysec` (answers before the fsync)' "$e_wps" \
  "median $(med $e_won) won, $(med $e_lost) conflicts; same ${DURATION}s, in turns" "" "$s_cpu" "$e_cpu" "answer (won or conflict)" \
  "$s_cps" "$e_cps"

# 3. restart time: 1,000,000 seats plus everything above
curl -fsS -XPOST "http://127.0.0.1:$bp/v1/events" --json '{"event_id":"million","sections":[{"name":"F","rows":1000,"cols":1000,"price":1}]}' >/dev/null
rss=$(awk '/VmHWM/ {print $2 " " $3}' /proc/$bpid/status)
restart=; rebuilt=
for round in $(seq "$ROUNDS"); do
  kill "$bpid"; wait "$bpid" 2>/dev/null || true
  log=$work/restart$round.log
  t0=$(date +%s%3N)
  build/strata --listen 127.0.0.1:"$bp" --data-dir "$work/strata" 2>"$log" &
  bpid=$!; pids+=($bpid)
  until grep -q "listening on" "$log"; do
    kill -0 "$bpid" 2>/dev/null || { cat "$log"; die "strata did not restart"; }
    sleep 0.005
  done
  # strata's log time stamp (UTC, ms) of "listening on", less the spawn time: no polling in it
  t1=$(date -u -d "$(grep -m1 "listening on" "$log" | cut -c1-23)" +%s%3N)
  restart+=" $((t1 - t0))"
  rebuilt=$(grep 'seats: rebuilt' "$log" | sed 's/.*seats: //')
  raw_keep "$round" strata-restart "spawn $t0 ms, listening $t1 ms: $((t1 - t0)) ms; $rebuilt"
  echo "round $round: restart $((t1 - t0)) ms; $rebuilt"
done
echo "peak RSS of strata during the bookings: $rss"
row 'restart with a 1,000,000-seat event and the bookings above' "$restart" "ms" \
  "spawn to strata's own \"listening on\" log time stamp; $rebuilt" "" "" ""
out_write seats "DURATION=$DURATION ROUNDS=$ROUNDS SELLOUT_SECONDS=$SELLOUT_SECONDS bench/seats.sh"
