#!/usr/bin/env bash
# reads of random cold users of USERS (1,000,000) on the data set DATA (/tmp/s27/data1m), the
# binaries in turns: BINS="a b ..." ROUNDS=n PERF=1; the 10,000-user runs: USERS=10000 DATA=/tmp/s27/data10k
set -u
until mkdir /tmp/bench.lock 2>/dev/null; do sleep 5; done
trap 'rmdir /tmp/bench.lock; kill $spid 2>/dev/null' EXIT
cd /work/main
port=18791; url=http://127.0.0.1:$port
DUR=${DUR:-20}
hz=$(getconf CLK_TCK)
for r in $(seq ${ROUNDS:-1}); do
 order=$BINS; [ $((r % 2)) = 0 ] && order=$(tr " " "\n" <<<"$BINS" | tac | tr "\n" " ")
 for b in $order; do
  $b --listen 127.0.0.1:$port --data-dir ${DATA:-/tmp/s27/data1m} --map-size 16GiB --flush-interval 86400 --reconcile-interval 86400 --cold-cache 32MiB --log-level warn 2>>/tmp/s27/readab.log &
  spid=$!
  until curl -sf $url/healthz >/dev/null; do sleep 0.05; done
  sleep 15
  io0=$(awk '/^read_bytes/{print $2}' /proc/$spid/io)
  t0=$(awk '{print $14+$15}' /proc/$spid/stat)
  [ -n "${PERF:-}" ] && { perf record -F 999 -g -p $spid -o /tmp/s27/perf-$(basename $b)-$r.data -- sleep $((DUR-2)) 2>/dev/null & pp=$!; }
  out=$(wrk -t1 -c8 -d${DUR}s --latency -s bench/atsize.lua $url -- read ${USERS:-1000000} 10)
  [ -n "${PERF:-}" ] && wait $pp
  t1=$(awk '{print $14+$15}' /proc/$spid/stat)
  io1=$(awk '/^read_bytes/{print $2}' /proc/$spid/io)
  n=$(awk '/requests in/{print $1}' <<<"$out")
  p50=$(awk '$1=="50%"{print $2}' <<<"$out"); p99=$(awk '$1=="99%"{print $2}' <<<"$out")
  echo "bin=$(basename $b) round=$r reqs=$n p50=$p50 p99=$p99 cpu_us=$(awk -v a=$t0 -v b=$t1 -v n=$n -v hz=$hz 'BEGIN{printf "%.1f",(b-a)/hz*1e6/n}') disk_kib=$(( (io1-io0)/1024 )) threads_io=$(for t in /proc/$spid/task/*; do echo -n "$(cat $t/comm):$(awk '/^read_bytes/{printf "%d",$2/1024}' $t/io),"; done)"
  kill $spid; wait $spid 2>/dev/null
 done
done
