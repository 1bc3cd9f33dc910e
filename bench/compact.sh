#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Compaction bench (issue 17): one user after FLUSHES flushes of 5 messages (2,016 = a week of
# 5-minute flushes), compacted (--compact-objects 8 and 3) and not, against the same rows
# flushed once: objects, bytes, write amplification, newest-1000 read after a restart.
#   FLUSHES=2016 READS=5 MODES="single on8 on3 off" bench/compact.sh
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# compaction, $(date -u +%F), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
MODES=${MODES:-single on8 on3 off} node bench/compact.mjs build/strata "${FLUSHES:-2016}" "${READS:-5}"
