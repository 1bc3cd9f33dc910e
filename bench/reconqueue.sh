#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Memory of the reconciliation queue (issue 48, session 26): posts to N distinct conversations
# (bench/owners.lua in its "once" mode, users q0..q{N-1}, one post each, then GET /healthz) for SEC seconds against each side, in
# turns, ROUNDS rounds; then RssAnon, jemalloc's allocated bytes and the queue's metrics. The
# interval is an hour (and flushes too), so nothing drains the queue but an overflow's pass. Read
# once the store's backlog of staged writes is applied (0) and 2 s more.
#   bench/reconqueue.sh OLD_BIN NEW_BIN [N] [SEC]
#   SIDES (default "old new new:1000"): a side is old or new, new:K runs --reconcile-queue K
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2 N=${3:-200000} SEC=${4:-15}
. bench/lib.sh
echo "# load before: $(cat /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for side in ${SIDES:-old new new:1000}; do
    bin=$NEW args=()
    case $side in old) bin=$OLD ;; new:*) args=(--reconcile-queue "${side#new:}") ;; esac
    port=$(free_port)
    rm -rf "$work/data"
    "$bin" --listen 127.0.0.1:"$port" --data-dir "$work/data" --log-level warn \
      --reconcile-interval 3600 --flush-interval 3600 "${args[@]}" >"$work/srv.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    wait_port "$port"
    out=$(wrk -t1 -c64 -d"${SEC}s" -s bench/owners.lua "http://127.0.0.1:$port" -- "$N" once q)
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    last=$(curl -fsS "127.0.0.1:$port/v1/users/q$((N - 1))/conversations/c" | grep -o '"total_messages":[0-9]*' | cut -d: -f2)
    g() { awk -v k="$1" '$1 == k {printf "%.0f", $2}' <<<"$m"; }
    # the writes applied (the store's staged backlog, ~ as large as the queue, is not measured),
    # then 2 s for jemalloc to give freed pages back
    for _ in $(seq 300); do
      m=$(curl -fsS "127.0.0.1:$port/metrics")
      [ "$(g strata_store_backlog_bytes)" = 0 ] && break
      sleep 0.1
    done
    sleep 2
    rss=$(awk '/^RssAnon/ {print $2}' /proc/"$pid"/status)
    m=$(curl -fsS "127.0.0.1:$port/metrics")
    echo "round $round side $side posts $reqs q$((N - 1)).total $last (1: every post done) rss_anon_kib $rss" \
      "malloc_allocated $(g strata_malloc_allocated_bytes) queue $(g strata_reconcile_queue)" \
      "overflows $(g strata_reconcile_overflows_total) passes $(g strata_reconcile_all_passes_total)" \
      "backlog $(g strata_store_backlog_bytes)"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
done
echo "# load after: $(cat /proc/loadavg)"
