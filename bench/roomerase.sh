#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Erasing a user who posted a few times in a big room (issue 48: a room of 100,000 members, an
# erasure of a million messages): a room made before the author index (src/rooms/authors.c,
# session 24) has its messages walked to find the user's posts (src/rooms/erase.c, 16 a slice),
# so the erasure's time grows with the room; an indexed room's erasure visits the user's posts
# only (the "walked per s" column is then the room's size over the seconds, nothing walked).
# Per room size M (ROOM_SIZES, default "20000 100000"): a fresh server; a room of two members; the
# victim posts VICTIM_N/2 messages, "bench" posts M (wrk, bench/roompost.lua: 1 KiB each), the
# victim VICTIM_N/2 more; COLD=1 flushes the room first (then the walk reads its cold pages).
# Then DELETE /v1/users/victim; the row: the seconds until GET /v1/admin/erasures/{id} says
# done, the room's messages walked per second, the room's total_messages and the other member's
# unread read right after the 202 (the window in which they still count the victim's posts)
# and after done, and the server's CPU seconds over the erasure.
#   ROOM_SIZES="20000 100000" VICTIM_N=10 COLD=0 bench/roomerase.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
STRATA=${STRATA:-build/strata}
ROOM_SIZES=${ROOM_SIZES:-20000 100000}
VICTIM_N=${VICTIM_N:-10}
COLD=${COLD:-0}
[ -n "$(git status --porcelain -- src include)" ] && [ "${ALLOW_DIRTY:-0}" != 1 ] && die "the tree is dirty (ALLOW_DIRTY=1 to run anyway)"
echo "# roomerase, $(date -u +%FT%TZ), $(nproc) cores, load $(load_avg), commit $(git rev-parse --short HEAD), $STRATA, victim posts $VICTIM_N, cold $COLD"
echo "| room messages | erasure done in, s | room messages walked per s | total_messages after the 202 / after done | other's unread after the 202 / after done | server CPU s |"
echo "|---|---|---|---|---|---|"
j() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
ok() { curl -fsS "$@" >/dev/null; }
for m in $ROOM_SIZES; do
  rm -rf "$work/data"
  port=$(free_port)
  "$STRATA" --listen 127.0.0.1:"$port" --data-dir "$work/data" --map-size 8GiB \
    --flush-interval 86400 --flush-rows 100000000 --reconcile-interval 86400 --log-level warn \
    2>>"$work/strata.log" &
  spid=$!
  pids+=("$spid")
  wait_port "$port"
  url="http://127.0.0.1:$port"
  ok -XPOST "$url/v1/rooms" -H 'Content-Type: application/json' \
    -d '{"room_id":"big","members":["bench","victim","reader"]}'
  say() { ok -XPOST "$url/v1/rooms/big/messages" -H 'Content-Type: application/json' -d "{\"from\":\"$1\",\"content\":\"$2\"}"; }
  for i in $(seq $((VICTIM_N / 2))); do say victim "early $i"; done
  wrk -t1 -c16 -d3600s -s bench/roompost.lua "$url" -- big >"$work/wrk.txt" 2>&1 &
  wp=$!
  pids+=("$wp")
  while [ "$(curl -fsS "$url/v1/rooms/big" | j 'd["total_messages"]')" -lt "$m" ]; do sleep 0.2; done
  kill -INT "$wp"
  wait "$wp" || true
  for i in $(seq $((VICTIM_N - VICTIM_N / 2))); do say victim "late $i"; done
  total=$(curl -fsS "$url/v1/rooms/big" | j 'd["total_messages"]')
  if [ "$COLD" = 1 ]; then
    ok -XPOST "$url/v1/admin/flush"
    sleep 1
    while [ "$(curl -fsS "$url/metrics" | awk '$1 == "strata_flush_running" {print $2}')" != 0 ]; do sleep 0.5; done
  fi
  unread() { curl -fsS "$url/v1/rooms/big/members" | j '[x["unread"] for x in d["members"] if x["user"] == "reader"][0]'; }
  cpu0=$(awk '{print $14 + $15}' /proc/"$spid"/stat)
  t0=$(date +%s.%N)
  id=$(curl -fsS -XDELETE "$url/v1/users/victim" | j 'd["erasure_id"]')
  tm0=$(curl -fsS "$url/v1/rooms/big" | j 'd["total_messages"]')
  un0=$(unread)
  while [ "$(curl -fsS "$url/v1/admin/erasures/$id" | j 'd["status"]')" != done ]; do sleep 0.1; done
  t1=$(date +%s.%N)
  cpu1=$(awk '{print $14 + $15}' /proc/"$spid"/stat)
  tm1=$(curl -fsS "$url/v1/rooms/big" | j 'd["total_messages"]')
  un1=$(unread)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
  rate=$(awk -v n="$total" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
  cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b - a) / hz}')
  echo "| $total | $secs | $rate | $tm0 / $tm1 | $un0 / $un1 | $cpu |"
  kill "$spid"
  wait "$spid" 2>/dev/null || true
done
