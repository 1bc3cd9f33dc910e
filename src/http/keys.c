/* SPDX-License-Identifier: MIT */
/*
 * The identity provider's keys: --jwt-jwks-file read once at start, --jwt-jwks-url fetched with
 * libcurl on a worker thread (the loop never waits for it), every --jwt-jwks-refresh seconds and
 * when a token names a kid no set holds (at most every 10 s, so a flood of made-up kids cannot
 * hammer the provider). A failed fetch keeps the last good set: an identity provider that is
 * briefly down must not lock every client out. The loop owns every field but the worker's
 * in/out pair (fetched, fetch_err), which it touches only between uv_queue_work and its done
 * callback.
 */
#include "strata/idle.h"
#include "jwt.h"
#include "strata/http.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST__KID_MISS_MS      10000 /* the shortest time between two fetches a kid miss starts */
#define ST__JWKS_MAX         (1u << 20) /* a key set larger than 1 MiB is not one */
#define ST__FETCH_TIMEOUT_MS 5000       /* also bounds how long a shutdown waits for a fetch */

typedef struct {
    st_buf_t body;
    bool too_big;
} st_fetch_t;

static size_t st__keys_collect(char *p, size_t size, size_t n, void *arg)
{
    st_fetch_t *f = arg;
    if (f->body.len + size * n > ST__JWKS_MAX) {
        f->too_big = true;
        return 0;
    }
    st_buf_append(&f->body, p, size * n);
    return size * n;
}

static void st__fetch_work(uv_work_t *w)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_auth_t *a = w->data;
    st_fetch_t f = {0};
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(a->fetch_err, sizeof a->fetch_err, "out of memory");
        return;
    }
    curl_easy_setopt(h, CURLOPT_URL, a->cfg->jwt_jwks_url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)ST__FETCH_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, st__keys_collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &f);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    char why[160] = "";
    if (f.too_big)
        snprintf(a->fetch_err, sizeof a->fetch_err, "the key set is larger than 1 MiB");
    else if (cc != CURLE_OK)
        snprintf(a->fetch_err, sizeof a->fetch_err, "%s", curl_easy_strerror(cc));
    else if (status != 200)
        snprintf(a->fetch_err, sizeof a->fetch_err, "HTTP status %ld", status);
    else if (st_jwks_parse(f.body.data ? f.body.data : "", f.body.len, &a->fetched, why,
                           sizeof why) != ST_OK)
        snprintf(a->fetch_err, sizeof a->fetch_err, "%s", why);
    else if (a->fetched->n == 0) {
        snprintf(a->fetch_err, sizeof a->fetch_err, "it holds no signing key strata can use");
        st_jwks_free(a->fetched);
        a->fetched = NULL;
    }
    st_buf_free(&f.body);
}

static void st__keys_on_timer(uv_timer_t *t);

static void st__keys_maybe_free(st_auth_t *a)
{
    if (!a->closing || a->fetching || a->timer_open) return;
    st_jwks_free(a->file_keys);
    st_jwks_free(a->url_keys);
    free(a->cache);
    free(a);
}

static void st__fetch_done(uv_work_t *w, int status)
{
    st_auth_t *a = w->data;
    a->fetching = false;
    if (a->closing || status != 0) {
        st_jwks_free(a->fetched);
    } else if (a->fetched) {
        st_jwks_free(a->url_keys);
        a->url_keys = a->fetched;
        a->gen++;
        st_info("jwks: %zu key(s) from %s", a->url_keys->n, a->cfg->jwt_jwks_url);
    } else {
        st_warn("jwks: fetching %s failed: %s; %s", a->cfg->jwt_jwks_url, a->fetch_err,
                a->url_keys ? "keeping the last good key set" : "no key set yet, retrying in 10 s");
        /* without any set, tokens are refused: retry soon rather than at the refresh period */
        if (!a->url_keys && a->timer_open)
            uv_timer_start(&a->timer, st__keys_on_timer, ST__KID_MISS_MS,
                           a->cfg->jwt_jwks_refresh * 1000);
    }
    a->fetched = NULL;
    st__keys_maybe_free(a);
}

