/* SPDX-License-Identifier: MIT */
/*
 * Hybrid and distinct counters. A counter record is kind(1) | baseline(i64) | hot(i64). Keeping
 * the two parts apart is what lets the cold tier consolidate (baseline += hot, hot = 0) in one
 * staged write, so a reader never sees the value jump or count twice.
 */
#include "strata/counters.h"

#include <openssl/sha.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ST__REC_LEN 17

static size_t st__counters_key(uint8_t *key, char ks, const char *name, size_t nlen)
{
    key[0] = (uint8_t)ks;
    memcpy(key + 1, name, nlen);
    return nlen + 1;
}

static void st__counters_decode(const void *v, st_counter_t *c)
{
    const uint8_t *p = v;
    c->kind = (st_counter_kind_t)p[0];
    memcpy(&c->baseline, p + 1, 8);
    memcpy(&c->hot, p + 9, 8);
}

static int st__put(st_store_t *s, const uint8_t *key, size_t klen, const st_counter_t *c,
                   uint64_t *wait)
{
    uint8_t v[ST__REC_LEN];
    v[0] = (uint8_t)c->kind;
    memcpy(v + 1, &c->baseline, 8);
    memcpy(v + 9, &c->hot, 8);
    return st_store_put(s, key, klen, v, sizeof v, wait);
}

static int st__counters_load(st_store_t *s, const uint8_t *key, size_t klen, st_counter_t *c,
                             uint64_t *wait)
{
    const void *v;
    size_t vlen;
    int rc = st_store_get(s, key, klen, &v, &vlen, wait);
    if (rc != ST_OK) return rc;
    if (vlen != ST__REC_LEN) {
        st_error("counters: record of %zu bytes under '%.*s' is corrupt", vlen, (int)klen - 1,
                 (const char *)key + 1);
        return ST_EINTERNAL;
    }
    st__counters_decode(v, c);
    return ST_OK;
}

int st_counters_open(st_store_t *s)
{
    static const char ks[] = {ST_KS_COUNTER, ST_KS_MEMBER, ST_KS_SEQUENCE};
    static const st_claim_t keys[] = {{ks, 1}, {ks + 1, 1}, {ks + 2, 1}};
    return st_store_claims(s, "counters", keys, sizeof keys / sizeof *keys);
}

void st_counters_observe(st_store_t *s, st_counter_observer_fn fn, void *arg)
{
    st_observers_add(st_store_observers(s), (st_observer_any_fn)fn, arg);
}

void st_counters_unobserve(st_store_t *s, const void *arg)
{
    st_observers_remove(st_store_observers(s), arg);
}

static void st__changed(st_store_t *s, const char *name, size_t nlen, const st_counter_t *c,
                        bool repair, uint64_t wait)
{
    st_observers_t *o = st_store_observers(s);
    for (size_t i = 0; i < o->n; i++)
        ((st_counter_observer_fn)o->fn[i])(o->arg[i], name, nlen, st_counter_value(c),
                                           c->kind == ST_COUNTER_DISTINCT, repair, wait);
}

int st_counter_get(st_store_t *s, const char *name, size_t nlen, st_counter_t *out, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    return st__counters_load(s, key, st__counters_key(key, ST_KS_COUNTER, name, nlen), out, wait);
}

int st_counter_incr(st_store_t *s, const char *name, size_t nlen, int64_t by, int64_t *value,
                    uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__counters_key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c = {ST_COUNTER_PLAIN, 0, 0};
    int rc = st__counters_load(s, key, klen, &c, wait);
    if (rc != ST_OK && rc != ST_ENOTFOUND) return rc;
    if (c.kind != ST_COUNTER_PLAIN) return ST_ECONFLICT;
    int64_t hot, val;
    if (__builtin_add_overflow(c.hot, by, &hot) || __builtin_add_overflow(c.baseline, hot, &val))
        return ST_EINVAL;
    c.hot = hot;
    if ((rc = st__put(s, key, klen, &c, wait)) != ST_OK) return rc;
    *value = val;
    st__changed(s, name, nlen, &c, false, *wait);
    return ST_OK;
}

