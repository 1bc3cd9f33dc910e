#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Seat benchmarks (issue 4), side by side on loopback:
#  1. sellout of a 100,000-seat event by wrk -c64 (book 1-4 seats, confirm each win): bookings/s,
#     sellout time, p99, oversell check against the seat map;
#  2. durable strata bookings of 2 random seats vs the same logic as a Redis 7 Lua script
#     (appendfsync everysec) driven by redis-benchmark -c64.
#  3. restart time with a 1,000,000-seat event and its bookings.
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

echo "# seats, $(date -u +%F), $(nproc) cores"
out=$(wrk -t1 -c64 -d"${DURATION}s" --latency -s bench/sellout.lua "$B")
res=$(echo "$out" | grep RESULT)
ev=$(curl -fsS "$B/v1/events/sellout")
dur=$(echo "$ev" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sellout"]["duration_seconds"])')
stats=$(echo "$ev" | python3 -c 'import json,sys; e=json.load(sys.stdin)["event_stats"]; print(e["available"], e["reserved"], e["sold"], e["total"])')
booked=$(echo "$res" | sed 's/.*booked=\([0-9]*\).*/\1/')
seats_booked=$(echo "$res" | sed 's/.*seats_booked=\([0-9]*\).*/\1/')
recount=$(for s in S1 S2 S3 S4; do curl -fsS "$B/v1/events/sellout/sections/$s/seats"; echo; done | python3 -c '
import base64, json, sys
taken = 0
for line in sys.stdin:
    m = json.loads(line); b = base64.b64decode(m["seats"])
    taken += sum(1 for i in range(m["rows"] * m["cols"]) if (b[i >> 2] >> ((i & 3) * 2)) & 3)
print(taken)')
echo "sellout: $res"
echo "sellout: event stats (available reserved sold total) = $stats; seats taken in the bitmap = $recount; seats in 201 answers = $seats_booked"
echo "sellout: oversold seats = $(( seats_booked > 100000 ? seats_booked - 100000 : 0 )); bookings/s during sellout = $(awk -v b="$booked" -v d="$dur" 'BEGIN{ if (d > 0) printf "%.0f", b/d; else print "n/a" }'); sellout time = ${dur} s"

# 2. bookings vs Redis Lua
curl -fsS -XPOST "$B/v1/events" -d '{"event_id":"bench2","sections":[{"name":"F","rows":1000,"cols":1000,"price":1}]}' >/dev/null
s_book=$(wrk -t1 -c64 -d"${DURATION}s" -s bench/book2.lua "$B" | awk '/Requests\/sec/ {print $2}')
s_ok=$(curl -fsS "$B/v1/events/bench2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["event_stats"]["reserved"] // 2)')
rp=$(free_port); mkdir -p "$work/redis"
redis-server --port "$rp" --dir "$work/redis" --save '' --appendonly yes --appendfsync everysec --daemonize no --logfile "$work/redis.log" &
pids+=($!)
wait_port "$rp"
sha=$(redis-cli -p "$rp" SCRIPT LOAD "$(cat bench/book.redis.lua)")
redis-cli -p "$rp" HSET stats available 1000000 reserved 0 >/dev/null
n=$((DURATION * 30000))
r_book=$(redis-benchmark -p "$rp" -c 64 -n "$n" -r 999999 -q EVALSHA "$sha" 2 seats stats __rand_int__ 2 2>/dev/null | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | awk '{print $1}')
r_ok=$(redis-cli -p "$rp" GET booking:seq)
printf '\n| benchmark | strata | peer | ratio |\n|---|---:|---|---:|\n'
printf '| book 2 random seats (durable) | %s req/s (%s won) | Redis 7 Lua EVALSHA, everysec: %s req/s (%s won) | %sx |\n' "$s_book" "$s_ok" "$r_book" "$r_ok" "$(ratio "$s_book" "$r_book")"

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
