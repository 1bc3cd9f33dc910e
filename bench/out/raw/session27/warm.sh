#!/usr/bin/env bash
until mkdir /tmp/bench.lock 2>/dev/null; do sleep 5; done
trap 'rmdir /tmp/bench.lock' EXIT
date
find /tmp/s27/data1m/cold -type f -name '*.parquet' -print0 | xargs -0 -P2 -n 2000 cat > /dev/null
cat /tmp/s27/data1m/data.mdb > /dev/null
date
