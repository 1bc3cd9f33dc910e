/* SPDX-License-Identifier: MIT */
/*
 * idle: a thread's background work at SCHED_IDLE, and back at exactly the policy it had.
 *
 * Background work (encoding a cold object, merging, an Iceberg commit, LMDB applying an
 * erasure's deletes) runs on CPU time nothing else wants, so serving keeps its cores when they
 * are few. Left at SCHED_IDLE, a thread would run its next, foreground job (a cold read, a
 * client's LMDB apply) and take shared locks at that priority: whoever waits for it waits for a
 * thread the scheduler starves (priority inversion). So a thread goes there only if it can come
 * back: leaving SCHED_IDLE takes CAP_SYS_NICE (honoured in the initial user namespace only) or an
 * RLIMIT_NICE that allows the thread's nice value (sched_setscheduler(2)); an unprivileged
 * container (Dockerfile: a non-root user, RLIMIT_NICE 0) has neither, and then it never goes. A
 * refused return the prediction missed is logged once, and from then on no thread of the
 * process goes to SCHED_IDLE again.
 *
 * The way back is the policy and priority the thread had when st_idle_init ran (SCHED_OTHER,
 * SCHED_BATCH, a real-time one set with chrt, with SCHED_RESET_ON_FORK as it was), not
 * SCHED_OTHER; its nice value is left alone throughout.
 */
#ifndef STRATA_IDLE_H
#define STRATA_IDLE_H

#include <stdbool.h>

typedef struct {
    int tid;         /* the thread, by its kernel id (another thread may move it) */
    int policy;      /* its own policy, as sched_getscheduler(2) gave it */
    int prio;        /* its own sched_priority (0 but for the real-time policies) */
    bool may;        /* it could come back from SCHED_IDLE: st_idle_enter moves it */
    const char *who; /* for the log line; a static string */
} st_idle_t;

/* Called on the thread itself: reads its policy and whether it could come back. The caller owns
 * t; the fields are not written again, so any thread may then call enter and leave. */
void st_idle_init(st_idle_t *t, const char *who);
/* Whether st_idle_enter would move the thread (it could come back, and no return was refused). */
bool st_idle_may(const st_idle_t *t);
/* Moves the thread to SCHED_IDLE; true if it is there now. From any thread. */
bool st_idle_enter(st_idle_t *t);
/* Moves it back to its own policy. From any thread, any number of times, entered or not (a
 * thread that moves another back may come before or after the enter it races with: the one
 * that entered must then read again whether to leave). Refused: said once (st_error), and
 * st_idle_may is false for every thread from then on. */
void st_idle_leave(st_idle_t *t);

/* Moves the calling thread, once (later calls return at once), from SCHED_OTHER to SCHED_BATCH:
 * the store's commit threads and the worker pool's threads. A thread the loop wakes (a job
 * queued, a batch to log) then never preempts the loop at its wake-up: it runs on a free core or
 * once the loop's turn ends, and the loop's turns keep their length (SPEC §7, issue 48: on 2
 * cores, each wake-up preempted the loop, ~55,000 times in one flush of 50,000 users). CPU
 * shares are unchanged (nice values are left alone), and any thread may do this unprivileged. A
 * thread set to another policy from outside (chrt) keeps it. */
void st_sched_worker(void);

#endif
