/* SPDX-License-Identifier: MIT */
/*
 * kinds: strata's data kinds, registered in one list (ARCHITECTURE.md "Modules register, the
 * core enforces"), one line each, as PostgreSQL's rmgrlist.h has one line per WAL resource
 * manager. Everything that needs every kind loops over the list and names none:
 *   - the config table (config.c) takes each kind's options from it: parsing, the environment
 *     and --help; a kind reads its parsed values through st_config_kind;
 *   - main.c joins each kind's tier member to the tier in the list's order (src/cli/kinds.c);
 *   - `strata rebuild-meta` (src/cli/offline.c) runs their rebuild hooks in that order;
 *   - the Iceberg tables (src/tables, SPEC v5 §5.1) are the kinds' tables in that order, and the
 *     catalog serves those.
 *
 * A kind defines, in its own folder, `const st_kind_t st_<name>_kind`: its name, its options (an
 * st_cfg_opt_t table over a struct of its own, config.h) and a member hook that applies those
 * options to its module and makes its member of the tier (tier.h), and, when its objects make an
 * Iceberg table, that table (iceberg.h: name, schema, name mapping, partition field, owner tag).
 * Adding a kind, a table kind too, is that folder
 * and one line in ST_KINDS below. The modules a member is made from are the ones main opens for
 * their other sides too (HTTP, streams, rooms): st_kind_env_t.
 *
 * Loop thread only.
 */
#ifndef STRATA_KINDS_H
#define STRATA_KINDS_H

#include "strata/config.h"
#include "strata/iceberg.h"
#include "strata/tier.h"

/* The kinds, in the order they join the tier and rebuild: one line each. */
#define ST_KINDS(X)                                                                                \
    X(chat) /* first: settles the writer; table messages (0) */                                    \
    X(chat_delta)                                                                                  \
    X(counters)                                                                                    \
    X(rooms) /* rooms own chat messages; table room_messages (1) */                                \
    X(seats) /* table bookings (2) */                                                              \
    /* a new kind: one line above this one */

typedef struct st_chat st_chat_t;
typedef struct st_seats st_seats_t;

/* What a kind's member is made from; every pointer borrowed, owned by main (or rebuild-meta). */
typedef struct {
    const st_config_t *cfg;
    st_store_t *store;
    st_tier_t *tier; /* NULL offline (rebuild-meta: no tier runs) */
    st_chat_t *chat;
    st_seats_t *seats; /* NULL offline: its member only rebuilds */
} st_kind_env_t;

struct st_kind {
    const char *name;         /* for logs and tests */
    const st_cfg_opt_t *opts; /* its options (off: into its options struct); may be NULL */
    size_t nopts;
    size_t opts_size; /* bytes of its options struct (at most ST_CONFIG_KIND_WORDS words in all) */
    /* Applies its options (opts: its struct, st_config_kind) to its module and returns its
     * member of the tier, owned by the tier once joined (NULL: none here). */
    st_tier_member_t *(*member)(const st_kind_env_t *env, const void *opts);
    /* Its Iceberg table (static, in its folder), or NULL: its objects are no table's. */
    const st_table_def_t *table;
};

/* The options part of a kind's st_kind_t: its st_cfg_opt_t array and the struct type it fills. */
#define ST_KIND_OPTS(table, type)                                                                  \
    .opts = (table), .nopts = sizeof(table) / sizeof((table)[0]), .opts_size = sizeof(type)

#define ST__KIND_DECLARE(name) extern const st_kind_t st_##name##_kind;
ST_KINDS(ST__KIND_DECLARE)
#undef ST__KIND_DECLARE

/* The list (src/cli/kinds.c), st_kinds_n entries. */
extern const st_kind_t *const st_kinds[];
extern const size_t st_kinds_n;

#endif
