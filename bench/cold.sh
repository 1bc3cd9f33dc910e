#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cold-tier benchmarks (issue 6):
#   encode   1M generated messages into one Parquet file, strata's encoder (one thread) vs
#            DuckDB's COPY ... (FORMAT parquet, COMPRESSION zstd) of the same rows, threads=1;
#   flush    messages posted to a running strata (100 users x 10 conversations, LOAD_SECONDS of
#            pipelined posts), then POST /v1/admin/flush: rows/s per worker from strata's own
#            metrics, and counter reads per second while the flush runs vs before it;
#   read     newest 50 of one conversation: hot (before the flush) vs cold (after), p50/p99.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
(cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
ROWS=${ROWS:-1000000}
LOAD_SECONDS=${LOAD_SECONDS:-20}

echo "# cold tier, $(date -u +%F), $(nproc) cores"
cat >"$work/duck.mjs" <<'JS'
import { DuckDBInstance } from '@duckdb/node-api';
import { statSync } from 'node:fs';
const [src, dst] = process.argv.slice(2);
const c = await (await DuckDBInstance.create(':memory:')).connect();
await c.run('SET threads=1');
await c.run(`CREATE TABLE t AS SELECT * FROM '${src}'`);
const t0 = performance.now();
await c.run(`COPY t TO '${dst}' (FORMAT parquet, COMPRESSION zstd)`);
const s = (performance.now() - t0) / 1000;
const n = Number((await c.runAndReadAll('SELECT count(*) AS n FROM t')).getRowObjectsJson()[0].n);
console.log(`duckdb_copy rows=${n} threads=1 seconds=${s.toFixed(3)} rows_per_sec=${(n / s).toFixed(0)} bytes=${statSync(dst).size}`);
JS
cp "$work/duck.mjs" tests/e2e/.bench-duck.mjs
# three alternating rounds (this machine's speed drifts): the ratio of the medians
for round in 1 2 3; do
  build/strata-pqbench "$ROWS" 1000 "$work/strata.parquet" | tee -a "$work/enc.txt"
  (cd tests/e2e && node .bench-duck.mjs "$work/strata.parquet" "$work/duck.parquet") | tee -a "$work/enc.txt"
done
rm -f tests/e2e/.bench-duck.mjs
awk '/^strata_encode/ {split($6, a, "="); s[++ns] = a[2] + 0; split($7, b, "="); sb = b[2]}
     /^duckdb_copy/ {split($5, a, "="); d[++nd] = a[2] + 0; split($6, b, "="); db = b[2]}
     function med(x, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
                                     return x[int((n + 1) / 2)] }
     END { ms = med(s, ns); md = med(d, nd)
           printf "encode median rows_per_sec strata=%d duckdb=%d speed_ratio=%.2f size_ratio=%.3f\n", ms, md, ms / md, sb / db }' "$work/enc.txt"

port=$(free_port)
build/strata --listen 127.0.0.1:"$port" --data-dir "$work/data" --map-size 4GiB --flush-rows 100000000 \
  --flush-interval 86400 --log-level warn 2>"$work/strata.log" &
pids+=($!)
wait_port "$port"
url="http://127.0.0.1:$port"
# only 2xx answers count, from strata's own metrics (bench/lib.sh); any other status fails the run
wrk_strata "$port" "" -- -t1 -c32 -d"${LOAD_SECONDS}s" -s bench/cold.lua "$url" -- post
echo "load posts_per_sec=$W_RPS"
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
total=0
for u in $(seq 1 100); do
  t=$(curl -s "$url/v1/users/u$u/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total_messages"])')
  total=$((total + t))
done
echo "loaded messages=$total"
read_run() { wrk_strata "$port" "" -- -t1 -c64 -d"${DURATION}s" --latency -s bench/cold.lua "$url" -- messages
  echo "$1 req_per_sec=$W_RPS p50=${W_P50}ms p99=${W_P99}ms"; }
read_run read_hot
curl -s -XPOST "$url/v1/counters/bench/incr" >/dev/null
serve() { wrk_strata "$port" "" -- -t1 -c64 -d5s -s bench/get.lua "$url"; }
serve; idle=$W_RPS
t0=$(date +%s.%N)
curl -s -XPOST "$url/v1/admin/flush" >/dev/null
serve; during=$W_RPS
while [ "$(metric strata_flush_running)" != 0 ] || [ "$(metric strata_flush_pending)" != 0 ]; do sleep 0.2; done
t1=$(date +%s.%N)
rows=$(metric strata_flush_rows_total); secs=$(metric strata_flush_seconds_sum); bytes=$(metric strata_flush_bytes_total)
awk -v r="$rows" -v s="$secs" -v b="$bytes" -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" 'BEGIN {
  printf "flush rows=%d wall_seconds=%.2f worker_seconds=%.2f rows_per_sec_per_worker=%.0f bytes=%d\n", r, w, s, r / s, b }'
echo "serving counter_reads_per_sec idle=$idle during_flush=$during ratio=$(ratio "$during" "$idle")"
read_run read_cold
