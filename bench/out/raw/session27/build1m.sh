#!/usr/bin/env bash
# builds USERS (1,000,000) users x 10 msgs + USERS/10 rooms of 10, cooled, into DATA
# (/tmp/s27/data1m); the 10,000-user set: USERS=10000 DATA=/tmp/s27/data10k BIN=/tmp/lw/final27-strata
set -u
until mkdir /tmp/bench.lock 2>/dev/null; do sleep 5; done
trap 'rmdir /tmp/bench.lock; kill $spid 2>/dev/null' EXIT
cd /work/main
BIN=${BIN:-/tmp/lw/main27-strata}
n=${USERS:-1000000} MSGS=10 ROOM_MEMBERS=10
rooms=$((n / 10))
d=${DATA:-/tmp/s27/data1m}; rm -rf $d
port=18790; url=http://127.0.0.1:$port
start() { $BIN --listen 127.0.0.1:$port --data-dir $d --map-size 16GiB --flush-interval 86400 --reconcile-interval 86400 --cold-cache 32MiB --log-level warn 2>>/tmp/s27/b1m.log & spid=$!; until curl -sf $url/healthz >/dev/null; do sleep 0.1; done; }
stop() { kill $spid; wait $spid; }
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
created() { curl -s "$url/metrics" | awk '/^strata_http_requests_total\{/ && /status="201"/ {n += $NF} END {print n + 0}'; }
pending() { curl -s "$url/v1/admin/tables" | python3 -c 'import json,sys; print(sum(t["pending"] for t in json.load(sys.stdin)["tables"]))'; }
load_phase() {
  local mode=$1 want=$2 last=-1 c
  wrk -t1 -c32 -d3600s -s bench/atsize.lua "$url" -- "$mode" "$n" "$MSGS" "$rooms" "$ROOM_MEMBERS" >/tmp/s27/wrk-$mode.txt 2>&1 &
  local wp=$!
  while c=$(created) && { [ "$c" -lt $((want - 16 - MSGS)) ] || [ "$c" != "$last" ]; }; do last=$c; sleep 0.5; done
  target=$c
  kill -INT $wp; wait $wp
}
start
date; load_phase load $((n * MSGS)); date
load_phase rooms $((target + rooms * (1 + MSGS))); date
stop; start
curl -fsS -XPOST $url/v1/admin/flush >/dev/null
while [ "$(metric strata_flush_passes_total)" = 0 ]; do sleep 0.2; done
while [ "$(metric strata_flush_running)" != 0 ] || [ "$(metric strata_flush_pending)" != 0 ]; do sleep 2; done
date
while [ "$(pending)" != 0 ]; do sleep 1; done
date
stop
du -sh $d; echo done
