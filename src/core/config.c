/* SPDX-License-Identifier: MIT */
/*
 * Flags and their environment twins, from one table and the kinds' own (kinds.h), so --help,
 * the environment and parsing can never disagree.
 */
#include "strata/config.h"
#include "strata/core.h"
#include "strata/kinds.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ST__STR(field, flag, env, def, help) ST_CFG_STR(st_config_t, field, flag, env, def, help)
#define ST__NUM(type, field, flag, env, def, lo, hi, help)                                         \
    ST_CFG_NUM(st_config_t, type, field, flag, env, def, lo, hi, help)

/* The process's and the tier's options; each kind's are in its own folder (kinds.h). */
static const st_cfg_opt_t st__opts[] = {
    ST__STR(listen, "listen", "STRATA_LISTEN", "127.0.0.1:8080",
            "HOST:PORT to serve HTTP and WebSocket on (port 0 picks a free port)"),
    ST__STR(data_dir, "data-dir", "STRATA_DATA_DIR", "./data", "directory of the LMDB hot store"),
    ST__STR(cold_url, "cold-url", "STRATA_COLD_URL", "file://./data/cold",
            "cold tier: file://DIR or s3://BUCKET/PREFIX"),
    ST__NUM(ST_CFG_SIZE, map_size, "map-size", "STRATA_MAP_SIZE", "1GiB", 1 << 20, 1ULL << 44,
            "LMDB map size: the hot store's capacity (writes get 507 when full)"),
    ST__NUM(ST_CFG_U64, flush_interval, "flush-interval", "STRATA_FLUSH_INTERVAL", "300", 1,
            86400 * 7, "seconds between cold-tier flushes"),
    ST__NUM(ST_CFG_U64, flush_rows, "flush-rows", "STRATA_FLUSH_ROWS", "10000", 1, 100000000,
            "hot rows per user that trigger a flush"),
    ST__NUM(ST_CFG_U64, compact_objects, "compact-objects", "STRATA_COMPACT_OBJECTS", "8", 1,
            1000000, "merge a user's small cold objects once it has more than this many"),
    ST__NUM(ST_CFG_U64, compact_max_mb, "compact-max-mb", "STRATA_COMPACT_MAX_MB", "256", 1,
            1048576,
            "MiB: no compaction writes a larger object (POST /v1/admin/compact merges a user's "
            "objects down to as few as this allows)"),
    ST__NUM(ST_CFG_SIZE, cold_cache, "cold-cache", "STRATA_COLD_CACHE", "256MiB", 0, 1ULL << 40,
            "memory for cold reads: parsed Parquet footers and decoded row groups together, least "
            "recently used out (strata_cold_cache_bytes in /metrics)"),
    ST__NUM(ST_CFG_U64, cold_timeout_ms, "cold-timeout-ms", "STRATA_COLD_TIMEOUT_MS", "30000", 100,
            3600000, "time limit of one object-storage request, in ms (connecting: at most 3 s)"),
    ST__NUM(
        ST_CFG_U64, cold_retries, "cold-retries", "STRATA_COLD_RETRIES", "2", 0, 10,
        "retries of an idempotent object-storage request (GET, PUT, DELETE, HEAD, list, multipart "
        "start and part) that failed in transport or with a 5xx, with jittered backoff"),
    ST__NUM(ST_CFG_U64, cold_workers, "cold-workers", "STRATA_COLD_WORKERS", "16", 1, 128,
            "worker threads for flushes and cold reads (object storage is waited for there)"),
    ST__NUM(ST_CFG_U64, retention_seconds, "retention-seconds", "STRATA_RETENTION_SECONDS", "0", 0,
            86400ULL * 36500, "drop cold messages older than this (0 keeps them forever)"),
    ST__NUM(ST_CFG_U64, reconcile_interval, "reconcile-interval", "STRATA_RECONCILE_INTERVAL", "20",
            1, 86400, "seconds between reconciliation passes"),
    ST__NUM(ST_CFG_U64, reconcile_queue, "reconcile-queue", "STRATA_RECONCILE_QUEUE", "100000", 1,
            100000000,
            "keys (conversations, distinct counters) waiting for their recount, at most (about "
            "130 bytes each); a write past it falls back to a pass over every key "
            "(strata_reconcile_overflows_total in /metrics)"),
    ST__STR(jwt_secret, "jwt-secret", "STRATA_JWT_SECRET", "",
            "HS256 secret; when set every /v1 route requires a Bearer token"),
    ST__STR(jwt_jwks_file, "jwt-jwks-file", "STRATA_JWT_JWKS_FILE", "",
            "JSON Web Key Set file of an identity provider's public keys (RS256/384/512, PS256, "
            "ES256/384, EdDSA tokens); when set every /v1 route requires a Bearer token"),
    ST__STR(jwt_jwks_url, "jwt-jwks-url", "STRATA_JWT_JWKS_URL", "",
            "URL of an identity provider's JSON Web Key Set, fetched in the background; when set "
            "every /v1 route requires a Bearer token"),
    ST__NUM(ST_CFG_U64, jwt_jwks_refresh, "jwt-jwks-refresh", "STRATA_JWT_JWKS_REFRESH", "300", 10,
            86400,
            "seconds between fetches of --jwt-jwks-url (a token with an unknown kid fetches it at "
            "most every 10 s; the last good key set is kept while the URL fails)"),
    ST__STR(jwt_issuer, "jwt-issuer", "STRATA_JWT_ISSUER", "",
            "the iss every token must carry (unchecked when unset)"),
    ST__STR(jwt_audience, "jwt-audience", "STRATA_JWT_AUDIENCE", "",
            "a value the token's aud (a string or an array) must hold (unchecked when unset)"),
    ST__NUM(ST_CFG_U64, jwt_leeway, "jwt-leeway", "STRATA_JWT_LEEWAY", "30", 0, 3600,
            "seconds of clock skew allowed for a token's exp and nbf (requests and streams)"),
    ST__STR(jwt_roles_claim, "jwt-roles-claim", "STRATA_JWT_ROLES_CLAIM", "role",
            "dotted path of the token's roles (a string or an array of strings, e.g. "
            "realm_access.roles); \"admin\" among them opens the admin routes"),
    ST__STR(jwt_subject_claim, "jwt-subject-claim", "STRATA_JWT_SUBJECT_CLAIM", "sub",
            "the token claim that names the user"),
    ST__STR(cluster_secret, "cluster-secret", "STRATA_CLUSTER_SECRET", "",
            "secret a group's members sign their internal calls with (required in a group with "
            "auth on; must differ from --jwt-secret)"),
    ST__NUM(ST_CFG_BOOL, insecure, "insecure", "STRATA_INSECURE", "0", 0, 1,
            "serve without auth on a non-loopback --listen address (refused otherwise)"),
    ST__STR(cors_origins, "cors-origins", "STRATA_CORS_ORIGINS", "",
            "origins browsers may call from (comma list, or *); none when unset"),
    ST__NUM(ST_CFG_U64, node_id, "node-id", "STRATA_NODE_ID", "0", 0, 1023,
            "snowflake node id (0..1023), unique per instance"),
    ST__NUM(ST_CFG_SIZE, max_body, "max-body", "STRATA_MAX_BODY", "8MiB", 1024, 1ULL << 30,
            "largest request body accepted (413 above)"),
    ST__NUM(ST_CFG_SIZE, max_content, "max-content", "STRATA_MAX_CONTENT", "1MiB", 1, 1ULL << 30,
            "largest message content accepted (413 above)"),
    ST__NUM(ST_CFG_U64, erase_within, "erase-within", "STRATA_ERASE_WITHIN", "3600", 1, 86400 * 30,
            "seconds within which an erasure (DELETE /v1/users/{user}) deletes the user's rows "
            "and objects; one still pending after it is logged as late and counted"),
    ST__STR(tables_url, "tables-url", "STRATA_TABLES_URL", "",
            "where the cold tier's Apache Iceberg tables keep their metadata: file://DIR or "
            "s3://BUCKET/PREFIX, shared by many groups (empty: the cold tier's _tables folder)"),
    ST__NUM(ST_CFG_U64, table_commit_interval, "table-commit-interval",
            "STRATA_TABLE_COMMIT_INTERVAL", "10", 0, 3600,
            "seconds within which written cold objects, edits and deletes are in a committed "
            "Iceberg snapshot (0: no commits; the catalog serves what the tables' store holds)"),
    ST__NUM(ST_CFG_U64, table_keep, "table-keep", "STRATA_TABLE_KEEP", "86400", 0, 86400 * 365,
            "seconds an Iceberg snapshot is kept for time travel before it is expired (an "
            "erasure expires earlier ones at once)"),
    ST__NUM(ST_CFG_SIZE, max_header, "max-header", "STRATA_MAX_HEADER", "16KiB", 1024, 1ULL << 20,
            "largest request line + headers accepted (431 above)"),
    ST__NUM(ST_CFG_U64, max_room_members, "max-room-members", "STRATA_MAX_ROOM_MEMBERS", "100000",
            1, 100000000, "members one room may have (SPEC §2.1; an add past it is 409)"),
    ST__NUM(ST_CFG_U64, max_connections, "max-connections", "STRATA_MAX_CONNECTIONS", "10000", 1,
            1000000, "concurrent client connections (503 above)"),
    ST__NUM(ST_CFG_U64, max_pipeline, "max-pipeline", "STRATA_MAX_PIPELINE", "256", 1, 100000,
            "unanswered requests per connection before strata stops reading it"),
    ST__NUM(ST_CFG_U64, idle_timeout, "idle-timeout", "STRATA_IDLE_TIMEOUT", "60", 1, 86400,
            "seconds an idle keep-alive connection is kept, and a peer that takes no output"),
    ST__NUM(ST_CFG_U64, ws_ping_seconds, "ws-ping-seconds", "STRATA_WS_PING_SECONDS", "30", 1, 3600,
            "seconds of silence after which a stream is pinged; silent 3x as long, it is closed "
            "(lower it behind proxies that drop idle connections sooner)"),
    ST__NUM(ST_CFG_U64, ws_presence_budget, "ws-presence-budget", "STRATA_WS_PRESENCE_BUDGET",
            "16384", 1, 1ULL << 30,
            "presence frames (a subscriber's frame about one change) queued per loop turn: a "
            "storm of changes in a big room goes out over several turns, others served between"),
    ST__NUM(ST_CFG_U64, request_timeout, "request-timeout", "STRATA_REQUEST_TIMEOUT", "10", 1, 3600,
            "seconds a client may take to send one whole request (slowloris guard)"),
    ST__NUM(ST_CFG_U64, idempotency_ttl, "idempotency-ttl", "STRATA_IDEMPOTENCY_TTL", "86400", 60,
            86400 * 365, "seconds an Idempotency-Key answer is kept"),
    ST__NUM(ST_CFG_SIZE, idempotency_index, "idempotency-index", "STRATA_IDEMPOTENCY_INDEX",
            "64MiB", 1024, 1ULL << 40,
            "memory for the index of Idempotency-Key answers (16 bytes a slot, at most 70 % "
            "full); past it an answer is found through a store entry instead, slower but never "
            "lost (strata_idempotency_index_bytes in /metrics)"),
    ST__NUM(ST_CFG_U64, max_seats, "max-seats", "STRATA_MAX_SEATS", "1000000", 1, 100000000,
            "seats per event (400 above)"),
    ST__NUM(ST_CFG_U64, max_hold_seconds, "max-hold-seconds", "STRATA_MAX_HOLD_SECONDS", "7200", 1,
            365 * 86400,
            "longest a hold may last since its booking was created, extensions "
            "included (400 above)"),
    ST__NUM(ST_CFG_U64, max_total_seats, "max-total-seats", "STRATA_MAX_TOTAL_SEATS", "100000000",
            0, 100000000000ULL,
            "seats over all events, whose maps live in memory, a row of fewer than 16 counting "
            "as 16 and each section as 512 more (~0.5 byte each; 507 above; 0 = no limit)"),
    ST__STR(s3_endpoint, "s3-endpoint", "STRATA_S3_ENDPOINT", "",
            "S3-compatible endpoint URL, e.g. http://127.0.0.1:9000"),
    ST__STR(s3_region, "s3-region", "STRATA_S3_REGION", "us-east-1", "S3 region for signing"),
    ST__STR(s3_access_key, "s3-access-key", "STRATA_S3_ACCESS_KEY", "", "S3 access key id"),
    ST__STR(s3_secret_key, "s3-secret-key", "STRATA_S3_SECRET_KEY", "", "S3 secret access key"),
    ST__STR(s3_ca_file, "s3-ca-file", "STRATA_S3_CA_FILE", "",
            "CA bundle (PEM) that an https:// --s3-endpoint's certificate must chain to (unset: "
            "the system's; certificates are always verified)"),
    ST__STR(s3_path_style, "s3-path-style", "STRATA_S3_PATH_STYLE", "auto",
            "on: ENDPOINT/BUCKET/KEY (MinIO, Ceph); off: virtual-hosted BUCKET.HOST/KEY (AWS); "
            "auto: on with --s3-endpoint, off for AWS's own endpoint"),
    ST__STR(backup_url, "backup-url", "STRATA_BACKUP_URL", "",
            "continuous backup target: file://DIR or s3://BUCKET/PREFIX (same S3 flags; off when "
            "unset)"),
    ST__NUM(ST_CFG_U64, backup_interval, "backup-interval", "STRATA_BACKUP_INTERVAL", "1000", 10,
            3600000, "milliseconds between shipped redo-log segments"),
    ST__NUM(ST_CFG_U64, snapshot_interval, "snapshot-interval", "STRATA_SNAPSHOT_INTERVAL", "3600",
            1, 86400 * 365, "seconds between store snapshots shipped to the backup"),
    ST__NUM(ST_CFG_U64, backup_keep, "backup-keep", "STRATA_BACKUP_KEEP", "2", 1, 10000,
            "snapshots kept in the backup (older ones and their segments are deleted)"),
    ST__NUM(ST_CFG_U64, backup_barrier_timeout, "backup-barrier-timeout-ms",
            "STRATA_BACKUP_BARRIER_TIMEOUT_MS", "2000", 1, 600000,
            "longest wait for a new sequence/seq reservation to reach the backup; past it that "
            "request gets 503 and nothing of it is applied"),
    ST__NUM(ST_CFG_U64, backup_backlog_mb, "backup-backlog-mb", "STRATA_BACKUP_BACKLOG_MB", "256",
            1, 1048576,
            "MiB of shipped-later redo log kept in memory while the backup target is slow or down; "
            "past it the backlog is dropped and a new snapshot (taken when the target is back) "
            "covers it"),
    ST__NUM(ST_CFG_U64, backup_part_mb, "backup-part-mb", "STRATA_BACKUP_PART_MB", "16", 5, 4096,
            "MiB per part of a snapshot's multipart upload (S3 needs >= 5)"),
    ST__NUM(ST_CFG_TIME, to_time, "to-time", "STRATA_RESTORE_TO_TIME", "0", 0, INT64_MAX,
            "strata restore: the point in time to restore, RFC 3339 (2026-11-27T21:55:00Z, "
            "2026-11-27T23:55:00.5+02:00) or Unix µs; 0 = the newest shipped"),
    ST__NUM(ST_CFG_BOOL, restore_list, "list", "STRATA_RESTORE_LIST", "0", 0, 1,
            "strata restore: print the restore points in --backup-url, then exit"),
    ST__NUM(ST_CFG_BOOL, accept_loss, "accept-loss", "STRATA_ACCEPT_LOSS", "0", 0, 1,
            "strata rebuild-meta: build a new store from the cold tier alone although sequences, "
            "counters, events and hot bookings are lost (a sequence would start again at 1)"),
    ST__NUM(ST_CFG_U64, test_hooks, "test-hooks", "STRATA_TEST_HOOKS", "0", 0, 1,
            "1 enables POST /v1/admin/test/drift (tests only: corrupts counts on purpose)"),
    ST__STR(log_level, "log-level", "STRATA_LOG_LEVEL", "info", "debug, info, warn or error"),
    ST__STR(cluster, "cluster", "STRATA_CLUSTER", "",
            "replicated group: ID=HOST:PORT,... Raft addresses of every member (unset: one node)"),
    ST__NUM(ST_CFG_U64, cluster_self, "cluster-self", "STRATA_CLUSTER_SELF", "0", 0, 1023,
            "this member's id in --cluster"),
    ST__STR(advertise, "advertise", "STRATA_ADVERTISE", "",
            "this member's HTTP base URL for redirects (default http:// + --listen)"),
    ST__NUM(ST_CFG_U64, election_timeout, "election-timeout", "STRATA_ELECTION_TIMEOUT", "1000", 50,
            60000, "Raft election timeout in ms (a new leader within ~2-3x after a loss)"),
    ST__NUM(ST_CFG_U64, raft_snapshot_entries, "raft-snapshot-entries",
            "STRATA_RAFT_SNAPSHOT_ENTRIES", "0", 0, 1000000,
            "Raft entries between snapshots, and kept after one (a member further behind copies "
            "the store); 0: about every 64 MiB of log, 8192 entries at least"),
    ST__STR(route_url, "route-url", "STRATA_ROUTE_URL", "",
            "many groups behind a proxy (SPEC §10): the proxy's base URL; a room's membership "
            "changes reach its members' groups through it (a durable outbox); unset: one group"),
};
#define ST__NOPTS (sizeof st__opts / sizeof st__opts[0])
/* getopt_long's value for option i: past every character getopt answers with ('?' is 63) and
 * past --help/--version's */
