/* SPDX-License-Identifier: MIT */
/* Operational endpoints: health and Prometheus metrics (SPEC §7). */
#include "strata/coldshare.h"
#include "internal.h"
#include "strata/tables.h"
#include "strata/backup.h"
#include "strata/chat.h"
#include "strata/tier.h"
#include "strata/counters.h"
#include "strata/outbox.h"
#include "strata/reconcile.h"
#include "strata/repl.h"

#include <cjson/cJSON.h>
#include <string.h>

/* 200 {"status":"ok",...} while the node takes writes; 503 {"status":"degraded","reasons":[...]}
 * while it cannot (SPEC §7), with the figures that say why. */
int st_api_healthz(st_ctx_t *c)
{
    st_store_health_t h;
    st_store_health(c->app->store, &h);
    bool no_leader = c->app->repl && !st_repl_has_leader(c->app->repl);
    bool unshared = st_coldshare_held(); /* a group whose members do not share one cold store */
    /* an object the manifest names was missing in the last minute (SPEC v5 §5.1) */
    const char *lost =
        c->app->tier ? st_coldcache_missing(st_tier_cache(c->app->tier), 60000) : NULL;
    bool degraded = h.flags || no_leader || unshared || lost;
    if (degraded) c->status = 503;
    st_buf_printf(c->body, "{\"status\":\"%s\",\"reasons\":[", degraded ? "degraded" : "ok");
    unsigned n = 0;
    for (unsigned f = 1; f <= h.flags; f <<= 1)
        if (h.flags & f) st_buf_printf(c->body, "%s\"%s\"", n++ ? "," : "", st_store_reason(f));
    if (no_leader) st_buf_printf(c->body, "%s\"no_leader\"", n++ ? "," : "");
    if (unshared) st_buf_printf(c->body, "%s\"cold_not_shared\"", n++ ? "," : "");
    if (lost) st_buf_printf(c->body, "%s\"cold_object_missing\"", n++ ? "," : "");
    /* a lagging backup is worth an alert, not a reason to refuse writes: the status stays */
    if (c->app->backup && st_backup_lagging(c->app->backup))
        st_buf_printf(c->body, "%s\"backup_lagging\"", n++ ? "," : "");
    if (c->app->backup && st_backup_dropped(c->app->backup))
        st_buf_printf(c->body, "%s\"backup_backlog_dropped\"", n++ ? "," : "");
    st_buf_printf(c->body, "]");
    if (c->app->backup)
        st_buf_printf(c->body, ",\"backup_lag_seconds\":%.6f", st_backup_lag(c->app->backup));
    if (h.flags) st_buf_printf(c->body, ",\"message\":\"%s\"", st_store_refusal(c->app->store));
    if (lost) {
        st_buf_puts(c->body, ",\"missing_object\":");
        st_buf_append_json_str(c->body, lost, strlen(lost));
    }
    st_buf_printf(c->body,
                  ",\"hot_bytes\":%llu,\"hot_capacity_bytes\":%llu,\"quota_bytes\":%llu,"
                  "\"backlog_bytes\":%llu,\"disk_free_bytes\":%llu}",
                  (unsigned long long)h.used, (unsigned long long)h.capacity,
                  (unsigned long long)h.quota, (unsigned long long)h.backlog,
                  (unsigned long long)h.disk_free);
    return ST_OK;
}

int st_api_metrics(st_ctx_t *c)
{
    c->content_type = "text/plain; version=0.0.4";
    st_metrics_render(c->body);
    return ST_OK;
}

/* Queues a flush of every user with hot rows; the flushes run on the worker pool and their
 * progress shows in /metrics (strata_flush_*) and in each user's stats. */
int st_api_admin_flush(st_ctx_t *c)
{
    int rc = st_json_no_fields(c);
    if (rc) return rc;
    size_t n = st_tier_flush_all(c->app->tier);
    c->status = 202;
    st_buf_printf(c->body, "{\"flushing\":%zu}", n);
    return ST_OK;
}

/* Queues a major compaction of one user's cold objects ({"user": …}) or, with no body, of every
 * user's: merged down to as few as --compact-max-mb allows. It runs in the background
 * (strata_compactions_pending in /metrics is 0 once it is done). */
int st_api_admin_compact(st_ctx_t *c)
{
    static const char *const fields[] = {"user", NULL};
    cJSON *j;
    int rc = st_json_body(c, &j, fields);
    if (rc) return rc;
    const char *u = NULL;
    size_t ul = 0;
    if (j && cJSON_GetObjectItemCaseSensitive(j, "user")) rc = st_json_name(c, j, "user", &u, &ul);
    if (rc) {
        cJSON_Delete(j);
        return rc;
    }
    size_t n = st_tier_compact(c->app->tier, u, ul, ST_TIER_COMPACT_MAJOR | ST_TIER_COMPACT_FOLD);
    if (u && c->app->chat) st_chat_compact_deltas(c->app->chat, u, ul); /* its delta objects */
    cJSON_Delete(j);
    c->status = 202;
    st_buf_printf(c->body, "{\"compacting\":%zu}", n);
    return ST_OK;
}

/* Which key a reconcile or drift request names: {"user","conversation_id"} or {"counter"}.
 * Returns 1 for a conversation, 2 for a counter, 0 for none, or an error (written). */
