/* SPDX-License-Identifier: MIT */
/*
 * Compaction (SPEC §5): a user's small Parquet objects are merged into larger ones, so that
 * object count, bytes and read time stay flat as flushes pile up.
 *
 * Which objects: tiered. Objects fall in size classes (rows, powers of 4); a run of at least
 * four neighbouring objects of one class is merged into one of the next class, so a row is
 * rewritten about once per class, O(log n) times. Only when a user still holds more than
 * --compact-objects small objects is the neighbouring pair with the fewest rows merged, which
 * keeps the count bounded. POST /v1/admin/compact is a major compaction: the first run of
 * neighbours (of any size) that one merge may take is merged, then the next, until no two
 * neighbours fit in one merge, so the user holds as few objects as the size cap
 * (--compact-max-mb) allows: one for most users. No merge writes more than the cap (it is planned
 * on the objects' bytes: a merge's output is no larger than its inputs, which pay a footer and
 * dictionaries each), more than ST__MERGE_ROWS rows (the worker holds every row of a merge in
 * memory) or replaces more than ST__MERGE_OBJECTS objects (the swap batch is on the loop); an
 * object over the cap on its own stays as it is. Neighbours only: manifest order is msg_id order
 * (reads stop at the first object past their page), so a merged object takes the place, and the
 * manifest number, of the first object it replaces; its key is
 * {folder}/batch-{ts}-{seq}.{n}.parquet, where n is a fresh number, so no key is ever used twice.
 *
 * How, with the flush's mechanisms: on the loop, the new object is recorded ('P' with the
 * fresh number) in a batch; once that batch is durable, a worker (SCHED_IDLE) reads the old
 * objects whole, verifies their pages, merges their rows (one row group per conversation,
 * msg_id order, statistics, ZSTD, page CRCs) and writes the new object. Back on the loop, ONE
 * batch swaps them: the new object in the manifest, the old ones out with their deletion
 * recorded ('D'), 'P' dropped, the user's cold summary adjusted. The reaper deletes the old
 * objects once that batch is durable. A crash before the batch leaves a 'P' without its 'F': an
 * orphan, deleted at start-up; a crash after it leaves 'D' records, finished at start-up. So
 * strata's reads see the old objects or the new one, never both, never neither. Readers of the
 * bucket (DuckDB) may see both between the swap and the reaper's next pass (about a second).
 *
 * Retention: rows older than the retention are left out of a merged object, and a user whose
 * oldest object mixes expired and live rows has it rewritten alone; the swap batch takes the
 * dropped rows out of the conversations' cold baselines, the cold summary and the totals.
 *
 * One compaction at a time, beside the flushes (never holding one up; none while the hot
 * store is filling up), paced like them: the next waits twice as long as the last one took. A
 * major compaction asked for is held in memory: each merge done stands after a crash, the rest
 * is asked for again (strata_compactions_pending says when it is done).
 */
#include "strata/coldshare.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__SMALL_ROWS    1000000        /* objects with fewer rows are small */
#define ST__SMALL_BYTES   (128ull << 20) /* ... and fewer bytes */
#define ST__MERGE_ROWS    2000000        /* no merge writes more rows */
#define ST__MERGE_OBJECTS 256            /* nor replaces more objects */
#define ST__RUN_MIN       4              /* objects of one class merged together */

enum { ST__AUTO = 0, ST__MAJOR = 1, ST__EXPIRE = 2 };

typedef struct {
    st_map_node_t node;
    char user[ST_NAME_MAX + 1];
    size_t ulen;
    int flags;
} st_cuser_t;

typedef struct st_compjob {
    uv_work_t req;
    st_chatcold_t *cc;
    st_cuser_t *u;
    uint64_t pseq, fseq, wait;
    int64_t cutoff; /* rows with an older timestamp are left out (0: none) */
    size_t nold;
    uint64_t *seqs;
    char **keys;
    st_coldfile_t *files;
    bool queued; /* on a worker */
    uint64_t t0;
    /* worker results */
    int rc;
    st_buf_t key;
    st_coldfile_t out;
    int64_t read_rows;
    st_buf_t dropped; /* per conversation: u32 length, the id, i64 rows dropped */
} st_compjob_t;