static void st__fetch(st_auth_t *a)
{
    if (a->fetching || a->closing) return;
    a->fetch_err[0] = '\0';
    a->fetched = NULL;
    a->work.data = a;
    a->last_fetch_ms = st_mono_ns() / 1000000;
    if (uv_queue_work(a->loop, &a->work, st__fetch_work, st__fetch_done) == 0) a->fetching = true;
}

static void st__keys_on_timer(uv_timer_t *t)
{
    st__fetch(t->data);
}

void st_auth_kid_miss(st_auth_t *a)
{
    if (!a || !*a->cfg->jwt_jwks_url) return;
    if (a->last_fetch_ms && st_mono_ns() / 1000000 - a->last_fetch_ms < ST__KID_MISS_MS) return;
    st__fetch(a);
}

static int st__load_file(st_auth_t *a)
{
    FILE *f = fopen(a->cfg->jwt_jwks_file, "rb");
    st_buf_t b = {0};
    char chunk[8192], why[160] = "";
    size_t n;
    while (f && (n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= ST__JWKS_MAX)
        st_buf_append(&b, chunk, n);
    int rc = ST_EINVAL;
    if (!f)
        st_error("--jwt-jwks-file %s: cannot be read", a->cfg->jwt_jwks_file);
    else if (b.len > ST__JWKS_MAX)
        st_error("--jwt-jwks-file %s: larger than 1 MiB", a->cfg->jwt_jwks_file);
    else if (st_jwks_parse(b.data ? b.data : "", b.len, &a->file_keys, why, sizeof why) != ST_OK)
        st_error("--jwt-jwks-file %s: %s", a->cfg->jwt_jwks_file, why);
    else if (a->file_keys->n == 0)
        st_error("--jwt-jwks-file %s: no signing key strata can use (RSA >= 2048 bits, EC "
                 "P-256/P-384, Ed25519)",
                 a->cfg->jwt_jwks_file);
    else
        rc = ST_OK;
    if (rc == ST_OK) st_info("jwks: %zu key(s) from %s", a->file_keys->n, a->cfg->jwt_jwks_file);
    if (f) fclose(f);
    st_buf_free(&b);
    return rc;
}

int st_auth_open(st_auth_t **out, uv_loop_t *loop, const st_config_t *cfg)
{
    *out = NULL;
    if (!st_config_auth_on(cfg)) return ST_OK;
    st_auth_t *a = calloc(1, sizeof *a);
    if (!a) return ST_ENOMEM;
    a->loop = loop;
    a->cfg = cfg;
    a->closing = true; /* until open: a failure frees through st__keys_maybe_free */
    if (*cfg->jwt_jwks_file && st__load_file(a) != ST_OK) {
        st__keys_maybe_free(a);
        return ST_EINVAL;
    }
    a->closing = false;
    if (*cfg->jwt_jwks_url) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            a->closing = true;
            st__keys_maybe_free(a);
            return ST_ENOMEM;
        }
        uv_timer_init(loop, &a->timer);
        a->timer.data = a;
        a->timer_open = true;
        uint64_t every = cfg->jwt_jwks_refresh * 1000;
        uv_timer_start(&a->timer, st__keys_on_timer, 0, every);
    }
    *out = a;
    return ST_OK;
}

static void st__keys_timer_closed(uv_handle_t *h)
{
    st_auth_t *a = h->data;
    a->timer_open = false;
    st__keys_maybe_free(a);
}

void st_auth_close(st_auth_t *a)
{
    if (!a) return;
    a->closing = true;
    if (a->timer_open)
        uv_close((uv_handle_t *)&a->timer, st__keys_timer_closed);
    else
        st__keys_maybe_free(a);
}
