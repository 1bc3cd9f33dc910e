#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs strata and its peers side by side on this machine, on loopback, interleaved: each round
# runs strata, then its peers, with the same connections and payload for the same DURATION, and
# ROUNDS rounds give each row a median and a range. Installs the peers from Debian (redis-server,
# nginx-light, wrk), starts each with a config of its own in a temp dir, and stops them by PID.
# Not part of the test suite. Only 2xx answers count (bench/lib.sh); server CPU per operation
# comes from /proc of the server processes only (strata, redis-server, nginx master + worker),
# no profiler runs. The run is recorded in bench/out/run/DATE.json for bench/table.py, the tools'
# output in bench/out/raw/run/.
#   bench/run.sh            (DURATION=10 seconds per run, ROUNDS=3, CONNS=64)
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-64}
. bench/lib.sh
record_init run

# --- strata ---
sp=$(free_port)
build/strata --listen 127.0.0.1:"$sp" --data-dir "$work/strata" 2>"$work/strata.log" &
spid=$!; pids+=($spid)
wait_port "$sp"
# a 10-digit value: every GET answer keeps the length of nginx's fixed body below (the rounds add
# far fewer than the 8,999,999,999 increments that would make it 11 digits)
start=1000000000
curl -fsS -XPOST "http://127.0.0.1:$sp/v1/counters/bench/incr" --json "{\"by\":$start}" >/dev/null
body=$(curl -fsS "http://127.0.0.1:$sp/v1/counters/bench")

