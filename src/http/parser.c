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

/* Headers whose values are kept (as offsets into `head`); the rest are only counted. */
typedef enum {
    ST_HDR_IDEM,
    ST_HDR_AUTH,
    ST_HDR_EXPECT,
    ST_HDR_UPGRADE,
    ST_HDR_WS_KEY,
    ST_HDR_WS_VERSION,
    ST_HDR_WS_PROTOCOL,
    ST_HDR_ORIGIN,
    ST_HDR_CONTENT_TYPE,
    ST_HDR_NKEPT,
    ST_HDR_OTHER = ST_HDR_NKEPT,
} st_hdr_t;

static const struct {
    const char *name;
    size_t len;
} st__kept[ST_HDR_NKEPT] = {
    {"idempotency-key", 15},
    {"authorization", 13},
    {"expect", 6},
    {"upgrade", 7},
    {"sec-websocket-key", 17},
    {"sec-websocket-version", 21},
    {"sec-websocket-protocol", 22},
    {"origin", 6},
    {"content-type", 12},
};

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
    bool headers_done; /* this request's headers are all parsed (`kept` is final) */
    /* Request parts, as offsets into `head` (the head may move while it grows). */
    st_buf_t head;
    st_buf_t field;
    st_hdr_t cur;
    bool in_value;
    size_t url_len;
    bool url_done; /* the request target is whole (url_len bytes at the head of `head`) */
    /* a refused request's target is under /iceberg (SPEC v5 §5.1): the answer is Iceberg's */
    bool iceberg;
    struct {
        size_t off, len;
        bool have;
    } kept[ST_HDR_NKEPT];
    st_buf_t body;
    /* obs-fold detection: the buffer being fed, and whether the previous one ended in a line
     * break followed only by blanks (a value starting the next buffer would be folded) */
    const char *feed_start;
    bool tail_lf_blank;
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
    p->url_done = p->iceberg = false;
    memset(p->kept, 0, sizeof p->kept);
    p->headers_done = false;
    p->cur = ST_HDR_OTHER;
    p->in_value = false;
    return 0;
}

static int st__on_url(llhttp_t *ll, const char *at, size_t n)
{
    st_http_parser_t *p = st__p(ll);
    if (st__head_bytes(p, n)) {
        /* too long: its first bytes still tell whether the 431 is the Iceberg catalog's */
        size_t k = p->url_len < 9 ? 9 - p->url_len : 0;
        st_buf_append(&p->head, at, n < k ? n : k);
        p->url_len += n < k ? n : k;
        return -1;
    }
    st_buf_append(&p->head, at, n);
    p->url_len += n;
    return 0;
}

static int st__on_url_complete(llhttp_t *ll)
{
    st__p(ll)->url_done = true;
    return 0;
}

/* Is a request target (n bytes of it known; whole or its beginning) under /iceberg? */
static bool st__ice_target(const char *u, size_t n, bool whole)
{
    static const char pre[] = "/iceberg";
    size_t pl = sizeof pre - 1;
    if (n < pl || memcmp(u, pre, pl) != 0) return false;
    return n == pl ? whole : u[pl] == '/' || u[pl] == '?';
}

static int st__on_header_field(llhttp_t *ll, const char *at, size_t n)
{
    st_http_parser_t *p = st__p(ll);
    if (p->in_value) { /* the last value ended (a 431 below still knows that Origin whole) */
        st_buf_reset(&p->field);
        p->in_value = false;
    }
    if (st__head_bytes(p, n + 4)) return -1;
    st_buf_append(&p->field, at, n);
    return 0;
}

static st_hdr_t st__classify(const st_buf_t *f)
{
    for (int i = 0; i < ST_HDR_NKEPT; i++)
        if (f->len == st__kept[i].len && strncasecmp(f->data, st__kept[i].name, f->len) == 0)
            return (st_hdr_t)i;
    return ST_HDR_OTHER;
}

/* llhttp accepts obs-fold (a header line continued on the next line after blanks) and joins it
 * silently, so "Transfer-Encoding:\r\n chunked" would frame the body differently from a proxy
 * that does not (request smuggling). RFC 9112 lets a server refuse it: a value whose first byte
 * is preceded by blanks and a line break is one. */
