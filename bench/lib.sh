# SPDX-License-Identifier: MIT
# Shared by the bench scripts (sourced from the repo root): installs the peers, builds strata,
# and gives a temp dir, processes stopped by PID on exit, free ports and a wait for a port;
# the one way every script counts answers (only 2xx count as throughput, see "Counting" in
# bench/RESULTS.md) and the one way it records a run in bench/out/NAME/DATE.json for bench/table.py
# (records accumulate: the table's ranges span the runs), with the load gate (record_init, out_write)
# and the alternating order of the sides in each round (turns).
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3} # rounds of each interleaved pair (strata, peer, strata, peer …)
tools/install-deps.sh --bench
tools/build.sh release >/dev/null
work=$(mktemp -d /tmp/strata-bench-XXXXXX)
pids=()
# bench_on_exit CMD: CMD (eval'd) runs first on exit, whatever the exit status: a script's own
# holdings, such as the bench lock bench/eraseab.sh takes per run (lib.sh owns the EXIT trap)
exit_hooks=()
bench_on_exit() { exit_hooks+=("$*"); }
# On a failed run the servers' logs are kept (copied out of $work, which goes) and their place told.
cleanup() {
  local rc=$? keep h
  for h in "${exit_hooks[@]}"; do eval "$h" || true; done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$rc" != 0 ] && [ -n "$(find "$work" -maxdepth 1 -name '*.log' -size +0 2>/dev/null)" ]; then
    keep=$(mktemp -d /tmp/strata-bench-failed-XXXXXX)
    cp "$work"/*.log "$keep"/ 2>/dev/null || true
    echo "bench: exit $rc; the logs are in $keep" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
die() { echo "BENCH FAILED: $*" >&2; exit 1; }
load_avg() { cut -d' ' -f1 /proc/loadavg; }
bench_load_start=$(load_avg) # again in record_init, once the load gate let the run start

# ---- counting answers ----
# strata: its own per-route, per-status counter (strata_http_requests_total{route,status}),
# read before and after a run — exact, and costs wrk nothing (no Lua response() callback).
# Prints "STATUS COUNT" lines summed over every route but GET /metrics itself.
st_statuses() {
  curl -fsS "http://127.0.0.1:$1/metrics" | awk '
    /^strata_http_requests_total\{/ && !/route="GET \/metrics"/ {
      match($0, /status="[0-9]+"/); n[substr($0, RSTART + 8, 3)] += $NF }
    END { for (s in n) print s, n[s] }' | sort
}
# "STATUS DELTA" for every status whose count moved between two st_statuses outputs
st_status_delta() { join -a2 -e0 -o 0,1.2,2.2 <(echo "$1") <(echo "$2") | awk '$3 - $2 > 0 {print $1, $3 - $2}'; }

# wrk's own summary: seconds it ran, requests it counted, p50/p99 in ms (with --latency)
wrk_secs() { awk '/requests in/ { t = $4; sub(/,$/, "", t); u = t; gsub(/[0-9.]/, "", u); v = t + 0
  print (u == "ms") ? v / 1000 : (u == "m") ? v * 60 : v }' <<<"$1"; }
wrk_pct() { awk -v p="$2" '$1 == p { v = $2; u = v; gsub(/[0-9.]/, "", u); v += 0
  printf "%.2f", (u == "us") ? v / 1000 : (u == "s") ? v * 1000 : (u == "m") ? v * 60000 : v }' <<<"$1"; }
wrk_errors() { awk '/Socket errors/ { sub(/.*Socket errors: /, ""); print }' <<<"$1"; }
# wrk's "Socket errors: connect N, read N, write N, timeout N" (printed only when one is > 0):
# a request never answered is not a slow answer, so any of them fails the run.
wrk_socket_check() {
  local e; e=$(wrk_errors "$W_OUT")
  [ -z "$e" ] || [ "$(tr -cd '0-9\n ' <<<"${e//,/ }" | awk '{for (i = 1; i <= NF; i++) s += $i} END {print s + 0}')" = 0 ] ||
    die "wrk socket errors ($e) during: wrk $1"
}

# st_count BEFORE AFTER EXPECTED WHAT: the answers between two st_statuses outputs. Sets W_OK (2xx)
# and W_EXPECTED (the non-2xx statuses EXPECTED names, space-separated); any other status fails
# the bench, naming WHAT ran meanwhile.
st_count() {
  local delta bad
  delta=$(st_status_delta "$1" "$2")
  W_OK=$(awk '$1 ~ /^2/ {s += $2} END {print s + 0}' <<<"$delta")
  W_EXPECTED=$(awk -v e=" $3 " 'index(e, " " $1 " ") {s += $2} END {print s + 0}' <<<"$delta")
  bad=$(awk -v e=" $3 " '$1 !~ /^2/ && !index(e, " " $1 " ") {printf "%s%s x%s", sep, $1, $2; sep = ", "}' <<<"$delta")
  [ -z "$bad" ] || die "strata answered $bad during: $4 (only 2xx${3:+ and $3} may appear)"
}

# wrk against strata, counting only 2xx answers from strata's own metrics.
#   wrk_strata PORT EXPECTED -- WRK-ARGS…
# EXPECTED: space-separated non-2xx statuses the workload expects (e.g. "409" for bookings that
# lose a race), counted apart as W_EXPECTED; any other status makes the bench fail.
# Sets W_OK (2xx answers), W_EXPECTED, W_SECS, W_RPS (2xx per second), W_EXP_RPS, W_P50, W_P99
# (ms, all answers), W_WRK_RPS (wrk's own figure, every answer), W_OUT (wrk's output).
wrk_strata() {
  local port=$1 expected=$2 before after; shift 3
  before=$(st_statuses "$port")
  W_OUT=$(wrk "$@" 2>&1) || die "wrk failed: $W_OUT"
  after=$(st_statuses "$port")
  st_count "$before" "$after" "$expected" "wrk $*"
  W_SECS=$(wrk_secs "$W_OUT")
  W_RPS=$(awk -v n="$W_OK" -v s="$W_SECS" 'BEGIN {printf "%.0f", n / s}')
  W_EXP_RPS=$(awk -v n="$W_EXPECTED" -v s="$W_SECS" 'BEGIN {printf "%.0f", n / s}')
  W_WRK_RPS=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$W_OUT")
  W_P50=$(wrk_pct "$W_OUT" 50%); W_P99=$(wrk_pct "$W_OUT" 99%)
  wrk_socket_check "$*"
  [ "$W_OK" -gt 0 ] || die "no 2xx answer during: wrk $*"
}

# Where a run's time goes inside strata, per answered request: CPU (user + system, from
# /proc/PID/task/*/stat) and context switches (voluntary + involuntary, /proc status), in all
# and per named thread (the loop is "strata", the store's threads "strata-sync" and
# "strata-apply"). Reads /proc only: no profiler runs beside a measured run.
#   cost_begin PID; …the run…; cost_end PID ANSWERS
# Sets C_CPU_US, C_CSW (per answer) and C_THREADS ("name cpu_us/csw, …").
cost_snap() {
  local t
  for t in /proc/"$1"/task/*; do
    awk -v c="$(cat "$t/comm")" 'FNR == NR { split($0, a, ") "); split(a[2], f, " "); cpu = f[12] + f[13]; next }
      /^voluntary_ctxt_switches/ { v = $2 } /^nonvoluntary_ctxt_switches/ { n = $2 }
      END { print c, cpu, v + n }' "$t/stat" "$t/status" 2>/dev/null || true
  done | awk '{ cpu[$1] += $2; cs[$1] += $3 } END { for (c in cpu) print c, cpu[c], cs[c] }' | sort
}
cost_begin() { C_SNAP0=$(cost_snap "$1"); }
cost_end() {
  local n=$2 hz; hz=$(getconf CLK_TCK)
  local snap1; snap1=$(cost_snap "$1")
  local d; d=$(join <(echo "$C_SNAP0") <(echo "$snap1") | awk '{ print $1, $4 - $2, $5 - $3 }')
  C_CPU_US=$(awk -v n="$n" -v hz="$hz" '{ s += $2 } END { printf "%.1f", s * 1e6 / hz / n }' <<<"$d")
  C_CSW=$(awk -v n="$n" '{ s += $3 } END { printf "%.3f", s / n }' <<<"$d")
  C_THREADS=$(awk -v n="$n" -v hz="$hz" '$2 > 0 || $3 > 0 { printf "%s%s %.1f µs/%.3f cs", sep, $1, $2 * 1e6 / hz / n, $3 / n; sep = ", " }' <<<"$d")
}

# ---- server CPU per operation ----
# CPU ticks (user + system) a server has used so far: each PID given, the children it reaped
# (cutime + cstime: PostgreSQL backends that ended, old nginx workers) and its live children
# (PostgreSQL's backends and helpers, nginx's workers). Threads are in their process's figure.
# Only server processes are named: the load generator's CPU is never in it.
srv_ticks() {
  local p c t=0
  for p in "$@"; do
    t=$((t + $(sed 's/.*) //' /proc/"$p"/stat | awk '{print $12 + $13 + $14 + $15}')))
    for c in $(pgrep -P "$p" || true); do
      # (a backend that ended meanwhile reads as 0 here; its time is in the parent's cutime later)
      t=$((t + $(sed 's/.*) //' /proc/"$c"/stat 2>/dev/null | awk '{s = $12 + $13} END {print s + 0}')))
    done
  done
  echo $t
}
# cpu_run "PIDS" COMMAND ARGS…: runs COMMAND (a function such as wrk_strata or redis_timed) in
# this shell and sets CPU_TICKS to what the server processes PIDS used meanwhile.
cpu_run() {
  local ps=$1 a; shift
  a=$(srv_ticks $ps)
  "$@"
  CPU_TICKS=$(($(srv_ticks $ps) - a))
}
# per_op TICKS OPS: µs of server CPU per operation (3 significant digits)
per_op() { awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.3g", (n > 0) ? t * 1e6 / hz / n : 0}'; }
# med "V1 V2 …": the median of the values (the mean of the middle two for an even count)
med() { tr ' ' '\n' <<<"$*" | grep . | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# rng "V1 V2 …": the range of the values, "lowest-highest"
rng() { tr ' ' '\n' <<<"$*" | grep . | sort -g | sed -n '1p;$p' | paste -sd'-' -; }
# kv SIDE KEY: the KEY=value figures of the lines of $work/out.txt that start with SIDE, space
# separated (the A/B scripts write one "SIDE k=v k=v …" line per run)
kv() { awk -v s="$1" -v k="$2" '$1 == s { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) printf "%s ", a[2] } }' "$work/out.txt"; }

# redis_pubsub_start CLIENTS: a Redis 7 for pub/sub (nothing kept on disk, room for CLIENTS
# connections), its log in $work/redis.log; sets rport and rpid (also in pids) and waits for it
# (bench/streams.sh, bench/bigroom.sh, bench/notifyab.sh)
redis_pubsub_start() {
  rport=$(free_port)
  redis-server --port "$rport" --save '' --appendonly no --maxclients $(($1 + 1000)) --daemonize no \
    --logfile "$work/redis.log" &
  rpid=$!
  pids+=("$rpid")
  wait_port "$rport"
}

# ---- a clean tree, raw output ----
# record_init NAME: refuses a tree with uncommitted changes or untracked files that .gitignore does
# not name (bench/out aside, which the run itself writes; CMake globs src/*/*.c, so a new file not
# yet committed would be built in): a record names the commit it measured, so that commit must be
# the code.
# ALLOW_DIRTY=1 (smoke tests only) runs anyway and marks the record "dirty"; bench/table.py
# --check refuses a dirty record. Then the load gate's first half (below), and a new
# bench/out/raw/NAME/DATE/, where raw_keep ROUND SIDE TEXT keeps each run's tool output (wrk,
# redis-benchmark, pgbench, wsload) as ROUND-SIDE.txt; the record is bench/out/NAME/DATE.json.
#
# The load gate (the thresholds are stated in README's Benchmarks section and read by
# bench/table.py --check from the record):
# - before: the 1-minute load average must be at most LOAD_MAX (default 0.5 per core); record_init
#   waits up to LOAD_WAIT seconds (default 300: the previous script's or the build's own load
#   decays) and refuses to start past that.
# - during, judged at the end: the CPU time the machine spent outside this bench's own process
#   tree (the script, its servers, its load generators and everything they reaped), from
#   /proc/stat's user + nice + system less the tree's utime + stime (+ reaped children's) and the
#   kernel threads' (softirq, journal and writeback work mostly done for the bench), as a
#   share of all cores over the run, must be at most FOREIGN_MAX percent (default 10). The 1-minute
#   load average at the end is recorded but not gated: it counts the run's own processes (chat's
#   64 PostgreSQL backends alone make it 10).
# A run past either is not recorded (out_write dies; ALLOW_DIRTY=1 smoke runs record it marked
# "loaded", refused by bench/table.py --check like a dirty one).
bench_dirty() { [ -n "$(git status --porcelain -- . ':!bench/out' 2>/dev/null)" ]; }
bench_was_dirty=0
bench_root=$$
LOAD_MAX=${LOAD_MAX:-$(awk -v n="$(nproc)" 'BEGIN {print n * 0.5}')}
LOAD_WAIT=${LOAD_WAIT:-300}
FOREIGN_MAX=${FOREIGN_MAX:-10}
# "OWN TOTAL STEAL": CPU ticks of this bench's process tree (every descendant of $bench_root, with
# the children each reaped) and of the kernel's threads, the machine's user + nice + system ticks,
# and its steal ticks
cpu_split() {
  python3 - "$bench_root" <<'PY'
import os, sys
root = int(sys.argv[1]); kids = {}; t = {}
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        f = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    kids.setdefault(int(f[1]), []).append(int(d))
    t[int(d)] = sum(int(x) for x in f[11:15])  # utime stime cutime cstime
def tree(r):
    n, todo = 0, [r]
    while todo:
        p = todo.pop(); n += t.get(p, 0); todo += kids.get(p, [])
    return n
c = open("/proc/stat").readline().split()[1:]
# the kernel's threads (kthreadd's children: softirq, journal, writeback) count as the bench's
# own: on a quiet machine they serve its loopback traffic and fsyncs
print(tree(root) + tree(2), int(c[0]) + int(c[1]) + int(c[2]), int(c[7]) if len(c) > 7 else 0)
PY
}
record_init() {
  if bench_dirty; then
    bench_was_dirty=1
    [ "${ALLOW_DIRTY:-}" = 1 ] || die "uncommitted changes or untracked files (git status --porcelain): commit them first, a record names the commit it measured (ALLOW_DIRTY=1 for a smoke test; its record is marked dirty)"
    echo "bench: ALLOW_DIRTY=1 on a tree with uncommitted changes: the record is marked dirty" >&2
  fi
  local waited=0
  # BENCH_MEASURES=bytes (bench/bookflat.sh): sizes, not rates; no load gate
  [ "${BENCH_MEASURES:-}" != bytes ] || waited=-1
  while [ "$waited" -ge 0 ] && awk -v l="$(load_avg)" -v m="$LOAD_MAX" 'BEGIN { exit !(l > m) }'; do
    if [ "$waited" -ge "$LOAD_WAIT" ]; then
      [ "${ALLOW_DIRTY:-}" = 1 ] || die "the machine is loaded: 1-minute load average $(load_avg) > LOAD_MAX=$LOAD_MAX after waiting ${LOAD_WAIT}s (its figures would not be fair; run on a quiet machine)"
      echo "bench: ALLOW_DIRTY=1 on a loaded machine (load $(load_avg) > $LOAD_MAX): the record is marked loaded" >&2
      break
    fi
    [ "$waited" -gt 0 ] || echo "bench: waiting up to ${LOAD_WAIT}s for the 1-minute load average ($(load_avg)) to fall to LOAD_MAX=$LOAD_MAX" >&2
    sleep 5; waited=$((waited + 5))
  done
  bench_load_start=$(load_avg)
  bench_stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
  bench_t0=$(date +%s.%N)
  read -r bench_own0 bench_busy0 bench_steal0 <<<"$(cpu_split)"
  raw_dir=bench/out/raw/$1/$bench_stamp
  mkdir -p "$raw_dir"
}
raw_keep() { printf '%s\n' "$3" >>"$raw_dir/$1-$2.txt"; }
# A script that gives the bench lock back between its runs (bench/eraseab.sh: other engineers'
# builds go on meanwhile) would have their CPU counted as foreign over its whole span, though
# none of it ran beside a measured run. gate_hold (the lock just taken) and gate_release (before
# giving it back) bound the windows it measures in; out_write then judges the CPU outside the
# bench over the windows' sum only, and records their count (gate.windows). The 1-minute load
# before (record_init's half) is still the one before the first window.
gate_wins=0 gate_own=0 gate_busy=0 gate_steal=0 gate_secs=0
gate_hold() {
  bench_t0=$(date +%s.%N)
  read -r bench_own0 bench_busy0 bench_steal0 <<<"$(cpu_split)"
}
gate_release() {
  local o b s t
  read -r o b s <<<"$(cpu_split)"
  t=$(date +%s.%N)
  gate_own=$((gate_own + o - bench_own0)) gate_busy=$((gate_busy + b - bench_busy0))
  gate_steal=$((gate_steal + s - bench_steal0))
  gate_secs=$(awk -v a="$gate_secs" -v t0="$bench_t0" -v t1="$t" 'BEGIN {printf "%.3f", a + t1 - t0}')
  gate_wins=$((gate_wins + 1))
}

# wrk against a peer without per-status metrics (nginx): wrk's "Non-2xx or 3xx responses" line
# counts statuses above 399 (wrk 4.1); the peers' configs answer nothing but 200, so any such
# line fails the bench. Sets the same W_* variables (W_OK = every answer wrk counted).
wrk_peer() {
  W_OUT=$(wrk "$@" 2>&1) || die "wrk failed: $W_OUT"
  local bad; bad=$(awk '/Non-2xx or 3xx responses/ {print $NF}' <<<"$W_OUT")
  [ -z "$bad" ] || die "peer answered $bad non-2xx during: wrk $*"
  wrk_socket_check "$*"
  W_SECS=$(wrk_secs "$W_OUT")
  W_OK=$(awk '/requests in/ {print $1}' <<<"$W_OUT"); W_EXPECTED=0; W_EXP_RPS=0
  W_RPS=$(awk -v n="$W_OK" -v s="$W_SECS" 'BEGIN {printf "%.0f", n / s}')
  W_WRK_RPS=$W_RPS
  W_P50=$(wrk_pct "$W_OUT" 50%); W_P99=$(wrk_pct "$W_OUT" 99%)
}

# Redis for a fixed time, like wrk: redis-benchmark has no duration flag, so it is given more
# requests than it can finish and stopped after DURATION seconds; what counts is Redis's own
# per-command counter (INFO commandstats: calls less failed_calls and rejected_calls) over the
# measured wall time. A failed or rejected call fails the bench.
#   redis_timed PORT COMMAND -- REDIS-BENCHMARK-ARGS…   (COMMAND as in commandstats: incr, evalsha)
# Sets R_OK (successful calls), R_SECS, R_RPS, R_OUT (redis-benchmark's last lines and the count).
redis_cmdstat() { redis-cli -p "$1" INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v c="cmdstat_$2" '
  $1 == c { for (i = 2; i < NF; i += 2) v[$i] = $(i + 1) } END { print v["calls"] + 0, v["failed_calls"] + 0, v["rejected_calls"] + 0 }'; }
redis_timed() {
  local port=$1 cmd=$2 b f r b2 f2 r2 t0 t1; shift 3
  read -r b f r <<<"$(redis_cmdstat "$port" "$cmd")"
  t0=$(date +%s%N)
  R_OUT=$(timeout "$DURATION" redis-benchmark -p "$port" -n 1000000000 "$@" 2>&1 | tr '\r' '\n' | grep '[^[:space:]]' | tail -n 3 || true)
  t1=$(date +%s%N)
  read -r b2 f2 r2 <<<"$(redis_cmdstat "$port" "$cmd")"
  [ $((f2 - f + r2 - r)) -eq 0 ] || die "Redis failed $((f2 - f)) and rejected $((r2 - r)) $cmd calls"
  R_OK=$((b2 - b))
  R_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
  R_RPS=$(awk -v n="$R_OK" -v s="$R_SECS" 'BEGIN {printf "%.0f", n / s}')
  R_OUT+=$'\n'"commandstats $cmd: $R_OK successful calls in $R_SECS s = $R_RPS/s (redis-benchmark $*)"
  [ "$R_OK" -gt 0 ] || die "no successful $cmd call on Redis"
}

# ---- recording a run ----
# row BENCHMARK STRATA_VALUES UNIT STRATA_NOTE PEER PEER_VALUES PEER_NOTE [PEER_UNIT]
#     [STRATA_CPU PEER_CPU OP [STRATA_CONFLICTS PEER_CONFLICTS [RATIO]]]
# VALUES: one figure per round, space-separated, in round order on both sides (the ratio is taken
# per round, strata's round i over the peer's round i); PEER/PEER_VALUES empty when there is no
# peer; PEER_UNIT defaults to UNIT. STRATA_CPU/PEER_CPU: µs of server CPU per operation, one per
# round; OP names the operation ("2xx answer", "committed tx", "frame"). *_CONFLICTS: answers the
# workload expects to lose (bookings' 409s) per second, one per round: their own column, never in
# the throughput or the ratio. The ratio is taken for rates (units ending in /s); RATIO "ratio"
# takes it for a row of another unit too when both sides have the same one (a time or a size:
# there strata is ahead below 1.0, bench/bigroom.sh). out_write records the
# values with their median and range (min–max), and the same of the ratio, for bench/table.py.
rows_file=$work/rows.tsv
row() { local IFS=$'\t'; echo "$*" >>"$rows_file"; }
# out_write NAME COMMAND [EXTRA.json]: bench/out/NAME/DATE.json with the rows, date, machine,
# commit, load and the load gate's figures, rounds, and whether the tree had uncommitted changes
# (record_init refuses that without ALLOW_DIRTY=1); EXTRA's keys are added to the record (a script
# whose figures are not table rows, such as bench/bookflat.sh).
out_write() {
  touch "$rows_file"
  local dirty=$bench_was_dirty own1 busy1 steal1 t1 foreign steal loaded=0
  ! bench_dirty || dirty=1
  read -r own1 busy1 steal1 <<<"$(cpu_split)"
  t1=$(date +%s.%N)
  if [ "$gate_wins" -gt 0 ]; then # only the windows gate_hold … gate_release bound
    bench_own0=0 own1=$gate_own bench_busy0=0 busy1=$gate_busy bench_steal0=0 steal1=$gate_steal
    bench_t0=0 t1=$gate_secs
  fi
  read -r foreign steal <<<"$(awk -v o0="$bench_own0" -v o1="$own1" -v b0="$bench_busy0" -v b1="$busy1" \
    -v s0="$bench_steal0" -v s1="$steal1" -v t0="$bench_t0" -v t1="$t1" -v n="$(nproc)" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { all = (t1 - t0) * n * hz; f = (b1 - b0) - (o1 - o0); if (f < 0) f = 0
             printf "%.1f %.1f", 100 * f / all, 100 * (s1 - s0) / all }')"
  if [ "${BENCH_MEASURES:-}" != bytes ] &&
    awk -v l="$bench_load_start" -v m="$LOAD_MAX" -v f="$foreign" -v fm="$FOREIGN_MAX" 'BEGIN { exit !(l > m || f > fm) }'; then
    loaded=1
    [ "${ALLOW_DIRTY:-}" = 1 ] || die "not recorded: the machine was loaded (load before $bench_load_start, LOAD_MAX $LOAD_MAX; CPU outside this bench ${foreign}% of the machine, FOREIGN_MAX $FOREIGN_MAX%); the tools' output is in $raw_dir"
  fi
  mkdir -p "bench/out/$1"
  python3 - "$1" "$2" "$rows_file" "$bench_load_start" "$(load_avg)" "$dirty" \
    "$LOAD_MAX" "$foreign" "$FOREIGN_MAX" "$steal" "$loaded" "$raw_dir" "${3:-}" "$gate_wins" >"$work/out.json" <<'PY'
import datetime, json, os, platform, statistics, subprocess, sys
name, command, rows_path, load0, load1, dirty, load_max, foreign, foreign_max, steal, loaded, raw, extra = sys.argv[1:14]
wins = sys.argv[14] if len(sys.argv) > 14 else "0"  # gate_hold … gate_release windows
def sh(*a):
    try: return subprocess.run(a, capture_output=True, text=True).stdout.strip()
    except OSError: return ""
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
def vals(s):
    return [float(x) for x in s.split() if x not in ("", "n/a")]
def stats(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "values": v} if v else None
rows = []
for line in open(rows_path):
    f = line.rstrip("\n").split("\t") + [""] * 14
    sv, pv = vals(f[1]), vals(f[5])
    unit, punit = f[2], f[7] or f[2]
    ratio = None
    rated = (unit.endswith("/s") and punit.endswith("/s")) or (f[13] == "ratio" and unit == punit)
    if sv and pv and len(sv) == len(pv) and rated and all(pv):
        ratio = stats([round(a / b, 4) for a, b in zip(sv, pv)])
    sc, pc = vals(f[8]), vals(f[9])
    rows.append({"benchmark": f[0], "unit": unit, "strata": stats(sv), "strata_note": f[3],
                 "peer": f[4], "peer_value": stats(pv), "peer_note": f[6], "peer_unit": punit,
                 "ratio": ratio,
                 "cpu_us_per_op": {"op": f[10], "strata": stats(sc), "peer": stats(pc)} if sc or pc else None,
                 "conflicts_per_s": {"strata": stats(vals(f[11])), "peer": stats(vals(f[12]))} if f[11] else None})
rec = {
    "format": 3, "name": name, "command": command,
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "machine": {"host": platform.node(), "cores": os.cpu_count(), "cpu": cpu,
                "mem_gib": round(mem / 1048576), "kernel": platform.release(),
                "load_start": float(load0), "load_end": float(load1)},
    "measures": os.environ.get("BENCH_MEASURES") or "rates",
    "gate": {"load_max": float(load_max), "load_start": float(load0), "foreign_cpu_pct": float(foreign),
             "foreign_max_pct": float(foreign_max), "steal_pct": float(steal),
             **({"windows": int(wins)} if int(wins) else {})},
    "loaded": loaded == "1",
    "commit": sh("git", "rev-parse", "--short", "HEAD"), "dirty": dirty == "1",
    "duration_s": float(os.environ.get("DURATION", "10")),
    "rounds": int(os.environ.get("ROUNDS", "3")),
    "order": "alternating",
    "raw": raw,
    "rows": rows}
if extra:
    rec.update(json.load(open(extra)))
print(json.dumps(rec, indent=1))
PY
  mv "$work/out.json" "bench/out/$1/$bench_stamp.json"
  echo "wrote bench/out/$1/$bench_stamp.json (load before $bench_load_start, CPU outside this bench ${foreign}% of the machine)"
}

# turns ROUND FN…: runs the sides of one round in turns, the first side changing every round
# (round 1: A B C, round 2: B C A, round 3: C A B …), so neither side always runs first (after
# the other's writes, caches or heat). Each FN appends its own round's figures, so the recorded
# values stay in round order whatever ran first.
turns() {
  local r=$1 n i; shift
  n=$#
  local fns=("$@")
  for ((i = 0; i < n; i++)); do "${fns[$(((r - 1 + i) % n))]}" "$r"; done
}
# turns_of ROUND WHAT LABEL…: each label's run of WHAT (`measure ROUND LABEL WHAT`, the script's
# own) in turns, the first changing every round (the binaries of an A/B: bench/roomlist.sh,
# bench/ownerab.sh).
turns_of() {
  local r=$1 what=$2 l fns=()
  shift 2
  for l in "$@"; do
    eval "m_$l() { measure \"\$1\" $l $what; }"
    fns+=("m_$l")
  done
  turns "$r" "${fns[@]}"
}

# CPU ticks (user + system) process $1 has used so far.
ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }

# Starts "$BIN" for CONNS streams (--max-connections CONNS + 1000, the open files limit raised
# to the hard one for the load generator) and waits for it: its port in $port, its pid in $p.
# Then holds /tmp/strata-bench.lock (bench/adopt.sh, bench/closecost.sh).
streams_server_start() {
  ulimit -n "$(ulimit -Hn)"
  port=$(free_port)
  "$BIN" --listen 127.0.0.1:"$port" --data-dir "$work/data" --max-connections $((CONNS + 1000)) \
    --log-level warn &
  p=$!
  pids+=("$p")
  wait_port "$port"
  exec 9>/tmp/strata-bench.lock
  flock 9
}

# A strata for a timed flush (bench/flushrate.sh, bench/tablecost.sh): only POST /v1/admin/flush
# flushes (no interval pass, no row threshold, no reconciliation), data in $work/data.
#   flush_server_start BIN [ARGS…]   sets spid (also in pids) and url; flush_server_stop ends it;
#   flush_metric NAME                 the value of one /metrics line
flush_server_start() {
  local bin=$1 port
  shift
  port=$(free_port)
  "$bin" --listen 127.0.0.1:"$port" --data-dir "$work/data" --map-size 8GiB --flush-interval 86400 \
    --flush-rows 100000000 --reconcile-interval 86400 --log-level warn "$@" 2>>"$work/strata.log" &
  spid=$!
  pids+=("$spid")
  wait_port "$port"
  url="http://127.0.0.1:$port"
}
flush_server_stop() { kill "$spid"; wait "$spid" 2>/dev/null || true; }
flush_metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
# the 201 answers so far (posts made), from strata's per-status counter
flush_created() { curl -s "$url/metrics" | awk '/^strata_http_requests_total\{/ && /status="201"/ {n += $NF} END {print n + 0}'; }
flush_healthy() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")" = 200 ]; }
# flush_settle: POST /v1/admin/flush, then waits for its first pass and until no flush runs or
# is queued (a pass cools every owner; the gauges say when the last one is done)
flush_settle() {
  curl -fsS -o /dev/null -XPOST "$url/v1/admin/flush" || die "flush refused"
  while [ "$(flush_metric strata_flush_passes_total)" = 0 ]; do sleep 0.2; done
  while [ "$(flush_metric strata_flush_running)" != 0 ] || [ "$(flush_metric strata_flush_pending)" != 0 ]; do sleep 0.2; done
}

