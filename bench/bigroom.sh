#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A room of MEMBERS (100,000) members, SUBS (10,000) of them connected (issue 48), against Redis 7
# pub/sub with SUBS SUBSCRIBErs of one channel, driven by the same build/strata-wsload on the same
# machine, the two sides in turns with the first side alternating each round (bench/lib.sh), for
# ROUNDS rounds:
#   create  the room: POST /v1/rooms with the first 1,000 members, then POST …/members adds of
#           1,000 (the most one request may list): seconds, and server CPU per member;
#   last    one post reaching the LAST connected member: POSTS (20) single posts spread over
#           DURATION, each waiting until the one before reached every subscriber; per post the
#           time from its send to its frame at the last of the SUBS subscribers; the median over
#           the posts (wsload last) — against one PUBLISH reaching the last of SUBS subscribers;
#   rate    posts at RATE (10) per second for DURATION: every frame's p50/p99 (wsload latency);
#   memory  RSS once SUBS idle room streams (wsload idle) are ready and the server went quiet,
#           less before, per stream (both servers restarted first); Redis: per subscriber;
#   post    durable 1 KiB posts (wrk -c64, bench/roompost.lua) to the 100,000-member room and to a
#           10-member room in turns, no stream open: a post's cost must not grow with the members.
# The SUBS subscribers are members m0…m(SUBS-1), each naming itself ("user" in the subscribe frame,
# WSLOAD_USERS): checked to be a member and online in the room's presence, as a member's app is.
# Each wsload run opens its own streams; the figures exclude that opening: once every stream is
# ready, the tool waits until no byte has reached any stream for QUIET ms (default 1000,
# WSLOAD_QUIET_MS): 10,000 members coming online together are owed 50 million presence frames
# (SPEC §2.1 v5), several seconds of writing, and the rows before session 27 measured posts queued
# behind that backlog (a fixed warm-up of 3 s); drain_ms on the wsload lines is how long it took.
# Then posting starts WARMUP ms (default 3000) later, on both sides (WSLOAD_WARMUP_MS), and the server CPU
# is counted from the first measured post to the end (WSLOAD_CPU_PID); between runs the server is
# left to finish the last run's closes (settle). Server CPU: strata's process (all its threads) vs
# redis-server. Records bench/out/bigroom/DATE.json; wsload's and wrk's output in
# bench/out/raw/bigroom/.
# PARTS=memory (a comma-separated subset of create,memory,last,rate,post; default all of them)
# runs only those parts, and then writes no record (the README's row needs every part): their
# lines are in the raw output. OLD_BIN=PATH (with memory) measures a second strata binary's
# memory too, as a third side in the turns ("strata-old-memory" lines): an A/B of a change.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init bigroom
ulimit -n "$(ulimit -Hn)"
LOAD=build/strata-wsload
MEMBERS=${MEMBERS:-100000}
SUBS=${SUBS:-10000}
POSTS=${POSTS:-20}
RATE=${RATE:-10}
WARMUP=${WARMUP:-3000}
QUIET=${QUIET:-1000}
export WSLOAD_WARMUP_MS=$WARMUP WSLOAD_QUIET_MS=$QUIET
# KTIME=1: frames timed when the kernel received them (strata-wsload WSLOAD_KTIME, both sides): the
# one-threaded tool reading 10,000 sockets waits for a CPU beside the server, and that wait is the
# tool's, not the server's; the rate part reports the tool-side p99 beside it (user_p99_ms)
export WSLOAD_KTIME=${KTIME:-0}
KT=; [ "$WSLOAD_KTIME" = 0 ] || KT="; frames timed at their kernel receive (KTIME)"
PARTS=${PARTS:-create,memory,last,rate,post}
OLD_BIN=${OLD_BIN:-}
has() { [[ ",$PARTS," == *",$1,"* ]]; }

# the servers; restarted (strata on the same data, its rooms kept) before each round's memory
# measure, so that neither side reuses memory a run before it freed
start() {
  port=$(free_port)
  build/strata --listen 127.0.0.1:"$port" --data-dir "$work/data" --max-connections $((SUBS + 1000)) \
    --max-room-members "$MEMBERS" --log-level warn 2>>"$work/strata.log" &
  spid=$!
  pids+=("$spid")
  wait_port "$port"
  redis_pubsub_start "$SUBS"
  [ -n "$OLD_BIN" ] || return 0
  oport=$(free_port)
  "$OLD_BIN" --listen 127.0.0.1:"$oport" --data-dir "$work/data-old" --max-connections $((SUBS + 1000)) \
    --max-room-members "$MEMBERS" --log-level warn 2>>"$work/strata-old.log" &
  opid=$!
  pids+=("$opid")
  wait_port "$oport"
}
stop() {
  kill "$spid" "$rpid" ${opid:+"$opid"}
  wait "$spid" "$rpid" ${opid:+"$opid"} 2>/dev/null || true
}
start

