/* SPDX-License-Identifier: MIT */
/* Operational endpoints: health and Prometheus metrics (SPEC §7). */
#include "internal.h"

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
