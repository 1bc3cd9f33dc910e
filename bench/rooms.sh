#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rooms (SPEC §2.1, issue 35), on loopback, ROUNDS rounds, each pair interleaved in one run:
#  1. notify latency: 1,000 subscribers of one room of 1,000 members, posts at 100/s
#     (build/strata-wsload latency with WSLOAD_ROOM) against the same on one user's conversation
#     (today's streams row): p50/p99 insert -> notification, server CPU per frame;
#  2. a post's own cost does not grow with the members: durable 1 KiB posts to a room of 10
#     members and to a room of 1,000 (wrk -c64, bench/roompost.lua), and to a user's conversation
#     (bench/post1.lua): answers/s, p99, server CPU per post;
#  3. GET /v1/users/{user}/rooms for a user in 500 rooms (each with a message), newest 20 first:
#     p99 and server CPU per answer.
# Only 2xx count; any other status fails the run (bench/lib.sh). Prints a table; raw output in
# $work (kept only for the run).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
LOAD=build/strata-wsload
echo "# rooms, $(date -u +%F), $(nproc) cores, ${DURATION}s per run, $ROUNDS rounds, commit $(git rev-parse --short HEAD)"
port=$(free_port)
build/strata --listen 127.0.0.1:"$port" --data-dir "$work/data" --max-connections 5000 --log-level warn 2>"$work/strata.log" &
spid=$!
pids+=("$spid")
wait_port "$port"
B="http://127.0.0.1:$port"
members() { python3 -c "import json,sys; print(json.dumps(['bench'] + ['m%d' % i for i in range(int(sys.argv[1]) - 1)]))" "$1"; }
curl -fsS "$B/v1/rooms" --json "{\"room_id\":\"r1000\",\"members\":$(members 1000)}" >/dev/null
curl -fsS "$B/v1/rooms" --json "{\"room_id\":\"r10\",\"members\":$(members 10)}" >/dev/null
curl -fsS "$B/v1/rooms" --json "{\"room_id\":\"lat\",\"members\":$(members 1000)}" >/dev/null
# a user in 500 rooms, each with a message
for i in $(seq 500); do
  curl -fsS "$B/v1/rooms" --json "{\"room_id\":\"u$i\",\"members\":[\"bench\",\"solo\"]}" >/dev/null
  curl -fsS "$B/v1/rooms/u$i/messages" --json '{"from":"bench","content":"hi"}' >/dev/null
done

field() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k {print $2}'; }
lat_room_p99=; lat_user_p99=; lat_room_cpu=; lat_user_cpu=
post10=; post1000=; postu=; cpu10=; cpu1000=; cpuu=; p99_10=; p99_1000=; p99_u=
list_p99=; list_cpu=; list_rps=
for round in $(seq "$ROUNDS"); do
  cpu_run "$spid" eval 'WS_OUT=$(WSLOAD_ROOM=lat "$LOAD" latency "$port" 1000 "$DURATION" 100)' || die "wsload (room) failed"
  echo "round $round room: $WS_OUT"
  lat_room_p99+=" $(field "$WS_OUT" p99_ms)"; lat_room_cpu+=" $(per_op "$CPU_TICKS" "$(field "$WS_OUT" samples)")"
  cpu_run "$spid" eval 'WS_OUT=$("$LOAD" latency "$port" 1000 "$DURATION" 100)' || die "wsload (user) failed"
  echo "round $round user: $WS_OUT"
  lat_user_p99+=" $(field "$WS_OUT" p99_ms)"; lat_user_cpu+=" $(per_op "$CPU_TICKS" "$(field "$WS_OUT" samples)")"

  cpu_run "$spid" wrk_strata "$port" "" -- -t1 -c64 -d"${DURATION}s" --latency -s bench/roompost.lua "$B" -- r10
  post10+=" $W_RPS"; p99_10+=" $W_P99"; cpu10+=" $(per_op "$CPU_TICKS" "$W_OK")"
  cpu_run "$spid" wrk_strata "$port" "" -- -t1 -c64 -d"${DURATION}s" --latency -s bench/roompost.lua "$B" -- r1000
  post1000+=" $W_RPS"; p99_1000+=" $W_P99"; cpu1000+=" $(per_op "$CPU_TICKS" "$W_OK")"
  cpu_run "$spid" wrk_strata "$port" "" -- -t1 -c64 -d"${DURATION}s" --latency -s bench/post1.lua "$B"
  postu+=" $W_RPS"; p99_u+=" $W_P99"; cpuu+=" $(per_op "$CPU_TICKS" "$W_OK")"

  cpu_run "$spid" wrk_strata "$port" "" -- -t1 -c16 -d"${DURATION}s" --latency "$B/v1/users/bench/rooms"
  list_rps+=" $W_RPS"; list_p99+=" $W_P99"; list_cpu+=" $(per_op "$CPU_TICKS" "$W_OK")"
  echo "round $round: posts/s r10 ${post10##* } r1000 ${post1000##* } user ${postu##* }; rooms list ${list_rps##* }/s p99 ${list_p99##* } ms"
done
echo
echo "| measure | median (range) | server CPU per op, median |"
echo "|---|---|---|"
echo "| notify p99, room of 1,000 members, 1,000 subscribers, 100 posts/s | $(med $lat_room_p99) ms ($(rng $lat_room_p99)) | $(med $lat_room_cpu) µs/frame |"
echo "| notify p99, one user's conversation, 1,000 subscribers, 100 posts/s | $(med $lat_user_p99) ms ($(rng $lat_user_p99)) | $(med $lat_user_cpu) µs/frame |"
echo "| durable posts/s, room of 10 members (p99 $(med $p99_10) ms) | $(med $post10) ($(rng $post10)) | $(med $cpu10) µs |"
echo "| durable posts/s, room of 1,000 members (p99 $(med $p99_1000) ms) | $(med $post1000) ($(rng $post1000)) | $(med $cpu1000) µs |"
echo "| durable posts/s, one user's conversation (p99 $(med $p99_u) ms) | $(med $postu) ($(rng $postu)) | $(med $cpuu) µs |"
echo "| GET /v1/users/{user}/rooms, user in 500 rooms: answers/s (p99 $(med $list_p99) ms, range $(rng $list_p99)) | $(med $list_rps) ($(rng $list_rps)) | $(med $list_cpu) µs |"