struct st_compact {
    st_map_t queue;
    st_compjob_t *job;
    size_t limit;
    uint64_t max_bytes; /* --compact-max-mb */
    uint64_t resume_ms; /* pacing: no compaction before this */
    st_metric_t *m_ok, *m_err, *m_rows, *m_bytes, *m_dropped;
    st_metric_t *m_pending; /* users queued or merging: 0 once an asked for compaction is done */
    st_metric_t *m_s3[4];
    st_metric_t *m_objects[2], *m_obytes[2]; /* small, large */
    uint64_t census_ms;                      /* next count of the manifests */
};

/* ---- planning (pure) ---- */

static int st__class(int64_t rows)
{
    int c = 0;
    while (rows >= 4) {
        rows /= 4;
        c++;
    }
    return c;
}

static bool st__small(const st_coldfile_t *f)
{
    return f->rows < ST__SMALL_ROWS && f->size < ST__SMALL_BYTES;
}

/* Where a run of neighbours from f[i] that one merge may take ends: within the merge bounds;
 * tiered, only small objects of f[i]'s class. */
static size_t st__run_end(const st_coldfile_t *f, size_t n, size_t i, uint64_t max_bytes,
                          bool tiered)
{
    size_t j = i;
    int64_t rows = 0;
    uint64_t bytes = 0;
    while (j < n && j - i < ST__MERGE_OBJECTS && rows + f[j].rows <= ST__MERGE_ROWS &&
           bytes + f[j].size <= max_bytes &&
           (!tiered || (st__small(&f[j]) && st__class(f[j].rows) == st__class(f[i].rows)))) {
        rows += f[j].rows;
        bytes += f[j].size;
        j++;
    }
    return j;
}

bool st__chat_compact_plan(const st_coldfile_t *f, size_t n, size_t limit, uint64_t max_bytes,
                           int flags, size_t *from, size_t *to)
{
    if (flags & ST__EXPIRE && n) {
        *from = 0;
        *to = 1;
        return true;
    }
    if (flags & ST__MAJOR) {
        /* the first run of two or more neighbours that fits one merge, as long as it takes:
         * planned again after each merge, it ends when no two neighbours fit together */
        for (size_t i = 0; i + 1 < n; i++) {
            size_t j = st__run_end(f, n, i, max_bytes, false);
            if (j - i >= 2) {
                *from = i;
                *to = j;
                return true;
            }
        }
        return false;
    }
    size_t nsmall = 0;
    for (size_t i = 0; i < n; i++)
        nsmall += st__small(&f[i]);
    if (nsmall <= limit) return false;
    /* a run of neighbouring small objects of one class (tiered) */
    for (size_t i = 0; i < n;) {
        size_t j = st__run_end(f, n, i, max_bytes, true);
        if (j - i >= ST__RUN_MIN) {
            *from = i;
            *to = j;
            return true;
        }
        i = j > i ? j : i + 1;
    }
    /* still too many: the neighbouring pair with the fewest rows */
    int64_t best = INT64_MAX;
    for (size_t i = 0; i + 1 < n; i++)
        if (st__small(&f[i]) && st__small(&f[i + 1]) && f[i].rows + f[i + 1].rows < best &&
            f[i].rows + f[i + 1].rows <= ST__MERGE_ROWS && f[i].size + f[i + 1].size <= max_bytes) {
            best = f[i].rows + f[i + 1].rows;
            *from = i;
            *to = i + 2;
        }
    return best != INT64_MAX;
}

/* ---- worker side ---- */

typedef struct {
    st_pq_rows_t *v;
    size_t n, cap;
} st_groups_t;

