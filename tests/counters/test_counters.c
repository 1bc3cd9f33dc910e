/* SPDX-License-Identifier: MIT */
/* Unit tests for hybrid counters, distinct counters and sequences on a real store. */
#include "../test.h"
#include "../fixture.h"
#include "strata/counters.h"
#include "strata/metrics.h"
#include "strata/tier.h"

#include <stdlib.h>

static fx_t fx;
static st_store_t *store;

static void setup(void)
{
    fx_begin(&fx);
    store = fx_store(&fx, 16 << 20, 0);
}

static void settle(void)
{
    fx_settle(&fx, store);
}

static void teardown(void)
{
    fx_close_store(&fx, store);
    fx_end(&fx);
}

TEST(incr_is_baseline_plus_hot_and_consolidation_keeps_the_value)
{
    setup();
    uint64_t w = 0;
    int64_t v;
    st_counter_t c;
    CHECK_EQ(st_counter_get(store, "c", 1, &c, &w), ST_ENOTFOUND);
    CHECK_EQ(st_counter_incr(store, "c", 1, 5, &v, &w), ST_OK);
    CHECK_EQ(v, 5);
    CHECK_EQ(st_counter_incr(store, "c", 1, -7, &v, &w), ST_OK);
    CHECK_EQ(v, -2);
    settle();
    CHECK_EQ(st_counter_consolidate(store, "c", 1, &w), ST_OK);
    CHECK_EQ(st_counter_get(store, "c", 1, &c, &w), ST_OK);
    CHECK_EQ(c.baseline, -2);
    CHECK_EQ(c.hot, 0);
    CHECK_EQ(st_counter_incr(store, "c", 1, 3, &v, &w), ST_OK);
    CHECK_EQ(v, 1);
    CHECK_EQ(st_counter_get(store, "c", 1, &c, &w), ST_OK);
    CHECK_EQ(c.baseline, -2);
    CHECK_EQ(c.hot, 3);
    CHECK_EQ(st_counter_incr(store, "c", 1, INT64_MAX, &v, &w), ST_EINVAL);
    teardown();
}

TEST(distinct_counts_each_member_once_and_kinds_do_not_mix)
{
    setup();
    uint64_t w = 0;
    int64_t v;
    bool added;
    CHECK_EQ(st_counter_distinct_add(store, "d", 1, "alice", 5, &v, &added, &w), ST_OK);
    CHECK(added);
    CHECK_EQ(v, 1);
    CHECK_EQ(st_counter_distinct_add(store, "d", 1, "alice", 5, &v, &added, &w), ST_OK);
    CHECK(!added);
    CHECK_EQ(v, 1);
    settle();
    CHECK_EQ(st_counter_distinct_add(store, "d", 1, "alice", 5, &v, &added, &w), ST_OK);
    CHECK(!added);
    CHECK_EQ(st_counter_distinct_add(store, "d", 1, "bob", 3, &v, &added, &w), ST_OK);
    CHECK(added);
    CHECK_EQ(v, 2);
    /* a 255-byte member on a 255-byte name still fits (hashed key) */
    char big[255];
    memset(big, 'm', sizeof big);
    CHECK_EQ(st_counter_distinct_add(store, big, 255, big, 255, &v, &added, &w), ST_OK);
    CHECK(added);
    CHECK_EQ(st_counter_distinct_add(store, big, 255, big, 255, &v, &added, &w), ST_OK);
    CHECK(!added);
    CHECK_EQ(st_counter_incr(store, "d", 1, 1, &v, &w), ST_ECONFLICT);
    CHECK_EQ(st_counter_incr(store, "p", 1, 1, &v, &w), ST_OK);
    CHECK_EQ(st_counter_distinct_add(store, "p", 1, "x", 1, &v, &added, &w), ST_ECONFLICT);
    teardown();
}

