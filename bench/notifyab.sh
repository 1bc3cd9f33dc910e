#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Post → notification latency of two strata binaries and Redis pub/sub in turns (issue 48's
# notify-latency bar: p99 with 1,000 subscribers at 100 posts/s ≤ Redis's). Each round runs
# old, new and Redis in turns, the first side changing every round (bench/lib.sh's turns); each
# strata run starts its binary on an empty data dir, Redis runs all along (it keeps nothing).
# Every run is `strata-wsload latency` (or redis-latency) with SUBS subscribers, RATE posts/s, for
# DURATION seconds, frames timed at their kernel receive (WSLOAD_KTIME=1, both sides); the
# server's CPU per frame beside each. Records bench/out/notifyab/DATE.json, raw lines in
# bench/out/raw/notifyab/.
#   OLD=/path/to/strata-before NEW=build/strata SUBS=1000 RATE=100 DURATION=10 ROUNDS=3 bench/notifyab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init notifyab
ab_bins
SUBS=${SUBS:-1000} RATE=${RATE:-100}
ulimit -n "$(ulimit -Hn)"
LOAD=build/strata-wsload
export WSLOAD_KTIME=1
echo "# notifyab, $(date -u +%F), $(nproc) cores, $SUBS subscribers, $RATE posts/s, ${DURATION}s, $ROUNDS rounds, commit $(git rev-parse --short HEAD), old $OLD"

redis_pubsub_start "$SUBS"

run_wsload() { WS_OUT=$("$LOAD" "$@") || die "wsload $* failed"; }
# keep ROUND SIDE: the wsload line with the round and the server's CPU per frame to out.txt
keep() {
  local frames line
  frames=$(tr ' ' '\n' <<<"$WS_OUT" | awk -F= '$1 == "samples" {print $2}')
  line="$2 ${WS_OUT#* } round=$1 cpu_us_per_frame=$(per_op "$CPU_TICKS" "$frames")"
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$1" "$2" "$line"
}
side_strata() { # ROUND SIDE
  local bin port spid
  bin=$([ "$2" = old ] && echo "$OLD" || echo "$NEW")
  port=$(free_port)
  rm -rf "$work/data"
  "$bin" --listen 127.0.0.1:"$port" --data-dir "$work/data" --max-connections $((SUBS + 1000)) \
    --log-level warn 2>>"$work/strata.log" &
  spid=$!
  pids+=("$spid")
  wait_port "$port"
  cpu_run "$spid" run_wsload latency "$port" "$SUBS" "$DURATION" "$RATE"
  keep "$1" "$2"
  kill "$spid"
  wait "$spid" 2>/dev/null || true
}
m_old() { side_strata "$1" old; }
m_new() { side_strata "$1" new; }
m_redis() {
  cpu_run "$rpid" run_wsload redis-latency "$rport" "$SUBS" "$DURATION" "$RATE"
  keep "$1" redis
}
for round in $(seq "$ROUNDS"); do turns "$round" m_old m_new m_redis; done

what="post → stream notification, $SUBS subscribers, $RATE posts/s"
for k in p99_ms p50_ms; do
  row "$what: $k (new)" "$(kv new "$k")" ms "" "Redis 7 pub/sub" "$(kv redis "$k")" "" ms \
    "$(kv new cpu_us_per_frame)" "$(kv redis cpu_us_per_frame)" frame "" "" ratio
  row "$what: $k (old)" "$(kv old "$k")" ms "" "Redis 7 pub/sub" "$(kv redis "$k")" "" ms \
    "$(kv old cpu_us_per_frame)" "$(kv redis cpu_us_per_frame)" frame "" "" ratio
done
for s in new old redis; do
  echo "$s: p99 $(med "$(kv $s p99_ms)") ms ($(rng "$(kv $s p99_ms)")), p50 $(med "$(kv $s p50_ms)") ms, cpu/frame $(med "$(kv $s cpu_us_per_frame)") µs"
done
out_write notifyab "OLD=$OLD SUBS=$SUBS RATE=$RATE DURATION=$DURATION ROUNDS=$ROUNDS bench/notifyab.sh"
