/* SPDX-License-Identifier: MIT */
/*
 * cli: what main.c's commands share — the configuration turned into the options of the stores
 * (opts.c) — and the offline commands `strata restore` and `strata rebuild-meta` (offline.c),
 * which build a data dir and exit without serving. Loop thread (the process's only thread but
 * for workers).
 */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include "strata/cold.h"
#include "strata/config.h"
#include "strata/kinds.h"
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

/* The data kinds' members of the tier (kinds.h's list, kinds.c), in the order they join and
 * rebuild: each kind's member hook with its options from env->cfg. Returns how many are in out
 * (a NULL one: a kind that has none here). */
#define ST_CLI_MEMBERS_MAX 8
size_t st_cli_members(const st_kind_env_t *env, st_tier_member_t *out[ST_CLI_MEMBERS_MAX]);

/* `strata restore` (SPEC §9): 0 on success, else the process's exit code. */
int st_cli_restore(const st_config_t *cfg);
/* `strata rebuild-meta` (SPEC §9): 0 on success, else the process's exit code. */
int st_cli_rebuild_meta(const st_config_t *cfg);

#endif
