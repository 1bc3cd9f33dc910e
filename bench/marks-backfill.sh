#!/bin/bash
# SPDX-License-Identifier: MIT
# Session 25 (issue 48): the marks backfill's longest loop turn, OLD and NEW binaries alternated
# ROUNDS times on copies of TMPL (made by bench/marks-backfill-store.mjs with a binary from
# before the marks or STRATA_TEST_NO_MARKS=1: one owner of 2,000 objects, 40 small owners).
# Each run: a start until strata_marks_backfill_done is 1, then a restart (the "restart" figures).
# Takes the bench lock; waits up to 120 s for tests started before it to end.
# OLD=... NEW=... TMPL=... ROUNDS=4 bench/marks-backfill.sh
set -u
ROUNDS=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
until mkdir /tmp/bench.lock 2>/dev/null; do sleep 10; done
trap 'rmdir /tmp/bench.lock' EXIT
for i in $(seq 1 24); do
  n=$(ps -eo args | grep -E "node .*test|/strata |cmake|cc1|ld " | grep -v grep | wc -l)
  [ "$n" = 0 ] && break; sleep 5
done
cd "$here/../tests/e2e"
echo "start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) busy=$n"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="OLD NEW"; else order="NEW OLD"; fi
  for side in $order; do
    echo "$side r$r $(node "$here/marks-backfill.mjs" "${!side}" "$TMPL" again 2>&1 | grep '^{')"
  done
done
echo "end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
