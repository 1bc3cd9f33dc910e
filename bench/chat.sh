#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Chat benchmark (issue 3): strata vs PostgreSQL 15 (synchronous_commit=on) doing the same work,
# side by side on loopback, 64 connections: durable posts of 1 KiB across 1,000 conversations,
# then the newest 50 messages of a conversation, then a user's conversations. strata is driven by
# wrk, PostgreSQL by pgbench with the scripts in bench/pg/ (a post is one statement: one round
# trip, one commit), each for the same DURATION. Only strata's 2xx answers and PostgreSQL's
# committed transactions count (bench/lib.sh); any other status or a failed transaction fails
# the run. Prints throughput, p50/p99 and ratios; records the run in bench/out/chat.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
PGBIN=/usr/lib/postgresql/15/bin
chmod 755 "$work"

sp=$(free_port)
build/strata --listen 127.0.0.1:"$sp" --data-dir "$work/strata" 2>"$work/strata.log" &
pids+=($!)
pp=$(free_port)
mkdir -p "$work/pg"; chown postgres "$work/pg"
runuser -u postgres -- "$PGBIN/initdb" -D "$work/pg/data" -A trust >/dev/null
runuser -u postgres -- "$PGBIN/postgres" -D "$work/pg/data" -p "$pp" -k "$work/pg" -c listen_addresses=127.0.0.1 \
  -c synchronous_commit=on -c fsync=on -c max_connections=200 -c shared_buffers=256MB >"$work/pg.log" 2>&1 &
pids+=($!)
wait_port "$sp"; wait_port "$pp"
psql() { runuser -u postgres -- "$PGBIN/psql" -h 127.0.0.1 -p "$pp" -q -v ON_ERROR_STOP=1 "$@"; }
psql -c 'CREATE DATABASE bench' postgres
psql -f bench/pg/schema.sql bench >/dev/null

# strata: only 2xx count (bench/lib.sh); prints 2xx/s, p50, p99 (ms)
wrk_run() { wrk_strata "$sp" "" -- -t1 -c64 -d"${DURATION}s" --latency -s bench/chat.lua "http://127.0.0.1:$sp" -- "$1"
  echo "$W_RPS ${W_P50}ms ${W_P99}ms"; }
# pgbench: tps of committed transactions and p50/p99 from its per-transaction log (microseconds);
# a failed transaction or an aborted client fails the bench
pg_run() {
  local d out; d=$(mktemp -d -p "$work"); chmod 777 "$d"
  out=$(cd "$d" && runuser -u postgres -- "$PGBIN/pgbench" -h 127.0.0.1 -p "$pp" -n -M prepared -c 64 -j 1 \
    -T "$DURATION" -l -f "$OLDPWD/bench/pg/$1.sql" bench 2>&1) || die "pgbench $1 failed: $out"
  local failed; failed=$(awk '/number of failed transactions/ {print $5}' <<<"$out")
  [ "${failed:-0}" = 0 ] || die "pgbench $1: $failed failed transactions"
  local tps; tps=$(awk '/^tps/ {printf "%.0f", $3; exit}' <<<"$out")
  cat "$d"/pgbench_log.* | awk '{print $3}' | sort -n | awk -v t="$tps" '{a[NR]=$1} END {
    printf "%s %.2fms %.2fms\n", t, a[int(NR*0.5)]/1000, a[int(NR*0.99)]/1000 }'
}
echo "# chat, $(date -u +%F), $(nproc) cores, 64 connections, ${DURATION}s each"
wrk_run post >"$work/w"; read -r s_post s_post50 s_post99 <"$work/w"
pg_run post >"$work/p"; read -r p_post p_post50 p_post99 <"$work/p"
# Same data for the reads: top PostgreSQL up to as many messages as strata holds, spread evenly.
s_total=0
for u in $(seq 100); do
  n=$(curl -fsS "http://127.0.0.1:$sp/v1/users/u$u/stats" | sed 's/.*"total_messages":\([0-9]*\).*/\1/')
  s_total=$((s_total + n))
done
p_total=$(psql -tA -c 'SELECT count(*) FROM messages' bench)
if [ "$s_total" -gt "$p_total" ]; then
  psql -c "INSERT INTO messages SELECT 'u' || (1 + k % 100), nextval('msg_ids'), 'c' || (1 + (k / 100) % 10),
    'bench', 0, 0, repeat('x', 1024), NULL FROM generate_series(0, $((s_total - p_total - 1))) k" bench
  psql -c 'VACUUM ANALYZE messages' bench
fi
wrk_run messages >"$work/w"; read -r s_msg s_msg50 s_msg99 <"$work/w"
pg_run messages >"$work/p"; read -r p_msg p_msg50 p_msg99 <"$work/p"
wrk_run conversations >"$work/w"; read -r s_conv s_conv50 s_conv99 <"$work/w"
pg_run conversations >"$work/p"; read -r p_conv p_conv50 p_conv99 <"$work/p"
printf '\n| workload | strata req/s (p50 / p99) | PostgreSQL 15 tps (p50 / p99) | ratio |\n|---|---:|---:|---:|\n'
printf '| durable post, 1 KiB | %s (%s / %s) | %s (%s / %s) | %sx |\n' "$s_post" "$s_post50" "$s_post99" "$p_post" "$p_post50" "$p_post99" "$(ratio "$s_post" "$p_post")"
printf '| newest 50 of a conversation | %s (%s / %s) | %s (%s / %s) | %sx |\n' "$s_msg" "$s_msg50" "$s_msg99" "$p_msg" "$p_msg50" "$p_msg99" "$(ratio "$s_msg" "$p_msg")"
printf '| list conversations | %s (%s / %s) | %s (%s / %s) | %sx |\n' "$s_conv" "$s_conv50" "$s_conv99" "$p_conv" "$p_conv50" "$p_conv99" "$(ratio "$s_conv" "$p_conv")"
echo "messages stored before the reads: strata $s_total, PostgreSQL $(psql -tA -c 'SELECT count(*) FROM messages' bench) (topped up from $p_total)"
D="strata: fsync per group commit before the answer"
P="PostgreSQL 15, pgbench -M prepared -c 64"
row 'durable chat post, 1 KiB, 1,000 conversations' "$s_post" "req/s" "p50 / p99 $s_post50 / $s_post99; $D" \
  "$P, one statement, \`synchronous_commit=on\` (WAL flush before the answer)" "$p_post" "p50 / p99 $p_post50 / $p_post99" "committed tx/s"
row 'newest 50 messages of a conversation' "$s_msg" "req/s" "p50 / p99 $s_msg50 / $s_msg99" \
  "$P, same message count" "$p_msg" "p50 / p99 $p_msg50 / $p_msg99" "committed tx/s"
row "list a user's conversations" "$s_conv" "req/s" "p50 / p99 $s_conv50 / $s_conv99" \
  "$P" "$p_conv" "p50 / p99 $p_conv50 / $p_conv99" "committed tx/s"
out_write chat "DURATION=$DURATION bench/chat.sh"