#define ST__OPT_BASE 2000

/* Bytes a kind's options take in st_config_t.kinds: its struct, 8-byte aligned. */
static size_t st__kind_room(const st_kind_t *k)
{
    return (k->opts_size + 7) & ~(size_t)7;
}

/* Every option: the table's, then each kind's in the kinds' list order (kinds.h). */
static size_t st__nopts_all(void)
{
    size_t n = ST__NOPTS;
    for (size_t k = 0; k < st_kinds_n; k++)
        n += st_kinds[k]->nopts;
    return n;
}

/* Option i of every option (st__nopts_all); *base is the offset in st_config_t of the struct its
 * off is into: 0 for the table's, the kind's place in st_config_t.kinds for a kind's. */
static const st_cfg_opt_t *st__opt_at(size_t i, size_t *base)
{
    *base = 0;
    if (i < ST__NOPTS) return &st__opts[i];
    i -= ST__NOPTS;
    size_t at = offsetof(st_config_t, kinds);
    for (size_t k = 0; k < st_kinds_n; k++) {
        if (i < st_kinds[k]->nopts) {
            *base = at;
            return &st_kinds[k]->opts[i];
        }
        i -= st_kinds[k]->nopts;
        at += st__kind_room(st_kinds[k]);
    }
    return NULL;
}