# --- redis, fsync always and everysec ---
ra=$(free_port); re=$(free_port)
mkdir -p "$work/ra" "$work/re"
redis-server --port "$ra" --dir "$work/ra" --save '' --appendonly yes --appendfsync always --daemonize no --logfile "$work/ra.log" &
rapid=$!; pids+=($rapid)
redis-server --port "$re" --dir "$work/re" --save '' --appendonly yes --appendfsync everysec --daemonize no --logfile "$work/re.log" &
repid=$!; pids+=($repid)

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
npid=$!; pids+=($npid)
wait_port "$ra"; wait_port "$re"; wait_port "$np"
[ "$(curl -fsS "http://127.0.0.1:$np/")" = "$body" ] || die "nginx does not answer strata's body"

W="-t1 -c$CONNS -d${DURATION}s --latency"
echo "# strata vs peers, $(date -u +%F), $(nproc) cores, ${DURATION}s per side, $CONNS connections, $ROUNDS rounds"
s_incr=; s_incr_cpu=; s_incr_p99=; s_get=; s_get_cpu=; s_get_p99=; s_pipe=; s_pipe_cpu=
r_always=; r_always_cpu=; r_every=; r_every_cpu=; n_get=; n_get_cpu=; n_get_p99=; acked=0
incr_strata() {
  cost_begin "$spid"
  cpu_run "$spid" wrk_strata "$sp" "" -- $W -s bench/incr.lua "http://127.0.0.1:$sp"
  cost_end "$spid" "$W_OK"
  raw_keep "$1" strata-incr "$W_OUT"
  s_incr+=" $W_RPS"; s_incr_p99+=" $W_P99"; s_incr_cpu+=" $(per_op "$CPU_TICKS" "$W_OK")"; acked=$((acked + W_OK))
  echo "round $1: strata incr $W_RPS 2xx/s; $C_CPU_US µs CPU, $C_CSW context switches per durable write ($C_THREADS)"
}
incr_always() {
  cpu_run "$rapid" redis_timed "$ra" incr -- -c "$CONNS" -t incr
  raw_keep "$1" redis-always-incr "$R_OUT"
  r_always+=" $R_RPS"; r_always_cpu+=" $(per_op "$CPU_TICKS" "$R_OK")"
}
incr_everysec() {
  cpu_run "$repid" redis_timed "$re" incr -- -c "$CONNS" -t incr
  raw_keep "$1" redis-everysec-incr "$R_OUT"
  r_every+=" $R_RPS"; r_every_cpu+=" $(per_op "$CPU_TICKS" "$R_OK")"
}
get_strata() {
  got=$(curl -fsS "http://127.0.0.1:$sp/v1/counters/bench")
  [ ${#got} = ${#body} ] || die "strata's GET answer ($got) is no longer as long as nginx's body ($body)"
  cpu_run "$spid" wrk_strata "$sp" "" -- $W -s bench/get.lua "http://127.0.0.1:$sp"
  raw_keep "$1" strata-get "$W_OUT"
  s_get+=" $W_RPS"; s_get_p99+=" $W_P99"; s_get_cpu+=" $(per_op "$CPU_TICKS" "$W_OK")"
}
get_nginx() {
  cpu_run "$npid" wrk_peer $W -s bench/get.lua "http://127.0.0.1:$np" -- /
  raw_keep "$1" nginx-get "$W_OUT"
  n_get+=" $W_RPS"; n_get_p99+=" $W_P99"; n_get_cpu+=" $(per_op "$CPU_TICKS" "$W_OK")"
}
# each pair in turns, the first side changing every round (bench/lib.sh's turns)
for round in $(seq "$ROUNDS"); do
  turns "$round" incr_strata incr_always incr_everysec
  echo "round $round: Redis INCR always $(awk '{print $NF}' <<<"$r_always")/s, everysec $(awk '{print $NF}' <<<"$r_every")/s"
  turns "$round" get_strata get_nginx
  cpu_run "$spid" wrk_strata "$sp" "" -- $W -s bench/pipeline.lua "http://127.0.0.1:$sp" -- /v1/counters/bench 16
  raw_keep "$round" strata-get-pipelined "$W_OUT"
  s_pipe+=" $W_RPS"; s_pipe_cpu+=" $(per_op "$CPU_TICKS" "$W_OK")"
  echo "round $round: GET strata $(awk '{print $NF}' <<<"$s_get")/s, nginx $(awk '{print $NF}' <<<"$n_get")/s; pipelined strata $(awk '{print $NF}' <<<"$s_pipe")/s"
done

metrics=$(curl -fsS "http://127.0.0.1:$sp/metrics")
batch_avg=$(echo "$metrics" | awk '/^strata_commit_batch_writes_sum/ {s=$2} /^strata_commit_batch_writes_count/ {c=$2} END {printf "%.1f", s/c}')
commit_avg=$(echo "$metrics" | awk '/^strata_commit_seconds_sum/ {s=$2} /^strata_commit_seconds_count/ {c=$2} END {printf "%.3f", 1000*s/c}')
rss=$(awk '/VmHWM/ {print $2 " " $3}' /proc/$spid/status)
value=$(curl -fsS "http://127.0.0.1:$sp/v1/counters/bench" | python3 -c 'import json,sys; print(json.load(sys.stdin)["value"])')
# every 2xx incr is one acknowledged +1: the counter must hold all of them, plus at most the
# CONNS requests per round still in flight when wrk stopped (applied, but answered to no one)
extra=$((value - start - acked))
[ "$extra" -ge 0 ] && [ "$extra" -le $((CONNS * ROUNDS)) ] ||
  die "final counter $value, but $start + $acked acknowledged increments (+ up to $((CONNS * ROUNDS)) in flight) = $((start + acked))"
echo "final counter: $value = $start + $acked acknowledged increments + $extra in flight when wrk stopped"
echo "group commit: $batch_avg writes/commit on average, $commit_avg ms per commit (fdatasync incl.); peak RSS $rss"

D="strata: fsync per group commit before the answer"
S="redis-benchmark -c $CONNS, same ${DURATION}s, interleaved"
row 'durable `POST /v1/counters/x/incr`' "$s_incr" "req/s" "p99 $(med $s_incr_p99) ms; $D" \
  'Redis 7 INCR, `appendfsync always` (fsync before the answer)' "$r_always" "$S" "" "$s_incr_cpu" "$r_always_cpu" "2xx answer / call"
row 'durable `POST /v1/counters/x/incr`' "$s_incr" "req/s" "p99 $(med $s_incr_p99) ms; $D" \
  'Redis 7 INCR, `appendfsync everysec` (answers before the fsync)' "$r_every" "$S" "" "$s_incr_cpu" "$r_every_cpu" "2xx answer / call"
row '`GET /v1/counters/x`' "$s_get" "req/s" "p99 $(med $s_get_p99) ms" \
  'nginx 1.22, 1 worker, fixed JSON body of the same length' "$n_get" "p99 $(med $n_get_p99) ms; wrk, same ${DURATION}s, interleaved" "" \
  "$s_get_cpu" "$n_get_cpu" "2xx answer"
row '`GET /v1/counters/x`, 16 pipelined per connection' "$s_pipe" "req/s" \
  "no peer: nginx answers pipelined requests one write each, so a ratio would measure that, not equal work" "" "" "" "" \
  "$s_pipe_cpu" "" "2xx answer"
out_write run "DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$CONNS bench/run.sh"
