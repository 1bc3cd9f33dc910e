# SPDX-License-Identifier: MIT
# Shared by the bench scripts (sourced from the repo root): installs the peers, builds strata,
# and gives a temp dir, processes stopped by PID on exit, free ports and a wait for a port;
# the one way every script counts answers (only 2xx count as throughput, see "Counting" in
# bench/RESULTS.md) and the one way it records a run in bench/out/NAME.json for bench/table.py.
DURATION=${DURATION:-10}
tools/install-deps.sh --bench
tools/build.sh release >/dev/null
work=$(mktemp -d /tmp/strata-bench-XXXXXX)
pids=()
# On a failed run the servers' logs are kept (copied out of $work, which goes) and their place told.
cleanup() {
  local rc=$? keep
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
bench_load_start=$(load_avg)

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

# wrk against strata, counting only 2xx answers from strata's own metrics.
#   wrk_strata PORT EXPECTED -- WRK-ARGS…
# EXPECTED: space-separated non-2xx statuses the workload expects (e.g. "409" for bookings that
# lose a race), counted apart as W_EXPECTED; any other status makes the bench fail.
# Sets W_OK (2xx answers), W_EXPECTED, W_SECS, W_RPS (2xx per second), W_EXP_RPS, W_P50, W_P99
# (ms, all answers), W_WRK_RPS (wrk's own figure, every answer), W_OUT (wrk's output).
wrk_strata() {
  local port=$1 expected=$2 before after delta bad; shift 3
  before=$(st_statuses "$port")
  W_OUT=$(wrk "$@" 2>&1) || die "wrk failed: $W_OUT"
  after=$(st_statuses "$port")
  delta=$(st_status_delta "$before" "$after")
  W_OK=$(awk '$1 ~ /^2/ {s += $2} END {print s + 0}' <<<"$delta")
  W_EXPECTED=$(awk -v e=" $expected " 'index(e, " " $1 " ") {s += $2} END {print s + 0}' <<<"$delta")
  bad=$(awk -v e=" $expected " '$1 !~ /^2/ && !index(e, " " $1 " ") {printf "%s%s x%s", sep, $1, $2; sep = ", "}' <<<"$delta")
  [ -z "$bad" ] || die "strata answered $bad during: wrk $* (only 2xx${expected:+ and $expected} may appear)"
  W_SECS=$(wrk_secs "$W_OUT")
  W_RPS=$(awk -v n="$W_OK" -v s="$W_SECS" 'BEGIN {printf "%.0f", n / s}')
  W_EXP_RPS=$(awk -v n="$W_EXPECTED" -v s="$W_SECS" 'BEGIN {printf "%.0f", n / s}')
  W_WRK_RPS=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$W_OUT")
  W_P50=$(wrk_pct "$W_OUT" 50%); W_P99=$(wrk_pct "$W_OUT" 99%)
  local sock; sock=$(wrk_errors "$W_OUT")
  [ -z "$sock" ] || echo "note: wrk socket errors (requests never answered, not counted): $sock" >&2
  [ "$W_OK" -gt 0 ] || die "no 2xx answer during: wrk $*"
}

# Where a run's time goes inside strata, per answered request: CPU (user + system, from
# /proc/PID/task/*/stat), system calls (perf stat's raw_syscalls:sys_enter tracepoint; "n/a"
# where perf may not trace) and context switches (voluntary + involuntary, /proc status), in all
# and per named thread (the loop is "strata", the store's threads "strata-sync" and
# "strata-apply").
#   cost_begin PID; …the run…; cost_end PID ANSWERS
# Sets C_CPU_US, C_SYSCALLS, C_CSW (per answer) and C_THREADS ("name cpu_us/csw, …").
cost_snap() {
  local t
  for t in /proc/"$1"/task/*; do
    awk -v c="$(cat "$t/comm")" 'FNR == NR { split($0, a, ") "); split(a[2], f, " "); cpu = f[12] + f[13]; next }
      /^voluntary_ctxt_switches/ { v = $2 } /^nonvoluntary_ctxt_switches/ { n = $2 }
      END { print c, cpu, v + n }' "$t/stat" "$t/status" 2>/dev/null || true
  done | awk '{ cpu[$1] += $2; cs[$1] += $3 } END { for (c in cpu) print c, cpu[c], cs[c] }' | sort
}
cost_begin() {
  C_SNAP0=$(cost_snap "$1")
  C_PERF=$work/perf.$1
  if perf stat -e raw_syscalls:sys_enter -x, -p "$1" -o "$C_PERF" -- true >/dev/null 2>&1; then
    perf stat -e raw_syscalls:sys_enter -x, -p "$1" -o "$C_PERF" >/dev/null 2>&1 &
    C_PERF_PID=$!
  else
    C_PERF_PID=
  fi
}
cost_end() {
  local n=$2 hz; hz=$(getconf CLK_TCK)
  if [ -n "$C_PERF_PID" ]; then kill -INT "$C_PERF_PID"; wait "$C_PERF_PID" 2>/dev/null || true; fi
  local snap1; snap1=$(cost_snap "$1")
  local d; d=$(join <(echo "$C_SNAP0") <(echo "$snap1") | awk '{ print $1, $4 - $2, $5 - $3 }')
  C_CPU_US=$(awk -v n="$n" -v hz="$hz" '{ s += $2 } END { printf "%.1f", s * 1e6 / hz / n }' <<<"$d")
  C_CSW=$(awk -v n="$n" '{ s += $3 } END { printf "%.3f", s / n }' <<<"$d")
  C_THREADS=$(awk -v n="$n" -v hz="$hz" '$2 > 0 || $3 > 0 { printf "%s%s %.1f µs/%.3f cs", sep, $1, $2 * 1e6 / hz / n, $3 / n; sep = ", " }' <<<"$d")
  C_SYSCALLS=n/a
  if [ -n "$C_PERF_PID" ] && [ -s "$C_PERF" ]; then
    C_SYSCALLS=$(awk -F, -v n="$n" '/raw_syscalls:sys_enter/ && $1 ~ /^[0-9]+$/ { printf "%.2f", $1 / n }' "$C_PERF")
    [ -n "$C_SYSCALLS" ] || C_SYSCALLS=n/a
  fi
}

# wrk against a peer without per-status metrics (nginx): wrk's "Non-2xx or 3xx responses" line
# counts statuses above 399 (wrk 4.1); the peers' configs answer nothing but 200, so any such
# line fails the bench. Sets the same W_* variables (W_OK = every answer wrk counted).
wrk_peer() {
  W_OUT=$(wrk "$@" 2>&1) || die "wrk failed: $W_OUT"
  local bad; bad=$(awk '/Non-2xx or 3xx responses/ {print $NF}' <<<"$W_OUT")
  [ -z "$bad" ] || die "peer answered $bad non-2xx during: wrk $*"
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
# Sets R_OK (successful calls), R_SECS, R_RPS.
redis_cmdstat() { redis-cli -p "$1" INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v c="cmdstat_$2" '
  $1 == c { for (i = 2; i < NF; i += 2) v[$i] = $(i + 1) } END { print v["calls"] + 0, v["failed_calls"] + 0, v["rejected_calls"] + 0 }'; }
redis_timed() {
  local port=$1 cmd=$2 b f r b2 f2 r2 t0 t1; shift 3
  read -r b f r <<<"$(redis_cmdstat "$port" "$cmd")"
  t0=$(date +%s%N)
  timeout "$DURATION" redis-benchmark -p "$port" -n 1000000000 "$@" >/dev/null 2>&1 || true
  t1=$(date +%s%N)
  read -r b2 f2 r2 <<<"$(redis_cmdstat "$port" "$cmd")"
  [ $((f2 - f + r2 - r)) -eq 0 ] || die "Redis failed $((f2 - f)) and rejected $((r2 - r)) $cmd calls"
  R_OK=$((b2 - b))
  R_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
  R_RPS=$(awk -v n="$R_OK" -v s="$R_SECS" 'BEGIN {printf "%.0f", n / s}')
  [ "$R_OK" -gt 0 ] || die "no successful $cmd call on Redis"
}

# ---- recording a run ----
# row BENCHMARK STRATA_VALUE UNIT STRATA_NOTE PEER PEER_VALUE PEER_NOTE [PEER_UNIT]
# (PEER/PEER_VALUE empty when there is no peer; PEER_UNIT defaults to UNIT; the ratio
# strata / peer of a rate is computed by bench/table.py)
rows_file=$work/rows.tsv
row() { local IFS=$'\t'; echo "$*" >>"$rows_file"; }
# out_write NAME COMMAND: bench/out/NAME.json with the rows, date, machine, commit and load
out_write() {
  mkdir -p bench/out
  touch "$rows_file"
  python3 - "$1" "$2" "$rows_file" "$bench_load_start" "$(load_avg)" >"bench/out/$1.json" <<'PY'
import datetime, json, os, platform, subprocess, sys
name, command, rows_path, load0, load1 = sys.argv[1:6]
def sh(*a):
    try: return subprocess.run(a, capture_output=True, text=True).stdout.strip()
    except OSError: return ""
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
rows = []
for line in open(rows_path):
    f = line.rstrip("\n").split("\t") + [""] * 8
    num = lambda s: float(s) if s not in ("", "n/a") else None
    rows.append({"benchmark": f[0], "strata": num(f[1]), "unit": f[2], "strata_note": f[3],
                 "peer": f[4], "peer_value": num(f[5]), "peer_note": f[6],
                 "peer_unit": f[7] or f[2]})
print(json.dumps({
    "name": name, "command": command,
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "machine": {"host": platform.node(), "cores": os.cpu_count(), "cpu": cpu,
                "mem_gib": round(mem / 1048576), "kernel": platform.release(),
                "load_start": float(load0), "load_end": float(load1)},
    "commit": sh("git", "rev-parse", "--short", "HEAD") + ("+changes" if sh("git", "status", "--porcelain", "--", "src", "bench", ":!bench/out") else ""),
    "duration_s": float(os.environ.get("DURATION", "10")),
    "rows": rows}, indent=1))
PY
  echo "wrote bench/out/$1.json"
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