const void *st_config_kind(const st_config_t *cfg, const st_kind_t *k)
{
    size_t at = 0;
    for (size_t i = 0; i < st_kinds_n; i++) {
        if (st_kinds[i] == k) return (const char *)cfg->kinds + at;
        at += st__kind_room(st_kinds[i]);
    }
    st_fatal("kind %s is not in the kinds' list (kinds.h)", k->name);
}

/* What the kinds registered fits st_config_t, and no flag or environment variable is claimed
 * twice: a kind's flag that another option has would never be parsed (getopt takes the first). */
static void st__kinds_check(void)
{
    size_t room = 0, n = st__nopts_all(), base;
    for (size_t k = 0; k < st_kinds_n; k++) {
        for (size_t i = 0; i < st_kinds[k]->nopts; i++) {
            const st_cfg_opt_t *o = &st_kinds[k]->opts[i];
            if (o->off + (o->type == ST_CFG_STR ? o->size : 8) > st_kinds[k]->opts_size)
                st_fatal("--%s lies past kind %s's options struct", o->flag, st_kinds[k]->name);
        }
        room += st__kind_room(st_kinds[k]);
    }
    if (room > sizeof((st_config_t *)0)->kinds)
        st_fatal("the kinds' options take %zu bytes: raise ST_CONFIG_KIND_WORDS", room);
    for (size_t i = ST__NOPTS; i < n; i++) {
        const st_cfg_opt_t *a = st__opt_at(i, &base);
        for (size_t j = 0; j < i; j++) {
            const st_cfg_opt_t *b = st__opt_at(j, &base);
            if (strcmp(a->flag, b->flag) == 0 || (*a->env && strcmp(a->env, b->env) == 0))
                st_fatal("--%s (%s) is registered twice", a->flag, a->env);
        }
    }
}