struct st_distinct_recount {
    st_list_t link; /* in the recounts under way (loop thread only) */
    st_store_t *store;
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen;
    uint8_t pre[ST_KEY_MAX + 1], cursor[ST_KEY_MAX + 1]; /* members from cursor on are ahead */
    size_t plen, clen;
    int64_t counted, behind; /* members counted; members added behind the cursor meanwhile */
};

static st_list_t st__recounts = {&st__recounts, &st__recounts};

/* A member just added: if a recount of its counter has passed its key, count it there. */
static void st__recount_note_add(st_store_t *s, const uint8_t *mkey, size_t mklen)
{
    for (ST_LIST_EACH(l, next, &st__recounts)) {
        st_distinct_recount_t *j = ST_LIST_ITEM(l, st_distinct_recount_t, link);
        if (j->store != s || mklen < j->plen || memcmp(mkey, j->pre, j->plen) != 0) continue;
        size_t n = mklen < j->clen ? mklen : j->clen;
        int c = memcmp(mkey, j->cursor, n);
        if (c < 0 || (c == 0 && mklen < j->clen)) j->behind++;
    }
}

/* Membership key: 'm' | name | 0 | member. Long members are replaced by their SHA-256 behind a
 * 0x01 marker (which no valid name contains) so the key stays within LMDB's 511 bytes. */
static size_t st__member_key(uint8_t *key, const char *name, size_t nlen, const char *member,
                             size_t mlen)
{
    size_t k = st__counters_key(key, ST_KS_MEMBER, name, nlen);
    key[k++] = 0;
    if (k + mlen <= ST_KEY_MAX) {
        memcpy(key + k, member, mlen);
        return k + mlen;
    }
    key[k++] = 1;
    SHA256((const unsigned char *)member, mlen, key + k);
    return k + SHA256_DIGEST_LENGTH;
}

int st_counter_distinct_add(st_store_t *s, const char *name, size_t nlen, const char *member,
                            size_t mlen, int64_t *value, bool *added, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__counters_key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c = {ST_COUNTER_DISTINCT, 0, 0};
    int rc = st__counters_load(s, key, klen, &c, wait);
    if (rc != ST_OK && rc != ST_ENOTFOUND) return rc;
    if (c.kind != ST_COUNTER_DISTINCT) return ST_ECONFLICT;
    uint8_t mkey[ST_KEY_MAX + 1];
    size_t mklen = st__member_key(mkey, name, nlen, member, mlen);
    const void *v;
    size_t vlen;
    rc = st_store_get(s, mkey, mklen, &v, &vlen, wait);
    if (rc == ST_OK) {
        *added = false;
        *value = st_counter_value(&c);
        return ST_OK;
    }
    if (rc != ST_ENOTFOUND) return rc;
    c.hot++;
    rc = st_store_put(s, mkey, mklen, "", 0, wait);
    if (rc == ST_OK) rc = st__put(s, key, klen, &c, wait);
    if (rc != ST_OK) return rc;
    st__recount_note_add(s, mkey, mklen); /* a recount under way may have passed it */
    *added = true;
    *value = st_counter_value(&c);
    st__changed(s, name, nlen, &c, false, *wait);
    return ST_OK;
}

int st_counter_consolidate(st_store_t *s, const char *name, size_t nlen, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__counters_key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c;
    int rc = st__counters_load(s, key, klen, &c, wait);
    if (rc != ST_OK) return rc;
    if (c.hot == 0) return ST_OK;
    c.baseline += c.hot;
    c.hot = 0;
    return st__put(s, key, klen, &c, wait);
}

/* A sequence record is last(i64), optionally followed by reserved(i64): numbers up to reserved
 * may be issued without asking again. Raising reserved is a store barrier, so a backup has the
 * new reservation before any number from it is acknowledged, and a restore resumes after it. */