TEST(a_sliced_distinct_recount_is_exact_with_adds_behind_and_ahead_of_its_cursor)
{
    setup();
    uint64_t w = 0;
    int64_t v, drift = 0;
    bool added, done = false;
    char m[32];
    for (int i = 0; i < 500; i++) {
        int n = snprintf(m, sizeof m, "m%03d", i);
        CHECK_EQ(st_counter_distinct_add(store, "d", 1, m, (size_t)n, &v, &added, &w), ST_OK);
    }
    settle();
    CHECK_EQ(st_counter_test_drift(store, "d", 1, -3, &w), ST_OK); /* a write gone wrong */
    st_distinct_recount_t *j;
    CHECK_EQ(st_counter_recount_start(store, "e", 1, &j, &w), ST_ENOTFOUND);
    CHECK_EQ(st_counter_recount_start(store, "d", 1, &j, &w), ST_OK);
    int steps = 0, adds = 0;
    while (!done) {
        CHECK_EQ(st_counter_recount_step(j, 37, &done, &drift, &w), ST_OK);
        steps++;
        /* between slices: members sorting before the cursor ("a…"), after it ("z…") and at it */
        const char *pre[] = {"a", "z", "m250x"};
        for (int k = 0; k < 3 && !done; k++) {
            int n = snprintf(m, sizeof m, "%s%d", pre[k], steps);
            CHECK_EQ(st_counter_distinct_add(store, "d", 1, m, (size_t)n, &v, &added, &w), ST_OK);
            CHECK(added);
            adds++;
        }
        if (steps % 4 == 0) settle();
    }
    st_counter_recount_free(j);
    CHECK(steps > 10);
    CHECK_EQ(drift, 3); /* only the injected drift: no add missed or counted twice */
    st_counter_t c;
    CHECK_EQ(st_counter_get(store, "d", 1, &c, &w), ST_OK);
    CHECK_EQ(st_counter_value(&c), 500 + adds);
    CHECK_EQ(st_counter_distinct_recount(store, "d", 1, &drift, &w), ST_OK);
    CHECK_EQ(drift, 0);
    teardown();
}

TEST(sequences_start_at_one_and_never_overlap)
{
    setup();
    uint64_t w = 0;
    int64_t first, last;
    CHECK_EQ(st_sequence_get(store, "s", 1, &last, &w), ST_OK);
    CHECK_EQ(last, 0);
    CHECK_EQ(st_sequence_next(store, "s", 1, 1, &first, &last, &w), ST_OK);
    CHECK_EQ(first, 1);
    CHECK_EQ(last, 1);
    CHECK_EQ(st_sequence_next(store, "s", 1, 10000, &first, &last, &w), ST_OK);
    CHECK_EQ(first, 2);
    CHECK_EQ(last, 10001);
    CHECK_EQ(st_sequence_next(store, "s", 1, 0, &first, &last, &w), ST_EINVAL);
    CHECK_EQ(st_sequence_next(store, "s", 1, 10001, &first, &last, &w), ST_EINVAL);
    settle();
    CHECK_EQ(st_sequence_next(store, "s", 1, 5, &first, &last, &w), ST_OK);
    CHECK_EQ(first, 10002);
    CHECK_EQ(last, 10006);
    teardown();
}

/* Observers: every change that alters a value is told once, in registration order, with its
 * kind; a repair is told as a repair; an observer that went away is told nothing. */
typedef struct {
    int calls, distinct, repairs;
    int64_t last;
    int *seen;
    int id;
} obs_t;

static void on_counter(void *arg, const char *name, size_t nlen, int64_t value, bool distinct,
                       bool repair, uint64_t wait)
{
    obs_t *o = arg;
    (void)name, (void)nlen, (void)wait;
    o->calls++;
    o->distinct += distinct;
    o->repairs += repair;
    o->last = value;
    o->seen[o->seen[0] + 1] = o->id;
    o->seen[0]++;
}