/* Every row group of one object, decoded (pages verified), appended to gs. */
static int st__read_object(st_objstore_t *obj, const char *key, uint64_t size, st_groups_t *gs)
{
    st_buf_t b = {0};
    st_pq_meta_t m;
    uint32_t flen;
    int rc = size >= 12 ? st_objstore_get(obj, key, 0, size, &b) : ST_EINVAL;
    if (rc == ST_OK && b.len != size) rc = ST_EIO;
    if (rc == ST_OK) rc = st_parquet_footer_len((const uint8_t *)b.data + size - 8, size, &flen);
    if (rc == ST_OK)
        rc = st_parquet_parse_footer((const uint8_t *)b.data + size - 8 - flen, flen, size, &m);
    if (rc != ST_OK) {
        st_buf_free(&b);
        return rc == ST_ENOTFOUND ? ST_EIO : rc;
    }
    for (size_t g = 0; g < m.ngroups && rc == ST_OK; g++) {
        const st_pq_group_t *G = &m.groups[g];
        if (G->offset + G->length > size) {
            rc = ST_EINVAL;
            break;
        }
        if (gs->n == gs->cap) {
            gs->cap = gs->cap ? gs->cap * 2 : 16;
            gs->v = st_realloc(gs->v, gs->cap * sizeof *gs->v);
        }
        rc =
            st_parquet_read_group(G, (const uint8_t *)b.data + G->offset, G->length, &gs->v[gs->n]);
        if (rc == ST_OK) gs->n++;
    }
    st_parquet_meta_free(&m);
    st_buf_free(&b);
    return rc;
}

static void st__note_dropped(st_compjob_t *j, const st_msgrow_t *r)
{
    /* rows come grouped by conversation: the last entry is the only candidate */
    st_buf_t *d = &j->dropped;
    size_t at = d->len;
    if (d->len) {
        size_t p = 0, last = 0;
        while (p < d->len) {
            uint32_t l;
            memcpy(&l, d->data + p, 4);
            last = p;
            p += 4 + l + 8;
        }
        uint32_t l;
        memcpy(&l, d->data + last, 4);
        if (l == r->conv_len && memcmp(d->data + last + 4, r->conv, l) == 0) at = last;
    }
    if (at == d->len) {
        uint32_t l = r->conv_len;
        int64_t zero = 0;
        st_buf_append(d, &l, 4);
        st_buf_append(d, r->conv, l);
        st_buf_append(d, &zero, 8);
    }
    uint32_t l;
    memcpy(&l, d->data + at, 4);
    int64_t cnt;
    memcpy(&cnt, d->data + at + 4 + l, 8);
    cnt++;
    memcpy(d->data + at + 4 + l, &cnt, 8);
}

static void st__merge(st_compjob_t *j)
{
    st_groups_t gs = {0};
    j->rc = ST_OK;
    for (size_t i = 0; i < j->nold && j->rc == ST_OK; i++)
        j->rc = st__read_object(j->cc->tier.obj, j->keys[i], j->files[i].size, &gs);
    size_t total = 0;
    for (size_t g = 0; g < gs.n; g++)
        total += gs.v[g].n;
    st_msgrow_t *rows = st_malloc((total ? total : 1) * sizeof *rows);
    size_t n = 0;
    for (size_t g = 0; g < gs.n && j->rc == ST_OK; g++)
        for (size_t i = 0; i < gs.v[g].n; i++)
            rows[n++] = gs.v[g].rows[i];
    j->read_rows = (int64_t)n;
    if (j->rc == ST_OK) {
        qsort(rows, n, sizeof *rows, st__chat_cmp_rows);
        size_t keep = 0;
        j->out.min_id = UINT64_MAX;
        for (size_t i = 0; i < n; i++) {
            if (i && st__chat_cmp_rows(&rows[i], &rows[i - 1]) == 0) {
                j->rc = ST_EINTERNAL; /* a row held twice: the manifest is not what we think */
                break;
            }
            if (j->cutoff && rows[i].timestamp < j->cutoff) {
                st__note_dropped(j, &rows[i]);
                continue;
            }
            if (rows[i].msg_id < j->out.min_id) j->out.min_id = rows[i].msg_id;
            if (rows[i].msg_id > j->out.max_id) j->out.max_id = rows[i].msg_id;
            rows[keep++] = rows[i];
        }
        j->out.rows = (int64_t)keep;
        if (j->rc == ST_OK && keep) {
            st_buf_t file = {0};
            j->rc = st_parquet_encode(rows, keep, j->cc->zstd_level, &file);
            if (j->rc == ST_OK)
                j->rc = st_objstore_put(j->cc->tier.obj, j->key.data, file.data, file.len);
            j->out.size = file.len;
            st_buf_free(&file);
        }
    }
    free(rows);
    for (size_t g = 0; g < gs.n; g++)
        st_parquet_rows_free(&gs.v[g]);
    free(gs.v);
}