static bool st__folded(const st_http_parser_t *p, const char *at)
{
    const char *q = at;
    while (q > p->feed_start && (q[-1] == ' ' || q[-1] == '\t'))
        q--;
    if (q > p->feed_start) return q[-1] == '\n';
    return p->tail_lf_blank;
}

static int st__on_header_value(llhttp_t *ll, const char *at, size_t n)
{
    st_http_parser_t *p = st__p(ll);
    if (st__head_bytes(p, n)) return -1;
    if (n && st__folded(p, at)) {
        p->error = ST_EBADREQ;
        return -1;
    }
    if (!p->in_value) {
        p->in_value = true;
        p->cur = st__classify(&p->field);
        /* A header that holds one value, given twice, is ambiguous: which one a proxy in front
         * acted on is not known (two Content-Types, two Authorizations): 400. Any other
         * repeated header replaces the earlier one's value. */
        if (p->cur != ST_HDR_OTHER && p->kept[p->cur].have &&
            (p->cur == ST_HDR_IDEM || p->cur == ST_HDR_AUTH || p->cur == ST_HDR_CONTENT_TYPE ||
             p->cur == ST_HDR_WS_KEY || p->cur == ST_HDR_ORIGIN)) {
            p->error = ST_EBADREQ;
            return -1;
        }
        if (p->cur != ST_HDR_OTHER) {
            p->kept[p->cur].have = true;
            p->kept[p->cur].off = p->head.len;
            p->kept[p->cur].len = 0;
        }
    }
    if (p->cur != ST_HDR_OTHER) {
        st_buf_append(&p->head, at, n);
        p->kept[p->cur].len += n;
    }
    return 0;
}

/* Expect must be exactly 100-continue (case-insensitive, blanks around allowed). */
static bool st__expects_continue(const st_http_parser_t *p)
{
    if (!p->kept[ST_HDR_EXPECT].have) return false;
    const char *v = p->head.data + p->kept[ST_HDR_EXPECT].off;
    size_t n = p->kept[ST_HDR_EXPECT].len;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    return n == 12 && strncasecmp(v, "100-continue", 12) == 0;
}

