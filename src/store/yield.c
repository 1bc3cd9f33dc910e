/* SPDX-License-Identifier: MIT */
/*
 * The apply thread yields to serving while a background job feeds it (issue 48).
 *
 * An erasure of a user with a million messages stages a million deletes; the apply thread
 * writes them into LMDB behind the WAL, a few hundred ms of CPU a second. On 2 cores that thread,
 * the sync lanes and the clients share the cores with the loop, and the loop's longest turns
 * were mostly the loop waiting for a core (bench/RESULTS.md, sessions 19 and 20). Nothing a
 * client waits for waits for LMDB: acknowledgements come from the WAL, reads from the overlay.
 * So while the job runs (st_store_apply_background, told by the loop), each group's LMDB
 * transaction runs at SCHED_IDLE: any other thread that wakes takes the core from it at once.
 *
 * Priority inversion is kept out three ways. Only the transaction is at SCHED_IDLE: the thread
 * goes there after it released mu and is back at its own policy before it takes mu again (the
 * loop seals batches under mu), and not at all while more than ST__IDLE_BACKLOG_MAX waits for
 * LMDB. LMDB's write
 * lock is the apply thread's alone. And whoever waits for LMDB to catch up (a checkpoint: the
 * sync lane before it may log into the other half; a group sync) calls st__hurry, which lifts a
 * thread at SCHED_IDLE back to its own policy at once (st__apply_lift), and no group starts
 * at SCHED_IDLE while someone waits. The thread goes there and back through core/idle.c: only if
 * it could come back (CAP_SYS_NICE or RLIMIT_NICE), back to exactly the policy it started with,
 * and never again once a return was refused (said once).
 */
#include "internal.h"

void st_store_apply_background(st_store_t *s, bool on)
{
    uv_mutex_lock(&s->th.mu);
    s->th.background = on;
    uv_mutex_unlock(&s->th.mu);
}

/* Above this many bytes logged and not yet in LMDB the thread catches up at its own policy:
 * the backlog a checkpoint must wait for (the log's older half, a redo of every acknowledgement
 * behind it) and the space the store counts as used stay small. */
#define ST__IDLE_BACKLOG_MAX (8u << 20)

bool st__apply_yield(st_store_t *s)
{
    if (!st_idle_may(&s->th.idle) || !s->th.background || s->th.hurry || s->th.stop ||
        s->th.stop_apply || st__pending_bytes(s) > ST__IDLE_BACKLOG_MAX)
        return false;
    s->th.apply_idle = true; /* a hurry from now on lifts it (st__apply_lift) */
    s->th.fig.idle_applies++;
    return true;
}

void st__apply_go_idle(st_store_t *s)
{
    /* after mu is released: at SCHED_IDLE the thread could be kept off the CPU while holding
     * it, and the loop seals batches under mu. A hurry that came meanwhile found apply_idle set
     * and lifted a thread not yet idle: the policy is set first, then the hurry read again. */
    if (st_idle_enter(&s->th.idle) && __atomic_load_n(&s->th.hurry, __ATOMIC_SEQ_CST) > 0)
        st_idle_leave(&s->th.idle);
}

void st__apply_unyield(st_store_t *s)
{
    /* apply_idle stays set until the thread has mu again: a hurry meanwhile lifts it twice */
    st_idle_leave(&s->th.idle);
}

void st__apply_lift(st_store_t *s)
{
    if (!s->th.apply_idle) return;
    st_idle_leave(&s->th.idle);
    s->th.apply_idle = false;
}
