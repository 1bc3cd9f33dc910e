#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Chat benchmark (issue 3): strata vs PostgreSQL 15 (synchronous_commit=on) doing the same work,
# side by side on loopback, 64 connections: durable posts of 1 KiB across 1,000 conversations,
# then the newest 50 messages of a conversation, then a user's conversations. strata is driven by
# wrk, PostgreSQL by pgbench with the scripts in bench/pg/. Prints throughput, p50/p99 and ratios.
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

# wrk: req/s, p50, p99 (ms)
wrk_run() { wrk -t1 -c64 -d"${DURATION}s" --latency -s bench/chat.lua "http://127.0.0.1:$sp" -- "$1" |
  awk '/Requests\/sec/ {r=$2} / 50%/ {p50=$2} / 99%/ {p99=$2} END {print r, p50, p99}'; }
# pgbench: tps and p50/p99 from its per-transaction log (microseconds)
pg_run() {
  local d; d=$(mktemp -d -p "$work"); chmod 777 "$d"
  local tps; tps=$(cd "$d" && runuser -u postgres -- "$PGBIN/pgbench" -h 127.0.0.1 -p "$pp" -n -M prepared -c 64 -j 1 \
    -T "$DURATION" -l -f "$OLDPWD/bench/pg/$1.sql" bench 2>/dev/null | awk '/^tps/ {print $3; exit}')
  cat "$d"/pgbench_log.* | awk '{print $3}' | sort -n | awk -v t="$tps" '{a[NR]=$1} END {
    printf "%s %.2fms %.2fms\n", t, a[int(NR*0.5)]/1000, a[int(NR*0.99)]/1000 }'
}

echo "# chat, $(date -u +%F), $(nproc) cores, 64 connections, ${DURATION}s each"
read -r s_post s_post50 s_post99 <<<"$(wrk_run post)"
read -r p_post p_post50 p_post99 <<<"$(pg_run post)"
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
read -r s_msg s_msg50 s_msg99 <<<"$(wrk_run messages)"
read -r p_msg p_msg50 p_msg99 <<<"$(pg_run messages)"
read -r s_conv s_conv50 s_conv99 <<<"$(wrk_run conversations)"
read -r p_conv p_conv50 p_conv99 <<<"$(pg_run conversations)"
printf '\n| workload | strata req/s (p50 / p99) | PostgreSQL 15 tps (p50 / p99) | ratio |\n|---|---:|---:|---:|\n'
printf '| durable post, 1 KiB | %s (%s / %s) | %s (%s / %s) | %sx |\n' "$s_post" "$s_post50" "$s_post99" "$p_post" "$p_post50" "$p_post99" "$(ratio "$s_post" "$p_post")"
printf '| newest 50 of a conversation | %s (%s / %s) | %s (%s / %s) | %sx |\n' "$s_msg" "$s_msg50" "$s_msg99" "$p_msg" "$p_msg50" "$p_msg99" "$(ratio "$s_msg" "$p_msg")"
printf '| list conversations | %s (%s / %s) | %s (%s / %s) | %sx |\n' "$s_conv" "$s_conv50" "$s_conv99" "$p_conv" "$p_conv50" "$p_conv99" "$(ratio "$s_conv" "$p_conv")"
echo "messages stored before the reads: strata $s_total, PostgreSQL $(psql -tA -c 'SELECT count(*) FROM messages' bench) (topped up from $p_total)"
