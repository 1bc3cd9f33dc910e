/* SPDX-License-Identifier: MIT */
/*
 * reconcile: counters that heal themselves (SPEC §6). Writes mark the derived counts they touch
 * (a conversation's total_messages, a distinct counter) dirty in a deduplicated queue; every
 * --reconcile-interval the queue is worked off, each key recounted from its source of truth
 * and repaired if it drifted, at most once per interval per key. A key dirtied again after its
 * recount began stays queued (generations), so an older run never marks it clean.
 *
 * Loop-thread only.
 */
#ifndef STRATA_RECONCILE_H
#define STRATA_RECONCILE_H

#include "strata/chat.h"
#include "strata/tier.h"

typedef struct st_reconcile st_reconcile_t;

/* chat may be NULL (no conversations to reconcile). A recount that needs cold footers not in
 * memory has them fetched through tier's wait (borrowed; NULL: no cold tier) and is retried.
 * queue_max: keys queued at most (0: 100,000); a mark past it falls back to a pass over every
 * key (st_reconcile_all's, counted in strata_reconcile_overflows_total). */
int st_reconcile_open(st_reconcile_t **out, uv_loop_t *loop, st_store_t *store, st_chat_t *chat,
                      st_tier_t *tier, uint64_t interval_s, uint64_t queue_max);
/* Stops the timer; the state is freed once its handle has closed (run the loop). */
void st_reconcile_close(st_reconcile_t *r);

/* A conversation of the owner o (borrowed for the call). */
void st_reconcile_mark_conversation(st_reconcile_t *r, const st_owner_t *o, const char *conv,
                                    size_t clen);
void st_reconcile_mark_distinct(st_reconcile_t *r, const char *name, size_t nlen);

/* Recounts one key now, whatever its spacing; *drift = truth - recorded (repaired). */
int st_reconcile_conversation_now(st_reconcile_t *r, const st_owner_t *o, const char *conv,
                                  size_t clen, int64_t *drift, uint64_t *wait);
int st_reconcile_distinct_now(st_reconcile_t *r, const char *name, size_t nlen, int64_t *drift,
                              uint64_t *wait);
/* Starts a pass that recounts every conversation and distinct counter in the background, a
 * bounded slice per step (a pass already running is followed by one more). Returns the number
 * of the pass that covers the request: done once strata_reconcile_all_passes_total reaches it. */
uint64_t st_reconcile_all(st_reconcile_t *r);

#endif