static void st__compact_work(uv_work_t *req)
{
    st_tier_background(true); /* SCHED_IDLE while merging (see src/cold/flush.c) */
    st__merge(req->data);
    st_tier_background(false);
}

/* ---- loop side ---- */

static void st__job_free(st_compjob_t *j)
{
    for (size_t i = 0; i < j->nold; i++)
        free(j->keys[i]);
    free(j->keys);
    free(j->seqs);
    free(j->files);
    st_buf_free(&j->key);
    st_buf_free(&j->dropped);
    free(j);
}

/* A user's manifest with its manifest numbers. */
typedef struct {
    st_coldfile_t *files;
    uint64_t *seqs;
    char **keys;
    size_t n, cap;
} st_fman_t;

static int st__collect_f(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_fman_t *m = arg;
    if (klen < 8 || vlen <= sizeof(st_coldfile_t)) return 0;
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 16;
        m->files = st_realloc(m->files, m->cap * sizeof *m->files);
        m->seqs = st_realloc(m->seqs, m->cap * sizeof *m->seqs);
        m->keys = st_realloc(m->keys, m->cap * sizeof *m->keys);
    }
    memcpy(&m->files[m->n], val, sizeof(st_coldfile_t));
    m->seqs[m->n] = st__chat_rd64((const uint8_t *)key + klen - 8);
    m->keys[m->n++] =
        st_strndup((const char *)val + sizeof(st_coldfile_t), vlen - sizeof(st_coldfile_t));
    return 0;
}

static void st__fman_free(st_fman_t *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->seqs);
    free(m->files);
}

/* Plans the user's next merge and records its object ('P'); NULL when there is nothing to do. */
static st_compjob_t *st__begin(st_chatcold_t *cc, st_cuser_t *u)
{
    st_chat_t *c = cc->chat;
    st_store_t *s = c->store;
    uint8_t k[ST__KEY_CAP];
    uint64_t wait = 0;
    st_fman_t m = {0};
    size_t from, to;
    size_t pl = st__chat_ukey(k, 'F', u->user, u->ulen);
    int rc = st_store_range(s, k, pl, NULL, 0, NULL, 0, false, st__collect_f, &m, &wait);
    if (rc != ST_OK || !st__chat_compact_plan(m.files, m.n, cc->compact->limit,
                                              cc->compact->max_bytes, u->flags, &from, &to)) {
        st__fman_free(&m);
        return NULL;
    }
    st_coldstat_t cs;
    if (st__chat_coldstat(c, u->user, u->ulen, &cs, &wait) != ST_OK) {
        st__fman_free(&m);
        return NULL;
    }
    st_compjob_t *j = st_calloc(1, sizeof *j);
    j->cc = cc;
    j->u = u;
    j->t0 = uv_hrtime();
    j->req.data = j;
    j->nold = to - from;
    j->seqs = st_malloc(j->nold * sizeof *j->seqs);
    j->keys = st_malloc(j->nold * sizeof *j->keys);
    j->files = st_malloc(j->nold * sizeof *j->files);
    for (size_t i = 0; i < j->nold; i++) {
        j->seqs[i] = m.seqs[from + i];
        j->files[i] = m.files[from + i];
        j->keys[i] = m.keys[from + i];
        m.keys[from + i] = NULL;
    }
    st__fman_free(&m);
    j->fseq = j->seqs[0];
    j->pseq = cs.next_seq ? cs.next_seq : 1;
    if (cc->retention_us) j->cutoff = st_now_us() - (int64_t)cc->retention_us;
    /* the new key: the first object's time, its manifest number, then the fresh number */
    const char *b = strstr(j->keys[0], "/batch-");
    int64_t ts = b ? strtoll(b + 7, NULL, 10) : 0;
    st__chat_object_key(&j->key, u->user, u->ulen, ts, j->fseq);
    j->key.len -= 8; /* ".parquet" */
    st_buf_printf(&j->key, ".%llu.parquet", (unsigned long long)j->pseq);
    st_buf_appendc(&j->key, 0);
    j->key.len--;
    size_t n = st__chat_ukey(k, 'P', u->user, u->ulen);
    st__chat_be64(k + n, j->pseq);
    rc = st_store_put(s, k, n + 8, j->key.data, j->key.len, &wait);
    cs.next_seq = j->pseq + 1;
    if (rc == ST_OK)
        rc = st_store_put(s, k, st__chat_ukey(k, 'W', u->user, u->ulen) - 1, &cs, sizeof cs, &wait);
    if (rc != ST_OK) {
        st__job_free(j);
        return NULL;
    }
    j->wait = wait;
    return j;
}

