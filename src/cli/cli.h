/* SPDX-License-Identifier: MIT */
/*
 * cli: what main.c's commands share — the configuration turned into the options of the stores
 * (opts.c) — and the offline commands `strata restore` and `strata rebuild-meta` (offline.c),
 * which build a data dir and exit without serving. Loop thread (the process's only thread but
 * for workers).
 */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include "strata/chat.h"
#include "strata/cold.h"
#include "strata/config.h"
#include "strata/seats.h"
#include "strata/store.h"
#include "strata/tier.h"

/* Room for a cold URL: the flag's, or file:// + the data dir + /cold. */
#define ST_CLI_COLD_URL_MAX                                                                        \
    (sizeof((st_config_t *)0)->cold_url + sizeof((st_config_t *)0)->data_dir + 16)

/* Object-store options for url with the shared S3 flags (url and cfg borrowed). */
st_objstore_opts_t st_cli_obj_opts(const st_config_t *cfg, const char *url);
/* The cold tier's URL into url (n bytes, ST_CLI_COLD_URL_MAX): the default follows --data-dir. */
void st_cli_cold_url(const st_config_t *cfg, char *url, size_t n);
/* The Iceberg tables' metadata URL (SPEC v5 §5.1): --tables-url, or the cold tier's _tables
 * folder. */
void st_cli_tables_url(const st_config_t *cfg, char *url, size_t n);
/* The hot store's options; cold_dir (n bytes) holds the directory a local cold tier writes to,
 * which the store watches for a full disk. */
st_store_opts_t st_cli_store_opts(const st_config_t *cfg, char *cold_dir, size_t n);
/* The backup target's options (--backup-url). */
st_objstore_opts_t st_cli_backup_obj(const st_config_t *cfg);
/* Whether --backup-url names a store (else says so, naming the flag, for cmd). */
bool st_cli_backup_url_ok(const char *cmd, const char *url);

/* The data kinds' members of the tier (kinds.c), in the order they join and rebuild. */
#define ST_CLI_MEMBERS_MAX 8
typedef struct {
    st_store_t *store;
    st_chat_t *chat;
    st_seats_t *seats; /* NULL offline: its member only rebuilds */
    st_tier_t *tier;   /* NULL offline (rebuild-meta: no tier runs) */
    const st_chat_cold_opts_t *chat_opts;
    uint64_t booking_hot_seconds;
} st_cli_kinds_t;
/* Makes every kind's member into out; returns how many (a NULL one: a kind that has none). */
size_t st_cli_members(const st_cli_kinds_t *k, st_tier_member_t *out[ST_CLI_MEMBERS_MAX]);

/* `strata restore` (SPEC §9): 0 on success, else the process's exit code. */
int st_cli_restore(const st_config_t *cfg);
/* `strata rebuild-meta` (SPEC §9): 0 on success, else the process's exit code. */
int st_cli_rebuild_meta(const st_config_t *cfg);

#endif
