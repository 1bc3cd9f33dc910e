/* SPDX-License-Identifier: MIT */
/* Key layout of the chat module (see internal.h); shared by posting, reading and flushing. */
#include "internal.h"

#include <openssl/sha.h>
#include <string.h>

/* ks u 0 */
size_t st__chat_ukey(uint8_t *k, char ks, const char *u, size_t ul)
{
    k[0] = (uint8_t)ks;
    memcpy(k + 1, u, ul);
    k[1 + ul] = 0;
    return ul + 2;
}

size_t st__chat_conv_part(uint8_t *k, size_t ul, const char *c, size_t cl)
{
    if (ul + cl <= 400) {
        memcpy(k, c, cl);
        return cl;
    }
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)c, cl, d);
    k[0] = 1;
    memcpy(k + 1, d, 20);
    return 21;
}

size_t st__chat_ckey(uint8_t *k, const char *u, size_t ul, const char *c, size_t cl)
{
    size_t n = st__chat_ukey(k, 'C', u, ul);
    return n + st__chat_conv_part(k + n, ul, c, cl);
}

size_t st__chat_nprefix(uint8_t *k, const char *u, size_t ul, const char *c, size_t cl)
{
    size_t n = st__chat_ukey(k, 'N', u, ul);
    n += st__chat_conv_part(k + n, ul, c, cl);
    k[n++] = 0;
    return n;
}

size_t st__chat_ukey_upd(uint8_t *k, const char *u, size_t ul, int64_t updated, const char *c,
                         size_t cl)
{
    size_t n = st__chat_ukey(k, 'U', u, ul);
    st_be64_put(k + n, ~(uint64_t)updated);
    n += 8;
    return n + st__chat_conv_part(k + n, ul, c, cl);
}

int st__chat_get_fixed(st_store_t *s, const uint8_t *k, size_t kl, void *dst, size_t n,
                       uint64_t *wait)
{
    const void *v;
    size_t vl;
    int rc = st_store_get(s, k, kl, &v, &vl, wait);
    if (rc) return rc;
    if (vl != n) return ST_EINTERNAL;
    memcpy(dst, v, n);
    return ST_OK;
}

bool st__chat_conv_decode(const void *val, size_t vlen, st_conv_t *cv)
{
    if (vlen == sizeof *cv) {
        memcpy(cv, val, sizeof *cv);
        return true;
    }
    if (vlen != ST__CONV_V1_SIZE) return false;
    memcpy(cv, val, ST__CONV_V1_SIZE);
    cv->last_seq = cv->base_total + cv->hot_total;
    return true;
}

int st__chat_conv_get(st_store_t *s, const uint8_t *k, size_t kl, st_conv_t *cv, uint64_t *wait)
{
    const void *v;
    size_t vl;
    int rc = st_store_get(s, k, kl, &v, &vl, wait);
    if (rc) return rc;
    return st__chat_conv_decode(v, vl, cv) ? ST_OK : ST_EINTERNAL;
}

void st__chat_object_key(st_buf_t *b, const char *o, size_t ol, int64_t ts, uint64_t writer,
                         uint64_t seq)
{
    st_owner_t w = st_chat_owner_from(o, ol);
    const char *u = w.id;
    size_t ul = w.len;
    if (w.kind == ST_OWNER_ROOM) { /* a room's (SPEC §2.1) */
        st_buf_puts(b, ST__ROOM_FOLDER);
    } else if (ul && u[0] == '.') {
        st_buf_appendc(b, '~');
        u++;
        ul--;
    }
    st_buf_append(b, u, ul);
    st_buf_printf(b, "/batch-%lld-", (long long)ts);
    if (writer) {
        st_tier_key_writer(b, writer);
        st_buf_appendc(b, '-');
    }
    st_buf_printf(b, "%llu.parquet", (unsigned long long)seq);
    st_buf_appendc(b, 0);
    b->len--;
}

bool st__chat_folder_user(const char *key, size_t flen, char *u, size_t *ul)
{
    size_t n = 0;
    const char *p = key, *end = key + flen;
    size_t rl = sizeof ST__ROOM_FOLDER - 1;
    if (flen > rl && memcmp(key, ST__ROOM_FOLDER, rl) == 0) {
        /* shared/conversations/{room}: a room's; a user's folder never holds a '/', so a user
         * named "shared" (folder "shared") is never taken for a room */
        if (!st_name_valid(key + rl, flen - rl)) return false;
        *ul = st_chat_owner_bytes(u, ST_ROOM(key + rl, flen - rl));
        return true;
    }
    if (p < end && *p == '~') {
        u[n++] = '.';
        p++;
    }
    while (p < end && n <= ST_NAME_MAX) {
        if (end - p >= 3 && memcmp(p, "%2E", 3) == 0) { /* the older encoding: every leading dot */
            u[n++] = '.';
            p += 3;
        } else {
            u[n++] = *p++;
        }
    }
    if (p < end || n > ST_NAME_MAX || !st_name_valid(u, n)) return false;
    *ul = n;
    return true;
}

static int st__sum_conv(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_totals_t *t = arg;
    st_conv_t cv;
    (void)key;
    (void)klen;
    if (!st__chat_conv_decode(val, vlen, &cv)) return 0;
    t->total += cv.base_total + cv.hot_total;
    t->conversations++;
    return 0;
}

int st__chat_refresh_totals(st_chat_t *c, const char *u, size_t ul, uint64_t *wait)
{
    st_totals_t tot = {0, 0};
    uint8_t k[ST__KEY_CAP];
    size_t kl = st__chat_ukey(k, 'C', u, ul);
    int rc = st_store_scan(c->store, k, kl, st__sum_conv, &tot, wait);
    if (rc) return rc;
    return st_store_put(c->store, k, st__chat_ukey(k, 'T', u, ul) - 1, &tot, sizeof tot, wait);
}

/* ---- owners as bytes (strata/chat.h; the encoding: internal.h) ---- */

size_t st_chat_owner_bytes(char *o, const st_owner_t *w)
{
    ST_ASSERT(w->len <= ST_NAME_MAX);
    return st_tier_owner(o, w->kind == ST_OWNER_ROOM ? ST__ROOM_TAG : 0, w->id, w->len);
}

st_owner_t st_chat_owner_from(const char *o, size_t ol)
{
    if (st_tier_owner_tag(o, ol) == ST__ROOM_TAG) return (st_owner_t){ST_OWNER_ROOM, o + 2, ol - 2};
    return (st_owner_t){ST_OWNER_USER, o, ol};
}