TEST(counter_changes_reach_every_observer_once_in_order_until_it_leaves)
{
    setup();
    int seen[64] = {0};
    obs_t a = {.seen = seen, .id = 1}, b = {.seen = seen, .id = 2};
    st_counters_observe(store, on_counter, &a);
    st_counters_observe(store, on_counter, &b);
    uint64_t w = 0;
    int64_t v, drift;
    bool added;
    CHECK_EQ(st_counter_incr(store, "c", 1, 5, &v, &w), ST_OK);
    CHECK_EQ(a.calls, 1);
    CHECK_EQ(a.last, 5);
    CHECK_EQ(seen[1], 1);
    CHECK_EQ(seen[2], 2);
    CHECK_EQ(st_counter_incr(store, "d", 1, 1, &v, &w), ST_OK);
    CHECK_EQ(st_counter_distinct_add(store, "d", 1, "m", 1, &v, &added, &w), ST_ECONFLICT);
    CHECK_EQ(a.calls, 2); /* the refused add told nobody */
    CHECK_EQ(st_counter_distinct_add(store, "e", 1, "m", 1, &v, &added, &w), ST_OK);
    CHECK_EQ(st_counter_distinct_add(store, "e", 1, "m", 1, &v, &added, &w), ST_OK);
    CHECK(!added);
    CHECK_EQ(a.calls, 3); /* a member already there changes nothing */
    CHECK_EQ(a.distinct, 1);
    CHECK_EQ(st_counter_test_drift(store, "e", 1, 4, &w), ST_OK);
    CHECK_EQ(a.last, 5);
    CHECK_EQ(st_counter_distinct_recount(store, "e", 1, &drift, &w), ST_OK);
    CHECK_EQ(drift, -4);
    CHECK_EQ(a.repairs, 1);
    CHECK_EQ(a.last, 1);
    st_counters_unobserve(store, &a);
    CHECK_EQ(st_counter_incr(store, "c", 1, 1, &v, &w), ST_OK);
    CHECK_EQ(a.calls, 5);
    CHECK_EQ(b.calls, 6);
    st_counters_unobserve(store, &b);
    CHECK_EQ(st_counter_incr(store, "c", 1, 1, &v, &w), ST_OK);
    CHECK_EQ(b.calls, 6);
    teardown();
}

/* Counter consolidation moved out of chat into a source of the tier's pass (issue 13): a pass
 * with only the counters' source moves every hot increment into its baseline and changes no
 * value. */
TEST(the_counters_tier_source_consolidates_every_counter_at_a_pass)
{
    setup();
    int64_t v;
    uint64_t w = 0;
    bool added;
    CHECK_EQ(st_counter_incr(store, "a", 1, 5, &v, &w), ST_OK);
    CHECK_EQ(st_counter_incr(store, "b", 1, -2, &v, &w), ST_OK);
    CHECK_EQ(st_counter_distinct_add(store, "d", 1, "m1", 2, &v, &added, &w), ST_OK);
    settle();
    st_tier_source_t src;
    st_counters_tier_source(store, &src);
    st_tier_pass_t *p;
    CHECK_EQ(st_tier_pass_open(&p, &fx.loop, store, NULL, NULL), ST_OK);
    st_tier_pass_add(p, &src);
    st_tier_pass_start(p, 0);
    while (st_tier_pass_running(p))
        uv_run(&fx.loop, UV_RUN_ONCE);
    settle();
    const char *names[] = {"a", "b", "d"};
    const int64_t want[] = {5, -2, 1};
    for (int i = 0; i < 3; i++) {
        st_counter_t c;
        CHECK_EQ(st_counter_get(store, names[i], 1, &c, &w), ST_OK);
        CHECK_EQ(c.hot, 0);
        CHECK_EQ(c.baseline, want[i]);
    }
    st_tier_pass_close(p, NULL, NULL);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    teardown();
}

RUN_TESTS("counters")
