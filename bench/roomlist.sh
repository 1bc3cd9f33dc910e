#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# GET /v1/users/{user}/rooms for a user in ROOMS (500) rooms, before and after a change to how the
# list is answered (issue 47: the v5 unread count, SPEC §2.1), binaries alternated in one run.
#   BINS="LABEL=PATH LABEL=PATH …" DURATION=10 ROUNDS=3 bench/roomlist.sh
# The first binary is the baseline ("before"), the others are each compared with it. Each binary
# gets its own strata and data directory, seeded alike through its HTTP API: ROOMS rooms of 3
# members (bench, a, b), each with 20 messages — 6 by a/b, bench's read marker set to seq 6, 2 by
# a/b, 4 by bench, 8 by a/b — and in every other room one of the last 8 deleted (a deleted message
# after the marker: v5 subtracts it). The servers stay up for the whole run; in each round every
# binary is measured in turns, the first changing every round (bench/lib.sh's turns):
#   wrk -t1 -cCONNS (16) -dDURATION --latency on GET /v1/users/bench/rooms (the default page of 20)
#   and on ?limit=ROOMS (every room on one page: the unread count of each);
# p50/p99 (wrk), 2xx answers/s (strata's own counter; any other status fails the run) and server
# CPU per answer (utime + stime of the strata process over the run, /proc/PID/stat). Records
# bench/out/roomlist/DATE.json (not a README table row: bench/RESULTS.md quotes it), wrk's output
# in bench/out/raw/roomlist/. A binary built from another commit: a detached worktree at that
# commit, `cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build --target
# strata` (what tools/build.sh release builds, the strata target only).
# PERF=LABEL: a profiling run, not recorded — `perf record -g` of that binary's strata during each
# of its runs, the top symbols by self and by inclusive time printed.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init roomlist
BINS=${BINS:-"HEAD=build/strata"} ROOMS=${ROOMS:-500} CONNS=${CONNS:-16}
read -ra bins <<<"$BINS"
echo "# roomlist, $(date -u +%F), $(nproc) cores, ${DURATION}s per run, $ROUNDS rounds, commit $(git rev-parse --short HEAD), binaries: $BINS"
declare -A port spid
labels=()
seed() { # PORT: the rooms, their messages, read markers and deletes (16 rooms at a time)
  python3 - "$1" "$ROOMS" <<'PY'
import http.client, json, sys
from concurrent.futures import ThreadPoolExecutor
port, rooms = int(sys.argv[1]), int(sys.argv[2])
def room(i):
    c = http.client.HTTPConnection("127.0.0.1", port)
    def req(method, path, body=None):
        c.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
        r = c.getresponse(); t = r.read()
        if r.status // 100 != 2:
            sys.exit(f"{method} {path}: {r.status} {t[:200]}")
        return json.loads(t) if t else None
    r = f"u{i}"
    req("POST", "/v1/rooms", {"room_id": r, "members": ["bench", "a", "b"]})
    post = lambda who: req("POST", f"/v1/rooms/{r}/messages", {"from": who, "content": "hi"})["msg_id"]
    for k in range(6): post("ab"[k % 2])
    req("POST", f"/v1/rooms/{r}/read", {"user": "bench", "seq": 6})
    for k in range(2): post("ab"[k % 2])
    for k in range(4): post("bench")
    last = [post("ab"[k % 2]) for k in range(8)]
    if i % 2 == 0:
        req("DELETE", f"/v1/rooms/{r}/messages/{last[3]}")
    c.close()
with ThreadPoolExecutor(16) as ex:
    list(ex.map(room, range(1, rooms + 1)))
PY
}
for b in "${bins[@]}"; do
  l=${b%%=*} bin=${b#*=}
  [ -x "$bin" ] || die "$bin: no such binary"
  [[ $l =~ ^[A-Za-z0-9_]+$ ]] || die "label $l: letters, digits and _ only"
  labels+=("$l")
  port[$l]=$(free_port)
  "$bin" --listen 127.0.0.1:"${port[$l]}" --data-dir "$work/data-$l" --log-level warn 2>"$work/strata-$l.log" &
  spid[$l]=$!
  pids+=("${spid[$l]}")
  wait_port "${port[$l]}"
  t0=$(date +%s.%N)
  seed "${port[$l]}" || die "seeding $l failed"
  echo "$l ($bin): seeded in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s; its first row:" \
    "$(curl -fsS "http://127.0.0.1:${port[$l]}/v1/users/bench/rooms?limit=2" | head -c 400)"
done

# one run: ROUND LABEL PAGE; appends "LABEL page=PAGE round=R rps= p50= p99= cpu=" to $work/out.txt
measure() {
  local round=$1 l=$2 page=$3 q=
  [ "$page" = 20 ] || q="?limit=$page"
  local pp=
  if [ "${PERF:-}" = "$l" ]; then
    perf record -F 999 -g -p "${spid[$l]}" -o "$work/perf.data" -- sleep "$DURATION" >/dev/null 2>&1 &
    pp=$!
  fi
  cpu_run "${spid[$l]}" wrk_strata "${port[$l]}" "" -- -t1 -c"$CONNS" -d"${DURATION}s" --latency \
    "http://127.0.0.1:${port[$l]}/v1/users/bench/rooms$q"
  if [ -n "$pp" ]; then
    wait "$pp" || true
    for how in --no-children --children; do
      echo "perf report $how, $l, page of $page (top 30 symbols):"
      perf report -i "$work/perf.data" "$how" -g none --sort symbol --stdio 2>/dev/null | awk '/%/ && !/^#/ && n++ < 30'
    done
  fi
  local line="$l page=$page round=$round rps=$W_RPS p50=$W_P50 p99=$W_P99 cpu=$(per_op "$CPU_TICKS" "$W_OK")"
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$round" "$l-page$page" "$line"$'\n'"$W_OUT"
}
for round in $(seq "$ROUNDS"); do
  for page in 20 "$ROOMS"; do
    turns_of "$round" "$page" "${labels[@]}"
  done
done

kv() { awk -v l="$1" -v p="page=$2" -v k="$3" '$1 == l && $2 == p { for (i = 3; i <= NF; i++) { split($i, a, "="); if (a[1] == k) printf "%s ", a[2] } }' "$work/out.txt"; }
echo
echo "| binary | page | p99 ms, median (range) | p50 ms | answers/s | server CPU µs per answer, median (range) |"
echo "|---|---|---|---|---|---|"
for page in 20 "$ROOMS"; do
  for l in "${labels[@]}"; do
    echo "| $l | $page | $(med $(kv "$l" "$page" p99)) ($(rng $(kv "$l" "$page" p99))) | $(med $(kv "$l" "$page" p50)) | $(med $(kv "$l" "$page" rps)) | $(med $(kv "$l" "$page" cpu)) ($(rng $(kv "$l" "$page" cpu))) |"
  done
done
base=${labels[0]}
for l in "${labels[@]:1}"; do
  for page in 20 "$ROOMS"; do
    what="GET /v1/users/{user}/rooms, user in $ROOMS rooms of 20 messages, page of $page"
    row "$what: p99, binary $l" "$(kv "$l" "$page" p99)" "ms" "median p50 $(med $(kv "$l" "$page" p50)) ms; wrk -c$CONNS" \
      "binary $base, alternated" "$(kv "$base" "$page" p99)" "median p50 $(med $(kv "$base" "$page" p50)) ms" "" \
      "$(kv "$l" "$page" cpu)" "$(kv "$base" "$page" cpu)" "answer"
    row "$what: answers/s, binary $l" "$(kv "$l" "$page" rps)" "answers/s" "" \
      "binary $base, alternated" "$(kv "$base" "$page" rps)" "" ""
  done
done
[ -z "${PERF:-}" ] || { echo "PERF=$PERF: a profiling run, not recorded"; exit 0; }
out_write roomlist "BINS=\"$BINS\" DURATION=$DURATION ROUNDS=$ROUNDS bench/roomlist.sh"