/* The swap: one batch. Everything is checked before anything is written. */
static int st__commit(st_chatcold_t *cc, st_compjob_t *j, uint64_t *wait)
{
    st_chat_t *c = cc->chat;
    st_store_t *s = c->store;
    const char *u = j->u->user;
    size_t ul = j->u->ulen;
    uint8_t k[ST__KEY_CAP];
    const void *v;
    size_t vl;
    size_t pn = st__chat_ukey(k, 'P', u, ul);
    st__chat_be64(k + pn, j->pseq);
    int rc = st_store_get(s, k, pn + 8, &v, &vl, wait);
    for (size_t i = 0; rc == ST_OK && i < j->nold; i++) {
        size_t n = st__chat_ukey(k, 'F', u, ul);
        st__chat_be64(k + n, j->seqs[i]);
        rc = st_store_get(s, k, n + 8, &v, &vl, wait);
        size_t kl = strlen(j->keys[i]);
        if (rc == ST_OK && (vl != sizeof(st_coldfile_t) + kl ||
                            memcmp((const char *)v + sizeof(st_coldfile_t), j->keys[i], kl)))
            rc = ST_ENOTFOUND; /* replaced meanwhile (retention) */
    }
    if (rc == ST_ENOTFOUND) return ST_ECONFLICT;
    if (rc != ST_OK) return rc;
    /* rows left out by retention leave the conversations first, while the manifest still
     * holds them (a conversation re-warmed from the cold tier counts them) */
    int64_t dropped = 0;
    for (size_t p = 0; rc == ST_OK && p < j->dropped.len;) {
        uint32_t l;
        int64_t cnt;
        memcpy(&l, j->dropped.data + p, 4);
        const char *conv = j->dropped.data + p + 4;
        memcpy(&cnt, conv + l, 8);
        p += 4 + l + 8;
        dropped += cnt;
        st_conv_t cv;
        bool cold;
        rc = st__chat_conv_load(c, u, ul, conv, l, &cv, &cold, wait);
        if (rc == ST_OK) {
            cv.base_total -= cnt;
            size_t ckl = st__chat_ckey(k, u, ul, conv, l);
            rc = st_store_put(s, k, ckl, &cv, sizeof cv, wait);
        } else if (rc == ST_ENOTFOUND || rc == ST_EPARKED) {
            /* evicted, its footers not in memory: it stays evicted, and its count comes from
             * the footers when it is re-warmed — the merged object's, without these rows */
            rc = ST_OK;
        }
    }
    st__chat_ukey(k, 'P', u, ul);
    st__chat_be64(k + pn, j->pseq);
    if (rc == ST_OK) rc = st_store_del(s, k, pn + 8, wait);
    int64_t old_bytes = 0;
    for (size_t i = 0; rc == ST_OK && i < j->nold; i++) {
        size_t n = st__chat_ukey(k, 'F', u, ul);
        st__chat_be64(k + n, j->seqs[i]);
        old_bytes += (int64_t)j->files[i].size;
        rc = st_store_del(s, k, n + 8, wait);
        /* 'D' numbers stay unique: the first old object's number goes on with the new one, so
         * its deletion is recorded under the fresh number (no 'F' ever has it) */
        uint64_t dseq = i ? j->seqs[i] : j->pseq;
        if (rc == ST_OK) rc = st__chat_doom(c, u, ul, dseq, j->keys[i], wait);
    }
    if (rc == ST_OK && j->out.rows) {
        st_buf_t val = {0};
        st_buf_append(&val, &j->out, sizeof j->out);
        st_buf_append(&val, j->key.data, j->key.len);
        size_t n = st__chat_ukey(k, 'F', u, ul);
        st__chat_be64(k + n, j->fseq);
        rc = st_store_put(s, k, n + 8, val.data, val.len, wait);
        st_buf_free(&val);
    }
    st_coldstat_t cs;
    if (rc == ST_OK) rc = st__chat_coldstat(c, u, ul, &cs, wait);
    if (rc == ST_OK) {
        cs.rows -= dropped;
        cs.bytes += (int64_t)j->out.size - old_bytes;
        cs.files += (j->out.rows ? 1 : 0) - (int64_t)j->nold;
        rc = st_store_put(s, k, st__chat_ukey(k, 'W', u, ul) - 1, &cs, sizeof cs, wait);
    }
    if (rc == ST_OK && dropped) rc = st__chat_refresh_totals(c, u, ul, wait);
    if (rc == ST_OK && dropped) st_metric_add(cc->m_retained, (double)dropped);
    if (rc == ST_OK) st_metric_add(cc->compact->m_dropped, (double)dropped);
    return rc;
}

