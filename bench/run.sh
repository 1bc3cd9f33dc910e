#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs strata and its peers side by side on this machine, on loopback, and prints the ratios.
# Installs the peers from Debian (redis-server, nginx-light, wrk), starts each with a config of
# its own in a temp dir, and stops them by PID. Not part of the test suite. Every pair runs for
# the same DURATION; only 2xx answers count (bench/lib.sh); the run is recorded in
# bench/out/run.json for bench/table.py.
#   bench/run.sh            (DURATION=10 seconds per run, CONNS=64)
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-64}
. bench/lib.sh

# --- strata ---
sp=$(free_port)
build/strata --listen 127.0.0.1:"$sp" --data-dir "$work/strata" 2>"$work/strata.log" &
spid=$!; pids+=($spid)
wait_port "$sp"
curl -fsS -XPOST "http://127.0.0.1:$sp/v1/counters/bench/incr" -d '{"by":12345}' >/dev/null
body=$(curl -fsS "http://127.0.0.1:$sp/v1/counters/bench")

# --- redis, fsync always and everysec ---
ra=$(free_port); re=$(free_port)
mkdir -p "$work/ra" "$work/re"
redis-server --port "$ra" --dir "$work/ra" --save '' --appendonly yes --appendfsync always --daemonize no --logfile "$work/ra.log" &
pids+=($!)
redis-server --port "$re" --dir "$work/re" --save '' --appendonly yes --appendfsync everysec --daemonize no --logfile "$work/re.log" &
pids+=($!)

# --- nginx, one worker, a fixed JSON body as long as strata's counter response ---
np=$(free_port)
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$np;
    location / { default_type application/json; return 200 '$body'; }
  }
}
CONF
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
pids+=($!)
wait_port "$ra"; wait_port "$re"; wait_port "$np"

W="-t1 -c$CONNS -d${DURATION}s --latency"
echo "# strata vs peers, $(date -u +%F), $(nproc) cores, ${DURATION}s per side, $CONNS connections"
cost_begin "$spid"
wrk_strata "$sp" "" -- $W -s bench/incr.lua "http://127.0.0.1:$sp"
cost_end "$spid" "$W_OK"
s_incr=$W_RPS; s_incr_p99=$W_P99; s_incr_ok=$W_OK; s_incr_wrk=$W_WRK_RPS
incr_cost="$C_CPU_US µs CPU, $C_SYSCALLS syscalls, $C_CSW context switches per durable write ($C_THREADS)"
redis_timed "$ra" incr -- -c "$CONNS" -t incr
r_always=$R_RPS
redis_timed "$re" incr -- -c "$CONNS" -t incr
r_every=$R_RPS
cost_begin "$spid"
wrk_strata "$sp" "" -- $W -s bench/get.lua "http://127.0.0.1:$sp"
cost_end "$spid" "$W_OK"
s_get=$W_RPS; s_get_p99=$W_P99
get_cost="$C_CPU_US µs CPU, $C_SYSCALLS syscalls, $C_CSW context switches per read ($C_THREADS)"
wrk_peer $W -s bench/get.lua "http://127.0.0.1:$np" -- /
n_get=$W_RPS
wrk_strata "$sp" "" -- $W -s bench/pipeline.lua "http://127.0.0.1:$sp" -- /v1/counters/bench 16
s_pipe=$W_RPS

metrics=$(curl -fsS "http://127.0.0.1:$sp/metrics")
batch_avg=$(echo "$metrics" | awk '/^strata_commit_batch_writes_sum/ {s=$2} /^strata_commit_batch_writes_count/ {c=$2} END {printf "%.1f", s/c}')
commit_avg=$(echo "$metrics" | awk '/^strata_commit_seconds_sum/ {s=$2} /^strata_commit_seconds_count/ {c=$2} END {printf "%.3f", 1000*s/c}')
commits=$(echo "$metrics" | awk '/^strata_commits_total/ {print $2}')
rss=$(awk '/VmHWM/ {print $2 " " $3}' /proc/$spid/status)
value=$(curl -fsS "http://127.0.0.1:$sp/v1/counters/bench" | python3 -c 'import json,sys; print(json.load(sys.stdin)["value"])')
# every 2xx incr is one acknowledged +1: the counter must hold all of them, plus at most the
# CONNS requests still in flight when wrk stopped (applied, but answered to no one)
extra=$((value - 12345 - s_incr_ok))
[ "$extra" -ge 0 ] && [ "$extra" -le "$CONNS" ] ||
  die "final counter $value, but 12345 + $s_incr_ok acknowledged increments (+ up to $CONNS in flight) = $((12345 + s_incr_ok))"

D="strata: fsync per group commit before the answer"
row 'durable `POST /v1/counters/x/incr`' "$s_incr" "req/s" "p99 $s_incr_p99 ms; $D" \
  'Redis 7 INCR, `appendfsync always` (fsync before the answer)' "$r_always" "redis-benchmark -c $CONNS, same ${DURATION}s"
row 'durable `POST /v1/counters/x/incr`' "$s_incr" "req/s" "p99 $s_incr_p99 ms; $D" \
  'Redis 7 INCR, `appendfsync everysec` (answers before the fsync)' "$r_every" "redis-benchmark -c $CONNS, same ${DURATION}s"
row '`GET /v1/counters/x`' "$s_get" "req/s" "p99 $s_get_p99 ms" \
  'nginx 1.22, 1 worker, fixed JSON of the same length' "$n_get" "wrk, same ${DURATION}s"
row '`GET /v1/counters/x`, 16 pipelined per connection' "$s_pipe" "req/s" \
  "no peer: nginx answers pipelined requests one write each, so a ratio would measure that, not equal work" "" "" ""
out_write run "DURATION=$DURATION CONNS=$CONNS bench/run.sh"

printf '\n| benchmark | strata 2xx/s | peer | peer ok/s | ratio |\n|---|---:|---|---:|---:|\n'
printf '| durable POST incr | %s | Redis INCR appendfsync always | %s | %sx |\n' "$s_incr" "$r_always" "$(ratio "$s_incr" "$r_always")"
printf '| durable POST incr | %s | Redis INCR appendfsync everysec | %s | %sx |\n' "$s_incr" "$r_every" "$(ratio "$s_incr" "$r_every")"
printf '| GET counter | %s | nginx 1 worker, fixed JSON | %s | %sx |\n' "$s_get" "$n_get" "$(ratio "$s_get" "$n_get")"
printf '| GET counter, pipeline 16 | %s | (no peer) | | |\n' "$s_pipe"
printf '\nstrata p99: incr %s ms, get %s ms; wrk counted %s req/s for incr (strata answered %s 2xx/s); group commit: %s commits, %s writes/commit on average, %s ms per commit (fdatasync incl.); peak RSS %s\n' \
  "$s_incr_p99" "$s_get_p99" "$s_incr_wrk" "$s_incr" "$commits" "$batch_avg" "$commit_avg" "$rss"
printf 'final counter: %s = 12345 + %s acknowledged increments + %s in flight when wrk stopped\n' "$value" "$s_incr_ok" "$extra"
printf 'where the time goes in strata: incr: %s\n                                 get:  %s\n' "$incr_cost" "$get_cost"
