# SPDX-License-Identifier: MIT
# Shared by the bench scripts (sourced from the repo root): installs the peers, builds strata,
# and gives a temp dir, processes stopped by PID on exit, free ports and a wait for a port.
DURATION=${DURATION:-10}
tools/install-deps.sh --bench
tools/build.sh release >/dev/null
work=$(mktemp -d /tmp/strata-bench-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