static int st__cfg_set(st_config_t *cfg, const st_cfg_opt_t *o, size_t base, const char *val,
                       const char *src)
{
    char *dst = (char *)cfg + base + o->off;
    if (o->type == ST_CFG_STR) {
        size_t n = strlen(val);
        if (n >= o->size) {
            fprintf(stderr, "strata: %s for --%s is too long (max %zu bytes)\n", src, o->flag,
                    o->size - 1);
            return ST_EINVAL;
        }
        memcpy(dst, val, n + 1);
        return ST_OK;
    }
    uint64_t v;
    int64_t sv;
    int rc;
    if (o->type == ST_CFG_SIZE) {
        rc = st_parse_size(val, &v);
    } else if (o->type == ST_CFG_TIME) {
        rc = st_parse_time_us(val, &sv);
        v = (uint64_t)sv;
        if (rc != ST_OK) {
            fprintf(stderr,
                    "strata: bad value '%s' from %s for --%s (expected RFC 3339 such as "
                    "2026-11-27T21:55:00Z or 2026-11-27T23:55:00.250+02:00, or Unix µs)\n",
                    val, src, o->flag);
            return ST_EINVAL;
        }
    } else {
        rc = st_parse_i64(val, strlen(val), &sv);
        v = (uint64_t)sv;
        if (rc == ST_OK && sv < 0) rc = ST_EINVAL;
    }
    if (rc != ST_OK || v < o->min || v > o->max) {
        fprintf(stderr, "strata: bad value '%s' from %s for --%s (expected %llu..%llu)\n", val, src,
                o->flag, (unsigned long long)o->min, (unsigned long long)o->max);
        return ST_EINVAL;
    }
    memcpy(dst, &v, sizeof v);
    return ST_OK;
}

