#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Notify latency during a typing burst (issue 47, SPEC §2.1 v5 typing): one strata, one room of
# 1,000 members, SUBS (1,000) WebSocket subscribers of it on loopback, posts to it at RATE (100)/s
# for DURATION s (build/strata-wsload latency with WSLOAD_ROOM: post -> frame latency over every
# post frame at every subscriber). The same run with a typing burst beside it: TYPERS (100)
# members POST /v1/rooms/{room}/typing in turn over TYPERS keep-alive connections (wrk -t1,
# bench/typing.lua), each connection waiting DELAY ms between requests; DELAYS lists the bursts
# ("100 0": about 10 signals per user per second, then as fast as wrk goes). strata coalesces
# typing to one frame per user per room per second, so the subscribers get at most TYPERS typing
# frames/s each on top of the posts' RATE. The runs without typing and with each burst go in
# turns, the first changing every round (bench/lib.sh's turns), ROUNDS rounds.
# Per run: notify p50/p99 (ms), typing signals/s answered (wrk; any non-2xx fails the run), typing
# frames received, and server CPU per delivered frame (post and typing frames; the CPU is the
# server's over the whole wsload run, its 1,000 stream opens included in every run alike), and
# the subscribers' tool's own CPU share while it measures (wsload's client_cpu: CPU seconds per
# second; near 1.0 the one-threaded tool, reading twice the frames with typing on, is what
# delays the frames it timestamps, not the server).
# Records bench/out/typing/DATE.json (not a README table row: bench/RESULTS.md quotes it), the
# tools' output in bench/out/raw/typing/.
#   DURATION=10 ROUNDS=3 bench/typing.sh
# WARMUP=MS (1000): the first MS ms of posts after the streams are ready give no sample (the
# streams' opening — 1,000 presence changes to up to 1,000 streams each, the subscriptions' replay
# — is still draining then, in every run alike; strata-wsload's WSLOAD_WARMUP_MS); 0 measures
# from the first post, as the records before this option did.
# PIN=1: the server on CPU 0, the load tools (wsload, wrk) on CPU 1 (taskset), so the tools' CPU
# (the subscribers read twice the frames with typing on) does not queue the server's loop behind
# it on a 2-core machine, as clients on other machines would not; both sides run pinned alike.
# KTIME=1: each frame is timed when the kernel received it (strata-wsload's WSLOAD_KTIME,
# SO_TIMESTAMPNS), not when the one-threaded subscribers' tool got to parse it: with typing on it
# reads twice the frames and waits for a CPU beside the server, and that wait is the tool's, not
# the server's latency. The tool-side p99 is reported beside it (user_p99_ms).
# PERF=SIDE (none, typing100, typing0): a profiling run, not recorded — `perf record -g` of the
# server during each run of SIDE, `perf report --no-children` (top 40 symbols by self time) printed.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
record_init typing
ulimit -n "$(ulimit -Hn)"
LOAD=build/strata-wsload
WARMUP=${WARMUP:-1000} SUBS=${SUBS:-1000} RATE=${RATE:-100} TYPERS=${TYPERS:-100} DELAYS=${DELAYS:-"100 0"} MEMBERS=${MEMBERS:-1000}
echo "# typing, $(date -u +%F), $(nproc) cores, ${DURATION}s per run, $ROUNDS rounds, commit $(git rev-parse --short HEAD)"
srv_pin=() tool_pin=()
[ -z "${PIN:-}" ] || { srv_pin=(taskset -c 0); tool_pin=(taskset -c 1); }
port=$(free_port)
"${srv_pin[@]}" build/strata --listen 127.0.0.1:"$port" --data-dir "$work/data" --max-connections $((SUBS + TYPERS + 1000)) \
  --log-level warn 2>"$work/strata.log" &
spid=$!
pids+=("$spid")
wait_port "$port"
B="http://127.0.0.1:$port"
# bench posts, t0 … t{TYPERS-1} type, the rest are members that do neither
curl -fsS "$B/v1/rooms" --json "$(python3 -c "import json,sys; t, n = int(sys.argv[1]), int(sys.argv[2])
print(json.dumps({'room_id': 'lat', 'members': ['bench'] + ['t%d' % i for i in range(t)] + ['m%d' % i for i in range(n - t - 1)]}))" "$TYPERS" "$MEMBERS")" >/dev/null

field() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k {print $2}'; }
# one run: ROUND SIDE [DELAY]; appends "SIDE round=R key=value…" to $work/out.txt
run() {
  local round=$1 side=$2 delay=${3:-} wp= wout= sig=0 secs=0 line frames
  if [ -n "$delay" ]; then
    "${tool_pin[@]}" wrk -t1 -c"$TYPERS" -d$((DURATION + 30))s -s bench/typing.lua "$B" -- lat "$TYPERS" "$delay" >"$work/wrk.txt" 2>&1 &
    wp=$!
    sleep 1 # the burst is on before the subscribers connect
  fi
  local pp=
  if [ "${PERF:-}" = "$side" ]; then
    perf record -F 999 -g -p "$spid" -o "$work/perf.data" -- sleep $((DURATION + 2)) >/dev/null 2>&1 &
    pp=$!
  fi
  cpu_run "$spid" eval 'WS_OUT=$(WSLOAD_KTIME=${KTIME:-0} WSLOAD_ROOM=lat WSLOAD_WARMUP_MS=$WARMUP "${tool_pin[@]}" "$LOAD" latency "$port" "$SUBS" "$DURATION" "$RATE")' || die "wsload failed"
  if [ -n "$pp" ]; then
    wait "$pp" || true
    perf report -i "$work/perf.data" --no-children -g none --sort symbol --stdio 2>/dev/null |
      awk '/%/ && !/^#/ && n++ < 40' | tee "$work/perf-$side-$round.txt"
  fi
  if [ -n "$wp" ]; then
    kill -INT "$wp"
    wait "$wp" || true
    wout=$(cat "$work/wrk.txt")
    ! grep -q "Non-2xx" <<<"$wout" || die "typing answered non-2xx: $wout"
    sig=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$wout")
  fi
  frames=$(($(field "$WS_OUT" samples) + $(field "$WS_OUT" typing_frames)))
  line="$side round=$round $WS_OUT typing_signals_per_s=$sig cpu_us_per_frame=$(per_op "$CPU_TICKS" "$frames")"
  echo "$line" | tee -a "$work/out.txt"
  raw_keep "$round" "$side" "$line"$'\n'"$wout"
}
none() { run "$1" none; }
sides=(none)
for d in $DELAYS; do
  eval "typing$d() { run \"\$1\" typing$d $d; }"
  sides+=("typing$d")
done
for round in $(seq "$ROUNDS"); do turns "$round" "${sides[@]}"; done

per_round() { paste -d' ' <(kv "$1" "$3" | tr ' ' '\n' | grep .) <(kv "$2" "$3" | tr ' ' '\n' | grep .) | awk '{printf "%.4f ", $1 / $2}'; }
base="without typing (alternated)"
echo
echo "| run | notify p99 ms, median (range) | tool-side p99 ms (KTIME) | p50 ms | typing signals/s | typing frames/s per subscriber | server CPU µs per delivered frame | subscribers' tool CPU share | p99 with ÷ without, per round |"
echo "|---|---|---|---|---|---|---|---|---|"
tfr() { kv "$1" typing_frames | awk -v n="$SUBS" -v d="$DURATION" '{for (i = 1; i <= NF; i++) printf "%.1f ", $i / n / d}'; }
for s in "${sides[@]}"; do
  tf=$(tfr "$s")
  q=; [ "$s" = none ] || q=$(per_round "$s" none p99_ms)
  up=$(kv "$s" user_p99_ms)
  echo "| $s | $(med $(kv "$s" p99_ms)) ($(rng $(kv "$s" p99_ms))) | ${up:+$(med $up) ($(rng $up))} | $(med $(kv "$s" p50_ms)) | $(med $(kv "$s" typing_signals_per_s)) | $(med $tf) | $(med $(kv "$s" cpu_us_per_frame)) | $(med $(kv "$s" client_cpu)) ($(rng $(kv "$s" client_cpu))) | $q |"
done
for d in $DELAYS; do
  s=typing$d
  tf=$(tfr "$s")
  what=$([ "$d" = 0 ] && echo "as fast as wrk goes" || echo "each waiting $d ms between signals")
  row "notify p99, room of $MEMBERS members, $SUBS subscribers, $RATE posts/s, typing burst from $TYPERS users ($what)" \
    "$(kv "$s" p99_ms)" "ms" \
    "median p50 $(med $(kv "$s" p50_ms)) ms; typing signals answered median $(med $(kv "$s" typing_signals_per_s))/s; typing frames per subscriber median $(med $tf)/s" \
    "$base" "$(kv none p99_ms)" "median p50 $(med $(kv none p50_ms)) ms" "" \
    "$(kv "$s" cpu_us_per_frame)" "$(kv none cpu_us_per_frame)" "delivered frame (post or typing)"
  row "notify p99 with typing ÷ without, per round (typing burst: $what)" "$(per_round "$s" none p99_ms)" "×" "bar: at most 1.10${KTIME:+; frames timed at their kernel receive (KTIME)}" "" "" ""
  [ "${KTIME:-0}" = 0 ] ||
    row "tool-side notify p99 with typing ÷ without, per round (typing burst: $what; the frames timed when the tool parsed them)" "$(per_round "$s" none user_p99_ms)" "×" "the subscribers' tool's own wait included" "" "" ""
done
[ -z "${PERF:-}" ] || { echo "PERF=$PERF: a profiling run, not recorded"; exit 0; }
out_write typing "${KTIME:+KTIME=$KTIME }${PIN:+PIN=$PIN }WARMUP=$WARMUP DURATION=$DURATION ROUNDS=$ROUNDS SUBS=$SUBS RATE=$RATE TYPERS=$TYPERS DELAYS=\"$DELAYS\" bench/typing.sh"
