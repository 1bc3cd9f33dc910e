/* SPDX-License-Identifier: MIT */
/*
 * The S3 wire (s3wire.h): requests are signed by libcurl's own AWS SigV4 over URLs already in
 * SigV4's canonical form (every byte but A-Z a-z 0-9 - _ . ~ percent-encoded, '/' kept in the
 * path only; the caller sorts query parameters), so what libcurl signs is what the service
 * recomputes. Each carries its payload's SHA-256. Handles come from a small pool, so
 * connections stay alive between requests whichever thread makes them. HTTPS verifies the
 * service's certificate (against the private CA bundle when one is given).
 */
#include "s3wire.h"

#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

void st__s3conn_init(st_s3conn_t *c, unsigned timeout_ms, unsigned retries)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->timeout_ms = timeout_ms ? (long)timeout_ms : 30000;
    c->retries = retries;
}

void st__s3conn_free(st_s3conn_t *c)
{
    for (size_t i = 0; i < c->nidle; i++)
        curl_easy_cleanup(c->idle[i]);
    pthread_mutex_destroy(&c->mu);
    free(c->sigv4);
    free(c->userpwd);
    free(c->ca_file);
}

int st__s3_bucket_url(st_buf_t *b, const char *endpoint, const char *region, const char *bucket,
                      size_t bl, bool vhost)
{
    if (!endpoint) {
        if (vhost)
            st_buf_printf(b, "https://%.*s.s3.%s.amazonaws.com", (int)bl, bucket, region);
        else
            st_buf_printf(b, "https://s3.%s.amazonaws.com/%.*s", region, (int)bl, bucket);
        return ST_OK;
    }
    size_t el = strlen(endpoint);
    while (el && endpoint[el - 1] == '/')
        el--;
    const char *host = strstr(endpoint, "://");
    if (!host || host == endpoint || (size_t)(host + 3 - endpoint) >= el) return ST_EINVAL;
    host += 3;
    if (!vhost) {
        st_buf_printf(b, "%.*s/%.*s", (int)el, endpoint, (int)bl, bucket);
        return ST_OK;
    }
    if (memchr(host, '/', el - (size_t)(host - endpoint))) return ST_EINVAL; /* a path too */
    st_buf_printf(b, "%.*s%.*s.%.*s", (int)(host - endpoint), endpoint, (int)bl, bucket,
                  (int)(el - (size_t)(host - endpoint)), host);
    return ST_OK;
}

typedef struct {
    st_buf_t *out;
    size_t limit;
} st_sink_t;

static size_t st__s3wire_on_body(char *p, size_t size, size_t n, void *arg)
{
    st_sink_t *k = arg;
    size_t len = size * n;
    if (!k->out) return len;
    if (k->limit < len) return 0; /* more than asked for: abort */
    st_buf_append(k->out, p, len);
    k->limit -= len;
    return len;
}

static size_t st__on_header(char *p, size_t size, size_t n, void *arg)
{
    st_buf_append(arg, p, size * n);
    return size * n;
}

/* SigV4's canonical form: unreserved characters stay, '/' too when slash (a path), everything
 * else is %XX. A query value must not keep '/': the service signs it as %2F. */
static void st__url_enc(st_buf_t *b, const char *s, bool slash)
{
    for (const char *p = s; *p; p++) {
        char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || (slash && c == '/'))
            st_buf_appendc(b, c);
        else
            st_buf_printf(b, "%%%02X", (unsigned char)c);
    }
}

void st__s3_url_key(st_buf_t *b, const char *key)
{
    st__url_enc(b, key, true);
}

void st__s3_url_query(st_buf_t *b, const char *value)
{
    st__url_enc(b, value, false);
}

/* A handle from the pool (its connection kept alive), or a new one. */
static CURL *st__handle_get(st_s3conn_t *s)
{
    CURL *h = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->nidle) h = s->idle[--s->nidle];
    pthread_mutex_unlock(&s->mu);
    if (h) {
        curl_easy_reset(h); /* options go, the connection cache stays */
        return h;
    }
    return curl_easy_init();
}

static void st__handle_put(st_s3conn_t *s, CURL *h)
{
    pthread_mutex_lock(&s->mu);
    if (s->nidle < sizeof s->idle / sizeof *s->idle) {
        s->idle[s->nidle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (h) curl_easy_cleanup(h);
}

int st__s3_call(st_s3conn_t *s, const char *method, const char *url, const void *body, size_t blen,
                const char *xhdr, st_buf_t *out, size_t limit, long *status, st_buf_t *hdrs)
{
    CURL *h = st__handle_get(s);
    if (!h) return ST_ENOMEM;
    st_buf_t hdr = {0};
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA256(body ? body : (const void *)"", body ? blen : 0, d);
    st_buf_puts(&hdr, "x-amz-content-sha256: ");
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
        st_buf_printf(&hdr, "%02x", d[i]);
    st_buf_appendc(&hdr, 0);
    struct curl_slist *hl = curl_slist_append(NULL, hdr.data);
    if (body) hl = curl_slist_append(hl, "Content-Type: application/octet-stream");
    if (xhdr) hl = curl_slist_append(hl, xhdr);
    st_sink_t sink = {out, limit};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(h, CURLOPT_USERPWD, s->userpwd);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, s->timeout_ms < 3000 ? s->timeout_ms : 3000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, s->timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, st__s3wire_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    }
    if (s->ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, s->ca_file);
    if (strcmp(method, "HEAD") == 0) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (hdrs) {
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, st__on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, hdrs);
    }
    CURLcode cc = curl_easy_perform(h);
    *status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    if (cc != CURLE_OK) st_warn("cold: %s %s: %s", method, url, curl_easy_strerror(cc));
    curl_slist_free_all(hl);
    if (cc == CURLE_OK)
        st__handle_put(s, h);
    else
        curl_easy_cleanup(h); /* its connection may be in any state */
    st_buf_free(&hdr);
    return cc == CURLE_OK ? ST_OK : ST_EIO;
}