void st_config_defaults(st_config_t *cfg)
{
    st__kinds_check();
    memset(cfg, 0, sizeof *cfg);
    size_t base;
    for (size_t i = 0, n = st__nopts_all(); i < n; i++) {
        const st_cfg_opt_t *o = st__opt_at(i, &base);
        if (st__cfg_set(cfg, o, base, o->def, "default") != ST_OK)
            st_fatal("bad built-in default for --%s", o->flag);
    }
}

void st_config_usage(FILE *out)
{
    fprintf(out, "usage: strata [options]\n"
                 "       strata rebuild-meta [--backup-url URL | --accept-loss] [options]\n"
                 "                                       rebuild a lost store from --cold-url "
                 "(and the backup), then exit\n"
                 "       strata restore --backup-url URL --data-dir DIR [--to-time TIME] "
                 "[options]\n"
                 "                                       build DIR from a backup, then exit\n"
                 "       strata restore --list --backup-url URL\n"
                 "                                       print the restore points, then exit\n\n"
                 "strata: durable hot state for chat, ticketing and counting over HTTP and "
                 "WebSocket.\nEvery option can also be set by its environment variable.\n\n");
    size_t base;
    for (size_t i = 0, n = st__nopts_all(); i < n; i++) {
        const st_cfg_opt_t *o = st__opt_at(i, &base);
        if (o->type == ST_CFG_BOOL)
            fprintf(out, "  --%-20s %-26s %s\n", o->flag, o->env, o->help);
        else
            fprintf(out, "  --%-20s %-26s %s (default: %s)\n", o->flag, o->env, o->help,
                    *o->def ? o->def : "unset");
    }
    fprintf(out, "  --%-20s %-26s %s\n", "help", "", "print this help and exit");
    fprintf(out, "  --%-20s %-26s %s\n", "version", "", "print the version and exit");
}

