/* SPDX-License-Identifier: MIT */
/*
 * config: every tunable of strata, each with a --flag and a STRATA_* environment twin. Flags win
 * over the environment, the environment over built-in defaults. `strata --help` prints the table.
 * One table holds the options of the process and the tier (config.c); each data kind declares
 * its own in its own folder (st_kind_t.opts, kinds.h), and the table takes them from the kinds'
 * list: parsing, the environment and --help loop over both.
 */
#ifndef STRATA_CONFIG_H
#define STRATA_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* An option's type. ST_CFG_TIME: µs, typed as µs or RFC 3339; ST_CFG_BOOL: a flag without a value
 * (1 when given). Numbers are stored as uint64_t, strings as char[size]. */
typedef enum { ST_CFG_STR, ST_CFG_U64, ST_CFG_SIZE, ST_CFG_TIME, ST_CFG_BOOL } st_cfg_type_t;

/* One option: its --flag, its environment twin, where its value lives (off: in st_config_t for
 * the table's own, in the kind's options struct for a kind's), its default and bounds (numbers)
 * and its --help line. */
typedef struct {
    const char *flag;
    const char *env;
    st_cfg_type_t type;
    size_t off;
    size_t size; /* capacity for strings */
    const char *def;
    uint64_t min, max;
    const char *help;
} st_cfg_opt_t;

/* Entries of an option table whose values are the fields of struct type T. */
#define ST_CFG_STR(T, field, flag, env, def, help)                                                 \
    {                                                                                              \
        flag, env, ST_CFG_STR, offsetof(T, field), sizeof(((T *)0)->field), def, 0, 0, help        \
    }
#define ST_CFG_NUM(T, type, field, flag, env, def, lo, hi, help)                                   \
    {                                                                                              \
        flag, env, type, offsetof(T, field), 0, def, lo, hi, help                                  \
    }

/* Room for the registered kinds' options (st_config_kind), in 8-byte words. */
#define ST_CONFIG_KIND_WORDS 32

typedef struct {
    char listen[256];
    char data_dir[1024];
    char cold_url[1024];
    uint64_t map_size;
    uint64_t flush_interval;
    uint64_t flush_rows;
    uint64_t compact_objects;
    uint64_t compact_max_mb;
    uint64_t cold_cache;
    uint64_t cold_timeout_ms;
    uint64_t cold_retries;
    uint64_t cold_workers;
    uint64_t retention_seconds;
    uint64_t reconcile_interval;
    uint64_t reconcile_queue; /* keys the reconciliation queue holds at most (reconcile.c) */
    char jwt_secret[512];
    char jwt_jwks_file[1024];
    char jwt_jwks_url[1024];
    uint64_t jwt_jwks_refresh; /* s */
    char jwt_issuer[512];
    char jwt_audience[512];
    uint64_t jwt_leeway; /* s */
    char jwt_roles_claim[256];
    char jwt_subject_claim[128];
    char cluster_secret[512];
    uint64_t insecure; /* --insecure: no auth on a non-loopback address is allowed */
    char cors_origins[2048];
    uint64_t node_id;
    uint64_t max_body;
    uint64_t max_content;
    uint64_t erase_within; /* s: an erasure still pending after this is reported late */
    char tables_url[1024]; /* SPEC v5 §5.1: the Iceberg tables' metadata ("": {cold}/_tables) */
    uint64_t table_commit_interval; /* s: written objects are in a committed snapshot within */
    uint64_t table_keep;            /* s: snapshots older are expired (time travel window) */
    uint64_t max_header;
    uint64_t max_room_members; /* rooms (SPEC §2.1) */
    uint64_t max_connections;
    uint64_t max_pipeline;
    uint64_t idle_timeout;
    uint64_t ws_ping_seconds;    /* stream keep-alive: ping after this, close after 3x */
    uint64_t ws_presence_budget; /* presence frames queued per loop turn (ws/presout.c) */
    uint64_t request_timeout;
    uint64_t idempotency_ttl;
    uint64_t idempotency_index; /* bytes of the answers' index in memory (http/idem_index.c) */
    uint64_t max_seats;
    uint64_t max_total_seats;
    uint64_t max_hold_seconds;
    char s3_endpoint[512];
    char s3_region[64];
    char s3_access_key[256];
    char s3_secret_key[256];
    char s3_ca_file[1024];
    char s3_path_style[8]; /* auto, on or off: see st_config_s3_path_style */
    char backup_url[1024];
    uint64_t backup_interval;   /* ms */
    uint64_t snapshot_interval; /* s */
    uint64_t backup_keep;
    uint64_t backup_barrier_timeout; /* ms */
    uint64_t backup_backlog_mb;
    uint64_t backup_part_mb;
    uint64_t to_time;      /* strata restore --to-time: µs, 0 = newest */
    uint64_t restore_list; /* strata restore --list */
    uint64_t accept_loss;  /* strata rebuild-meta --accept-loss */
    uint64_t test_hooks;
    char log_level[16];
    /* replicated groups (SPEC §8) */
    char cluster[1024];
    uint64_t cluster_self;
    char advertise[512];
    uint64_t election_timeout;
    uint64_t raft_snapshot_entries;
    /* many groups behind a proxy (SPEC §10) */
    char route_url[1024];
    /* the registered kinds' options, each kind's struct in the list's order: st_config_kind */
    uint64_t kinds[ST_CONFIG_KIND_WORDS];
} st_config_t;

typedef struct st_kind st_kind_t;
/* Where kind k's options are in cfg (borrowed from cfg): its options struct, as its table
 * (k->opts) describes it. k must be one of the kinds' list (kinds.h). */
const void *st_config_kind(const st_config_t *cfg, const st_kind_t *k);

/* Fills cfg with defaults only. */
void st_config_defaults(st_config_t *cfg);

/*
 * Loads defaults, then the environment, then argv. Returns 0 to run, 1 when --help/--version was
 * printed (exit 0), or ST_EINVAL with a message on stderr (exit 2).
 */
/* --s3-path-style as st_objstore_opts_t.path_style: 1 on, -1 off, 0 auto. ST_EINVAL for a
 * value that is none of auto, on/off, true/false, 1/0. */
int st_config_s3_path_style(const st_config_t *cfg, int *out);
int st_config_load(st_config_t *cfg, int argc, char **argv);

void st_config_usage(FILE *out);

/* True when clients must authenticate: a --jwt-secret or a JWKS (file or URL) is configured. */
bool st_config_auth_on(const st_config_t *cfg);

/* True when --listen names a loopback address only (127.0.0.0/8, ::1, localhost). */
bool st_config_listen_loopback(const char *listen);

/* Start-up checks across flags: protected mode (no auth on a non-loopback address needs
 * --insecure), --cluster-secret in a group with auth on and distinct from --jwt-secret. Prints the
 * reason on stderr and returns ST_EINVAL when strata must not start. */
int st_config_check(const st_config_t *cfg);

#endif
