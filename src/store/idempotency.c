/* SPDX-License-Identifier: MIT */
/*
 * Idempotency-Key answers. The first response to a keyed request is staged in the same batch as
 * the write it answers, so either both are durable or neither is: a retry can never see the write
 * without the answer, or the answer without the write.
 * Record: i64 created_us | u16 status | body.
 */
#include "internal.h"

#include <stdlib.h>

#include <string.h>

#define ST__IDEM_HDR 10

static void st__idem_key(uint8_t key[33], const uint8_t digest[32])
{
    key[0] = ST_KS_IDEM;
    memcpy(key + 1, digest, 32);
}

int st_idem_lookup(st_store_t *s, const uint8_t digest[32], int64_t ttl_us, int *status,
                   const char **body, size_t *blen, uint64_t *wait)
{
    uint8_t key[33];
    st__idem_key(key, digest);
    const void *val;
    size_t vlen;
    uint64_t w = 0;
    int rc = st_store_get(s, key, sizeof key, &val, &vlen, &w);
    if (rc != ST_OK) return rc;
    if (vlen < ST__IDEM_HDR) return ST_ENOTFOUND;
    int64_t created;
    uint16_t st;
    memcpy(&created, val, 8);
    memcpy(&st, (const char *)val + 8, 2);
    if (st_now_us() - created > ttl_us) return ST_ENOTFOUND;
    if (*wait < w) *wait = w;
    *status = st;
    *body = (const char *)val + ST__IDEM_HDR;
    *blen = vlen - ST__IDEM_HDR;
    return ST_OK;
}

int st_idem_record(st_store_t *s, const uint8_t digest[32], int status, const char *body,
                   size_t blen, uint64_t *wait)
{
    uint8_t key[33];
    st__idem_key(key, digest);
    st_buf_t v = {0};
    int64_t now = st_now_us();
    uint16_t st = (uint16_t)status;
    st_buf_append(&v, &now, 8);
    st_buf_append(&v, &st, 2);
    st_buf_append(&v, body, blen);
    int rc = st_store_put(s, key, sizeof key, v.data, v.len, wait);
    st_buf_free(&v);
    return rc;
}

typedef struct {
    int64_t cutoff;
    size_t budget, visited, nexpired;
    uint8_t (*expired)[33];
    uint8_t last[33];
    bool stopped;
} st_sweep_t;

static int st__sweep_visit(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_sweep_t *w = arg;
    if (klen != 33) return 0;
    if (w->visited == w->budget) {
        memcpy(w->last, key, 33); /* resume here next time */
        w->stopped = true;
        return 1;
    }
    w->visited++;
    int64_t created;
    if (vlen >= ST__IDEM_HDR) {
        memcpy(&created, val, 8);
        if (created < w->cutoff) memcpy(w->expired[w->nexpired++], key, 33);
    }
    return 0;
}

size_t st_idem_sweep(st_store_t *s, int64_t ttl_us, size_t budget)
{
    st_sweep_t w = {.cutoff = st_now_us() - ttl_us, .budget = budget};
    w.expired = st_malloc((budget ? budget : 1) * sizeof *w.expired);
    uint8_t prefix = ST_KS_IDEM;
    uint64_t wait = 0;
    st_store_scan_from(s, &prefix, 1, s->idem_cursor_len ? s->idem_cursor : NULL,
                       s->idem_cursor_len, st__sweep_visit, &w, &wait);
    if (w.stopped) {
        memcpy(s->idem_cursor, w.last, 33);
        s->idem_cursor_len = 33;
    } else {
        s->idem_cursor_len = 0; /* reached the end: start over next time */
    }
    for (size_t i = 0; i < w.nexpired; i++)
        st_store_del(s, w.expired[i], 33, &wait);
    free(w.expired);
    return w.nexpired;
}
