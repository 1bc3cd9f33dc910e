/* SPDX-License-Identifier: MIT */
/*
 * A table's newest metadata version, found the way Iceberg's readers of a "Hadoop" layout find
 * it — the one loader of the catalog's refresh (catalog.c), the committer's load (commit.c) and
 * `strata rebuild-meta` (truth.c). `metadata/version-hint.text` (bare digits, whitespace around
 * them forgiven) is a hint, never the truth: the version it names is read when it is newer than
 * the one known; only when nothing is known and no hinted version was taken may `metadata/` be
 * listed for the highest v{N}; then `v{N+1}`, `v{N+2}`, … are probed upward from the newest found
 * until one is missing. A committer writes v{N} by a create that refuses to overwrite, so a
 * version once read never changes.
 *
 * On a worker (object storage blocks); pure otherwise.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define ST__PROBES_MAX 10000 /* versions probed by one load, at most */

/* The hint's version: bare digits (whitespace around them forgiven); 0 when it is missing or
 * not a version. */
static int64_t st__hint(st_objstore_t *ms, const char *table)
{
    char key[160];
    snprintf(key, sizeof key, "%s/metadata/version-hint.text", table);
    st_buf_t b = {0};
    int64_t v = 0;
    if (st_objstore_read(ms, key, 64, &b) == ST_OK) {
        size_t i = 0, n = b.len;
        while (i < n && (b.data[i] == ' ' || b.data[i] == '\n' || b.data[i] == '\r'))
            i++;
        while (n > i && (b.data[n - 1] == ' ' || b.data[n - 1] == '\n' || b.data[n - 1] == '\r'))
            n--;
        for (; i < n && v < ((int64_t)1 << 53); i++) {
            if (b.data[i] < '0' || b.data[i] > '9') {
                v = 0;
                break;
            }
            v = v * 10 + (b.data[i] - '0');
        }
        if (i < n) v = 0; /* too long, or not digits */
    }
    st_buf_free(&b);
    return v;
}

static int st__list_fn(void *arg, const char *key, uint64_t size)
{
    (void)size;
    int64_t *max = arg, n = 0;
    const char *v = strrchr(key, '/');
    v = v ? v + 1 : key;
    if (*v++ != 'v' || *v < '1' || *v > '9') return 0;
    for (; *v >= '0' && *v <= '9' && n < ((int64_t)1 << 53); v++)
        n = n * 10 + (*v - '0');
    if (strcmp(v, ".metadata.json") == 0 && n > *max) *max = n;
    return 0;
}

/* Reads v{n} and offers it: ST_OK (taken), ST_EINVAL (refused, or too large), ST_ENOTFOUND,
 * another error of the store or of take. */
static int st__offer(st_objstore_t *ms, const char *table, int64_t n, const st_tables_take_t *t)
{
    char key[160];
    snprintf(key, sizeof key, "%s/metadata/v%lld.metadata.json", table, (long long)n);
    st_buf_t b = {0};
    int rc = st_objstore_read(ms, key, ST_TABLES_META_MAX, &b);
    if (rc == ST_ETOOLARGE) rc = ST_EINVAL;
    if (rc == ST_OK) rc = t->take(t->arg, n, key, &b);
    st_buf_free(&b);
    return rc;
}

int st_tables_newest(st_objstore_t *ms, const char *table, int64_t known, bool may_list,
                     const st_tables_take_t *t, int64_t *found)
{
    int64_t base = known;
    *found = known;
    int rc = ST_OK;
    int64_t hint = st__hint(ms, table);
    if (hint > base) {
        int r = st__offer(ms, table, hint, t);
        if (r == ST_OK) base = hint;
        if (r != ST_OK && r != ST_ENOTFOUND && (t->strict || r != ST_EINVAL)) return r;
    }
    if (base == 0 && may_list) {
        /* nothing known and no usable hint: the highest version listed (a listing finds a table
         * whose first versions were expired; v1 itself is probed below every time) */
        char prefix[160];
        snprintf(prefix, sizeof prefix, "%s/metadata/v", table);
        int64_t max = 0;
        rc = st_objstore_list(ms, prefix, st__list_fn, &max);
        if (rc == ST_ENOTFOUND) rc = ST_OK;
        if (rc == ST_OK && max) {
            int r = st__offer(ms, table, max, t);
            if (r == ST_OK) base = max;
            if (r != ST_OK && r != ST_ENOTFOUND && (t->strict || r != ST_EINVAL)) return r;
        }
    }
    /* upward from the newest found until a version is missing (one take refuses is passed over,
     * not served — unless strict) */
    for (int64_t n = base + 1, probes = 0; rc == ST_OK && probes < ST__PROBES_MAX; n++, probes++) {
        int r = st__offer(ms, table, n, t);
        if (r == ST_OK) base = n;
        if (r == ST_ENOTFOUND) break;
        if (r != ST_OK && (t->strict || r != ST_EINVAL)) rc = r;
    }
    *found = base;
    return rc;
}
