/* SPDX-License-Identifier: MIT */
/*
 * The store's entries of Idempotency-Key answers the index in memory could not hold
 * (idempotency.c; --idempotency-index full, issue 48):
 *   'y' scope(32) -> be64(created)
 * the answer's key is then 'x' be64(created) scope 3. One entry a scope: a key recorded again
 * after its answer expired overwrites it, and an expired answer's deletion deletes its entry only
 * if it still names that answer. Loop thread only.
 */
#include "internal.h"

#include <string.h>

static void st__ykey(uint8_t key[33], const uint8_t scope[32])
{
    key[0] = ST_KS_IDEM_SPILL;
    memcpy(key + 1, scope, 32);
}

bool st__spill_get(st_store_t *s, const uint8_t scope[32], int64_t *created)
{
    uint8_t key[33];
    st__ykey(key, scope);
    const void *v;
    size_t vl;
    uint64_t w = 0;
    if (st_store_get(s, key, sizeof key, &v, &vl, &w) != ST_OK || vl != 8) return false;
    *created = (int64_t)st_be64_get(v);
    return true;
}

int st__spill_write(st_store_t *s, const uint8_t scope[32], int64_t created, uint64_t *wait)
{
    uint8_t key[33], v[8];
    st__ykey(key, scope);
    st_be64_put(v, (uint64_t)created);
    return st_store_put(s, key, sizeof key, v, sizeof v, wait);
}

void st__spill_del(st_store_t *s, const uint8_t scope[32], int64_t created)
{
    int64_t c;
    if (!st__spill_get(s, scope, &c) || c != created) return;
    uint8_t key[33];
    uint64_t w = 0;
    st__ykey(key, scope);
    st_store_del(s, key, sizeof key, &w);
}

static int st__spill_seen(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)arg, (void)key, (void)klen, (void)val, (void)vlen;
    return 1;
}

bool st__spill_any(st_store_t *s)
{
    uint8_t ks = ST_KS_IDEM_SPILL;
    uint64_t w = 0;
    return st_store_scan(s, &ks, 1, st__spill_seen, NULL, &w) != 0;
}
