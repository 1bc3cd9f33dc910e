#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Memory under an event-creation attack (issue 12.3): N creates (default 700) of events with 100
# sections of 10000 rows x 1 col (1M seats each, the narrowest shape: per-row arrays dominate),
# then a restart on the same data dir. Prints the answers by status and the peak RSS (VmHWM) of
# the server after the attack and after the restart. Auth is off so old and new binaries take
# the same requests (with auth on, creating needs role admin).
#
# usage: bench/event_attack.sh [BIN] [N]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-$PWD/build/strata}
N=${2:-700}
[ "$BIN" = "$PWD/build/strata" ] && tools/build.sh release >/dev/null
work=$(mktemp -d /tmp/strata-attack-XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

start() {
  "$BIN" --listen 127.0.0.1:0 --data-dir "$work/d" --cold-url "file://$work/d/cold" >"$work/log" 2>&1 &
  pid=$!
  until grep -q "listening on" "$work/log"; do sleep 0.01; done
  port=$(grep -o 'listening on [0-9.]*:[0-9]*' "$work/log" | head -1 | sed 's/.*://')
}
hwm() { awk '/VmHWM/ {printf "%.1f MB", $2 / 1024}' "/proc/$pid/status"; }
stop() { kill -TERM "$pid"; wait "$pid" || true; pid=; }

start
python3 - "$port" "$N" <<'PY'
import http.client, json, sys, collections
port, n = int(sys.argv[1]), int(sys.argv[2])
c = http.client.HTTPConnection('127.0.0.1', port)
seen = collections.Counter()
for i in range(n):
    body = json.dumps({'event_id': f'attack-{i}',
                       'sections': [{'name': f's{k}', 'rows': 10000, 'cols': 1, 'price': 1}
                                    for k in range(100)]})
    c.request('POST', '/v1/events', body, {'Content-Type': 'application/json'})
    r = c.getresponse()
    r.read()
    seen[r.status] += 1
print('answers:', dict(seen))
PY
echo "after $N creates: peak RSS $(hwm)"
stop
start
echo "after a restart: peak RSS $(hwm) | $(grep -o 'seats: rebuilt.*' "$work/log" || echo 'no events')"
stop