rss_kib() { awk -v k="${2:-VmRSS}:" '$1 == k {print $2}' /proc/"$1"/status; }
field() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k {print $2}'; }
# settle PID: waits (up to 120 s) until PID used less than 20 ms of CPU over half a second: the
# last run's streams closed (each close of a member's stream is a presence frame to the others)
settle() {
  local a b
  for _ in $(seq 240); do
    a=$(ticks "$1"); sleep 0.5; b=$(ticks "$1")
    [ $((b - a)) -ge 2 ] || return 0
  done
  echo "bench: pid $1 still busy after 120 s" >&2
}
# room ID N [PORT]: creates room ID with bench and m0…m(N-2) (N members) over one keep-alive
# connection, the most users one request may list (1,000) at a time; prints the seconds it took
room() {
  python3 - "${3:-$port}" "$1" "$2" <<'PY'
import http.client, json, sys, time
port, room, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
names = ["bench"] + ["m%d" % i for i in range(n - 1)]
c = http.client.HTTPConnection("127.0.0.1", port)
t = time.monotonic()
def post(path, body):
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    b = r.read()
    if r.status not in (200, 201):
        sys.exit(f"POST {path}: {r.status} {b[:200]!r}")
post("/v1/rooms", {"room_id": room, "members": names[:1000]})
for i in range(1000, n, 1000):
    post(f"/v1/rooms/{room}/members", {"add": names[i:i + 1000]})
print(f"{time.monotonic() - t:.3f}")
PY
}
got=$(curl -fsS "http://127.0.0.1:$port/v1/rooms" --json '{"room_id":"r10","members":["bench","m0","m1","m2","m3","m4","m5","m6","m7","m8"]}')
[ "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["members"])' "$got")" = 10 ] || die "r10: $got"