static void st__count_pending(st_compact_t *cp)
{
    st_metric_set(cp->m_pending, (double)(cp->queue.count + (cp->job ? 1 : 0)));
}

static void st__enqueue(st_chatcold_t *cc, const char *u, size_t ul, int flags)
{
    st_compact_t *cp = cc->compact;
    st_cuser_t *q = (st_cuser_t *)st_map_get(&cp->queue, u, ul);
    if (q) {
        q->flags |= flags;
        return;
    }
    if (cp->job && cp->job->u->ulen == ul && memcmp(cp->job->u->user, u, ul) == 0) {
        cp->job->u->flags |= flags << 4; /* noted for when it comes back */
        return;
    }
    q = st_calloc(1, sizeof *q);
    memcpy(q->user, u, ul);
    q->ulen = ul;
    q->flags = flags;
    q->node.key = q->user;
    q->node.klen = ul;
    st_map_insert(&cp->queue, &q->node);
    st__count_pending(cp);
}

/* What a user whose merge is back is queued again for: a major compaction goes on, merge after
 * merge, until its plan finds nothing; what was asked for meanwhile is added. */
static int st__again(const st_cuser_t *u)
{
    return (u->flags & ST__MAJOR) | ((u->flags >> 4) & ~ST__EXPIRE);
}

static void st__done(uv_work_t *req, int status)
{
    st_compjob_t *j = req->data;
    st_chatcold_t *cc = j->cc;
    st_compact_t *cp = cc->compact;
    st_cuser_t *u = j->u;
    cp->job = NULL;
    if (cc->tier.stopping || status == UV_ECANCELED) { /* its 'P' record waits for start-up */
        free(u);
        st__job_free(j);
        st__chat_cold_maybe_free(cc);
        return;
    }
    uint64_t wait = 0;
    int rc = j->rc;
    if (rc == ST_OK) rc = st__commit(cc, j, &wait);
    if (rc != ST_OK) {
        st_metric_add(cp->m_err, 1);
        /* what the worker may have written is an orphan now (its 'P' says so; if that record
         * never became durable, the object is doomed here) */
        uint8_t k[ST__KEY_CAP];
        size_t n = st__chat_ukey(k, 'P', u->user, u->ulen);
        st__chat_be64(k + n, j->pseq);
        const void *v;
        size_t vl;
        if (st_store_get(cc->chat->store, k, n + 8, &v, &vl, &wait) == ST_ENOTFOUND)
            st__chat_doom(cc->chat, u->user, u->ulen, j->pseq, j->key.data, &wait);
        st__chat_orphans(cc->chat, u->user, u->ulen, &wait);
        st_warn("cold: compaction of %.*s failed (%s)", (int)u->ulen, u->user, st_strerror(rc));
        /* the manifest changed meanwhile (retention): planned again on the new one, so an asked
         * for major compaction is not given up */
        if (rc == ST_ECONFLICT) st__enqueue(cc, u->user, u->ulen, st__again(u));
        free(u);
    } else {
        st_metric_add(cp->m_ok, 1);
        st_metric_add(cp->m_rows, (double)j->read_rows);
        st_metric_add(cp->m_bytes, (double)j->out.size);
        st_info("cold: compacted %zu objects of %.*s into %s (%lld rows, %llu bytes)", j->nold,
                (int)u->ulen, u->user, j->out.rows ? j->key.data : "nothing",
                (long long)j->out.rows, (unsigned long long)j->out.size);
        st__enqueue(cc, u->user, u->ulen, st__again(u)); /* more may be due */
        free(u);
    }
    uint64_t took_ms = (uv_hrtime() - j->t0) / 1000000;
    cp->resume_ms = uv_now(cc->tier.loop) + 2 * took_ms;
    st__job_free(j);
    st__count_pending(cp);
}

