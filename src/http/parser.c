/* SPDX-License-Identifier: MIT */
/*
 * The request parser: llhttp callbacks that collect the parts strata needs into one buffer per
 * request, with strata's limits (head size -> 431, body size -> 413). It knows nothing of sockets
 * so the fuzzer drives exactly the code the server runs.
 */
#include "strata/http.h"

#include <llhttp.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

typedef enum { ST_HDR_NONE, ST_HDR_IDEM, ST_HDR_AUTH, ST_HDR_EXPECT, ST_HDR_OTHER } st_hdr_t;

struct st_http_parser {
    llhttp_t ll;
    llhttp_settings_t settings;
    st_http_parser_cb_t cb;
    void *arg;
    size_t max_header, max_body;
    size_t head_bytes;
    int error;
    bool mid;
    bool upgraded;
    /* Request parts, as offsets into `head` (the head may move while it grows). */
    st_buf_t head;
    st_buf_t field;
    st_hdr_t cur;
    bool in_value;
    size_t url_len;
    size_t idem_off, idem_len, auth_off, auth_len;
    bool have_idem, have_auth, expect_continue;
    st_buf_t body;
};

static st_http_parser_t *st__p(llhttp_t *ll)
{
    return (st_http_parser_t *)ll->data;
}

static int st__head_bytes(st_http_parser_t *p, size_t n)
{
    p->head_bytes += n;
    if (p->head_bytes > p->max_header) {
        p->error = ST_EHEADERS;
        return -1;
    }
    return 0;
}

static int st__on_message_begin(llhttp_t *ll)
{
    st_http_parser_t *p = st__p(ll);
    p->mid = true;
    p->head_bytes = 0;
    st_buf_reset(&p->head);
    st_buf_reset(&p->body);
    st_buf_reset(&p->field);
    p->url_len = 0;
    p->have_idem = p->have_auth = p->expect_continue = false;
    p->cur = ST_HDR_NONE;
    p->in_value = false;
    return 0;
}

static int st__on_url(llhttp_t *ll, const char *at, size_t n)
{
    st_http_parser_t *p = st__p(ll);
    if (st__head_bytes(p, n)) return -1;
    st_buf_append(&p->head, at, n);
    p->url_len += n;
    return 0;
}

static int st__on_header_field(llhttp_t *ll, const char *at, size_t n)
{
    st_http_parser_t *p = st__p(ll);
    if (st__head_bytes(p, n + 4)) return -1;
    if (p->in_value) {
        st_buf_reset(&p->field);
        p->in_value = false;
    }
    st_buf_append(&p->field, at, n);
    return 0;
}

static st_hdr_t st__classify(const st_buf_t *f)
{
    if (f->len == 15 && strncasecmp(f->data, "idempotency-key", 15) == 0) return ST_HDR_IDEM;
    if (f->len == 13 && strncasecmp(f->data, "authorization", 13) == 0) return ST_HDR_AUTH;
    if (f->len == 6 && strncasecmp(f->data, "expect", 6) == 0) return ST_HDR_EXPECT;
    return ST_HDR_OTHER;
}

static int st__on_header_value(llhttp_t *ll, const char *at, size_t n)
{
    st_http_parser_t *p = st__p(ll);
    if (st__head_bytes(p, n)) return -1;
    if (!p->in_value) {
        p->in_value = true;
        p->cur = st__classify(&p->field);
        /* A repeated header replaces the earlier one's value. */
        if (p->cur == ST_HDR_IDEM) {
            p->have_idem = true;
            p->idem_off = p->head.len;
            p->idem_len = 0;
        } else if (p->cur == ST_HDR_AUTH) {
            p->have_auth = true;
            p->auth_off = p->head.len;
            p->auth_len = 0;
        }
    }
    switch (p->cur) {
    case ST_HDR_IDEM:
        st_buf_append(&p->head, at, n);
        p->idem_len += n;
        break;
    case ST_HDR_AUTH:
        st_buf_append(&p->head, at, n);
        p->auth_len += n;
        break;
    case ST_HDR_EXPECT:
        if (n >= 12 && strncasecmp(at, "100-continue", 12) == 0) p->expect_continue = true;
        break;
    default:
        break;
    }
    return 0;
}