/* A pause before retry number attempt + 1: 100 ms doubling up to 3.2 s, of which a random
 * half (so that many clients throttled together do not come back together). */
static void st__backoff(unsigned attempt)
{
    long ms = 100L << (attempt < 5 ? attempt : 5);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&ms ^ attempt;
    ms = ms / 2 + (long)(rand_r(&seed) % (ms / 2 + 1));
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One signed request, retried after a transport error or a 5xx (a 503 SlowDown included) when
 * retry is set: only for requests that are safe to repeat. */
int st__s3_try(st_s3conn_t *s, const char *method, const char *url, const void *body, size_t blen,
               const char *xhdr, st_buf_t *out, size_t limit, long *status, st_buf_t *hdrs,
               bool retry)
{
    size_t before = out ? out->len : 0, hbefore = hdrs ? hdrs->len : 0;
    for (unsigned attempt = 0;; attempt++) {
        int rc = st__s3_call(s, method, url, body, blen, xhdr, out, limit, status, hdrs);
        bool transient = rc == ST_EIO || (rc == ST_OK && *status >= 500);
        if (!transient || !retry || attempt >= s->retries) return rc;
        if (out) out->len = before; /* a partial or error body goes */
        if (hdrs) hdrs->len = hbefore;
        st_warn("cold: %s %s failed (%s%ld); retrying", method, url,
                rc == ST_OK ? "status " : "transport error", rc == ST_OK ? *status : 0L);
        st__backoff(attempt);
    }
}

bool st__s3_idempotent(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "PUT") == 0 ||
           strcmp(method, "DELETE") == 0 || strcmp(method, "HEAD") == 0;
}

/* XML's escapes in text (&amp; &lt; &gt; &quot; &apos; &#N; &#xN;) undone in place: a key
 * holding '&' or '<' is listed escaped. */
static void st__xml_unescape(char *t)
{
    static const struct {
        const char *name;
        char c;
    } ents[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    char *w = t;
    for (const char *r = t; *r;) {
        if (*r != '&') {
            *w++ = *r++;
            continue;
        }
        size_t i, n = sizeof ents / sizeof *ents;
        for (i = 0; i < n && strncmp(r + 1, ents[i].name, strlen(ents[i].name)) != 0; i++)
            ;
        if (i < n) {
            *w++ = ents[i].c;
            r += 1 + strlen(ents[i].name);
            continue;
        }
        char *end;
        unsigned long cp = r[1] != '#'   ? 0
                           : r[2] == 'x' ? strtoul(r + 3, &end, 16)
                                         : strtoul(r + 2, &end, 10);
        if (cp == 0 || cp > 0x10FFFF || *end != ';') {
            *w++ = *r++;
            continue;
        }
        if (cp < 0x80) { /* as UTF-8 */
            *w++ = (char)cp;
        } else if (cp < 0x800) {
            *w++ = (char)(0xC0 | (cp >> 6));
            *w++ = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            *w++ = (char)(0xE0 | (cp >> 12));
            *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
            *w++ = (char)(0x80 | (cp & 0x3F));
        } else {
            *w++ = (char)(0xF0 | (cp >> 18));
            *w++ = (char)(0x80 | ((cp >> 12) & 0x3F));
            *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
            *w++ = (char)(0x80 | (cp & 0x3F));
        }
        r = end + 1;
    }
    *w = 0;
}

/* The text of <tag>…</tag> after *from in an S3 XML answer, unescaped; NULL when there is
 * none. */
char *st__s3_xml(const char *from, const char *tag, const char **next)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(from, open), *b = a ? strstr(a, close) : NULL;
    if (!a || !b) return NULL;
    a += strlen(open);
    if (next) *next = b + strlen(close);
    char *t = st_strndup(a, (size_t)(b - a));
    st__xml_unescape(t);
    return t;
}

char *st__s3_header(st_buf_t *hdrs, const char *name)
{
    st_buf_appendc(hdrs, 0);
    size_t nl = strlen(name);
    for (const char *p = hdrs->data; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncasecmp(p, name, nl) != 0) continue;
        p += nl;
        while (*p == ' ' || *p == '"')
            p++;
        size_t len = strcspn(p, "\"\r\n");
        return st_strndup(p, len);
    }
    return NULL;
}