static void st__queue(st_chatcold_t *cc, st_compjob_t *j)
{
    j->queued = true;
    if (uv_queue_work(cc->tier.loop, &j->req, st__compact_work, st__done) != 0) {
        j->rc = ST_EIO;
        st__done(&j->req, 0);
    }
}

void st__chat_compact_durable(st_chatcold_t *cc, uint64_t id)
{
    st_compjob_t *j = cc->compact ? cc->compact->job : NULL;
    if (j && !j->queued && j->wait <= id) st__queue(cc, j);
}

static int st__census(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    double *t = arg; /* objects, bytes: small, then large */
    st_coldfile_t f;
    (void)key, (void)klen;
    if (vlen <= sizeof f) return 0;
    memcpy(&f, val, sizeof f);
    int large = !st__small(&f);
    t[large * 2] += 1;
    t[large * 2 + 1] += (double)f.size;
    return 0;
}

/* The object store's requests (counted on the workers), and every 10 s the objects and bytes
 * of every manifest, small (compacted further) and large. */
static void st__publish(st_chatcold_t *cc)
{
    st_compact_t *cp = cc->compact;
    for (int v = 0; v < 4; v++)
        st_metric_set(cp->m_s3[v], (double)st_objstore_requests(v));
    if (uv_now(cc->tier.loop) < cp->census_ms) return;
    cp->census_ms = uv_now(cc->tier.loop) + 10000;
    double t[4] = {0};
    uint64_t wait = 0;
    char pre = 'F';
    if (st_store_scan(cc->chat->store, &pre, 1, st__census, t, &wait) != ST_OK) return;
    for (int i = 0; i < 2; i++) {
        st_metric_set(cp->m_objects[i], t[i * 2]);
        st_metric_set(cp->m_obytes[i], t[i * 2 + 1]);
    }
}

void st__chat_compact_pump(st_chatcold_t *cc)
{
    st_compact_t *cp = cc->compact;
    if (!cp || cc->tier.stopping) return;
    st__publish(cc);
    if (cp->job) {
        st__chat_compact_durable(cc, st_store_durable_id(cc->chat->store));
        return;
    }
    /* beside flushes, never holding one up; none while the hot store is filling up */
    if (cc->tier.urgent || uv_now(cc->tier.loop) < cp->resume_ms || st_coldshare_held()) return;
    size_t it;
    st_map_node_t *n;
    while (!cp->job && (n = st_map_first(&cp->queue, &it)) != NULL) {
        st_cuser_t *u = (st_cuser_t *)n;
        st_map_remove(&cp->queue, n);
        st_compjob_t *j = st__begin(cc, u);
        if (!j) {
            free(u);
            continue;
        }
        cp->job = j;
        if (j->wait <= st_store_durable_id(cc->chat->store)) st__queue(cc, j);
    }
    st__count_pending(cp);
}

bool st__chat_compacting(st_chatcold_t *cc, const char *u, size_t ul, uint64_t pseq)
{
    st_compjob_t *j = cc && cc->compact ? cc->compact->job : NULL;
    return j && j->pseq == pseq && j->u->ulen == ul && memcmp(j->u->user, u, ul) == 0;
}

void st__chat_compact_note(st_chatcold_t *cc, const char *u, size_t ul, bool expire)
{
    if (!cc || !cc->compact) return;
    if (!expire) {
        st_coldstat_t cs;
        uint64_t wait = 0;
        if (st__chat_coldstat(cc->chat, u, ul, &cs, &wait) != ST_OK ||
            cs.files <= (int64_t)cc->compact->limit)
            return;
    }
    st__enqueue(cc, u, ul, expire ? ST__EXPIRE : ST__AUTO);
}

