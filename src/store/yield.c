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
 * goes there after it released mu and is back at the normal policy before it takes mu again (the
 * loop seals batches under mu), and not at all while more than ST__IDLE_BACKLOG_MAX waits for
 * LMDB. LMDB's write
 * lock is the apply thread's alone. And whoever waits for LMDB to catch up (a checkpoint: the
 * sync lane before it may log into the other half; a group sync) calls st__hurry, which lifts a
 * thread at SCHED_IDLE back to the normal policy at once (st__apply_lift), and no group starts
 * at SCHED_IDLE while someone waits. A thread may leave SCHED_IDLE only with CAP_SYS_NICE or an
 * RLIMIT_NICE that allows its nice value (sched_setscheduler(2)): without either it would stay
 * there for good, so then it never goes there.
 */
#define _GNU_SOURCE /* SCHED_IDLE, gettid */
#include "internal.h"

#include <linux/capability.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int st__policy(int tid, int policy)
{
    struct sched_param sp = {0};
    return sched_setscheduler((pid_t)tid, policy, &sp);
}

/* Going back to the normal policy was refused (a user namespace whose CAP_SYS_NICE the kernel
 * does not honour): said once, and the thread never goes to SCHED_IDLE again. */
static void st__refused(st_store_t *s)
{
    if (!__atomic_exchange_n(&s->th.may_idle, false, __ATOMIC_SEQ_CST)) return;
    st_error("store: the apply thread could not leave SCHED_IDLE; it stays at the normal policy "
             "from now on");
}

/* Whether this thread could come back from SCHED_IDLE (see above). */
static bool st__may_return(void)
{
    struct rlimit rl;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (getrlimit(RLIMIT_NICE, &rl) == 0 &&
        (rl.rlim_cur == RLIM_INFINITY || (rlim_t)(20 - nice) <= rl.rlim_cur))
        return true;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{0}};
    if (syscall(SYS_capget, &h, d) != 0) return false;
    return d[CAP_SYS_NICE / 32].effective & (1u << (CAP_SYS_NICE % 32));
}

void st_store_apply_background(st_store_t *s, bool on)
{
    uv_mutex_lock(&s->th.mu);
    s->th.background = on;
    uv_mutex_unlock(&s->th.mu);
}

/* Above this many bytes logged and not yet in LMDB the thread catches up at the normal policy:
 * the backlog a checkpoint must wait for (the log's older half, a redo of every acknowledgement
 * behind it) and the space the store counts as used stay small. */
#define ST__IDLE_BACKLOG_MAX (8u << 20)

bool st__apply_yield(st_store_t *s)
{
    if (!s->th.apply_tid) {
        s->th.apply_tid = (int)syscall(SYS_gettid);
        s->th.may_idle = st__may_return();
    }
    if (!s->th.may_idle || !s->th.background || s->th.hurry || s->th.stop || s->th.stop_apply ||
        s->th.pending > ST__IDLE_BACKLOG_MAX)
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
    if (st__policy(s->th.apply_tid, SCHED_IDLE) != 0) return;
    if (__atomic_load_n(&s->th.hurry, __ATOMIC_SEQ_CST) > 0 &&
        st__policy(s->th.apply_tid, SCHED_OTHER) != 0)
        st__refused(s);
}

void st__apply_unyield(st_store_t *s)
{
    /* apply_idle stays set until the thread has mu again: a hurry meanwhile lifts it twice */
    if (st__policy(s->th.apply_tid, SCHED_OTHER) != 0) st__refused(s);
}

void st__apply_lift(st_store_t *s)
{
    if (!s->th.apply_idle) return;
    if (st__policy(s->th.apply_tid, SCHED_OTHER) != 0) st__refused(s);
    s->th.apply_idle = false;
}
