/* SPDX-License-Identifier: MIT */
/*
 * A thread's background work at SCHED_IDLE (include/strata/idle.h): the cold tier's pool
 * threads (cold/flush.c) and the store's apply thread (store/yield.c) share it.
 */
#define _GNU_SOURCE /* SCHED_IDLE, SCHED_BATCH, SCHED_RESET_ON_FORK */
#include "strata/idle.h"

#include "strata/core.h"

#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A return was refused: no thread goes to SCHED_IDLE again (the cause, the process's limits or
 * namespace, is every thread's). Read and written atomically. */
static bool st__idle_refused;
/* Idling was found not allowed at a thread's st_idle_init: said once, at info. */
static bool st__idle_said;

static bool st__idle_sys_nice(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{0}};
    if (syscall(SYS_capget, &h, d) != 0) return false;
    return d[CAP_SYS_NICE / 32].effective & (1u << (CAP_SYS_NICE % 32));
}

/* Whether the calling thread could set its policy `base` at `prio` again once at SCHED_IDLE: the
 * checks sched_setscheduler(2) makes of a caller without CAP_SYS_NICE. A capability held in a
 * user namespace other than the first passes here and is refused there: st_idle_leave catches
 * that. */
static bool st__idle_may_return(int base, int prio)
{
    if (st__idle_sys_nice()) return true;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0); /* the calling thread's (Linux) */
    struct rlimit rl;
    if (errno != 0 || getrlimit(RLIMIT_NICE, &rl) != 0) return false;
    /* SCHED_IDLE counts as nice 20: leaving it lowers the nice value to the thread's own, which
     * RLIMIT_NICE must allow (its unit is 20 - nice) */
    if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)(20 - nice) > rl.rlim_cur) return false;
    if (base != SCHED_FIFO && base != SCHED_RR) return true;
    /* a real-time policy again: RLIMIT_RTPRIO must allow one, at its priority */
    if (getrlimit(RLIMIT_RTPRIO, &rl) != 0) return false;
    return rl.rlim_cur == RLIM_INFINITY || (rl.rlim_cur > 0 && (rlim_t)prio <= rl.rlim_cur);
}

void st_idle_init(st_idle_t *t, const char *who)
{
    *t = (st_idle_t){.tid = (int)syscall(SYS_gettid), .who = who};
    struct sched_param sp = {0};
    int p = sched_getscheduler(0);
    if (p < 0 || sched_getparam(0, &sp) != 0) return; /* may stays false */
    t->policy = p;
    t->prio = sp.sched_priority;
    /* Only the policies it can set back: a thread at SCHED_IDLE already (chrt -i) has nowhere to
     * go, and SCHED_DEADLINE cannot be set by sched_setscheduler. */
    int base = p & ~SCHED_RESET_ON_FORK;
    if (base != SCHED_OTHER && base != SCHED_BATCH && base != SCHED_FIFO && base != SCHED_RR)
        return;
    t->may = st__idle_may_return(base, t->prio);
    if (!t->may && !__atomic_exchange_n(&st__idle_said, true, __ATOMIC_SEQ_CST))
        st_info("sched: background work runs at the threads' own policy, not at SCHED_IDLE: "
                "without CAP_SYS_NICE a thread leaves SCHED_IDLE only if RLIMIT_NICE allows its "
                "nice value (20 for nice 0: docker run --ulimit nice=20)");
}

bool st_idle_may(const st_idle_t *t)
{
    return t->may && !__atomic_load_n(&st__idle_refused, __ATOMIC_SEQ_CST);
}

bool st_idle_enter(st_idle_t *t)
{
    if (!st_idle_may(t)) return false;
    struct sched_param sp = {0};
    /* SCHED_RESET_ON_FORK kept: a caller without CAP_SYS_NICE may not clear it */
    return sched_setscheduler(t->tid, SCHED_IDLE | (t->policy & SCHED_RESET_ON_FORK), &sp) == 0;
}

void st_idle_leave(st_idle_t *t)
{
    if (!t->may) return; /* never entered */
    struct sched_param sp = {.sched_priority = t->prio};
    if (sched_setscheduler(t->tid, t->policy, &sp) == 0) return;
    int e = errno;
    if (__atomic_exchange_n(&st__idle_refused, true, __ATOMIC_SEQ_CST)) return;
    st_error("sched: %s could not leave SCHED_IDLE (%s): it stays there, and no thread goes "
             "there from now on",
             t->who, strerror(e));
}

void st_sched_worker(void)
{
    static __thread bool done;
    if (done) return;
    done = true;
    int p = sched_getscheduler(0);
    if (p < 0 || (p & ~SCHED_RESET_ON_FORK) != SCHED_OTHER) return;
    struct sched_param sp = {0};
    if (sched_setscheduler(0, SCHED_BATCH | (p & SCHED_RESET_ON_FORK), &sp) != 0)
        st_debug("sched: SCHED_BATCH refused for a worker thread: %s", strerror(errno));
}