static int st__seq_load(st_store_t *s, const uint8_t *key, size_t klen, int64_t *last,
                        int64_t *reserved, uint64_t *wait)
{
    const void *v;
    size_t vlen;
    int rc = st_store_get(s, key, klen, &v, &vlen, wait);
    *last = *reserved = 0;
    if (rc == ST_ENOTFOUND) return ST_OK;
    if (rc != ST_OK) return rc;
    if (vlen != 8 && vlen != 16) return ST_EINTERNAL;
    memcpy(last, v, 8);
    if (vlen == 16) memcpy(reserved, (const char *)v + 8, 8);
    return ST_OK;
}

static int st__seq_put(st_store_t *s, const uint8_t *key, size_t klen, int64_t last,
                       int64_t reserved, uint64_t *wait)
{
    int64_t v[2] = {last, reserved};
    return st_store_put(s, key, klen, v, sizeof v, wait);
}

int st_sequence_next(st_store_t *s, const char *name, size_t nlen, int64_t count, int64_t *first,
                     int64_t *last, uint64_t *wait)
{
    if (count < 1 || count > ST_SEQ_MAX_COUNT) return ST_EINVAL;
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__counters_key(key, ST_KS_SEQUENCE, name, nlen);
    int64_t cur, reserved;
    int rc = st__seq_load(s, key, klen, &cur, &reserved, wait);
    if (rc != ST_OK) return rc;
    int64_t next;
    if (__builtin_add_overflow(cur, count, &next)) return ST_EINVAL;
    if (next > reserved) {
        /* a new range: the record goes to the backup ahead of its group (restored, it resumes
         * after `reserved`, whatever `last` it holds) */
        if (__builtin_add_overflow(next, ST_SEQ_RESERVE, &reserved)) reserved = INT64_MAX;
        int64_t v[2] = {next, reserved};
        rc = st_store_put_resv(s, key, klen, v, sizeof v, wait);
    } else if ((rc = st_store_resv_check(s)) == ST_OK) {
        /* (refused while the reservation may predate a crash or failover the backup missed) */
        rc = st__seq_put(s, key, klen, next, reserved, wait);
    }
    if (rc != ST_OK) return rc;
    *first = cur + 1;
    *last = next;
    return ST_OK;
}

int st_sequence_get(st_store_t *s, const char *name, size_t nlen, int64_t *last, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__counters_key(key, ST_KS_SEQUENCE, name, nlen);
    int64_t reserved;
    return st__seq_load(s, key, klen, last, &reserved, wait);
}

static int st__seq_collect(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_buf_t *keys = arg;
    int64_t v[2];
    if (vlen != 16) return 0;
    memcpy(v, val, 16);
    if (v[1] <= v[0]) return 0;
    uint32_t kl = (uint32_t)klen;
    st_buf_append(keys, &kl, 4);
    st_buf_append(keys, key, klen);
    st_buf_append(keys, &v[1], 8);
    return 0;
}

int st_sequences_resume(st_store_t *s, size_t *n, uint64_t *wait)
{
    st_buf_t keys = {0};
    uint8_t pre = ST_KS_SEQUENCE;
    int rc = st_store_scan(s, &pre, 1, st__seq_collect, &keys, wait);
    *n = 0;
    for (size_t off = 0; rc == ST_OK && off < keys.len; (*n)++) {
        uint32_t kl;
        int64_t reserved;
        memcpy(&kl, keys.data + off, 4);
        memcpy(&reserved, keys.data + off + 4 + kl, 8);
        rc = st__seq_put(s, (const uint8_t *)keys.data + off + 4, kl, reserved, reserved, wait);
        off += 4 + kl + 8;
    }
    st_buf_free(&keys);
    return rc;
}

/* ---- recounting a distinct counter in slices ---- */

int st_counter_recount_start(st_store_t *s, const char *name, size_t nlen,
                             st_distinct_recount_t **out, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__counters_key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c;
    int rc = st__counters_load(s, key, klen, &c, wait);
    if (rc) return rc;
    if (c.kind != ST_COUNTER_DISTINCT) return ST_ECONFLICT;
    st_distinct_recount_t *j = st_calloc(1, sizeof *j);
    j->store = s;
    memcpy(j->key, key, klen);
    j->klen = klen;
    j->plen = st__counters_key(j->pre, ST_KS_MEMBER, name, nlen);
    j->pre[j->plen++] = 0;
    memcpy(j->cursor, j->pre, j->plen);
    j->clen = j->plen;
    st_list_push_front(&st__recounts, &j->link);
    *out = j;
    return ST_OK;
}

