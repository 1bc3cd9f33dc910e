#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPU, syscalls and context switches per 2xx answer of one strata binary under one wrk script
# (the A/B tool behind bench/RESULTS.md's "alternated" figures: run it for the old and the new
# binary in turns). Prints wrk's rate and p99, the group commit figures and, per named thread,
# µs of CPU and context switches per answer.
#   bench/cost.sh BIN LUA [SECONDS] [wrk-script-args...]
#   e.g. bench/cost.sh /tmp/strata-old bench/chat.lua 8 post
#   SETUP='PATH BODY': one POST before the run (e.g. the event bench/book2.lua books in);
#   CONNS=64 (default): wrk's connections
#   ANSWERS=2xx (default) or "2xx 409": which statuses count as answers (bookings: wins + conflicts);
#   any other status, or a wrk socket error, fails the run
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$1 LUA=$2 SEC=${3:-8}
shift $(($# < 3 ? $# : 3))
. bench/lib.sh
port=$(free_port)
"$BIN" --listen 127.0.0.1:"$port" --data-dir "$work/data" --log-level warn &
pid=$!
pids+=("$pid")
wait_port "$port"
curl -fsS -XPOST "127.0.0.1:$port/v1/counters/bench/incr" --json '{"by":1}' >/dev/null
if [ -n "${SETUP:-}" ]; then curl -fsS -XPOST "127.0.0.1:$port${SETUP%% *}" --json "${SETUP#* }" >/dev/null; fi
ANSWERS=${ANSWERS:-2xx}
snap() {
  for t in /proc/"$pid"/task/*; do
    echo "$(basename "$t") $(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat") $(awk '/^voluntary_ctxt/ {v = $2} /^nonvoluntary_ctxt/ {n = $2} END {print v, n}' "$t/status")"
  done | sort
}
snap >"$work/s0"
perf stat -e raw_syscalls:sys_enter -p "$pid" -o "$work/perf" -- sleep "$SEC" &
pp=$!
# only 2xx and the statuses ANSWERS names count; any other status or a wrk socket error fails the
# run (bench/lib.sh's wrk_strata)
wrk_strata "$port" "$(tr ' ' '\n' <<<"$ANSWERS" | grep -vx 2xx | tr '\n' ' ')" -- \
  -t1 -c"${CONNS:-64}" -d"${SEC}s" --latency -s "$LUA" "http://127.0.0.1:$port" -- "$@"
echo "$W_OUT" >"$work/wrk"
wait $pp
snap >"$work/s1"
n=$((W_OK + W_EXPECTED))
curl -fsS "127.0.0.1:$port/metrics" | awk '/^strata_commit_batch_writes_sum/ {s = $2} /^strata_commit_batch_writes_count/ {c = $2} /^strata_commit_seconds_sum/ {t = $2} /^strata_commit_seconds_count/ {k = $2} END {if (c && k) printf "commits %d, %.1f writes/commit, %.3f ms/commit\n", k, s / c, 1000 * t / k}'
echo "2xx/s $W_RPS, answers ($ANSWERS)/s $(awk -v n="$n" -v s="$W_SECS" 'BEGIN {printf "%.0f", n / s}'), p99 $W_P99 ms (wrk's own rate, every answer: $W_WRK_RPS/s)"
sc=$(awk '/raw_syscalls/ {gsub(",", "", $1); print $1}' "$work/perf")
echo "answers ($ANSWERS) $n, syscalls per answer $(awk -v a="$sc" -v b="$n" 'BEGIN {printf "%.2f", a / b}')"
join "$work/s0" "$work/s1" | awk -v n="$n" -v hz="$(getconf CLK_TCK)" '{cpu += $7 - $3; printf "%-14s cpu %.2f us/answer, cs %.3f/answer\n", $2, ($7 - $3) * 1e6 / hz / n, ($8 - $4 + $9 - $5) / n} END {printf "all threads    cpu %.2f us/answer\n", cpu * 1e6 / hz / n}'
