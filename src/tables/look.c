/* SPDX-License-Identifier: MIT */
/*
 * GET /v1/admin/tables's `pending` (internal.h, SPEC §5.1, issue 48): the objects of a table that
 * no committed snapshot has, exact at any scale. A running count per table in the hot store,
 * "\0tables" 'n' index -> be64 (st_tables_pending_key), so the route reads one record a table,
 * whatever a flush touched (it is polled while a flush of a million owners commits).
 *
 * The invariant: count[ti] = the file records ('F', strata/tier.h) of table ti's owners whose
 * object has no provenance record (tables.c; with its partition or from before). Each change of
 * either side stages the count's change in its own batch, so the count is durable, replicated and
 * rolled back with it (a kill -9, a failed batch, a follower applying the leader's batches: the
 * two always go together; the leader computes, every member writes the same value):
 *   - a file record put or deleted (st_tables_file_changed, the tier's file observer: a flush, a
 *     compaction or fold, retention, an erasure): +1 / -1 when its object has no provenance;
 *   - a commit's provenance records (st_tables_pending_there and _add, in the turn of the slice of
 *     its provenance writes, slice.c): -1 for each object newly recorded whose file record is
 *     still there (no file record written since the view, else a get of the record the view read,
 * by its number: a compaction may have taken it out meanwhile, which already took it off; numbers
 * of an owner's records are not reused, and the record's key is compared too). A record a commit
 * removes is of an object whose file record is gone (the view no longer had it; keys are never
 * reused), one it rewrites (another manifest, a record given its partition) was there before:
 * neither changes the count. rebuild-meta puts file records without the observer, and a store from
 * before the count has no record: the count is then recounted (st__pending_walk: the table's dirty
 * owners' file records without provenance — only a dirty owner can hold such an object: its mark
 * goes in the batch that puts the file record and leaves only with the commit that has its files),
 * and the observer leaves an absent count alone. The self-check (st__pending_check): a table none
 * of whose owners is dirty holds 0, and no count is negative; a count found otherwise has drifted —
 * logged once, recounted, and counted in strata_tables_pending_repairs_total. A 0 while owners are
 * dirty can be right (their changes all committed objects' removals), so a read takes it; at open
 * (and a lead's start) it is recounted once: a store upgraded from one without provenance records
 * holds a 0 that no commit has settled yet, which would read 0 until the next commit. Loop only.
 */
#include "internal.h"
#include "strata/metrics.h"

#include <stdlib.h>
#include <string.h>

static st_metric_t *st__repairs;
static bool st__warned; /* a drift is logged once a process; the metric counts each */

void st_tables_pending_open(void)
{
    st__repairs = st_metrics_counter(
        "strata_tables_pending_repairs_total",
        "Pending counts of the Iceberg tables found drifted (negative, or not 0 while no owner of "
        "the table is dirty) and recounted",
        "");
}

/* Whether table ti's object key, of partition part, has a provenance record (with its partition,
 * or one from before partitions were in the key): a snapshot has it. */
static bool st__committed(st_store_t *s, int ti, const char *part, const char *key)
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

/* The count's record into *n: ST_OK, or ST_ENOTFOUND (none yet: recounted). */
static int st__count_get(st_store_t *s, int ti, int64_t *n)
{
    uint8_t k[ST_KEY_MAX + 1];
    const void *v;
    size_t vl;
    uint64_t wait = 0;
    int rc = st_store_get(s, k, st_tables_pending_key(k, ti), &v, &vl, &wait);
    if (rc == ST_OK && vl != 8) rc = ST_ENOTFOUND;
    if (rc == ST_OK) *n = (int64_t)st_be64_get(v);
    return rc;
}

static int st__count_put(st_store_t *s, int ti, int64_t n, uint64_t *wait)
{
    uint8_t k[ST_KEY_MAX + 1], v[8];
    st_be64_put(v, (uint64_t)n);
    return st_store_put(s, k, st_tables_pending_key(k, ti), v, sizeof v, wait);
}

/* The count moved by d, staged (an absent count stays absent: its recount reads the store). */
static void st__count_add(st_store_t *s, int ti, int64_t d, uint64_t *wait)
{
    int64_t n;
    if (d && st__count_get(s, ti, &n) == ST_OK) st__count_put(s, ti, n + d, wait);
}

/* Owner o's partition (its name without the tag's "~" t) into part; false when it has none. */
static bool st__part(const char *o, size_t ol, char tag, char part[ST_TIER_OWNER_MAX + 1])
{
    size_t skip = tag ? 2 : 0; /* "~r" room, "~b" event */
    if (ol <= skip || ol - skip > ST_TIER_OWNER_MAX) return false;
    memcpy(part, o + skip, ol - skip);
    part[ol - skip] = 0;
    return true;
}

void st_tables_file_changed(st_store_t *s, const char *o, size_t ol, const char *key, bool put,
                            uint64_t *wait)
{
    char tag = st_tier_owner_tag(o, ol), part[ST_TIER_OWNER_MAX + 1];
    int ti = st_table_of_tag(tag);
    if (ti < 0 || !st__part(o, ol, tag, part) || st__committed(s, ti, part, key)) return;
    st__count_add(s, ti, put ? 1 : -1, wait);
}

/* ---- the recount: a walk of the table's dirty owners ---- */
/* One dirty mark, kept for after the walk (no read inside a scan): size_t length, owner. */
static int st__pending_mark(void *arg, const char *o, size_t ol, uint64_t gen)
{
    st_buf_t *b = arg;
    (void)gen;
    st_buf_append(b, &ol, sizeof ol);
    st_buf_append(b, o, ol);
    return 0;
}