typedef struct {
    st_distinct_recount_t *j;
    size_t left;
} st__slice_t;

static int st__count_member(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__slice_t *sl = arg;
    (void)val;
    (void)vlen;
    if (sl->left == 0) { /* the next slice starts here */
        memcpy(sl->j->cursor, key, klen);
        sl->j->clen = klen;
        return 1;
    }
    sl->left--;
    sl->j->counted++;
    return 0;
}

int st_counter_recount_step(st_distinct_recount_t *j, size_t budget, bool *done, int64_t *drift,
                            uint64_t *wait)
{
    st__slice_t sl = {j, budget};
    *done = false;
    *drift = 0;
    int rc = st_store_scan_from(j->store, j->pre, j->plen, j->cursor, j->clen, st__count_member,
                                &sl, wait);
    if (rc < 0) return rc;
    if (rc == 1) return ST_OK; /* more to count */
    *done = true;
    st_counter_t c;
    if ((rc = st__counters_load(j->store, j->key, j->klen, &c, wait)) != ST_OK) return rc;
    *drift = j->counted + j->behind - st_counter_value(&c);
    if (*drift == 0) return ST_OK;
    c.hot += *drift;
    if ((rc = st__put(j->store, j->key, j->klen, &c, wait)) != ST_OK) return rc;
    st__changed(j->store, (const char *)j->key + 1, j->klen - 1, &c, true, *wait);
    return ST_OK;
}

void st_counter_recount_free(st_distinct_recount_t *j)
{
    if (!j) return;
    st_list_unlink(&j->link);
    free(j);
}

int st_counter_distinct_recount(st_store_t *s, const char *name, size_t nlen, int64_t *drift,
                                uint64_t *wait)
{
    st_distinct_recount_t *j = NULL;
    bool done = false;
    *drift = 0;
    int rc = st_counter_recount_start(s, name, nlen, &j, wait);
    while (rc == ST_OK && !done)
        rc = st_counter_recount_step(j, SIZE_MAX, &done, drift, wait);
    st_counter_recount_free(j);
    return rc;
}

/* Up to max distinct counters' names from *cursor on (key order), each as u8 length + name
 * appended to names; *cursor (ST_KEY_MAX + 1 bytes, *clen 0 at the start) moves past them. */
typedef struct {
    st_buf_t *names;
    size_t left, n;
    uint8_t *cursor;
    size_t *clen;
} st__page_t;

static int st__page_counter(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__page_t *pg = arg;
    if (pg->left == 0) {
        memcpy(pg->cursor, key, klen);
        *pg->clen = klen;
        return 1;
    }
    if (vlen != ST__REC_LEN || ((const uint8_t *)val)[0] != ST_COUNTER_DISTINCT || klen < 2 ||
        klen - 1 > ST_NAME_MAX)
        return 0;
    st_buf_appendc(pg->names, (char)(uint8_t)(klen - 1));
    st_buf_append(pg->names, (const char *)key + 1, klen - 1);
    pg->left--;
    pg->n++;
    return 0;
}

size_t st_counter_distinct_page(st_store_t *s, uint8_t *cursor, size_t *clen, size_t max,
                                st_buf_t *names, bool *done, uint64_t *wait)
{
    st__page_t pg = {names, max, 0, cursor, clen};
    uint8_t pre = ST_KS_COUNTER;
    int rc =
        st_store_scan_from(s, &pre, 1, *clen ? cursor : NULL, *clen, st__page_counter, &pg, wait);
    *done = rc != 1;
    return pg.n;
}

int st_counter_test_drift(st_store_t *s, const char *name, size_t nlen, int64_t by, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__counters_key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c;
    int rc = st__counters_load(s, key, klen, &c, wait);
    if (rc) return rc;
    c.hot += by;
    if ((rc = st__put(s, key, klen, &c, wait)) != ST_OK) return rc;
    st__changed(s, name, nlen, &c, false, *wait); /* stands for a write gone wrong */
    return ST_OK;
}
