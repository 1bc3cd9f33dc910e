/* SPDX-License-Identifier: MIT */
/* Response framing and the uniform error body. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

const char *st_http_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 307:
        return "Temporary Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 426:
        return "Upgrade Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 507:
        return "Insufficient Storage";
    default:
        return "Unknown";
    }
}

void st_http_write_response(st_buf_t *out, int status, const char *content_type,
                            const char *extra_headers, const char *body, size_t blen, bool close)
{
    st_buf_reserve(out, blen + 160);
    st_buf_puts(out, "HTTP/1.1 ");
    st_buf_append_u64(out, (uint64_t)status);
    st_buf_appendc(out, ' ');
    st_buf_puts(out, st_http_reason(status));
    st_buf_puts(out, "\r\n");
    if (status != 204) {
        /* RFC 9110 §8.6: a 204 carries no Content-Length (and no body to type) */
        st_buf_puts(out, "Content-Type: ");
        st_buf_puts(out, content_type ? content_type : "application/json");
        st_buf_puts(out, "\r\nContent-Length: ");
        st_buf_append_u64(out, blen);
        st_buf_puts(out, "\r\n");
    }
    if (extra_headers) st_buf_puts(out, extra_headers);
    if (close) st_buf_puts(out, "Connection: close\r\n");
    st_buf_puts(out, "\r\n");
    st_buf_append(out, body, blen);
}

static int st__ctx_verror(st_ctx_t *c, int err, const char *field, const char *fmt, va_list ap)
{
    char msg[512];
    if (fmt)
        vsnprintf(msg, sizeof msg, fmt, ap);
    else
        snprintf(msg, sizeof msg, "%s", st_strerror(err));
    st_buf_reset(c->body);
    c->status = st_err_status(err);
    c->err = err;
    c->error_written = true;
    if (st_iceberg_path(c->req)) { /* the catalog's clients read Iceberg's error model */
        st_iceberg_error_body(c->body, c->status, c->error_type, msg);
        c->error_type = NULL;
        return err;
    }
    st_buf_puts(c->body, "{\"error\":{\"code\":\"");
    st_buf_puts(c->body, st_err_code(err));
    st_buf_puts(c->body, "\",\"message\":");
    st_buf_append_json_str(c->body, msg, strlen(msg));
    if (field) {
        st_buf_puts(c->body, ",\"field\":");
        st_buf_append_json_str(c->body, field, strlen(field));
    }
    st_buf_puts(c->body, "}}");
    return err;
}

int st_ctx_error(st_ctx_t *c, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = st__ctx_verror(c, err, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int st_ctx_error_field(st_ctx_t *c, int err, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = st__ctx_verror(c, err, field, fmt, ap);
    va_end(ap);
    return rc;
}

bool st_http_transient(int err)
{
    return err == ST_EUNAVAIL || err == ST_ENOLEADER || err == ST_ENOMEM;
}
