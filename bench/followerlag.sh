#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How far behind a follower's streams are (issues 23, 24): a group of 3 on loopback, streams
# opened on a follower, writes sent to the leader (build/strata-wsload PORT:POSTPORT).
#   BIN=build/strata bench/followerlag.sh             post -> notification on the follower,
#                                                     1 subscriber, 20 posts/s, p50/p99
#   MODE=fanout CONNS=3000 bench/followerlag.sh       fan-out frames/s at windows 16 and 64
# DURATION (default 4) seconds per run. Holds /tmp/strata-bench.lock while it loads the group.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-4}
. bench/lib.sh
. bench/groupstart.sh
BIN=${BIN:-build/strata}
MODE=${MODE:-latency}
CONNS=${CONNS:-$([ "$MODE" = latency ] && echo 1 || echo 3000)}
group_start "$BIN" --max-connections $((CONNS + 1000))
if [ "$MODE" = latency ]; then
  flock /tmp/strata-bench.lock build/strata-wsload latency "${http[$follower]}:${http[$leader]}" "$CONNS" "$DURATION" 20
else
  for window in 16 64; do
    flock /tmp/strata-bench.lock build/strata-wsload fanout "${http[$follower]}:${http[$leader]}" "$CONNS" "$DURATION" "$window"
  done
fi