int st_config_load(st_config_t *cfg, int argc, char **argv)
{
    st_config_defaults(cfg);
    size_t n = st__nopts_all(), base;
    for (size_t i = 0; i < n; i++) {
        const st_cfg_opt_t *o = st__opt_at(i, &base);
        const char *v = *o->env ? getenv(o->env) : NULL;
        if (v && st__cfg_set(cfg, o, base, v, o->env) != ST_OK) return ST_EINVAL;
    }
    struct option longopts[n + 3];
    for (size_t i = 0; i < n; i++) {
        const st_cfg_opt_t *o = st__opt_at(i, &base);
        longopts[i] =
            (struct option){o->flag, o->type == ST_CFG_BOOL ? no_argument : required_argument, NULL,
                            ST__OPT_BASE + (int)i};
    }
    longopts[n] = (struct option){"help", no_argument, NULL, 'h' + 1000};
    longopts[n + 1] = (struct option){"version", no_argument, NULL, 'v' + 1000};
    longopts[n + 2] = (struct option){0, 0, 0, 0};
    optind = 1;
    opterr = 0;
    for (;;) {
        int idx = -1;
        int c = getopt_long(argc, argv, "", longopts, &idx);
        if (c == -1) break;
        if (c == 'h' + 1000) {
            st_config_usage(stdout);
            return 1;
        }
        if (c == 'v' + 1000) {
            printf("strata 0.1.0\n");
            return 1;
        }
        c -= ST__OPT_BASE; /* getopt's own answers ('?', ':') stay below the base */
        if (c < 0 || (size_t)c >= n) {
            fprintf(stderr, "strata: unknown or incomplete option '%s' (see --help)\n",
                    argv[optind - 1]);
            return ST_EINVAL;
        }
        const st_cfg_opt_t *o = st__opt_at((size_t)c, &base);
        const char *val = o->type == ST_CFG_BOOL ? "1" : optarg;
        if (st__cfg_set(cfg, o, base, val, "the command line") != ST_OK) return ST_EINVAL;
    }
    if (optind < argc) {
        fprintf(stderr, "strata: unexpected argument '%s' (see --help)\n", argv[optind]);
        return ST_EINVAL;
    }
    int ps;
    if (st_config_s3_path_style(cfg, &ps) != ST_OK) {
        fprintf(stderr, "strata: bad value '%s' for --s3-path-style (expected auto, on or off)\n",
                cfg->s3_path_style);
        return ST_EINVAL;
    }
    return ST_OK;
}