static int st__collect_w(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_buf_t *b = arg;
    (void)val, (void)vlen;
    if (klen < 2 || klen - 1 > ST_NAME_MAX) return 0;
    st_buf_appendc(b, (char)(uint8_t)(klen - 1));
    st_buf_append(b, (const char *)key + 1, klen - 1);
    return 0;
}

size_t st_chat_compact(st_chat_t *c, const char *user, size_t ulen)
{
    st_chatcold_t *cc = c->cold;
    if (!cc || !cc->compact) return 0;
    if (user) {
        st__enqueue(cc, user, ulen, ST__MAJOR);
        st__chat_compact_pump(cc);
        return 1;
    }
    st_buf_t names = {0};
    uint64_t wait = 0;
    char pre = 'W';
    st_store_scan(c->store, &pre, 1, st__collect_w, &names, &wait);
    size_t n = 0;
    for (size_t i = 0; i < names.len; n++) {
        size_t ul = (uint8_t)names.data[i];
        st__enqueue(cc, names.data + i + 1, ul, ST__MAJOR);
        i += 1 + ul;
    }
    st_buf_free(&names);
    st__chat_compact_pump(cc);
    return n;
}

void st__chat_compact_init(st_chatcold_t *cc, size_t limit, uint64_t max_bytes)
{
    st_compact_t *cp = st_calloc(1, sizeof *cp);
    st_map_init(&cp->queue);
    cp->limit = limit ? limit : 8;
    cp->max_bytes = max_bytes ? max_bytes : 256ull << 20;
    const char *h = "Cold-tier compactions (small objects merged)";
    cp->m_ok = st_metrics_counter("strata_compactions_total", h, "result=\"ok\"");
    cp->m_err = st_metrics_counter("strata_compactions_total", h, "result=\"error\"");
    cp->m_rows = st_metrics_counter("strata_compaction_rows_rewritten_total",
                                    "Rows read and rewritten by compactions", "");
    cp->m_bytes = st_metrics_counter("strata_compaction_bytes_written_total",
                                     "Parquet bytes written by compactions", "");
    cp->m_pending = st_metrics_gauge("strata_compactions_pending",
                                     "Users whose compaction is queued or running", "");
    cp->m_dropped = st_metrics_counter("strata_compaction_expired_rows_total",
                                       "Expired rows left out by compactions (retention)", "");
    static const char *verbs[4] = {"verb=\"GET\"", "verb=\"PUT\"", "verb=\"DELETE\"",
                                   "verb=\"LIST\""};
    static const char *tiers[2] = {"tier=\"small\"", "tier=\"large\""};
    for (int i = 0; i < 2; i++) {
        cp->m_objects[i] =
            st_metrics_gauge("strata_cold_objects",
                             "Cold objects (small: merged further; counted every 10 s)", tiers[i]);
        cp->m_obytes[i] = st_metrics_gauge("strata_cold_bytes", "Bytes of cold objects", tiers[i]);
    }
    for (int v = 0; v < 4; v++)
        cp->m_s3[v] = st_metrics_counter("strata_objstore_requests_total",
                                         "Object store requests (S3 or local)", verbs[v]);
    cc->compact = cp;
}

void st__chat_compact_stop(st_chatcold_t *cc)
{
    st_compact_t *cp = cc->compact;
    if (cp && cp->job && !cp->job->queued) { /* its 'P' record waits for start-up */
        free(cp->job->u);
        st__job_free(cp->job);
        cp->job = NULL;
    }
}

void st__chat_compact_free(st_chatcold_t *cc)
{
    st_compact_t *cp = cc->compact;
    if (!cp) return;
    size_t it;
    st_map_node_t *n;
    while ((n = st_map_first(&cp->queue, &it)) != NULL) {
        st_map_remove(&cp->queue, n);
        free(n);
    }
    st_map_free(&cp->queue);
    free(cp);
    cc->compact = NULL;
}

bool st__chat_compact_busy(st_chatcold_t *cc)
{
    return cc->compact && cc->compact->job;
}
