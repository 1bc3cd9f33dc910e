/* SPDX-License-Identifier: MIT */
/* Operational endpoints: health and Prometheus metrics (SPEC §7). */
#include "internal.h"
#include "strata/chat.h"

int st_api_healthz(st_ctx_t *c)
{
    uint64_t used, size;
    st_store_usage(c->app->store, &used, &size);
    st_buf_printf(c->body, "{\"status\":\"ok\",\"hot_bytes\":%llu,\"hot_capacity_bytes\":%llu}",
                  (unsigned long long)used, (unsigned long long)size);
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
    size_t n = c->app->chat ? st_chat_flush_all(c->app->chat) : 0;
    c->status = 202;
    st_buf_printf(c->body, "{\"flushing\":%zu}", n);
    return ST_OK;
}
