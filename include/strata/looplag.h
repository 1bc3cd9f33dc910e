/* SPDX-License-Identifier: MIT */
/*
 * looplag: how late the event loop runs what is due (SPEC §7, "the loop never waits").
 * A repeating probe timer records its own lateness in the histogram strata_loop_lag_seconds;
 * every loop iteration's busy time (wall time less the time spent waiting in the poller) feeds
 * strata_loop_stall_max_seconds, the longest single stall seen since start-up. Loop thread only.
 */
#ifndef STRATA_LOOPLAG_H
#define STRATA_LOOPLAG_H

#include "strata/core.h"

#include <uv.h>

typedef struct st_looplag st_looplag_t;

/* Starts probing `loop`; the probe's handles never keep the loop alive. *out is owned: release
 * it with st_looplag_close, then run the loop once so its handles close. */
int st_looplag_open(st_looplag_t **out, uv_loop_t *loop);
void st_looplag_close(st_looplag_t *l);
/* Longest single iteration's busy time seen so far, in seconds. */
double st_looplag_max_stall(const st_looplag_t *l);

/* The turn's shared budget (SPEC §7: the loop's longest turn under 5 ms). Bounded pieces of
 * background work that may land in one turn (an erasure's slices, applied batches taken back, a
 * compaction's fold prepared) each size themselves by what the turn has left of it, so their sum
 * stays near it instead of each piece's own budget adding up. */
#define ST_TURN_BUDGET_NS 2000000ull
/* The loop's busy time in the current turn so far (since the last iteration's prepare, less the
 * time waited in the poller), ns; 0 while no probe is open (unit tests). Loop thread only. */
uint64_t st_looplag_turn_ns(void);
/* What the turn has left of ST_TURN_BUDGET_NS, within [least, most] ns: least keeps bounded work
 * going (one piece a turn at least), most is the piece's own cap. */
uint64_t st_looplag_turn_left(uint64_t least, uint64_t most);

#endif