# one wsload run: ws ROUND SIDE PID ARGS… (env before: WSLOAD_ROOM, WSLOAD_USERS); its line in
# $work/out.txt with the round appended, kept in raw/
ws() {
  local round=$1 side=$2 pid=$3 out; shift 3
  settle "$pid"
  out=$(WSLOAD_CPU_PID=$pid "$LOAD" "$@") || die "wsload $* failed"
  echo "$out round=$round" | tee -a "$work/out.txt"
  raw_keep "$round" "$side" "$out"
}
last_strata() { WSLOAD_ROOM=$big WSLOAD_USERS=m ws "$1" strata "$spid" last "$port" "$SUBS" "$DURATION" "$POSTS"; }
last_redis() { ws "$1" redis "$rpid" redis-last "$rport" "$SUBS" "$DURATION" "$POSTS"; }
rate_strata() { WSLOAD_ROOM=$big WSLOAD_USERS=m ws "$1" strata "$spid" latency "$port" "$SUBS" "$DURATION" "$RATE"; }
rate_redis() { ws "$1" redis "$rpid" redis-latency "$rport" "$SUBS" "$DURATION" "$RATE"; }
# SUBS idle streams: RSS of the server once they are all ready and it went quiet (settle: the
# presence frames of their opening sent), less before, per stream
mem() {
  local round=$1 side=$2 pid=$3 before after anon0 anon1 lp; shift 3
  settle "$pid"
  before=$(rss_kib "$pid")
  anon0=$(rss_kib "$pid" RssAnon)
  lag0=$(lag_buckets)
  # the opening: open_s until every stream is ready (to 0.1 s), quiet_s until the server went
  # quiet (settle: to its 0.5 s probe), open_cpu_s the server's CPU (all threads) over that
  local t0 c0 tr tq
  t0=$(date +%s.%N)
  c0=$(ticks "$pid")
  "$LOAD" "$@" "$SUBS" 600 >"$work/idle.txt" &
  lp=$!
  for _ in $(seq 1200); do grep -q ready "$work/idle.txt" && break; sleep 0.1; done
  grep -q ready "$work/idle.txt" || die "$side: $SUBS idle streams never all ready"
  tr=$(date +%s.%N)
  settle "$pid"
  tq=$(date +%s.%N)
  local opening
  opening=$(awk -v t0="$t0" -v tr="$tr" -v tq="$tq" -v c="$(($(ticks "$pid") - c0))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf " open_s=%.1f quiet_s=%.1f open_cpu_s=%.2f", tr - t0, tq - t0, c / hz }')
  sleep 3 # what a server gives back once quiet (strata: its heap trim within two 1 s ticks, or
          # jemalloc's decay of about 1 s)
  after=$(rss_kib "$pid")
  anon1=$(rss_kib "$pid" RssAnon)
  # the loop over the opening alone: how late its 10 ms probe timer ran (strata_loop_lag_seconds,
  # the buckets' growth since before the opening): lag_max_le, the bound every late run fell
  # under (the longest stall, rounded up to a bucket); lag_over_100ms, how many ran later than that
  lag=$(lag_buckets | awk -v before="$lag0" 'BEGIN { n = split(before, b, "\n"); for (i = 1; i <= n; i++) { split(b[i], f, " "); c0[f[1]] = f[2] } }
    { d[$1] = $2 - c0[$1]; le[++k] = $1 } END { if (!k) exit; t = d["+Inf"]; m = "+Inf"
      for (i = k; i >= 1; i--) if (d[le[i]] == t) m = le[i]; printf " lag_max_le=%s lag_over_100ms=%d", m, t - d["0.1"] }')
  # strata's heap trims (ws/ring.c, glibc's malloc) so far, when it counts them; the loop's
  # longest iteration since the restart (its start-up and this opening); jemalloc's resident bytes
  trims=$( (curl -s "http://127.0.0.1:${mport:-0}/metrics" 2>/dev/null || true) | awk '$1 == "strata_ws_heap_trims_total" {t = $2}
    $1 == "strata_ws_heap_trim_seconds_total" {s = $2} $1 == "strata_loop_stall_max_seconds" {m = $2}
    $1 == "strata_malloc_resident_bytes" {r = $2}
    END {if (t != "") printf " trims=%d trim_ms=%.1f", t, s * 1000; if (m != "") printf " stall_max_ms=%.1f", m * 1000
      if (r != "") printf " je_resident_mib=%.1f", r / 1048576}')
  kill "$lp"
  wait "$lp" 2>/dev/null || true
  # per_conn_kib from VmRSS (as bench/streams.sh); anon_per_conn_kib leaves out file pages (the
  # store's mapped pages the members' checks read)
  awk -v s="$side" -v b="$before" -v a="$after" -v n="$SUBS" -v r="$round" -v a0="$anon0" -v a1="$anon1" \
    'BEGIN { printf "%s-memory conns=%d rss_before_kib=%d rss_after_kib=%d per_conn_kib=%.3f anon_per_conn_kib=%.3f round=%d\n", s, n, b, a, (a - b) / n, (a1 - a0) / n, r }' |
    sed "s/\$/$trims$lag$opening/" | tee -a "$work/out.txt" >>"$raw_dir/$round-$side.txt"
}
# strata_loop_lag_seconds' buckets of the server at $mport: "LE COUNT" lines (nothing for Redis)
lag_buckets() {
  (curl -s "http://127.0.0.1:${mport:-0}/metrics" 2>/dev/null || true) |
    sed -n 's/^strata_loop_lag_seconds_bucket{le="\([^"]*\)"} \([0-9]*\)$/\1 \2/p'
}
mem_strata() { mport=$port WSLOAD_ROOM=$big WSLOAD_USERS=m mem "$1" strata "$spid" idle "$port"; }
mem_redis() { mport= mem "$1" redis "$rpid" redis-idle "$rport"; }
mem_old() { mport=$oport WSLOAD_ROOM=$big WSLOAD_USERS=m mem "$1" strata-old "$opid" idle "$oport"; }
# durable posts with wrk to room $1 (no stream open): 2xx/s, p99, server CPU per post
post_to() {
  local round=$1 label=$2 r=$3
  settle "$spid"
  cpu_run "$spid" wrk_strata "$port" "" -- -t1 -c64 -d"${DURATION}s" --latency -s bench/roompost.lua \
    "http://127.0.0.1:$port" -- "$r"
  echo "post-$label rps=$W_RPS p99_ms=$W_P99 cpu_us=$(per_op "$CPU_TICKS" "$W_OK") round=$round" | tee -a "$work/out.txt"
  raw_keep "$round" "post-$label" "$W_OUT"
}
post_big() { post_to "$1" big "$big"; }
post_small() { post_to "$1" small r10; }

echo "# bigroom, $(date -u +%F), $(nproc) cores, $MEMBERS members, $SUBS streams, ${DURATION}s per run, $ROUNDS rounds, load $(load_avg)"
for round in $(seq "$ROUNDS"); do
  big=big$round # a fresh room each round: its creation is measured too
  t0=$(ticks "$spid")
  secs=$(room "$big" "$MEMBERS")
  echo "create members=$MEMBERS secs=$secs cpu_us_per_member=$(per_op $(($(ticks "$spid") - t0)) "$MEMBERS") round=$round" |
    tee -a "$work/out.txt"
  [ -z "$OLD_BIN" ] || room "$big" "$MEMBERS" "$oport" >/dev/null
  if has memory; then
    stop
    start
    if [ -n "$OLD_BIN" ]; then turns "$round" mem_strata mem_old mem_redis; else turns "$round" mem_strata mem_redis; fi
  fi
  ! has last || turns "$round" last_strata last_redis
  ! has rate || turns "$round" rate_strata rate_redis
  ! has post || turns "$round" post_big post_small
done
if [ "$PARTS" != create,memory,last,rate,post ]; then
  echo "bench: PARTS=$PARTS: no record written (the lines above are in $raw_dir and $work/out.txt)" >&2
  cp "$work/out.txt" "$raw_dir/out.txt"
  exit 0
fi

# rows for bench/table.py from the "KIND key=value…" lines above
kv() { # KIND KEY: the values of KEY on the KIND lines, in round order
  awk -v m="$1" -v k="$2" '$1 == m { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) v = a[2]; if (a[1] == "round") r = a[2] }
    out[r] = v } END { for (r = 1; r in out; r++) printf "%s ", out[r] }' "$work/out.txt"; }
# server CPU per operation from wsload's server_cpu_s: per post (last) or per frame (rate)
cpu_per() { # KIND DIVISOR-KEY|-POSTS
  awk -v m="$1" -v k="$2" -v np="$POSTS" '$1 == m { s = 0; n = 0; for (i = 2; i <= NF; i++) { split($i, a, "=")
      if (a[1] == "server_cpu_s") s = a[2]; if (a[1] == k) n = a[2]; if (a[1] == "round") r = a[2] }
    if (k == "-POSTS") n = np; out[r] = n > 0 ? sprintf("%.4g", s * 1e6 / n) : "n/a" }
    END { for (r = 1; r in out; r++) printf "%s ", out[r] }' "$work/out.txt"; }
P="Redis 7 pub/sub, $SUBS SUBSCRIBErs of one channel (not durable: --appendonly no)"
I="interleaved, first side alternating"
commas() { sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta' <<<"$1"; } # 100000 → 100,000
M=$(commas "$MEMBERS")
S=$(commas "$SUBS")
row "one post → its frame at the last of $S connected members, room of $M members: median over $POSTS single posts" \
  "$(kv last last_p50_ms)" "ms" "a frame leaves once the post is fsync'd; members named in their streams (presence on)$KT" \
  "$P" "$(kv redis-last last_p50_ms)" "one PUBLISH → the last of $S subscribers; $I" "" \
  "$(cpu_per last -POSTS)" "$(cpu_per redis-last -POSTS)" "post ($S frames)" "" "" ratio
row "room of $M members, $S connected, $RATE posts/s: every frame's p99" "$(kv latency p99_ms)" "ms" \
  "median p50 $(med $(kv latency p50_ms)) ms; target p99 < 50 ms; posts start once the streams' opening drained (median $(med $(kv latency drain_ms)) ms, then no byte for $QUIET ms)$KT${KT:+; tool-side p99 median $(med $(kv latency user_p99_ms)) ms}" \
  "$P" "$(kv redis-latency p99_ms)" "median p50 $(med $(kv redis-latency p50_ms)) ms; $I${KT:+; tool-side p99 median $(med $(kv redis-latency user_p99_ms)) ms}" "" \
  "$(cpu_per latency samples)" "$(cpu_per redis-latency samples)" "frame" "" "" ratio
row "memory per idle room stream, $S members of a room of $M connected" "$(kv strata-memory per_conn_kib)" "KiB" \
  "RSS after − before, ÷ streams (presence entry included)" \
  "$P" "$(kv redis-memory per_conn_kib)" "RSS after − before, ÷ subscribers; $I" "" "" "" "" "" "" ratio
row "create a room of $M members (POST /v1/rooms, then adds of 1,000)" "$(kv create secs)" "s" \
  "one keep-alive connection; median server CPU $(med $(kv create cpu_us_per_member)) µs per member" "" "" ""
row "durable 1 KiB room posts (wrk -c64), room of $M members" "$(kv post-big rps)" "posts/s" \
  "median p99 $(med $(kv post-big p99_ms)) ms; no stream open" \
  "strata, a room of 10 members, same run" "$(kv post-small rps)" "median p99 $(med $(kv post-small p99_ms)) ms; in turns" "" \
  "$(kv post-big cpu_us)" "$(kv post-small cpu_us)" "post"
out_write bigroom "${KT:+KTIME=1 }DURATION=$DURATION ROUNDS=$ROUNDS MEMBERS=$MEMBERS SUBS=$SUBS POSTS=$POSTS RATE=$RATE WARMUP=$WARMUP QUIET=$QUIET bench/bigroom.sh"
