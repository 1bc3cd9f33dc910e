/* SPDX-License-Identifier: MIT */
/*
 * The counters' source for the cold tier's pass (strata/tier.h): at every flush pass, each
 * counter's hot increment moves into its baseline (values never change; the tier knows nothing
 * of counters, and chat nothing of them either); the counters' member, registered as a kind
 * (kinds.h) with nothing to flush.
 */
#include "strata/counters.h"
#include "strata/kinds.h"
#include "strata/tier.h"

#include <stdlib.h>

static bool st__want(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)arg, (void)key, (void)val, (void)vlen;
    return klen >= 2 && klen - 1 <= ST_NAME_MAX; /* a counter's name */
}

static void st__act(void *arg, const void *key, size_t klen)
{
    st_store_t *s = arg;
    const char *name = (const char *)key + 1;
    size_t nl = klen - 1;
    st_counter_t ctr;
    uint64_t wait = 0;
    if (st_counter_get(s, name, nl, &ctr, &wait) == ST_OK && ctr.hot)
        st_counter_consolidate(s, name, nl, &wait);
}

void st_counters_tier_source(st_store_t *s, st_tier_source_t *out)
{
    *out = (st_tier_source_t){.name = "counters",
                              .prefix = ST_KS_COUNTER,
                              .page = 256,
                              .order = ST_TIER_ORDER_MIDDLE,
                              .want = st__want,
                              .act = st__act,
                              .arg = s};
}

/* The counters as a member of the tier: one pass source, nothing to flush or merge. */
typedef struct {
    st_tier_member_t member;
    st_tier_source_t src;
} st_ctrmember_t;

static void st__consolidate_closed(void *arg)
{
    free(arg);
}

st_tier_member_t *st_counters_tier_member(st_store_t *s)
{
    st_ctrmember_t *m = st_calloc(1, sizeof *m);
    st_counters_tier_source(s, &m->src);
    m->member = (st_tier_member_t){.name = "counters",
                                   .sources = &m->src,
                                   .nsources = 1,
                                   .closed = st__consolidate_closed,
                                   .arg = m};
    return &m->member;
}

static st_tier_member_t *st__counters_kind_member(const st_kind_env_t *env, const void *opts)
{
    return st_counters_tier_member(env->store);
}

const st_kind_t st_counters_kind = {.name = "counters", .member = st__counters_kind_member};
