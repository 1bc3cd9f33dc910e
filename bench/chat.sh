#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Chat benchmark (issue 3): strata vs PostgreSQL 15 (synchronous_commit=on) doing the same work,
# side by side on loopback, 64 connections: durable posts of 1 KiB across 1,000 conversations,
# then the newest 50 messages of a conversation, then a user's conversations. strata is driven by
# wrk, PostgreSQL by pgbench with the scripts in bench/pg/ (a post is one statement: one round
# trip, one commit), each for the same DURATION, interleaved (strata, PostgreSQL, strata … for
# ROUNDS rounds of each workload). Only strata's 2xx answers and PostgreSQL's committed
# transactions count (bench/lib.sh); any other status or a failed transaction fails the run.
# Server CPU per operation: strata's process vs every process of the PostgreSQL cluster (the
# postmaster, its backends and helpers, and the backends it reaped). Prints throughput, p50/p99
# and ratios; records the run in bench/out/chat/DATE.json, the tools' output in bench/out/raw/chat/DATE/.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init chat
PGBIN=/usr/lib/postgresql/15/bin
chmod 755 "$work"

sp=$(free_port)
build/strata --listen 127.0.0.1:"$sp" --data-dir "$work/strata" 2>"$work/strata.log" &
spid=$!; pids+=($spid)
pp=$(free_port)
mkdir -p "$work/pg"; chown postgres "$work/pg"
runuser -u postgres -- "$PGBIN/initdb" -D "$work/pg/data" -A trust >/dev/null
runuser -u postgres -- "$PGBIN/postgres" -D "$work/pg/data" -p "$pp" -k "$work/pg" -c listen_addresses=127.0.0.1 \
  -c synchronous_commit=on -c fsync=on -c max_connections=200 -c shared_buffers=256MB >"$work/pg.log" 2>&1 &
pids+=($!)
wait_port "$sp"; wait_port "$pp"
pgpid=$(head -1 "$work/pg/data/postmaster.pid") # the postmaster: its children are the cluster
psql() { runuser -u postgres -- "$PGBIN/psql" -h 127.0.0.1 -p "$pp" -q -v ON_ERROR_STOP=1 "$@"; }
psql -c 'CREATE DATABASE bench' postgres
psql -f bench/pg/schema.sql bench >/dev/null

# strata: only 2xx count (bench/lib.sh); sets RES="2xx/s p50 p99 cpu_us_per_op"
wrk_run() {
  cpu_run "$spid" wrk_strata "$sp" "" -- -t1 -c64 -d"${DURATION}s" --latency -s bench/chat.lua "http://127.0.0.1:$sp" -- "$1"
  raw_keep "$2" "strata-$1" "$W_OUT"
  RES="$W_RPS ${W_P50}ms ${W_P99}ms $(per_op "$CPU_TICKS" "$W_OK")"
}
# pgbench: tps of committed transactions and p50/p99 from its per-transaction log (microseconds);
# a failed transaction or an aborted client fails the bench; sets RES like wrk_run
pg_bench() {
  PG_OUT=$(cd "$1" && runuser -u postgres -- "$PGBIN/pgbench" -h 127.0.0.1 -p "$pp" -n -M prepared -c 64 -j 1 \
    -T "$DURATION" -l -f "$OLDPWD/bench/pg/$2.sql" bench 2>&1) || die "pgbench $2 failed: $PG_OUT"
}
pg_run() {
  local d; d=$(mktemp -d -p "$work"); chmod 777 "$d"
  cpu_run "$pgpid" pg_bench "$d" "$1"
  raw_keep "$2" "postgresql-$1" "$PG_OUT"
  local failed; failed=$(awk '/number of failed transactions/ {print $5}' <<<"$PG_OUT")
  [ "${failed:-0}" = 0 ] || die "pgbench $1: $failed failed transactions"
  local tps n; tps=$(awk '/^tps/ {printf "%.0f", $3; exit}' <<<"$PG_OUT")
  n=$(awk '/number of transactions actually processed/ {split($6, a, "/"); print a[1]}' <<<"$PG_OUT")
  [ "${n:-0}" -gt 0 ] || die "pgbench $1: no transaction committed in ${DURATION}s (its 64 backends still connecting: a loaded machine, or DURATION too short)"
  RES=$(cat "$d"/pgbench_log.* | awk '{print $3}' | sort -n | awk -v t="$tps" -v c="$(per_op "$CPU_TICKS" "$n")" '{a[NR]=$1} END {
    printf "%s %.2fms %.2fms %s\n", t, a[int(NR*0.5)]/1000, a[int(NR*0.99)]/1000, c }')
  rm -rf "$d"
}
# pair WORKLOAD: ROUNDS rounds of strata and PostgreSQL in turns, the first side changing every
# round (bench/lib.sh's turns); sets s_v s_50 s_99 s_c p_v p_50 p_99 p_c
side_strata() { local a b c d; wrk_run "$pair_w" "$1"; read -r a b c d <<<"$RES"; s_v+=" $a"; s_50+=" ${b%ms}"; s_99+=" ${c%ms}"; s_c+=" $d"; }
side_pg() { local a b c d; pg_run "$pair_w" "$1"; read -r a b c d <<<"$RES"; p_v+=" $a"; p_50+=" ${b%ms}"; p_99+=" ${c%ms}"; p_c+=" $d"; }
pair() {
  s_v=; s_50=; s_99=; s_c=; p_v=; p_50=; p_99=; p_c=; pair_w=$1
  local round
  for round in $(seq "$ROUNDS"); do
    turns "$round" side_strata side_pg
    echo "round $round, $1: strata $(awk '{print $NF}' <<<"$s_v") 2xx/s, PostgreSQL $(awk '{print $NF}' <<<"$p_v") tx/s"
  done
}
echo "# chat, $(date -u +%F), $(nproc) cores, 64 connections, ${DURATION}s each, $ROUNDS rounds"
D="strata: fsync per group commit before the answer"
P="PostgreSQL 15, pgbench -M prepared -c 64"
I="interleaved"
pair post
row 'durable chat post, 1 KiB, 1,000 conversations' "$s_v" "req/s" "p50 / p99 $(med $s_50) / $(med $s_99) ms; $D" \
  "$P, one statement, \`synchronous_commit=on\` (WAL flush before the answer); its CPU includes starting the 64 backends pgbench connects" "$p_v" \
  "p50 / p99 $(med $p_50) / $(med $p_99) ms; $I" "committed tx/s" "$s_c" "$p_c" "2xx answer / committed tx"
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
fi
psql -c 'VACUUM ANALYZE messages' bench
echo "messages stored before the reads: strata $s_total, PostgreSQL $(psql -tA -c 'SELECT count(*) FROM messages' bench) (topped up from $p_total)"
pair messages
row 'newest 50 messages of a conversation' "$s_v" "req/s" "p50 / p99 $(med $s_50) / $(med $s_99) ms" \
  "$P, same message count" "$p_v" "p50 / p99 $(med $p_50) / $(med $p_99) ms; $I" "committed tx/s" "$s_c" "$p_c" "2xx answer / committed tx"
pair conversations
row "list a user's conversations" "$s_v" "req/s" "p50 / p99 $(med $s_50) / $(med $s_99) ms" \
  "$P" "$p_v" "p50 / p99 $(med $p_50) / $(med $p_99) ms; $I" "committed tx/s" "$s_c" "$p_c" "2xx answer / committed tx"
out_write chat "DURATION=$DURATION ROUNDS=$ROUNDS bench/chat.sh"
