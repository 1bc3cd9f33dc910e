/* SPDX-License-Identifier: MIT */
/*
 * The read-only Iceberg REST catalog (SPEC v5 §5.1), under /iceberg on strata's own port, as the
 * Iceberg REST Catalog specification (open-api/rest-catalog-open-api.yaml) defines it: one
 * namespace, "strata", and its tables with the newest metadata the catalog's cache holds
 * (strata/catalog.h: read back from the tables' metadata store on the worker pool, so a request
 * never waits and a follower serves the newest version it can see). Answers and errors are
 * Iceberg's: `{"error":{"message","type","code"}}` for every error under /iceberg (response.c
 * asks st_iceberg_path), 403 ForbiddenException for any change, and OAuth's own error for the
 * token endpoint (engines are given a bearer token, never a client secret).
 */
#include "internal.h"
#include "strata/catalog.h"
#include "strata/cold.h"

#include <string.h>

#define ST__ICE_NS "strata"

bool st_iceberg_path(const st_http_request_t *r)
{
    static const char p[] = "/iceberg";
    size_t n = sizeof p - 1;
    return r->path_len >= n && memcmp(r->path, p, n) == 0 &&
           (r->path_len == n || r->path[n] == '/');
}

/* Iceberg's exception type for an error of this status that named none. */
static const char *st__ice_type(int status)
{
    switch (status) {
    case 401:
        return "NotAuthorizedException";
    case 403:
        return "ForbiddenException";
    case 404:
        return "NotFoundException";
    case 406:
        return "UnsupportedOperationException";
    case 409:
        return "AlreadyExistsException";
    case 503:
        return "ServiceUnavailableException";
    default:
        return status >= 500 ? "ServerErrorException" : "BadRequestException";
    }
}

void st_iceberg_error_body(st_buf_t *b, int status, const char *type, const char *msg)
{
    st_buf_puts(b, "{\"error\":{\"message\":");
    st_buf_append_json_str(b, msg, strlen(msg));
    st_buf_puts(b, ",\"type\":\"");
    st_buf_puts(b, type ? type : st__ice_type(status));
    st_buf_puts(b, "\",\"code\":");
    st_buf_append_u64(b, (uint64_t)status);
    st_buf_puts(b, "}}");
}

bool st_iceberg_refuse(st_ctx_t *c, int rc)
{
    const st_http_request_t *r = c->req;
    if (!st_iceberg_path(r)) return false;
    bool read = r->method == ST_HTTP_GET || r->method == ST_HTTP_HEAD;
    if (rc != ST_EMETHOD && rc != ST_ENOTIMPL && !(rc == ST_ENOTFOUND && !read)) return false;
    c->extra_headers = NULL; /* no Allow: the catalog refuses, it does not redirect */
    st_ctx_error(c, ST_EFORBIDDEN, "this catalog is read-only: %s %.*s is not served",
                 r->method_name ? r->method_name : "?",
                 (int)(r->path_len > 200 ? 200 : r->path_len), r->path);
    return true;
}

/* The {namespace} parameter is "strata" (404 NoSuchNamespaceException otherwise). */
static int st__ice_ns(st_ctx_t *c)
{
    if (c->plens[0] == sizeof ST__ICE_NS - 1 && memcmp(c->params[0], ST__ICE_NS, c->plens[0]) == 0)
        return ST_OK;
    c->error_type = "NoSuchNamespaceException";
    return st_ctx_error(c, ST_ENOTFOUND, "namespace does not exist: %.*s%s",
                        ST__V(c->params[0], c->plens[0]));
}

static int st__ice_no_table(st_ctx_t *c)
{
    c->error_type = "NoSuchTableException";
    return st_ctx_error(c, ST_ENOTFOUND, "table does not exist: " ST__ICE_NS ".%.*s%s",
                        ST__V(c->params[1], c->plens[1]));
}

/* GET /iceberg/v1/config: no prefix, nothing to override; `warehouse` is taken and ignored.
 * Each endpoint is "<verb> <resource path from the REST spec>", the spec's path template with its
 * `{prefix}` placeholder: clients (Iceberg Java's Endpoint, PyIceberg's Capability, iceberg-rust)
 * compare these strings literally against "/v1/{prefix}/…" before they call a route, and a list
 * without the placeholder tells them loadTable is not served. With no `prefix` in overrides the
 * placeholder stands for nothing in the URLs they build. */
int st_api_ice_config(st_ctx_t *c)
{
    static const char *const endpoints[] = {
        "GET /v1/{prefix}/namespaces",
        "GET /v1/{prefix}/namespaces/{namespace}",
        "HEAD /v1/{prefix}/namespaces/{namespace}",
        "GET /v1/{prefix}/namespaces/{namespace}/tables",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    };
    st_buf_puts(c->body, "{\"defaults\":{},\"overrides\":{},\"endpoints\":[");
    for (size_t i = 0; i < sizeof endpoints / sizeof *endpoints; i++)
        st_buf_printf(c->body, "%s\"%s\"", i ? "," : "", endpoints[i]);
    st_buf_puts(c->body, "]}");
    return ST_OK;
}

/* GET /iceberg/v1/namespaces[?parent=]: one namespace, which has none under it. One page:
 * pageToken and pageSize are taken and ignored. */
int st_api_ice_namespaces(st_ctx_t *c)
{
    size_t pl = 0;
    const char *parent = st_query_get(c->arena, c->req->query, c->req->query_len, "parent", &pl);
    if (!parent || pl == 0) {
        st_buf_puts(c->body, "{\"namespaces\":[[\"" ST__ICE_NS "\"]]}");
        return ST_OK;
    }
    if (pl == sizeof ST__ICE_NS - 1 && memcmp(parent, ST__ICE_NS, pl) == 0) {
        st_buf_puts(c->body, "{\"namespaces\":[]}");
        return ST_OK;
    }
    c->error_type = "NoSuchNamespaceException";
    return st_ctx_error(c, ST_ENOTFOUND, "namespace does not exist: %.*s%s", ST__V(parent, pl));
}

