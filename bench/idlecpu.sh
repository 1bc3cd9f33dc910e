#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPU a group of 3 spends doing nothing (heartbeats, timers): the three processes' utime+stime
# over SECONDS (default 10) after a 4-s settle.   BIN=build/strata bench/idlecpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_IDLE=${SECONDS_IDLE:-10}
. bench/lib.sh
. bench/groupstart.sh
group_start "${BIN:-build/strata}"
sleep 4
ticks() { local t=0 id; for id in 1 2 3; do t=$((t + $(awk '{print $14 + $15}' /proc/${gpid[$id]}/stat))); done; echo $t; }
t0=$(ticks)
sleep "$SECONDS_IDLE"
t1=$(ticks)
echo "idle CPU of a group of 3 over ${SECONDS_IDLE} s: $(( (t1 - t0) * 1000 / $(getconf CLK_TCK) )) ms"
