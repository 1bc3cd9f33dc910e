/* SPDX-License-Identifier: MIT */
/*
 * GET /v1/admin/tables's `pending` (internal.h): the objects of a table's owners that no snapshot
 * has yet. Only an owner marked dirty (strata/tier.h) can hold one — a mark goes in the batch that
 * puts an owner's file record and leaves only with the commit that has its files — so the look
 * reads the marks of the table's owners and, for each, its file records and their provenance
 * records (tables.c). It reads ST_TABLES_LOOK_OWNERS owners a table at most: the route runs on the
 * loop and is polled while a flush of a million owners commits (bench/atsize.sh, issue 48), so its
 * cost must not grow with the owners a flush touched (it read every dirty owner, a million
 * owners' records in one loop turn). Past the bound the figure is those owners' objects and at
 * least 1 (more owners are dirty: something may be pending): a lower bound that reads 0 only
 * once no owner of the table is dirty, i.e. when every object written is in a snapshot. Loop only;
 * writes nothing.
 */
#include "internal.h"

#include <string.h>

typedef struct {
    st_buf_t owners; /* size_t length, owner; each (no read inside a scan) */
    size_t n;
    bool more; /* a mark past the bound was seen */
} st__look_t;

static int st__look_mark(void *arg, const char *o, size_t ol, uint64_t gen)
{
    st__look_t *l = arg;
    (void)gen;
    if (l->n == ST_TABLES_LOOK_OWNERS) {
        l->more = true;
        return 1;
    }
    st_buf_append(&l->owners, &ol, sizeof ol);
    st_buf_append(&l->owners, o, ol);
    l->n++;
    return 0;
}

/* Whether table ti's object key, of partition part, has a provenance record (with its partition,
 * or one from before partitions were in the key): a snapshot has it. */
static bool st__look_committed(st_store_t *s, int ti, const char *part, const char *key)
{
    uint8_t k[ST_KEY_MAX + 1];
    const void *v;
    size_t kl, vl;
    uint64_t wait = 0;
    for (int legacy = 0; legacy < 2; legacy++)
        if ((kl = st_tables_prov_key(k, ti, legacy ? NULL : part, key)) &&
            st_store_get(s, k, kl, &v, &vl, &wait) == ST_OK)
            return true;
    return false;
}

/* Table ti's pending objects (the owners of tag), read as above. */
static int64_t st__look_table(st_store_t *s, int ti, char tag)
{
    st__look_t l = {0};
    uint64_t wait = 0;
    int rc = st_tier_each_dirty_tag(s, tag, st__look_mark, &l, &wait);
    int64_t p = 0;
    char part[ST_TIER_OWNER_MAX + 1];
    for (size_t off = 0; (rc == ST_OK || rc == 1) && off + sizeof(size_t) <= l.owners.len;) {
        size_t ol;
        memcpy(&ol, l.owners.data + off, sizeof ol);
        const char *o = l.owners.data + off + sizeof ol;
        off += sizeof ol + ol;
        size_t skip = tag ? 2 : 0; /* "~r" room, "~b" event */
        if (ol <= skip || ol - skip > ST_TIER_OWNER_MAX) continue;
        memcpy(part, o + skip, ol - skip);
        part[ol - skip] = 0;
        st_tier_manifest_t m;
        if (st_tier_manifest(s, o, ol, false, &m, &wait) != ST_OK)
            p++; /* not read: counted as pending rather than passed over */
        else
            for (size_t i = 0; i < m.n; i++)
                p += !st__look_committed(s, ti, part, m.v[i].key);
        st_tier_manifest_free(&m); /* what a failed read collected, too */
    }
    if (rc != ST_OK && rc != 1 && !p) p = 1; /* the marks not read: not known to be 0 */
    if (l.more && !p) p = 1;
    st_buf_free(&l.owners);
    return p;
}

void st_tables_pending(st_store_t *s, int n, int64_t *pending)
{
    for (int i = 0; i < n; i++)
        pending[i] = st__look_table(s, i, st_table_def((size_t)i)->tag);
}
