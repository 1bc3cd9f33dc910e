/* SPDX-License-Identifier: MIT */
/*
 * Reading cold messages (chat's st__chat_cold_rows): a user's manifest ('F' records, the tier's)
 * lists its objects with their id ranges; footers are fetched once and kept (parsed, least
 * recently used out, summarized by st_chat_msg_view); a read fetches only the row groups whose
 * statistics (conversation, id range) can match and decodes them. A missing or damaged object fails
 * the reads that need it with ST_ECOLD and a log line; nothing else is affected. A read needs the
 * objects, in the ids' order, up to the one that holds its row past the page (which tells that
 * there is more), and not that last one when the manifest alone shows it holds such a row.
 *
 * Nothing here waits: footers and row groups come from the cold cache (cache.c). A read first
 * checks that everything its page needs is in memory; if not, it emits nothing and returns
 * ST_EPARKED with the missing parts on the cache's want list, and its caller parks (an HTTP
 * request, a stream's replay page) with st_tier_wait until the cache has fetched them, then
 * re-runs.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* First index in rows with msg_id > id. */
static size_t st__upper(const st_pq_rows_t *r, uint64_t id)
{
    size_t a = 0, b = r->n;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (r->rows[m].msg_id <= id)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

typedef struct {
    uint64_t id;
    const st_msgrow_t *row;
} st_crow_t;

static int st__cmp_asc(const void *a, const void *b)
{
    uint64_t x = ((const st_crow_t *)a)->id, y = ((const st_crow_t *)b)->id;
    return x < y ? -1 : x > y;
}

static int st__cmp_desc(const void *a, const void *b)
{
    return st__cmp_asc(b, a);
}

static bool st__group_matches(const st_pq_group_t *G, const char *conv, size_t cl, uint64_t lo,
                              uint64_t hi)
{
    if (conv && (G->conv_len != cl || memcmp(G->conv, conv, cl) != 0)) return false;
    return !((lo && G->max_id <= lo) || (hi && G->min_id >= hi));
}

/* How many rows the read wants the manifest alone shows f to hold: all of f->rows when every
 * row is the read's (no conversation asked, or the owner has only that one: a room) and its ids
 * all lie inside the range; else none. To tell that a page ending before it has more, such an
 * object need not be read, nor even be there (SPEC §7: a missing object fails only the reads
 * that need it). */
static size_t st__file_surely(const st_tier_file_t *f, const st__chat_rowq_t *q)
{
    bool all =
        (!q->conv || q->one_conv) && (!q->lo || f->min_id > q->lo) && (!q->hi || f->max_id < q->hi);
    return all && f->rows > 0 ? (size_t)f->rows : 0;
}

/* Up to `need` rows of one object with lo < id < hi (and the conversation), nearest the start
 * of the order first, as pointers into the cache's row groups. With rows NULL it only checks
 * what is in memory: *missing counts what it put on the want list, *known the rows it can
 * vouch for (whole groups inside the range). */
static int st__file_rows(st_coldcache_t *cache, const char *key, const st_tier_file_t *f,
                         const char *conv, size_t cl, uint64_t lo, uint64_t hi, bool desc,
                         size_t need, st_buf_t *rows, size_t *missing, size_t *known)
{
    const st_pq_meta_t *m;
    int rc = st_chat_cold_footer_rows(cache, key, f->size, &m);
    if (rc == ST_EPARKED && missing) {
        ++*missing;
        return ST_OK;
    }
    for (size_t gi = 0; gi < (rc ? 0 : m->ngroups); gi++) {
        const st_pq_group_t *G = &m->groups[gi];
        if (!st__group_matches(G, conv, cl, lo, hi)) continue;
        const st_pq_rows_t *g;
        rc = st_chat_cold_group(cache, key, gi, G, &g);
        if (!rows) {
            if (rc == ST_EPARKED) {
                ++*missing;
                rc = ST_OK;
                if ((!lo || G->min_id > lo) && (!hi || G->max_id < hi)) *known += (size_t)G->rows;
            } else if (rc == ST_OK) {
                size_t a = lo ? st__upper(g, lo) : 0, b = hi ? st__upper(g, hi - 1) : g->n;
                *known += b > a ? b - a : 0;
            }
            if (rc) break;
            continue;
        }
        if (rc) break;
        size_t a = lo ? st__upper(g, lo) : 0;
        size_t b = hi ? st__upper(g, hi - 1) : g->n;
        size_t take = b > a ? b - a : 0;
        if (take > need) take = need;
        size_t from = desc ? b - take : a;
        for (size_t i = from; i < from + take; i++) {
            st_crow_t cr = {g->rows[i].msg_id, &g->rows[i]};
            st_buf_append(rows, &cr, sizeof cr);
        }
    }
    return rc;
}

/* Whether everything the page needs is in memory: the objects in order (the manifest's, which
 * is the ids' order) until they surely hold `need` rows (the page and the one past it); the
 * objects after those are not needed, so one of them missing or damaged fails nothing. A needed
 * object that cannot be read fails the page with ST_ECOLD. What is not in memory goes on the
 * want list, looking past a missing footer (its rows are unknown) at most ST__LOOKAHEAD objects,
 * so one wait usually fetches a whole page. */
#define ST__LOOKAHEAD 3
static int st__cold_ready(st_coldcache_t *cache, const st_tier_manifest_t *man,
                          const st__chat_rowq_t *q, size_t need)
{
    const char *conv = q->conv;
    size_t cl = q->cl;
    uint64_t lo = q->lo, hi = q->hi;
    size_t missing = 0, known = 0, missing_files = 0;
    int rc = ST_OK;
    for (size_t i = 0; i < man->n && rc == ST_OK && known < need; i++) {
        const st_tier_file_t *f = &man->v[i].file;
        if ((lo && f->max_id <= lo) || (hi && f->min_id >= hi)) continue;
        /* only the row that tells there is more is wanted from it, and the manifest vouches */
        size_t surely = st__file_surely(f, q);
        if (known + 1 == need && surely) break;
        size_t before = missing, k = 0;
        rc = st__file_rows(cache, man->v[i].key, f, conv, cl, lo, hi, q->desc, 0, NULL, &missing,
                           &k);
        /* in memory, counted exactly; a footer not in memory vouches for none, the manifest may */
        known += missing > before && k < surely ? surely : k;
        if (rc == ST_ECOLD && missing) rc = ST_OK; /* the page may end before it: fetch first */
        if (missing > before && ++missing_files >= ST__LOOKAHEAD) break;
    }
    return rc == ST_OK && missing ? ST_EPARKED : rc;
}

int st__chat_cold_rows(st_tier_t *t, st_store_t *store, const char *o, size_t ol,
                       const st__chat_rowq_t *q, st__chat_row_fn fn, void *arg, size_t *given,
                       bool *more, uint64_t *last, uint64_t *wait)
{
    const char *conv = q->conv;
    size_t cl = q->cl, limit = q->limit;
    uint64_t lo = q->lo, hi = q->hi;
    bool desc = q->desc;
    *given = 0;
    *more = false;
    st_coldcache_t *cache = t ? st_tier_cache(t) : NULL;
    if (!cache || limit == 0) return ST_OK;
    st_tier_manifest_t man;
    int rc = st_tier_manifest(store, o, ol, desc, &man, wait);
    /* nothing is emitted unless all of it can be: a parked read re-runs from the start */
    if (rc == ST_OK) rc = st__cold_ready(cache, &man, q, limit + 1);
    if (!fn) {
        st_tier_manifest_free(&man);
        return rc;
    }
    st_buf_t rows = {0};
    for (size_t i = 0; i < man.n && rc == ST_OK && !*more; i++) {
        const st_tier_file_t *f = &man.v[i].file;
        if ((lo && f->max_id <= lo) || (hi && f->min_id >= hi)) continue;
        if (*given == limit && st__file_surely(f, q)) { /* as st__cold_ready */
            *more = true;
            break;
        }
        st_buf_reset(&rows);
        /* one row past the page tells whether there is more */
        rc = st__file_rows(cache, man.v[i].key, f, conv, cl, lo, hi, desc, limit - *given + 1,
                           &rows, NULL, NULL);
        ST_ASSERT(rc != ST_EPARKED); /* the check above found it all in memory */
        size_t n = rows.len / sizeof(st_crow_t);
        st_crow_t *r = (st_crow_t *)rows.data;
        if (n > 1) qsort(r, n, sizeof *r, desc ? st__cmp_desc : st__cmp_asc);
        for (size_t k = 0; k < n; k++) {
            if (*given == limit) {
                *more = true;
                break;
            }
            fn(arg, r[k].row);
            *last = r[k].id;
            ++*given;
        }
    }
    st_tier_manifest_free(&man);
    st_buf_free(&rows);
    return rc;
}