static int st__on_headers_complete(llhttp_t *ll)
{
    st_http_parser_t *p = st__p(ll);
    p->headers_done = true;
    if ((ll->flags & F_CONTENT_LENGTH) && ll->content_length > p->max_body) {
        p->error = ST_ETOOLARGE;
        return -1;
    }
    if (p->cb.on_continue && (ll->flags & (F_CONTENT_LENGTH | F_CHUNKED)) &&
        st__expects_continue(p))
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
    const char **vals[ST_HDR_NKEPT] = {&r.idem_key,    &r.auth,   NULL,
                                       &r.upgrade_to,  &r.ws_key, &r.ws_version,
                                       &r.ws_protocol, &r.origin, &r.content_type};
    size_t *lens[ST_HDR_NKEPT] = {&r.idem_len,        &r.auth_len,   NULL,
                                  &r.upgrade_to_len,  &r.ws_key_len, &r.ws_version_len,
                                  &r.ws_protocol_len, &r.origin_len, &r.content_type_len};
    for (int i = 0; i < ST_HDR_NKEPT; i++)
        if (vals[i] && p->kept[i].have) {
            *vals[i] = url + p->kept[i].off;
            *lens[i] = p->kept[i].len;
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
    p->settings.on_url_complete = st__on_url_complete;
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

/* Remembers whether data ends in a line break followed only by blanks (see st__folded). */
static void st__note_tail(st_http_parser_t *p, const char *data, size_t len)
{
    size_t i = len;
    while (i && (data[i - 1] == ' ' || data[i - 1] == '\t'))
        i--;
    if (i) p->tail_lf_blank = data[i - 1] == '\n';
    /* a buffer of blanks only keeps the previous state */
}

/* llhttp stops inside a method it does not know: if the rest is a token followed by a space,
 * the request line is well formed and only the method is unknown (501, not 400). */
static bool st__unknown_method(st_http_parser_t *p, const char *stop, const char *end)
{
    static const char tchar[] = "!#$%&'*+-.^_`|~";
    if (!stop) return false;
    const char *q = stop;
    while (q < end && ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
                       (*q >= '0' && *q <= '9') || (*q && strchr(tchar, *q))))
        q++;
    if (!(q > stop && q < end && *q == ' ')) return false;
    /* the target, as far as this buffer holds it */
    const char *t = q + 1, *sp = memchr(t, ' ', (size_t)(end - t));
    p->iceberg = st__ice_target(t, (size_t)((sp ? sp : end) - t), sp != NULL);
    return true;
}

int st_http_parser_feed(st_http_parser_t *p, const char *data, size_t len, size_t *consumed)
{
    *consumed = 0;
    if (p->error) return p->error;
    if (p->upgraded) return ST_OK;
    p->feed_start = data;
    llhttp_errno_t e = llhttp_execute(&p->ll, data, len);
    const char *stop = e == HPE_OK ? NULL : llhttp_get_error_pos(&p->ll);
    *consumed = stop && stop >= data && stop <= data + len ? (size_t)(stop - data) : len;
    /* what the next feed continues from is what was consumed (a paused feed resumes there) */
    st__note_tail(p, data, *consumed);
    if (e == HPE_OK) return ST_OK;
    if (e == HPE_PAUSED_UPGRADE) {
        p->upgraded = true;
        return ST_OK;
    }
    if (e == HPE_PAUSED) {
        /* The callback asked us to stop; the caller may feed the rest later. */
        llhttp_resume(&p->ll);
        return ST_OK;
    }
    if (!p->error)
        p->error = e == HPE_INVALID_METHOD && st__unknown_method(p, stop, data + len) ? ST_ENOTIMPL
                                                                                      : ST_EBADREQ;
    if (!p->iceberg && p->head.data) /* the target, whole or the part that came */
        p->iceberg = st__ice_target(p->head.data, p->url_len, p->url_done);
    return p->error;
}

bool st_http_parser_mid_request(const st_http_parser_t *p)
{
    return p->mid;
}

bool st_http_parser_iceberg(const st_http_parser_t *p)
{
    return p->iceberg;
}

bool st_http_parser_upgraded(const st_http_parser_t *p)
{
    return p->upgraded;
}

st_http_request_t *st_http_request_copy(const st_http_request_t *r)
{
    /* Origin too: the answer to a parked request carries the CORS lines like any other. */
    const char *src[] = {r->method_name, r->path, r->query,  r->body,
                         r->idem_key,    r->auth, r->origin, r->content_type};
    size_t len[] = {strlen(r->method_name),
                    r->path_len,
                    r->query_len,
                    r->body_len,
                    r->idem_len,
                    r->auth_len,
                    r->origin_len,
                    r->content_type_len};
    enum { N = sizeof src / sizeof src[0] };
    size_t total = sizeof *r;
    for (size_t i = 0; i < N; i++)
        total += len[i] + 1;
    st_http_request_t *q = st_malloc(total);
    *q = (st_http_request_t){.method = r->method,
                             .path_len = r->path_len,
                             .query_len = r->query_len,
                             .body_len = r->body_len,
                             .idem_len = r->idem_len,
                             .auth_len = r->auth_len,
                             .origin_len = r->origin_len,
                             .content_type_len = r->content_type_len,
                             .keep_alive = r->keep_alive,
                             .started_ns = r->started_ns};
    const char **dst[] = {&q->method_name, &q->path, &q->query,  &q->body,
                          &q->idem_key,    &q->auth, &q->origin, &q->content_type};
    char *p = (char *)(q + 1);
    for (size_t i = 0; i < N; i++) {
        if (!src[i]) continue;
        memcpy(p, src[i], len[i]);
        p[len[i]] = '\0';
        *dst[i] = p;
        p += len[i] + 1;
    }
    return q;
}

bool st_http_parser_origin(const st_http_parser_t *p, const char **origin, size_t *len)
{
    /* complete once its value is: a 431 refused in a later header still knows it */
    bool partial = !p->headers_done && p->in_value && p->cur == ST_HDR_ORIGIN;
    if (partial || !p->kept[ST_HDR_ORIGIN].have || !p->head.data) return false;
    *origin = p->head.data + p->kept[ST_HDR_ORIGIN].off;
    *len = p->kept[ST_HDR_ORIGIN].len;
    return true;
}
