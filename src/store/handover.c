/* SPDX-License-Identifier: MIT */
/*
 * The hand-over from the store's threads to the loop without the loop taking their mutex
 * (issue 48: a thread holding th.mu that the scheduler took the core from stalled the loop for
 * its time slice, 8,913 times in one flush of 50,000 users; bench/RESULTS.md, session 25):
 *  - batches back (applied, or failed once halted) go on a stack of chains the threads push with
 *    mu held, so in order among themselves, and the loop takes whole with one exchange;
 *  - what the loop reads of the threads' state on every write is published as atomics
 *    (st__publish_threads, mu held), read with __atomic loads (space.c, store.c, commit.c).
 * A failure is still read under mu (st__store_on_done): a lane sets halted and pushes the failed
 * groups in one hold of it.
 */
#include "internal.h"

void st__publish_threads(st_store_t *s)
{
    __atomic_store_n(&s->th.pub.acked_id, s->th.acked_id, __ATOMIC_RELEASE);
    __atomic_store_n(&s->th.pub.used_bytes, s->th.used_bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&s->th.pub.lmdb_free, s->th.lmdb_free, __ATOMIC_RELAXED);
    __atomic_store_n(&s->th.pub.apply_stall_ns, s->th.apply_stall_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&s->th.pub.log_err, s->th.log_err, __ATOMIC_RELAXED);
    __atomic_store_n(&s->th.pub.apply_err, s->th.apply_err, __ATOMIC_RELAXED);
    __atomic_store_n(&s->th.pub.halted, s->th.halted, __ATOMIC_RELEASE);
}

/* The threads push chains (with mu held, so in order among themselves) onto a stack the loop
 * takes whole with one exchange, never waiting for mu (st__store_on_done). */
void st__to_loop(st_store_t *s, st_batch_t *head, st_batch_t *tail)
{
    if (!head) return;
    tail->next = NULL;
    head->dlast = tail;
    head->dnext = __atomic_load_n(&s->th.d_top, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&s->th.d_top, &head->dnext, head, true, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
    st_wake_send(&s->uv.done);
}

/* Loop: every chain pushed so far, oldest first, as one list. */
st_batch_t *st__store_take_done(st_store_t *s)
{
    st_batch_t *top = __atomic_exchange_n(&s->th.d_top, NULL, __ATOMIC_ACQUIRE), *older = NULL;
    while (top) { /* newest first: reversed */
        st_batch_t *n = top->dnext;
        top->dnext = older;
        older = top;
        top = n;
    }
    st_batch_t *head = NULL, *tail = NULL;
    for (st_batch_t *c = older; c; c = c->dnext) {
        if (tail)
            tail->next = c;
        else
            head = c;
        tail = c->dlast;
    }
    return head;
}
