/* SPDX-License-Identifier: MIT */
/*
 * counters: hybrid counters (value = cold baseline + hot increment), distinct counters (value =
 * number of distinct members) and gapless sequences, all staged through the store's group commit.
 *
 * Every call takes `wait`: it is raised to the batch that must be durable before the result may
 * be shown to anyone (see store.h). Names must already be valid (st_name_valid).
 */
#ifndef STRATA_COUNTERS_H
#define STRATA_COUNTERS_H

#include "strata/store.h"

typedef enum { ST_COUNTER_PLAIN = 'p', ST_COUNTER_DISTINCT = 'd' } st_counter_kind_t;

typedef struct {
    st_counter_kind_t kind;
    int64_t baseline; /* consolidated (cold) part */
    int64_t hot;      /* increments since the last consolidation */
} st_counter_t;

#define ST_SEQ_MAX_COUNT 10000
/* Numbers reserved ahead of the last issued one (a restore resumes after the reservation). */
#define ST_SEQ_RESERVE 100000

/* A counter's value changed: an increment, a distinct member added (distinct), or a recount's
 * correction (repair). `wait` is the batch that must be durable before anyone sees the value.
 * Observers are called in registration order (at most ST_OBSERVERS_MAX); arg is borrowed until
 * st_counters_unobserve. */
typedef void (*st_counter_observer_fn)(void *arg, const char *name, size_t nlen, int64_t value,
                                       bool distinct, bool repair, uint64_t wait);
/* Counters are functions over the store and keep no state: opening them claims their key
 * spaces (ST_KS_COUNTER, ST_KS_MEMBER, ST_KS_SEQUENCE). */
int st_counters_open(st_store_t *s);
void st_counters_observe(st_store_t *s, st_counter_observer_fn fn, void *arg);
void st_counters_unobserve(st_store_t *s, const void *arg);

/* ST_ENOTFOUND if never written. */
int st_counter_get(st_store_t *s, const char *name, size_t nlen, st_counter_t *out, uint64_t *wait);
/* ST_EINVAL on int64 overflow, ST_ECONFLICT if the name is a distinct counter. */
int st_counter_incr(st_store_t *s, const char *name, size_t nlen, int64_t by, int64_t *value,
                    uint64_t *wait);
/* ST_ECONFLICT if the name is a plain counter. member must be a valid name. */
int st_counter_distinct_add(st_store_t *s, const char *name, size_t nlen, const char *member,
                            size_t mlen, int64_t *value, bool *added, uint64_t *wait);
/* Moves the hot increment into the baseline; the value does not change. */
int st_counter_consolidate(st_store_t *s, const char *name, size_t nlen, uint64_t *wait);
/* The counters' source for the cold tier's pass (strata/tier.h): every counter with a hot
 * increment is consolidated. Fills *out (caller-owned; it must outlive the pass). */
typedef struct st_tier_source st_tier_source_t;
void st_counters_tier_source(st_store_t *s, st_tier_source_t *out);
/* The counters as a member of the tier (st_tier_join): that source. Owned by the counters, freed
 * once the tier is done with it. */
typedef struct st_tier_member st_tier_member_t;
st_tier_member_t *st_counters_tier_member(st_store_t *s);

/* Recounts a distinct counter from its members and repairs it; *drift = members - recorded.
 * ST_ECONFLICT for a plain counter. Counts every member in one call: background work uses the
 * sliced recount below. */
int st_counter_distinct_recount(st_store_t *s, const char *name, size_t nlen, int64_t *drift,
                                uint64_t *wait);

/* A distinct counter recounted in slices: members are counted in key order from a cursor, a
 * bounded number per step. Members are never removed, and a member added meanwhile lands ahead
 * of the cursor (the scan counts it) or behind it (the add counts it here), so the total is
 * exact for the instant the last step runs, which repairs the record as the one-call recount
 * does. Loop thread only. */
typedef struct st_distinct_recount st_distinct_recount_t;
/* ST_ENOTFOUND, ST_ECONFLICT (a plain counter); else *out is owned (st_counter_recount_free). */
int st_counter_recount_start(st_store_t *s, const char *name, size_t nlen,
                             st_distinct_recount_t **out, uint64_t *wait);
/* Counts up to `budget` members; *done once all are counted (then *drift = truth - recorded,
 * repaired). */
int st_counter_recount_step(st_distinct_recount_t *j, size_t budget, bool *done, int64_t *drift,
                            uint64_t *wait);
void st_counter_recount_free(st_distinct_recount_t *j);
/* Up to max distinct counters' names in key order from *cursor (a buffer of ST_KEY_MAX + 1
 * bytes; *clen 0 to start), each appended to names as u8 length + name; the cursor moves on and
 * *done says the last one was reached. Returns how many were appended. */
size_t st_counter_distinct_page(st_store_t *s, uint8_t *cursor, size_t *clen, size_t max,
                                st_buf_t *names, bool *done, uint64_t *wait);
/* Testing only (--test-hooks): shifts a counter's recorded value by `by`. */
int st_counter_test_drift(st_store_t *s, const char *name, size_t nlen, int64_t by, uint64_t *wait);

static inline int64_t st_counter_value(const st_counter_t *c)
{
    return c->baseline + c->hot;
}

/* Allocates count (1..ST_SEQ_MAX_COUNT) numbers: first..last, strictly after every earlier one. */
int st_sequence_next(st_store_t *s, const char *name, size_t nlen, int64_t count, int64_t *first,
                     int64_t *last, uint64_t *wait);
/* last is 0 for a sequence that never issued a number. */
int st_sequence_get(st_store_t *s, const char *name, size_t nlen, int64_t *last, uint64_t *wait);
/* After a restore: every sequence resumes after its reservation (numbers in it may have been
 * issued after the backup's last shipped point). *n: how many moved. */
int st_sequences_resume(st_store_t *s, size_t *n, uint64_t *wait);

#endif
