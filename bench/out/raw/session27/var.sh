#!/usr/bin/env bash
# experiment: room with users / room anonymous / conversation, same tool
set -u
until mkdir /tmp/bench.lock 2>/dev/null; do sleep 5; done
trap 'rmdir /tmp/bench.lock; kill $spid 2>/dev/null' EXIT
cd /work/main
BIN=${BIN:-build/strata}
ulimit -n $(ulimit -Hn)
d=/tmp/s27/pdata; rm -rf $d
port=18777
$BIN --listen 127.0.0.1:$port --data-dir $d --max-connections 11000 --max-room-members 100000 --log-level warn 2>/tmp/s27/pres-strata.log &
spid=$!
sleep 1
python3 - $port <<'PY'
import http.client, json, sys
port=int(sys.argv[1]); c=http.client.HTTPConnection("127.0.0.1",port)
names=["bench"]+["m%d"%i for i in range(99999)]
def post(p,b):
    c.request("POST",p,json.dumps(b),{"Content-Type":"application/json"}); r=c.getresponse(); r.read(); assert r.status in (200,201),r.status
post("/v1/rooms",{"room_id":"big","members":names[:1000]})
for i in range(1000,100000,1000): post("/v1/rooms/big/members",{"add":names[i:i+1000]})
PY
for round in 1 2; do
for v in ${VARIANTS:-users anon conv}; do
  sleep 8
  case $v in
   users) export WSLOAD_ROOM=big WSLOAD_USERS=m;;
   anon) export WSLOAD_ROOM=big WSLOAD_USERS=;;
   conv) unset WSLOAD_ROOM WSLOAD_USERS;;
  esac
  echo -n "$v: "
  WSLOAD_KTIME=1 WSLOAD_WARMUP_MS=${WARMUP:-3000} WSLOAD_CPU_PID=$spid build/strata-wsload latency $port 10000 10 10 2>&1 | tail -1
done
done