int st_config_s3_path_style(const st_config_t *cfg, int *out)
{
    static const struct {
        const char *name;
        int v;
    } vals[] = {{"auto", 0}, {"on", 1},     {"true", 1}, {"1", 1},
                {"off", -1}, {"false", -1}, {"0", -1}};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        if (strcmp(cfg->s3_path_style, vals[i].name) == 0) {
            *out = vals[i].v;
            return ST_OK;
        }
    }
    return ST_EINVAL;
}

bool st_config_auth_on(const st_config_t *cfg)
{
    return *cfg->jwt_secret || *cfg->jwt_jwks_file || *cfg->jwt_jwks_url;
}

/* 1: a loopback address, 0: another address, -1: not an address (the server says so). */
static int st__listen_kind(const char *listen)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    size_t n = colon ? (size_t)(colon - listen) : strlen(listen);
    if (n >= sizeof host) return -1;
    memcpy(host, listen, n);
    host[n] = '\0';
    if (host[0] == '[' && n >= 2 && host[n - 1] == ']') { /* [v6]:PORT */
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    if (strcasecmp(host, "localhost") == 0) return 1;
    unsigned char a[16];
    if (inet_pton(AF_INET, host, a) == 1) return a[0] == 127;
    if (inet_pton(AF_INET6, host, a) == 1) return memcmp(a, &in6addr_loopback, 16) == 0;
    return -1;
}

bool st_config_listen_loopback(const char *listen)
{
    return st__listen_kind(listen) == 1;
}

int st_config_check(const st_config_t *cfg)
{
    bool auth = st_config_auth_on(cfg);
    if (!auth && !cfg->insecure && st__listen_kind(cfg->listen) == 0) {
        fprintf(stderr,
                "strata: refusing to serve without auth on %s, which is not a loopback address "
                "(protected mode). Configure auth (--jwt-secret, --jwt-jwks-file or "
                "--jwt-jwks-url), listen on 127.0.0.1, or pass --insecure (STRATA_INSECURE=1) if "
                "something in front of strata guards it\n",
                cfg->listen);
        return ST_EINVAL;
    }
    if (*cfg->cluster && auth && !*cfg->cluster_secret) {
        fprintf(stderr, "strata: a group with auth on needs --cluster-secret "
                        "(STRATA_CLUSTER_SECRET), the same on every member: members sign their "
                        "internal calls with it, never with a client's secret or key\n");
        return ST_EINVAL;
    }
    if (*cfg->route_url && strncmp(cfg->route_url, "http://", 7) != 0 &&
        strncmp(cfg->route_url, "https://", 8) != 0) {
        fprintf(stderr, "strata: --route-url must be an http:// or https:// base URL (the "
                        "proxy in front of the groups)\n");
        return ST_EINVAL;
    }
    if (*cfg->route_url && auth && !*cfg->cluster_secret) {
        fprintf(stderr, "strata: --route-url with auth on needs --cluster-secret "
                        "(STRATA_CLUSTER_SECRET), the same on every group behind the proxy: "
                        "groups sign the outbox's calls with it\n");
        return ST_EINVAL;
    }
    if (*cfg->cluster_secret && strcmp(cfg->cluster_secret, cfg->jwt_secret) == 0) {
        fprintf(stderr, "strata: --cluster-secret must differ from --jwt-secret (a client holding "
                        "a token secret must not be able to act as a member)\n");
        return ST_EINVAL;
    }
    return ST_OK;
}
