#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Keyed posts at the price of unkeyed ones (issue 48's bar: server CPU per post with an
# Idempotency-Key at most 1.25× that of one without). ONE binary; each round runs a keyed and an
# unkeyed run in turns (the first changing every round, bench/lib.sh's turns), each on a fresh
# server and data dir: `wrk -t1 -c64` for DURATION seconds of durable 1 KiB posts, each with an
# Idempotency-Key of its own (bench/idempost.lua) or none (bench/chat.lua post), 100 users x 10
# conversations either way. Per run: the server's CPU (all threads, /proc) per 2xx answer, the
# posts/s, the p99. The ratio is keyed/unkeyed per round, as bench/RESULTS.md's Session 18 read it
# with bench/cost.sh. Records bench/out/keyedcost/DATE.json, the raw wrk output in
# bench/out/raw/keyedcost/.
#   [BIN=build/strata] [DURATION=10] [ROUNDS=3] bench/keyedcost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
BIN=${BIN:-build/strata}
[ -x "$BIN" ] || die "$BIN: no such binary"
record_init keyedcost
echo "# keyedcost, $(date -u +%F), $(nproc) cores, ${DURATION}s, $ROUNDS rounds, $BIN, commit $(git rev-parse --short HEAD)"

# side ROUND SIDE LUA ARGS…: one run on a fresh server; "SIDE k=v …" to $work/out.txt
side() {
  local r=$1 s=$2 lua=$3 port spid line
  shift 3
  port=$(free_port)
  rm -rf "$work/data"
  "$BIN" --listen 127.0.0.1:"$port" --data-dir "$work/data" --log-level warn 2>>"$work/strata.log" &
  spid=$!
  pids+=("$spid")
  wait_port "$port"
  cpu_run "$spid" wrk_strata "$port" "" -- -t1 -c64 -d"${DURATION}s" --latency -s "$lua" "http://127.0.0.1:$port" -- "$@"
  kill "$spid"
  wait "$spid" 2>/dev/null || true
  line="$s round=$r posts_s=$W_RPS p99_ms=$W_P99 cpu_us=$(per_op "$CPU_TICKS" "$W_OK")"
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$r" "$s" "$line"$'\n'"$W_OUT"
}
m_keyed() { side "$1" keyed bench/idempost.lua; }
m_unkeyed() { side "$1" unkeyed bench/chat.lua post; }
for round in $(seq "$ROUNDS"); do turns "$round" m_keyed m_unkeyed; done

# the row: keyed against unkeyed, in µs of server CPU per post (the ratio per round is the bar's
# keyed/unkeyed); the same figures in the CPU column, the posts/s in the notes
row "CPU per keyed post (Idempotency-Key) vs unkeyed" "$(kv keyed cpu_us)" µs \
  "bar: ≤ 1.25× unkeyed; durable 1 KiB posts, wrk -t1 -c64, keyed posts/s median $(med "$(kv keyed posts_s)")" \
  "the same binary, posts without a key, alternated" "$(kv unkeyed cpu_us)" \
  "posts/s median $(med "$(kv unkeyed posts_s)")" µs "$(kv keyed cpu_us)" "$(kv unkeyed cpu_us)" post "" "" ratio
for s in keyed unkeyed; do
  echo "$s: cpu/post $(med "$(kv $s cpu_us)") µs ($(rng "$(kv $s cpu_us)")), posts/s $(med "$(kv $s posts_s)") ($(rng "$(kv $s posts_s)")), p99 $(med "$(kv $s p99_ms)") ms"
done
out_write keyedcost "BIN=$BIN DURATION=$DURATION ROUNDS=$ROUNDS bench/keyedcost.sh"
