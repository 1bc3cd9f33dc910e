/* SPDX-License-Identifier: MIT */
/*
 * Hybrid and distinct counters. A counter record is kind(1) | baseline(i64) | hot(i64). Keeping
 * the two parts apart is what lets the cold tier consolidate (baseline += hot, hot = 0) in one
 * staged write, so a reader never sees the value jump or count twice.
 */
#include "strata/counters.h"

#include <openssl/sha.h>
#include <string.h>

#define ST__REC_LEN 17

static size_t st__key(uint8_t *key, char ks, const char *name, size_t nlen)
{
    key[0] = (uint8_t)ks;
    memcpy(key + 1, name, nlen);
    return nlen + 1;
}

static void st__decode(const void *v, st_counter_t *c)
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

static int st__load(st_store_t *s, const uint8_t *key, size_t klen, st_counter_t *c, uint64_t *wait)
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
    st__decode(v, c);
    return ST_OK;
}

int st_counter_get(st_store_t *s, const char *name, size_t nlen, st_counter_t *out, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    return st__load(s, key, st__key(key, ST_KS_COUNTER, name, nlen), out, wait);
}

int st_counter_incr(st_store_t *s, const char *name, size_t nlen, int64_t by, int64_t *value,
                    uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c = {ST_COUNTER_PLAIN, 0, 0};
    int rc = st__load(s, key, klen, &c, wait);
    if (rc != ST_OK && rc != ST_ENOTFOUND) return rc;
    if (c.kind != ST_COUNTER_PLAIN) return ST_ECONFLICT;
    int64_t hot, val;
    if (__builtin_add_overflow(c.hot, by, &hot) || __builtin_add_overflow(c.baseline, hot, &val))
        return ST_EINVAL;
    c.hot = hot;
    rc = st__put(s, key, klen, &c, wait);
    if (rc == ST_OK) *value = val;
    return rc;
}

/* Membership key: 'm' | name | 0 | member. Long members are replaced by their SHA-256 behind a
 * 0x01 marker (which no valid name contains) so the key stays within LMDB's 511 bytes. */
static size_t st__member_key(uint8_t *key, const char *name, size_t nlen, const char *member,
                             size_t mlen)
{
    size_t k = st__key(key, ST_KS_MEMBER, name, nlen);
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
    size_t klen = st__key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c = {ST_COUNTER_DISTINCT, 0, 0};
    int rc = st__load(s, key, klen, &c, wait);
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
    *added = true;
    *value = st_counter_value(&c);
    return ST_OK;
}

int st_counter_consolidate(st_store_t *s, const char *name, size_t nlen, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c;
    int rc = st__load(s, key, klen, &c, wait);
    if (rc != ST_OK) return rc;
    if (c.hot == 0) return ST_OK;
    c.baseline += c.hot;
    c.hot = 0;
    return st__put(s, key, klen, &c, wait);
}

int st_sequence_next(st_store_t *s, const char *name, size_t nlen, int64_t count, int64_t *first,
                     int64_t *last, uint64_t *wait)
{
    if (count < 1 || count > ST_SEQ_MAX_COUNT) return ST_EINVAL;
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__key(key, ST_KS_SEQUENCE, name, nlen);
    int64_t cur = 0;
    int rc = st_sequence_get(s, name, nlen, &cur, wait);
    if (rc != ST_OK) return rc;
    int64_t next;
    if (__builtin_add_overflow(cur, count, &next)) return ST_EINVAL;
    rc = st_store_put(s, key, klen, &next, sizeof next, wait);
    if (rc != ST_OK) return rc;
    *first = cur + 1;
    *last = next;
    return ST_OK;
}

int st_sequence_get(st_store_t *s, const char *name, size_t nlen, int64_t *last, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__key(key, ST_KS_SEQUENCE, name, nlen);
    const void *v;
    size_t vlen;
    int rc = st_store_get(s, key, klen, &v, &vlen, wait);
    if (rc == ST_ENOTFOUND) {
        *last = 0;
        return ST_OK;
    }
    if (rc != ST_OK) return rc;
    if (vlen != 8) return ST_EINTERNAL;
    memcpy(last, v, 8);
    return ST_OK;
}

int st_counter_distinct_recount(st_store_t *s, const char *name, size_t nlen, int64_t *drift,
                                uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX], pre[ST_KEY_MAX + 1];
    size_t klen = st__key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c;
    *drift = 0;
    int rc = st__load(s, key, klen, &c, wait);
    if (rc) return rc;
    if (c.kind != ST_COUNTER_DISTINCT) return ST_ECONFLICT;
    size_t pl = st__key(pre, ST_KS_MEMBER, name, nlen);
    pre[pl++] = 0;
    int64_t members = 0;
    if ((rc = st_store_count(s, pre, pl, &members, wait)) != ST_OK) return rc;
    *drift = members - st_counter_value(&c);
    if (*drift == 0) return ST_OK;
    c.hot += *drift;
    return st__put(s, key, klen, &c, wait);
}

int st_counter_test_drift(st_store_t *s, const char *name, size_t nlen, int64_t by, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX];
    size_t klen = st__key(key, ST_KS_COUNTER, name, nlen);
    st_counter_t c;
    int rc = st__load(s, key, klen, &c, wait);
    if (rc) return rc;
    c.hot += by;
    return st__put(s, key, klen, &c, wait);
}