# ---- A/B of two binaries on one data dir (bench/tablescommit.sh, bench/tablesroute.sh,
# bench/tickcost.sh) ----
# The data dir is made once with NEW and kept as $work/template; every run of either side starts
# on a fresh copy of it, so both sides start from the same bytes. A script defines
# `measure ROUND SIDE` (one run: ab_start, its figures, ab_done) and calls ab_rounds.
# ab_bins: OLD (required) and NEW (default build/strata), both executable
ab_bins() {
  OLD=${OLD:-} NEW=${NEW:-build/strata}
  [ -n "$OLD" ] || die "OLD=path to the binary before the change"
  local b
  for b in "$OLD" "$NEW"; do [ -x "$b" ] || die "$b: no such binary"; done
}
# template_keep: stops the server and keeps its data dir as the template
template_keep() {
  flush_server_stop
  rm -rf "$work/template"
  mv "$work/data" "$work/template"
}
# template_atsize [--hot] USERS MSGS [SERVER ARGS…]: the template of USERS users x MSGS posts
# (bench/atsize.lua load mode, wrk until the posts stop rising near the target), all cooled by one
# POST /v1/admin/flush (--hot: none); NEW started with flush_server_start and ARGS. Sets posts and
# objects.
template_atsize() {
  local cool=1
  [ "$1" = --hot ] && cool= && shift
  local users=$1 msgs=$2 wp last=-1 target=$(($1 * $2))
  shift 2
  rm -rf "$work/data"
  flush_server_start "$NEW" "$@"
  wrk -t1 -c32 -d3600s -s bench/atsize.lua "$url" -- load "$users" "$msgs" >"$work/wrk-load.txt" 2>&1 &
  wp=$!
  pids+=("$wp")
  while posts=$(flush_created) && { [ "$posts" -lt $((target - 16)) ] || [ "$posts" != "$last" ]; }; do
    kill -0 "$wp" 2>/dev/null || die "wrk ended early: $(cat "$work/wrk-load.txt")"
    last=$posts
    sleep 0.5
  done
  kill -INT "$wp"
  wait "$wp" || true
  if [ -n "$cool" ]; then
    flush_settle
    objects=$(flush_metric 'strata_flush_total{result="ok"}')
    [ "${objects:-0}" -ge "$users" ] || die "only ${objects:-0} objects flushed for $users users"
  fi
  template_keep
}
# template_start BIN [SERVER ARGS…]: BIN (flush_server_start) on a fresh copy of the template
# (bench/roomsweep.sh: one binary, its sides told apart by their environment)
template_start() {
  rm -rf "$work/data"
  cp -a "$work/template" "$work/data"
  flush_server_start "$@"
}
# ab_start SIDE [SERVER ARGS…]: SIDE's binary (old: OLD, new: NEW) on a fresh copy of the template
ab_start() {
  local bin
  bin=$([ "$1" = old ] && echo "$OLD" || echo "$NEW")
  shift
  template_start "$bin" "$@"
}
# ab_done ROUND SIDE LINE: stops the server; LINE ("SIDE k=v …") to $work/out.txt (for kv) and raw
ab_done() {
  flush_server_stop
  echo "$3" | tee -a "$work/out.txt"
  raw_keep "$1" "$2" "$3"
}
# ab_rounds: ROUNDS rounds of `measure ROUND SIDE` for old and new, in turns
ab_rounds() {
  local r
  for r in $(seq "$ROUNDS"); do turns_of "$r" "" old new; done
}
# ab_row WHAT KEY UNIT: a record row of KEY's per-run figures, new vs old (old alternated)
ab_row() {
  row "$1, new vs old" "$(kv new "$2")" "$3" "" "main before the change, alternated" "$(kv old "$2")" "" "$3"
}
