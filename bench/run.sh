#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs strata and its peers side by side on this machine, on loopback, and prints the ratios.
# Installs the peers from Debian (redis-server, nginx-light, wrk), starts each with a config of
# its own in a temp dir, and stops them by PID. Not part of the test suite.
#   bench/run.sh            (DURATION=10 seconds per run, CONNS=64)
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-64}
. bench/lib.sh


wrk_rps() { wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$@" | tee -a "$work/wrk.log" | awk '/Requests\/sec/ {print $2}'; }
wrk_p99() { awk '/ 99%/ {v=$2} END {print v}' "$work/wrk.log"; }
rb_rps() { redis-benchmark -p "$1" -c "$CONNS" -n "$2" -t incr -q 2>/dev/null | tr '\r' '\n' | awk '/INCR:/ {print $2}' | tail -1; }

# --- strata ---
sp=$(free_port)
build/strata --listen 127.0.0.1:"$sp" --data-dir "$work/strata" 2>"$work/strata.log" &
spid=$!; pids+=($spid)
wait_port "$sp"
curl -s -XPOST "http://127.0.0.1:$sp/v1/counters/bench/incr" -d '{"by":12345}' >/dev/null
body=$(curl -s "http://127.0.0.1:$sp/v1/counters/bench")

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

echo "# strata vs peers, $(date -u +%F), $(nproc) cores, wrk -t1 -c$CONNS -d${DURATION}s, redis-benchmark -c $CONNS"
n=$((DURATION * 40000))
s_incr=$(wrk_rps -s bench/incr.lua "http://127.0.0.1:$sp"); s_incr_p99=$(wrk_p99)
r_always=$(rb_rps "$ra" $((DURATION * 20000)))
r_every=$(rb_rps "$re" "$n")
s_get=$(wrk_rps -s bench/get.lua "http://127.0.0.1:$sp"); s_get_p99=$(wrk_p99)
n_get=$(wrk_rps -s bench/get.lua "http://127.0.0.1:$np" -- /)
s_pipe=$(wrk_rps -s bench/pipeline.lua "http://127.0.0.1:$sp" -- /v1/counters/bench 16)
n_pipe=$(wrk_rps -s bench/pipeline.lua "http://127.0.0.1:$np" -- / 16)

metrics=$(curl -s "http://127.0.0.1:$sp/metrics")
batch_avg=$(echo "$metrics" | awk '/^strata_commit_batch_writes_sum/ {s=$2} /^strata_commit_batch_writes_count/ {c=$2} END {printf "%.1f", s/c}')
commit_avg=$(echo "$metrics" | awk '/^strata_commit_seconds_sum/ {s=$2} /^strata_commit_seconds_count/ {c=$2} END {printf "%.3f", 1000*s/c}')
commits=$(echo "$metrics" | awk '/^strata_commits_total/ {print $2}')
rss=$(awk '/VmHWM/ {print $2 " " $3}' /proc/$spid/status)
value=$(curl -s "http://127.0.0.1:$sp/v1/counters/bench")

printf '\n| benchmark | strata req/s | peer | peer req/s | ratio |\n|---|---:|---|---:|---:|\n'
printf '| durable POST incr | %s | Redis INCR appendfsync always | %s | %sx |\n' "$s_incr" "$r_always" "$(ratio "$s_incr" "$r_always")"
printf '| durable POST incr | %s | Redis INCR appendfsync everysec | %s | %sx |\n' "$s_incr" "$r_every" "$(ratio "$s_incr" "$r_every")"
printf '| GET counter | %s | nginx 1 worker, fixed JSON | %s | %sx |\n' "$s_get" "$n_get" "$(ratio "$s_get" "$n_get")"
printf '| GET counter, pipeline 16 | %s | nginx 1 worker, pipeline 16 | %s | %sx |\n' "$s_pipe" "$n_pipe" "$(ratio "$s_pipe" "$n_pipe")"
printf '\nstrata p99: incr %s, get %s; group commit: %s commits, %s writes/commit on average, %s ms per commit (fdatasync incl.); peak RSS %s\n' \
  "$s_incr_p99" "$s_get_p99" "$commits" "$batch_avg" "$commit_avg" "$rss"
printf 'final counter: %s\n' "$value"
