/* SPDX-License-Identifier: MIT */
/*
 * Chat as registered kinds (kinds.h): its options — when a user's hot messages are flushed, when
 * an idle conversation leaves the hot store, how many versions an edit keeps, when cold edits
 * are folded — and the members its kinds' lines join: chat's messages (st_chat_tier_member) and
 * their delta objects (st_chat_delta_tier_member).
 */
#include "internal.h"
#include "strata/kinds.h"

#include <stddef.h>

typedef struct {
    uint64_t flush_min_rows;
    uint64_t flush_max_age;    /* s */
    uint64_t hot_ttl;          /* s */
    uint64_t max_edit_history; /* SPEC §2.2: earlier versions an edit keeps */
    uint64_t delta_max_age;    /* s: cold edits folded into their objects within */
} st__chat_kind_opts_t;

#define ST__CHAT_NUM(field, flag, env, def, lo, hi, help)                                          \
    ST_CFG_NUM(st__chat_kind_opts_t, ST_CFG_U64, field, flag, env, def, lo, hi, help)

static const st_cfg_opt_t st__chat_kind_opts[] = {
    ST__CHAT_NUM(flush_min_rows, "flush-min-rows", "STRATA_FLUSH_MIN_ROWS", "100", 1, 100000000,
                 "at the interval, flush a user only with this many hot rows or --flush-max-age"),
    ST__CHAT_NUM(flush_max_age, "flush-max-age", "STRATA_FLUSH_MAX_AGE", "3600", 0, 86400 * 365,
                 "seconds: at the interval, flush a user whose oldest hot row is this old (0: "
                 "any)"),
    ST__CHAT_NUM(hot_ttl, "hot-ttl", "STRATA_HOT_TTL", "86400", 1, 86400 * 3650,
                 "seconds a conversation stays hot once idle and fully flushed (then read from "
                 "cold)"),
    ST__CHAT_NUM(max_edit_history, "max-edit-history", "STRATA_MAX_EDIT_HISTORY", "20", 0, 10000,
                 "earlier versions an edited message keeps in edit_history (the newest)"),
    ST__CHAT_NUM(delta_max_age, "delta-max-age", "STRATA_DELTA_MAX_AGE", "3600", 1, 86400 * 365,
                 "seconds within which an edit or delete of a cold message is folded into its "
                 "Parquet object (a compaction rewrites it)"),
};

static st_tier_member_t *st__chat_kind_member(const st_kind_env_t *env, const void *opts)
{
    const st__chat_kind_opts_t *o = opts;
    st_chat_cold_opts_t co = {.zstd_level = 3,
                              .hot_ttl_s = o->hot_ttl,
                              .flush_min_rows = o->flush_min_rows,
                              .flush_max_age_s = o->flush_max_age,
                              .delta_max_age_s = o->delta_max_age};
    /* A cold edit or delete reaches the tables' current snapshot within --table-commit-interval
     * (SPEC v5 §5.1) as a rewritten data file (copy-on-write): the fold is due by then. */
    uint64_t commit = env->cfg->table_commit_interval;
    if (commit && commit < co.delta_max_age_s) co.delta_max_age_s = commit;
    st_chat_set_max_history(env->chat, o->max_edit_history);
    return st_chat_tier_member(env->chat, env->tier, &co);
}

const st_kind_t st_chat_kind = {.name = "chat",
                                ST_KIND_OPTS(st__chat_kind_opts, st__chat_kind_opts_t),
                                .member = st__chat_kind_member,
                                .table = &st_chat_table};

static st_tier_member_t *st__chat_delta_kind_member(const st_kind_env_t *env, const void *opts)
{
    return st_chat_delta_tier_member(env->chat);
}

const st_kind_t st_chat_delta_kind = {.name = "chat deltas", .member = st__chat_delta_kind_member};