static int st__on_headers_complete(llhttp_t *ll)
{
    st_http_parser_t *p = st__p(ll);
    if ((ll->flags & F_CONTENT_LENGTH) && ll->content_length > p->max_body) {
        p->error = ST_ETOOLARGE;
        return -1;
    }
    if (p->expect_continue && p->cb.on_continue && (ll->flags & (F_CONTENT_LENGTH | F_CHUNKED)))
        p->cb.on_continue(p->arg);
    return 0;
}

static int st__on_body(llhttp_t *ll, const char *at, size_t n)
{
    st_http_parser_t *p = st__p(ll);
    if (p->body.len + n > p->max_body) {
        p->error = ST_ETOOLARGE;
        return -1;
    }
    st_buf_append(&p->body, at, n);
    return 0;
}

static int st__on_message_complete(llhttp_t *ll)
{
    st_http_parser_t *p = st__p(ll);
    p->mid = false;
    st_http_request_t r = {0};
    r.method = ll->method;
    r.method_name = llhttp_method_name((llhttp_method_t)ll->method);
    const char *url = p->head.data ? p->head.data : "";
    const char *q = memchr(url, '?', p->url_len);
    r.path = url;
    r.path_len = q ? (size_t)(q - url) : p->url_len;
    r.query = q ? q + 1 : "";
    r.query_len = q ? p->url_len - r.path_len - 1 : 0;
    r.body = p->body.data ? p->body.data : "";
    r.body_len = p->body.len;
    if (p->have_idem) {
        r.idem_key = url + p->idem_off;
        r.idem_len = p->idem_len;
    }
    if (p->have_auth) {
        r.auth = url + p->auth_off;
        r.auth_len = p->auth_len;
    }
    r.keep_alive = llhttp_should_keep_alive(ll);
    r.upgrade = ll->upgrade;
    r.started_ns = st_mono_ns();
    if (r.upgrade) p->upgraded = true;
    int rc = p->cb.on_request(p->arg, &r);
    /* Reclaim big bodies so an idle connection does not pin a megabyte. */
    if (p->body.cap > 65536) st_buf_free(&p->body);
    if (p->head.cap > 65536) st_buf_free(&p->head);
    return rc ? HPE_PAUSED : 0;
}

st_http_parser_t *st_http_parser_new(const st_http_parser_cb_t *cb, void *arg, size_t max_header,
                                     size_t max_body)
{
    st_http_parser_t *p = st_calloc(1, sizeof *p);
    llhttp_settings_init(&p->settings);
    p->settings.on_message_begin = st__on_message_begin;
    p->settings.on_url = st__on_url;
    p->settings.on_header_field = st__on_header_field;
    p->settings.on_header_value = st__on_header_value;
    p->settings.on_headers_complete = st__on_headers_complete;
    p->settings.on_body = st__on_body;
    p->settings.on_message_complete = st__on_message_complete;
    llhttp_init(&p->ll, HTTP_REQUEST, &p->settings);
    p->ll.data = p;
    p->cb = *cb;
    p->arg = arg;
    p->max_header = max_header;
    p->max_body = max_body;
    return p;
}

void st_http_parser_free(st_http_parser_t *p)
{
    if (!p) return;
    st_buf_free(&p->head);
    st_buf_free(&p->field);
    st_buf_free(&p->body);
    free(p);
}

int st_http_parser_feed(st_http_parser_t *p, const char *data, size_t len, size_t *consumed)
{
    *consumed = 0;
    if (p->error) return p->error;
    if (p->upgraded) return ST_OK;
    llhttp_errno_t e = llhttp_execute(&p->ll, data, len);
    if (e == HPE_OK) {
        *consumed = len;
        return ST_OK;
    }
    const char *stop = llhttp_get_error_pos(&p->ll);
    *consumed = stop && stop >= data ? (size_t)(stop - data) : len;
    if (e == HPE_PAUSED_UPGRADE) {
        p->upgraded = true;
        return ST_OK;
    }
    if (e == HPE_PAUSED) {
        /* The callback asked us to stop; the caller may feed the rest later. */
        llhttp_resume(&p->ll);
        return ST_OK;
    }
    if (!p->error) p->error = ST_EBADREQ;
    return p->error;
}

bool st_http_parser_mid_request(const st_http_parser_t *p)
{
    return p->mid;
}

bool st_http_parser_upgraded(const st_http_parser_t *p)
{
    return p->upgraded;
}