static int st__pending_any(void *arg, const char *o, size_t ol, uint64_t gen)
{
    (void)o, (void)ol, (void)gen;
    *(bool *)arg = true;
    return 1;
}

/* Whether an owner of tag is dirty (one seek; a failed read: not known, so true). */
static bool st__any_dirty(st_store_t *s, char tag)
{
    bool any = false;
    uint64_t wait = 0;
    int rc = st_tier_each_dirty_tag(s, tag, st__pending_any, &any, &wait);
    return any || (rc != ST_OK && rc != 1);
}

/* Table ti's objects without provenance, read from its dirty owners' file records into *out:
 * O(dirty owners), for a recount only. */
static int st__pending_walk(st_store_t *s, int ti, int64_t *out)
{
    char tag = st_table_def((size_t)ti)->tag, part[ST_TIER_OWNER_MAX + 1];
    st_buf_t m = {0};
    uint64_t wait = 0;
    int rc = st_tier_each_dirty_tag(s, tag, st__pending_mark, &m, &wait);
    int64_t p = 0;
    for (size_t off = 0; rc == ST_OK && off + sizeof(size_t) <= m.len;) {
        size_t ol;
        memcpy(&ol, m.data + off, sizeof ol);
        const char *o = m.data + off + sizeof ol;
        off += sizeof ol + ol;
        if (!st__part(o, ol, tag, part)) continue;
        st_tier_manifest_t man;
        rc = st_tier_manifest(s, o, ol, false, &man, &wait);
        for (size_t i = 0; rc == ST_OK && i < man.n; i++)
            p += !st__committed(s, ti, part, man.v[i].key);
        st_tier_manifest_free(&man); /* what a failed read collected, too */
    }
    st_buf_free(&m);
    *out = p;
    return rc;
}

int st_tables_pending_recount(st_store_t *s, uint64_t *wait)
{
    int rc = ST_OK;
    for (int i = 0; rc == ST_OK && i < (int)st_tables_n(); i++) {
        int64_t n;
        rc = st__pending_walk(s, i, &n);
        if (rc == ST_OK) rc = st__count_put(s, i, n, wait);
    }
    return rc;
}

/* Table ti's count, checked: O(1) (a get and a seek) unless it is absent or has drifted, when it
 * is recounted (and written back when fix: a member that may write). opening: a 0 with dirty
 * owners is recounted too (not a drift: see above). */
static int64_t st__pending_check(st_store_t *s, int ti, bool fix, bool opening)
{
    int64_t n = 0, w;
    int rc = st__count_get(s, ti, &n);
    if (rc == ST_OK && n >= 0) {
        bool dirty = (n > 0 || opening) && st__any_dirty(s, st_table_def((size_t)ti)->tag);
        if (n == 0 ? !dirty : dirty) return n;
    }
    if (st__pending_walk(s, ti, &w) != ST_OK) return n > 0 ? n : 1; /* not known to be 0 */
    if (rc == ST_OK && n == 0) {
        if (w)
            st_info("tables: %s: pending count 0 at open, recounted %lld",
                    st_table_def((size_t)ti)->ice.name, (long long)w);
    } else if (rc == ST_OK) { /* a drift: the invariant above did not hold */
        if (!st__warned)
            st_warn("tables: %s: pending count %lld, recounted %lld (further repairs only in "
                    "strata_tables_pending_repairs_total)",
                    st_table_def((size_t)ti)->ice.name, (long long)n, (long long)w);
        st__warned = true;
        if (st__repairs) st_metric_add(st__repairs, 1);
    }
    uint64_t wait = 0;
    if (fix) st__count_put(s, ti, w, &wait);
    return w;
}

void st_tables_pending(st_store_t *s, int n, int64_t *pending)
{
    bool fix = st_store_writable(s) == ST_OK;
    for (int i = 0; i < n; i++)
        pending[i] = st__pending_check(s, i, fix, false);
}

void st_tables_pending_checked(st_store_t *s, int ti)
{
    st__pending_check(s, ti, st_store_writable(s) == ST_OK, false);
}

void st_tables_pending_init(st_store_t *s, int n)
{
    for (int i = 0; i < n && st_store_writable(s) == ST_OK; i++)
        st__pending_check(s, i, true, true);
}

/* ---- a commit's newly recorded objects ---- */
bool st_tables_pending_there(st_store_t *s, int ti, const uint8_t *pk, size_t pkl, bool unchanged,
                             const uint64_t *fseq)
{
    if (unchanged) return true;
    uint8_t k[ST_KEY_MAX + 1];
    size_t at = st_tables_prov_key(k, ti, "", NULL) - 1; /* the partition's first byte */
    const uint8_t *nul = pkl > at ? memchr(pk + at, 0, pkl - at) : NULL;
    if (!nul || (size_t)(nul - pk) - at > ST_NAME_MAX) return false;
    char o[ST_TIER_OWNER_MAX], key[ST_KEY_MAX + 1];
    size_t ol = st_tier_owner(o, st_table_def((size_t)ti)->tag, (const char *)pk + at,
                              (size_t)(nul - pk) - at);
    size_t kl = pkl - (size_t)(nul + 1 - pk);
    memcpy(key, nul + 1, kl);
    key[kl] = 0;
    uint64_t wait = 0;
    /* the record the view read, by its number: one get (the owner's whole manifest was read for
     * each new record, 26 ms of the loop during a flush of 50,000 users: Session 23) */
    if (fseq) return st_tier_file_records(s, o, ol, *fseq, key, &wait);
    return st_tier_manifest_names(s, o, ol, key, &wait);
}

void st_tables_pending_add(st_store_t *s, int ti, int64_t d)
{
    uint64_t wait = 0;
    st__count_add(s, ti, d, &wait);
}