/* GET|HEAD /iceberg/v1/namespaces/{namespace}: no properties; HEAD answers 204. */
int st_api_ice_namespace(st_ctx_t *c)
{
    int rc = st__ice_ns(c);
    if (rc) return rc;
    if (c->req->method == ST_HTTP_HEAD) {
        c->status = 204;
        return ST_OK;
    }
    st_buf_puts(c->body, "{\"namespace\":[\"" ST__ICE_NS "\"],\"properties\":{}}");
    return ST_OK;
}

/* GET /iceberg/v1/namespaces/{namespace}/tables: the tables whose metadata was found (a table
 * listed can be loaded). */
int st_api_ice_tables(st_ctx_t *c)
{
    int rc = st__ice_ns(c);
    if (rc) return rc;
    st_buf_puts(c->body, "{\"identifiers\":[");
    bool first = true;
    const char *t;
    for (size_t i = 0; (t = st_catalog_table(i)); i++) {
        st_catalog_entry_t e;
        if (st_catalog_get(c->app->catalog, t, strlen(t), &e) != ST_OK) continue;
        st_buf_printf(c->body, "%s{\"namespace\":[\"" ST__ICE_NS "\"],\"name\":\"%s\"}",
                      first ? "" : ",", t);
        first = false;
    }
    st_buf_puts(c->body, "]}");
    return ST_OK;
}

/* The table config engines get: for S3, where the objects are (never strata's keys: engines
 * bring their own credentials). */
static void st__ice_table_config(st_ctx_t *c)
{
    const st_config_t *cfg = c->app->cfg;
    const char *where = c->app->tables ? st_objstore_describe(c->app->tables) : "";
    st_buf_puts(c->body, "\"config\":{");
    if (strncmp(where, "s3://", 5) == 0) {
        int ps = 0;
        st_config_s3_path_style(cfg, &ps);
        bool custom = *cfg->s3_endpoint != '\0';
        bool path_style = ps > 0 || (ps == 0 && custom); /* as st_objstore_open addresses it */
        if (custom) {
            st_buf_puts(c->body, "\"s3.endpoint\":");
            st_buf_append_json_str(c->body, cfg->s3_endpoint, strlen(cfg->s3_endpoint));
            st_buf_appendc(c->body, ',');
        }
        st_buf_printf(c->body, "\"s3.path-style-access\":\"%s\",\"client.region\":",
                      path_style ? "true" : "false");
        const char *region = *cfg->s3_region ? cfg->s3_region : "us-east-1";
        st_buf_append_json_str(c->body, region, strlen(region));
    }
    st_buf_puts(c->body, "}");
}

/* GET|HEAD /iceberg/v1/namespaces/{namespace}/tables/{table}[?snapshots=all|refs]: the newest
 * metadata known, its text byte for byte (snapshot ids pass 2^53: never re-printed through a
 * double). With refs every snapshot comes too, which a client asking for refs may be given.
 * HEAD answers 204. */
int st_api_ice_table(st_ctx_t *c)
{
    int rc = st__ice_ns(c);
    if (rc) return rc;
    size_t sl = 0;
    const char *snap = st_query_get(c->arena, c->req->query, c->req->query_len, "snapshots", &sl);
    if (snap && !(sl == 3 && memcmp(snap, "all", 3) == 0) &&
        !(sl == 4 && memcmp(snap, "refs", 4) == 0))
        return st_ctx_error(c, ST_EINVAL, "snapshots must be all or refs (got \"%.*s%s\")",
                            ST__V(snap, sl));
    st_catalog_entry_t e;
    if (st_catalog_get(c->app->catalog, c->params[1], c->plens[1], &e) != ST_OK)
        return st__ice_no_table(c);
    if (c->req->method == ST_HTTP_HEAD) {
        c->status = 204;
        return ST_OK;
    }
    st_buf_reserve(c->body, e.json_len + strlen(e.location) + 128);
    st_buf_puts(c->body, "{\"metadata-location\":");
    st_buf_append_json_str(c->body, e.location, strlen(e.location));
    st_buf_puts(c->body, ",\"metadata\":");
    st_buf_append(c->body, e.json, e.json_len);
    st_buf_appendc(c->body, ',');
    st__ice_table_config(c);
    st_buf_puts(c->body, "}");
    return ST_OK;
}

/* POST /iceberg/v1/namespaces/{namespace}/tables/{table}/metrics: a scan or commit report,
 * accepted and dropped (its size bounded by --max-body like any body). */
int st_api_ice_metrics(st_ctx_t *c)
{
    int rc = st__ice_ns(c);
    if (rc) return rc;
    if (!st_catalog_is_table(c->params[1], c->plens[1])) return st__ice_no_table(c);
    c->status = 204;
    return ST_OK;
}

/* POST /iceberg/v1/oauth/tokens: no client credentials are exchanged here (OAuth 2.0's error,
 * RFC 6749 §5.2, which Iceberg's clients read from this endpoint). The body is exactly the
 * SPEC's (v5 §5.1), with no optional error_description: the README tells users to configure a
 * bearer token instead. */
int st_api_ice_oauth(st_ctx_t *c)
{
    c->status = 400;
    st_buf_puts(c->body, "{\"error\":\"unsupported_grant_type\"}");
    return ST_OK;
}