static int st__admin_key(st_ctx_t *c, const cJSON *j, const char **a, size_t *al, const char **b,
                         size_t *bl)
{
    if (!j) return 0;
    if (cJSON_GetObjectItemCaseSensitive(j, "counter")) {
        int rc = st_json_name(c, j, "counter", a, al);
        return rc ? rc : 2;
    }
    /* a conversation_id alone is a key missing its user (400), not a pass over every key */
    if (!cJSON_GetObjectItemCaseSensitive(j, "user") &&
        !cJSON_GetObjectItemCaseSensitive(j, "conversation_id"))
        return 0;
    int rc = st_json_name(c, j, "user", a, al);
    if (!rc) rc = st_json_name(c, j, "conversation_id", b, bl);
    return rc ? rc : 1;
}

/* Recounts one key ({"user","conversation_id"} or {"counter"}) now and answers the drift
 * repaired; with no body, starts a pass over every conversation and distinct counter that runs
 * in the background in bounded slices, and answers 202 {"pass":N} (done once
 * strata_reconcile_all_passes_total reaches N). */
int st_api_admin_reconcile(st_ctx_t *c)
{
    static const char *const fields[] = {"user", "conversation_id", "counter", NULL};
    cJSON *j;
    int rc = st_json_body(c, &j, fields);
    if (rc) return rc;
    const char *a = NULL, *b = NULL;
    size_t al = 0, bl = 0, keys = 0;
    int64_t drift = 0;
    int which = st__admin_key(c, j, &a, &al, &b, &bl);
    if (which < 0) {
        cJSON_Delete(j);
        return which;
    }
    if (!c->app->reconcile) {
        rc = st_ctx_error(c, ST_EUNAVAIL, "reconciliation is not running");
    } else if (which == 0) {
        uint64_t pass = st_reconcile_all(c->app->reconcile);
        cJSON_Delete(j);
        c->status = 202;
        st_buf_printf(c->body, "{\"pass\":%llu}", (unsigned long long)pass);
        return ST_OK;
    } else {
        rc = which == 1 ? st_reconcile_conversation_now(c->app->reconcile, ST_USER(a, al), b, bl,
                                                        &drift, &c->wait)
                        : st_reconcile_distinct_now(c->app->reconcile, a, al, &drift, &c->wait);
        if (rc == ST_ECONFLICT)
            rc = st_ctx_error(c, rc, "'%.*s' is not a distinct counter", (int)al, a);
        else if (rc)
            rc = st_ctx_error(c, rc, NULL);
        keys = 1;
    }
    cJSON_Delete(j);
    if (rc) return rc;
    st_buf_printf(c->body, "{\"reconciled\":%zu,\"drift\":%lld}", keys, (long long)drift);
    return ST_OK;
}

/* Tests only (--test-hooks 1): shifts a recorded count so that reconciliation has drift to
 * find. Not found otherwise. */
int st_api_admin_test_drift(st_ctx_t *c)
{
    if (!c->app->cfg->test_hooks) return st_ctx_error(c, ST_ENOTFOUND, "no such route");
    static const char *const fields[] = {"user", "conversation_id", "counter", "by", NULL};
    cJSON *j;
    int rc = st_json_body(c, &j, fields);
    if (rc) return rc;
    const char *a = NULL, *b = NULL;
    size_t al = 0, bl = 0;
    int64_t by = 0;
    int which = st__admin_key(c, j, &a, &al, &b, &bl);
    if (which >= 0 && (rc = st_json_int(c, j, "by", -1000000, 1000000, 1, &by)) == ST_OK) {
        /* the drift stands for a write gone wrong, so its key is marked like a write's */
        if (which == 1) {
            rc = st_chat_test_drift(c->app->chat, a, al, b, bl, by, &c->wait);
            st_reconcile_mark_conversation(c->app->reconcile, ST_USER(a, al), b, bl);
        } else if (which == 2) {
            rc = st_counter_test_drift(c->app->store, a, al, by, &c->wait); /* observers mark */
        } else {
            rc = ST_EINVAL;
        }
        if (rc) rc = st_ctx_error(c, rc, NULL);
    } else if (which < 0) {
        rc = which;
    }
    cJSON_Delete(j);
    if (rc) return rc;
    st_buf_puts(c->body, "{\"ok\":true}");
    return ST_OK;
}

/* GET /v1/admin/outbox (SPEC §10): the rooms outbox's pending records and dead letters. */
int st_api_admin_outbox(st_ctx_t *c)
{
    size_t n;
    const char *v = st_query_get(c->arena, c->req->query, c->req->query_len, "limit", &n);
    int64_t limit = 100;
    if (v && (st_parse_i64(v, n, &limit) || limit < 1 || limit > 1000))
        return st_ctx_error_field(c, ST_EINVAL, "limit", "limit must be 1..1000 (got \"%.*s%s\")",
                                  ST__V(v, n));
    int rc = st_outbox_json(c->app->outbox, (size_t)limit, c->body, &c->wait);
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "no outbox here: strata runs without --route-url");
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

/* GET /v1/admin/tables: each Iceberg table's current snapshot and what is not in it yet (SPEC
 * v5 §5.1). */
int st_api_admin_tables(st_ctx_t *c)
{
    if (!c->app->iceberg) return st_ctx_error(c, ST_ENOTFOUND, "no Iceberg tables here");
    int rc = st_tables_json(c->app->iceberg, c->body);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

/* POST /v1/admin/outbox/{id}/retry: a dead letter goes back to the pending records. */
int st_api_admin_outbox_retry(st_ctx_t *c)
{
    int rc = st_json_no_fields(c);
    if (rc) return rc;
    uint64_t id;
    if ((rc = st_ctx_msg_id(c, "id", c->params[0], c->plens[0], &id))) return rc;
    rc = st_outbox_retry(c->app->outbox, id, c->body, &c->wait);
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "no dead letter %llu in the outbox", (unsigned long long)id);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}
