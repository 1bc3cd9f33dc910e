/* SPDX-License-Identifier: MIT */
/*
 * fastappend: which of this writer's manifests a commit's manifest list names — Iceberg's fast
 * append and manifest merge, so that a commit's cost and bytes grow with its change, not with
 * the table (issues 45, 48). A commit carries the parent snapshot's manifests over unchanged,
 * writes one manifest of the files it adds, and rewrites only the manifests naming a file it
 * removes (compaction, fold, retention, a deleted conversation, an erasure), with their surviving
 * entries as EXISTING: no commit writes a DELETED entry, so no manifest still names what went
 * (SPEC v5 §5.1 asks it of an erasure; one way for every remove keeps the rule simple), and the
 * rewritten ones' counts, sequence numbers and partition summaries are computed afresh.
 *
 * Which manifest names a file is remembered beside its provenance (tables.c: the file's man);
 * a removed file whose manifest is not known (provenance from before manifests were remembered)
 * makes the commit read all of this writer's manifests once, and learn. When the parent's
 * manifests of ours do not hold exactly the files strata last committed (their counts in the
 * list differ, or one has a name from before writer tokens), the commit writes one manifest of
 * every live file instead, as strata did before: the table is healed, not patched (its
 * already-committed files' column metrics carried over from the parent's manifests by path).
 *
 * Merging: past ST_TABLES_MANS_MAX manifests of ours, the smallest ones (below ST__MERGE_TARGET
 * bytes, as many as fit in it together) become one.
 *
 * On a worker (object storage blocks).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* A manifest this large (bytes) is never merged again. Iceberg's commit.manifest.target-size-bytes
 * is 8 MiB, but its writers' entries carry statistics of every column (about a KiB each);
 * strata's carried none and deflated to about 8 bytes (1 MiB: about 120,000 entries). Since
 * Session 23 they carry counts of every column and bounds of the few numeric ones (tables/
 * metrics.c), so 1 MiB holds fewer entries (not measured yet: more merges, each still bounded).
 * Larger targets would mean any remove that touches a manifest rewrites that many entries;
 * merging only smaller ones keeps a merge's cost bounded whatever the table's size. */
#define ST__MERGE_TARGET ((int64_t)1 << 20)

static void st__fa_man_free(st_tman_t *m)
{
    free((char *)m->mf.path);
    free((char *)m->mf.lower);
    free((char *)m->mf.upper);
    free(m->key);
    st_buf_free(&m->bytes);
}

void st_tmans_free(st_tmans_t *v)
{
    for (size_t i = 0; i < v->n; i++)
        st__fa_man_free(&v->v[i]);
    st_vec_free(v);
}

typedef struct {
    const st_tplan_in_t *in;
    st_tmans_t *out;
    uint32_t *man;           /* [live->n]: 1 + the index in out of the manifest naming the file */
    int k;                   /* the next manifest's number */
    st_tfiles_t *moved;      /* a delta's files outside live in manifests it writes (owned) */
    st_tstrs_t removed;      /* a delta's: the keys of prev's files not live (borrowed, sorted) */
    int64_t nadded;          /* a delta's: the live files no snapshot has yet */
    st_tmetrics_cols_t cols; /* the table's columns with metrics (metrics.c) */
    st_buf_t mx;             /* the new files' metrics, which their entries borrow (owned) */
} st__plan_t;

static const char *st__fa_base(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

static int st__fa_uri_cmp(const void *uri, const void *f)
{
    return strcmp(uri, ((const st_tfile_t *)f)->uri);
}

/* The live file of uri: live is sorted by key, and every URI is one root + its key. A manifest
 * lists its files in that order (each run of a merged one too), so the one after the last found
 * (*hint) is tried first. */
static const st_tfile_t *st__fa_live(const st_tfiles_t *live, const char *uri, size_t *hint)
{
    if (*hint < live->n && strcmp(live->v[*hint].uri, uri) == 0) return &live->v[(*hint)++];
    const st_tfile_t *f =
        live->n ? bsearch(uri, live->v, live->n, sizeof *live->v, st__fa_uri_cmp) : NULL;
    if (f) *hint = (size_t)(f - live->v) + 1;
    return f;
}

static int st__fa_bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* The key of a manifest in the tables' store, or NULL (another store's). */
static const char *st__fa_key(const st_tplan_in_t *in, const char *uri)
{
    size_t n = strlen(in->upfx);
    return strncmp(uri, in->upfx, n) == 0 ? uri + n : NULL;
}

/* The key of a data file's URI in the cold store (a delta's), or NULL (another store's). */
static const char *st__fa_ckey(const st_tplan_in_t *in, const char *uri)
{
    size_t n = in->croot ? strlen(in->croot) : 0;
    return n && strncmp(uri, in->croot, n) == 0 ? uri + n : NULL;
}

/* A delta's entry e, not live, now in manifest man of out: remembered for its record. */
static void st__fa_moved(st__plan_t *p, const st_ice_file_t *e, uint32_t man)
{
    const char *key = st__fa_ckey(p->in, e->path);
    if (!key || !e->part) return;
    st_tfile_t m = {.key = st_strndup(key, strlen(key)),
                    .part = st_strndup(e->part, e->part_len),
                    .rows = e->records,
                    .size = e->size,
                    .snap = e->snapshot_id,
                    .seq = e->data_seq,
                    .man = man};
    st_vec_push(p->moved, m);
}

/* Whether an entry of a manifest of ours (its URI) stays: it is live (the whole set), or, for a
 * delta, not one of the removed files. */
static bool st__fa_stays(const st__plan_t *p, const char *uri, size_t *hint)
{
    if (!p->in->croot) return st__fa_live(p->in->live, uri, hint) != NULL;
    const char *key = st__fa_ckey(p->in, uri);
    return !key || !p->removed.n ||
           !bsearch(&key, p->removed.v, p->removed.n, sizeof *p->removed.v, st_tstrs_cmp);
}

/* Writes f[0..n) (n > 0) as this commit's next manifest (an entry of the new snapshot ADDED, any
 * other EXISTING), its line's counts, sequence numbers and partition summary computed from them,
 * and points each live file it names at it. */
static int st__fa_write(st__plan_t *p, st_ice_file_t *f, size_t n)
{
    const st_tplan_in_t *in = p->in;
    st_buf_t k = {0}, u = {0};
    st_buf_printf(&k, "%s%d.avro", in->mpfx, p->k++);
    st_buf_appendc(&k, 0);
    st_buf_printf(&u, "%s%s", in->upfx, k.data);
    st_buf_appendc(&u, 0);
    st_tman_t m = {.key = st_buf_steal(&k, NULL)};
    m.mf = (st_ice_mfile_t){.path = st_buf_steal(&u, NULL),
                            .content = ST_ICE_DATA,
                            .seq = in->seq,
                            .min_seq = in->seq,
                            .added_snapshot_id = in->id};
    const char *lo = NULL, *hi = NULL;
    size_t lol = 0, hil = 0, hint = 0;
    for (size_t i = 0; i < n; i++) {
        bool added = f[i].snapshot_id == in->id;
        f[i].status = added ? ST_ICE_ADDED : ST_ICE_EXISTING;
        f[i].content = ST_ICE_DATA;
        if (f[i].data_seq < m.mf.min_seq) m.mf.min_seq = f[i].data_seq;
        if (added) {
            m.mf.added_files++;
            m.mf.added_rows += f[i].records;
        } else {
            m.mf.existing_files++;
            m.mf.existing_rows += f[i].records;
        }
        if (f[i].part && (!lo || st__fa_bytes_cmp(f[i].part, f[i].part_len, lo, lol) < 0))
            lo = f[i].part, lol = f[i].part_len;
        if (f[i].part && (!hi || st__fa_bytes_cmp(f[i].part, f[i].part_len, hi, hil) > 0))
            hi = f[i].part, hil = f[i].part_len;
        const st_tfile_t *lf = st__fa_live(in->live, f[i].path, &hint);
        if (lf)
            p->man[lf - in->live->v] = (uint32_t)p->out->n + 1;
        else
            st__fa_moved(p, &f[i], (uint32_t)p->out->n + 1);
    }
    m.mf.lower = lo ? st_strndup(lo, lol) : NULL;
    m.mf.lower_len = lol;
    m.mf.upper = hi ? st_strndup(hi, hil) : NULL;
    m.mf.upper_len = hil;
    int rc = st_ice_manifest(&m.bytes, &in->d->ice, ST_ICE_DATA, f, n, true);
    m.mf.length = (int64_t)m.bytes.len;
    st_vec_push(p->out, m);
    return rc;
}

/* The entries of a manifest of ours (its line mf; bytes when this commit wrote it, else read),
 * their inherited snapshot ids and sequence numbers filled in from mf (Iceberg's inheritance),
 * appended to *e (owned strings). */
static int st__fa_entries(const st__plan_t *p, const st_ice_mfile_t *mf, const st_buf_t *bytes,
                          st_ice_entries_t *e)
{
    const char *key = st__fa_key(p->in, mf->path);
    st_buf_t b = {0};
    st_ice_entries_t got = {0};
    int rc = bytes->len ? ST_OK
             : key      ? st_objstore_read(p->in->ms, key, ST_TABLES_META_MAX, &b)
                        : ST_EINVAL;
    if (rc == ST_OK)
        rc = bytes->len ? st_ice_manifest_read(&got, bytes->data, bytes->len)
                        : st_ice_manifest_read(&got, b.data, b.len);
    if (rc == ST_OK && got.content != ST_ICE_DATA) rc = ST_EINVAL;
    if (rc != ST_OK)
        st_error("tables: %s: the manifest %s cannot be read (%s)", p->in->d->ice.name, mf->path,
                 st_strerror(rc));
    if (rc == ST_OK) st_vec_reserve(e, e->n + got.n);
    for (size_t i = 0; rc == ST_OK && i < got.n; i++) {
        st_ice_file_t *f = &got.v[i];
        if (f->snapshot_id < 0) f->snapshot_id = mf->added_snapshot_id;
        if (f->data_seq < 0) f->data_seq = mf->seq;
        if (f->file_seq < 0) f->file_seq = mf->seq;
        e->v[e->n++] = *f;
        f->path = NULL;
        f->part = NULL;
        f->metrics = NULL;
    }
    st_ice_entries_free(&got);
    st_buf_free(&b);
    return rc;
}

/* A heal's (all: f[i] is live->v[i]) already-committed files' metrics, carried over by path from
 * the parent's manifests of ours into p->mx (off[i]: where f[i]'s start): the one manifest of
 * every file must not lose the bounds engines prune by. One manifest's entries are held at a
 * time, and only the metrics of live files kept, so memory stays that of the manifest written. A
 * manifest that cannot be read (logged), or an entry without metrics: those files keep none. */
static void st__fa_old_metrics(st__plan_t *p, st_ice_file_t *f, size_t *off)
{
    const st_tplan_in_t *in = p->in;
    for (size_t m = 0; m < in->mine->n; m++) {
        st_ice_entries_t e = {0};
        if (!st__fa_key(in, in->mine->v[m].path) ||
            st__fa_entries(p, &in->mine->v[m], &(st_buf_t){0}, &e) != ST_OK) {
            st_ice_entries_free(&e);
            continue;
        }
        size_t hint = 0;
        for (size_t i = 0; i < e.n; i++) {
            const st_ice_file_t *x = &e.v[i];
            if (x->status == ST_ICE_DELETED || !x->metrics_len) continue;
            const st_tfile_t *lf = st__fa_live(in->live, x->path, &hint);
            if (!lf || lf->snap == 0) continue; /* gone, or new (its footer is read) */
            size_t li = (size_t)(lf - in->live->v);
            if (f[li].metrics_len) continue; /* named twice: the first one's */
            off[li] = p->mx.len;
            f[li].metrics_len = x->metrics_len;
            st_buf_append(&p->mx, x->metrics, x->metrics_len);
        }
        st_ice_entries_free(&e);
    }
}

/* The live files new (snap 0) or all as entries, into f (borrowing their strings). A new file's
 * metrics come from its file record's stats (metrics.c; its footer is read only for a record
 * without them), an already-committed one's (all: the heal's one
 * manifest of every file) carried over from the parent's manifests; both into p->mx. */
static size_t st__fa_from_live(st__plan_t *p, bool all, st_ice_file_t *f)
{
    const st_tplan_in_t *in = p->in;
    size_t n = 0, nnew = 0, nread = 0, *at = st_calloc(in->live->n + 1, sizeof *at);
    size_t *rd = st_calloc(in->live->n + 1, sizeof *rd); /* the new files read: their index in at */
    const char **keys = st_calloc(in->live->n + 1, sizeof *keys);
    int64_t *sizes = st_calloc(in->live->n + 1, sizeof *sizes);
    st_buf_t *mx = st_calloc(in->live->n + 1, sizeof *mx);
    st_buf_reset(&p->mx);
    for (size_t i = 0; i < in->live->n; i++) {
        const st_tfile_t *t = &in->live->v[i];
        bool old = t->snap != 0;
        if (old && !all) continue;
        f[n++] = (st_ice_file_t){.snapshot_id = old ? t->snap : in->id,
                                 .data_seq = old ? t->seq : in->seq,
                                 .file_seq = old ? t->seq : in->seq,
                                 .path = t->uri,
                                 .part = t->part,
                                 .part_len = strlen(t->part),
                                 .records = t->rows,
                                 .size = t->size};
        if (!old && in->cold) {
            at[nnew] = n - 1; /* the new files' entries */
            /* from the stats its file record carries (colstats.c); a record from before them,
             * or stats that do not decode: its footer is read, as before */
            if (!t->stats_len ||
                st_tables_stats_metrics(&p->cols, t->stats, t->stats_len, &mx[nnew]) != ST_OK) {
                st_buf_reset(&mx[nnew]);
                rd[nread] = nnew;
                keys[nread] = t->key;
                sizes[nread++] = t->size;
            }
            nnew++;
        }
    }
    size_t *off =
        st_calloc(n + 1, sizeof *off); /* per entry, into p->mx, which moves as it grows */
    if (all) st__fa_old_metrics(p, f, off);
    if (nread) {
        st_buf_t *got = st_calloc(nread, sizeof *got);
        st_tables_files_metrics(in->cold, &p->cols, keys, sizes, nread, got);
        for (size_t i = 0; i < nread; i++)
            mx[rd[i]] = got[i]; /* moved */
        free(got);
    }
    for (size_t i = 0; i < nnew; i++) {
        off[at[i]] = p->mx.len;
        f[at[i]].metrics_len = mx[i].len;
        st_buf_append(&p->mx, mx[i].data, mx[i].len);
        st_buf_free(&mx[i]);
    }
    for (size_t i = 0; i < n; i++)
        if (f[i].metrics_len) f[i].metrics = (const uint8_t *)p->mx.data + off[i];
    free(mx);
    free(off);
    free(at);
    free(rd);
    free(keys);
    free(sizes);
    return n;
}

/* Carries the parent's manifest mf over unchanged. */
static void st__fa_carry(st__plan_t *p, const st_ice_mfile_t *mf)
{
    st_tman_t m = {.mf = *mf};
    const char *key = st__fa_key(p->in, mf->path);
    m.mf.path = st_strndup(mf->path, strlen(mf->path));
    m.mf.lower = mf->lower ? st_strndup(mf->lower, mf->lower_len) : NULL;
    m.mf.upper = mf->upper ? st_strndup(mf->upper, mf->upper_len) : NULL;
    m.key = key ? st_strndup(key, strlen(key)) : NULL;
    st_vec_push(p->out, m);
}

/* One of the parent's manifests of ours, read (it names a removed file, or which does is not
 * known): carried over when every entry is still live (its files learn their manifest), else
 * rewritten with the live ones (none: dropped). */
static int st__fa_reread(st__plan_t *p, const st_ice_mfile_t *mf)
{
    st_ice_entries_t e = {0};
    int rc = st__fa_entries(p, mf, &(st_buf_t){0}, &e);
    size_t keep = 0, all = e.n, hint = 0;
    for (size_t i = 0; rc == ST_OK && i < all; i++) {
        if (e.v[i].status == ST_ICE_DELETED || !st__fa_stays(p, e.v[i].path, &hint)) {
            free((char *)e.v[i].path);
            free((char *)e.v[i].part);
            free((void *)e.v[i].metrics);
            continue;
        }
        e.v[keep++] = e.v[i];
    }
    if (rc == ST_OK) e.n = keep; /* the rest freed or moved */
    if (rc == ST_OK && keep == all && keep > 0) {
        hint = 0;
        for (size_t i = 0; i < keep; i++) {
            const st_tfile_t *lf = st__fa_live(p->in->live, e.v[i].path, &hint);
            if (lf) p->man[lf - p->in->live->v] = (uint32_t)p->out->n + 1;
        }
        st__fa_carry(p, mf);
    } else if (rc == ST_OK && keep > 0) {
        rc = st__fa_write(p, e.v, keep);
    }
    st_ice_entries_free(&e);
    return rc;
}

static int st__fa_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The parent's manifests of ours, carried over or rewritten: those naming a removed file are
 * read (all of them when one such file's manifest is not known). */
static int st__fa_parent(st__plan_t *p)
{
    const st_tplan_in_t *in = p->in;
    st_tstrs_t hit = {0}; /* names of manifests naming a removed file (borrowed), sorted */
    bool locate = false;
    for (size_t i = 0, j = 0; i < in->prev->n; i++) { /* both sorted by key: one walk */
        const st_tfile_t *f = &in->prev->v[i];
        int c = 1;
        while (j < in->live->n && (c = strcmp(in->live->v[j].key, f->key)) < 0)
            j++;
        if (c == 0) continue; /* still live */
        st_vec_push(&p->removed, f->key);
        if (f->man == 0 || f->man > in->prev_mans->n)
            locate = true;
        else
            st_vec_push(&hit, in->prev_mans->v[f->man - 1]);
    }
    if (hit.n > 1) qsort(hit.v, hit.n, sizeof *hit.v, st__fa_name_cmp);
    size_t listed = 0; /* the remembered manifests the parent lists: all, or read them all */
    for (size_t i = 0; !locate && i < in->mine->n; i++) {
        const char *b = st__fa_base(in->mine->v[i].path);
        listed += hit.n && bsearch(&b, hit.v, hit.n, sizeof *hit.v, st__fa_name_cmp) != NULL;
    }
    for (size_t i = 1; i < hit.n; i++) /* distinct names */
        listed += strcmp(hit.v[i], hit.v[i - 1]) == 0;
    locate |= listed != hit.n;
    size_t first = p->out->n;
    int rc = ST_OK;
    for (size_t i = 0; rc == ST_OK && i < in->mine->n; i++) {
        const st_ice_mfile_t *mf = &in->mine->v[i];
        const char *b = st__fa_base(mf->path);
        if (locate || (hit.n && bsearch(&b, hit.v, hit.n, sizeof *hit.v, st__fa_name_cmp)))
            rc = st__fa_reread(p, mf);
        else
            st__fa_carry(p, mf);
    }
    st_vec_free(&hit);
    /* the files of manifests carried without reading: by the name prev knew them under, each
     * name looked up once */
    typedef struct {
        const char *name;
        uint32_t at;
    } st__named_t;
    ST_VEC(st__named_t) by = {0};
    for (size_t j = first; j < p->out->n; j++)
        if (!p->out->v[j].bytes.len)
            st_vec_push(&by, ((st__named_t){st__fa_base(p->out->v[j].mf.path), (uint32_t)j + 1}));
    if (by.n > 1) qsort(by.v, by.n, sizeof *by.v, st__fa_name_cmp);
    uint32_t *to = st_calloc(in->prev_mans->n + 1, sizeof *to); /* prev's man -> out's */
    for (size_t j = 0; by.n && j < in->prev_mans->n; j++) {
        const st__named_t *at =
            bsearch(&in->prev_mans->v[j], by.v, by.n, sizeof *by.v, st__fa_name_cmp);
        to[j + 1] = at ? at->at : 0;
    }
    for (size_t i = 0; rc == ST_OK && by.n && i < in->live->n; i++) {
        const st_tfile_t *f = &in->live->v[i];
        if (!p->man[i] && f->snap != 0 && f->man <= in->prev_mans->n) p->man[i] = to[f->man];
    }
    free(to);
    st_vec_free(&by);
    return rc;
}

static int st__fa_len_cmp(const void *a, const void *b)
{
    int64_t x = (*(st_tman_t *const *)a)->mf.length, y = (*(st_tman_t *const *)b)->mf.length;
    return (x > y) - (x < y);
}

/* Past ST_TABLES_MANS_MAX manifests: the smallest ones, as many as fit in ST__MERGE_TARGET
 * together (at least two), become one (Iceberg's manifest merge). */
static int st__fa_merge(st__plan_t *p)
{
    st_tmans_t *out = p->out;
    if (out->n <= ST_TABLES_MANS_MAX) return ST_OK;
    st_tman_t **small = st_calloc(out->n, sizeof *small);
    size_t ns = 0, take = 0;
    for (size_t i = 0; i < out->n; i++)
        if (out->v[i].mf.length < ST__MERGE_TARGET && (out->v[i].bytes.len || out->v[i].key))
            small[ns++] = &out->v[i];
    qsort(small, ns, sizeof *small, st__fa_len_cmp);
    for (int64_t sum = 0; take < ns && sum + small[take]->mf.length <= ST__MERGE_TARGET; take++)
        sum += small[take]->mf.length;
    st_ice_entries_t e = {0};
    int rc = ST_OK;
    bool *gone = st_calloc(out->n, sizeof *gone);
    for (size_t i = 0; take >= 2 && rc == ST_OK && i < take; i++) {
        rc = st__fa_entries(p, &small[i]->mf, &small[i]->bytes, &e);
        gone[small[i] - out->v] = true;
    }
    free(small);
    if (take < 2 || rc != ST_OK) {
        st_ice_entries_free(&e);
        free(gone);
        return rc;
    }
    /* the manifests left keep their order; the merged one comes last */
    uint32_t *at = st_calloc(out->n + 1, sizeof *at);
    size_t n = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (gone[i]) {
            st__fa_man_free(&out->v[i]);
            continue;
        }
        at[i + 1] = (uint32_t)n + 1;
        out->v[n++] = out->v[i];
    }
    out->n = n;
    for (size_t i = 0; i < p->in->live->n; i++)
        p->man[i] = p->man[i] ? at[p->man[i]] : 0; /* a merged one's files: set by the write */
    size_t keep = 0; /* moved files of a merged manifest: moved again by the write */
    for (size_t i = 0; i < p->moved->n; i++) {
        st_tfile_t *m = &p->moved->v[i];
        m->man = at[m->man];
        if (m->man) {
            p->moved->v[keep++] = *m;
            continue;
        }
        free(m->key);
        free(m->part);
    }
    p->moved->n = keep;
    rc = st__fa_write(p, e.v, e.n);
    st_info("tables: %s: %zu manifests merged into one (%zu entries)", p->in->d->ice.name, take,
            e.n);
    st_ice_entries_free(&e);
    free(gone);
    free(at);
    return rc;
}

/* The files this writer's manifests in out name. */
static int64_t st__fa_named(const st_tmans_t *out)
{
    int64_t named = 0;
    for (size_t i = 0; i < out->n; i++)
        named += (int64_t)out->v[i].mf.added_files + out->v[i].mf.existing_files;
    return named;
}

int st_tables_plan(const st_tplan_in_t *in, st_tmans_t *out, st_tstrs_t *names, uint32_t *man,
                   st_tfiles_t *moved)
{
    memset(out, 0, sizeof *out);
    memset(names, 0, sizeof *names);
    memset(moved, 0, sizeof *moved);
    memset(man, 0, in->live->n * sizeof *man);
    st__plan_t p = {.in = in, .out = out, .man = man, .moved = moved};
    if (in->cold) st_tables_metrics_cols(in->d, &p.cols);
    /* heal: the parent's manifests of ours hold exactly the files last committed, or are replaced
     * by one of every live file (a delta cannot know that: its files are the changed owners') */
    int64_t held = 0;
    bool whole = false;
    for (size_t i = 0; i < in->mine->n; i++) {
        const st_ice_mfile_t *mf = &in->mine->v[i];
        held += (int64_t)mf->added_files + mf->existing_files;
        whole |= !st_tier_key_incarnation(st__fa_base(mf->path)) || !st__fa_key(in, mf->path);
    }
    if (!in->croot) whole |= held != (int64_t)in->prev->n;
    if (whole && in->croot) return ST_TABLES_WHOLE;
    if (whole && in->prev->n)
        st_warn("tables: %s: the parent's manifests of this writer hold %lld files, %zu were "
                "committed: one manifest of every live file replaces them",
                in->d->ice.name, (long long)held, in->prev->n);
    for (size_t i = 0; i < in->live->n; i++)
        p.nadded += in->live->v[i].snap == 0;
    st_ice_file_t *f = st_calloc(in->live->n + 1, sizeof *f);
    int rc = whole ? ST_OK : st__fa_parent(&p);
    size_t n = rc == ST_OK ? st__fa_from_live(&p, whole, f) : 0;
    if (n) rc = st__fa_write(&p, f, n);
    /* what the manifests must name: the live set, or for a delta what the parent's held less the
     * removed files plus the added ones */
    int64_t want = in->croot ? held - (int64_t)p.removed.n + p.nadded : (int64_t)in->live->n;
    if (rc == ST_OK && !whole && st__fa_named(out) != want) {
        /* a remembered manifest was wrong (a removed file still named): heal */
        st_warn("tables: %s: this writer's manifests would name %lld files, %lld are live: %s",
                in->d->ice.name, (long long)st__fa_named(out), (long long)want,
                in->croot ? "the whole set is committed instead"
                          : "one manifest of every live file replaces them");
        st_tmans_free(out);
        st_tfiles_free(moved);
        memset(man, 0, in->live->n * sizeof *man);
        p.k = 0;
        if (in->croot) rc = ST_TABLES_WHOLE;
        n = in->croot ? 0 : st__fa_from_live(&p, true, f);
        if (n) rc = st__fa_write(&p, f, n);
    }
    free(f);
    st_buf_free(&p.mx);
    st_vec_free(&p.removed);
    if (rc == ST_OK) rc = st__fa_merge(&p);
    for (size_t i = 0; rc == ST_OK && i < out->n; i++) {
        const char *b = st__fa_base(out->v[i].mf.path);
        st_vec_push(names, st_strndup(b, strlen(b)));
    }
    if (rc != ST_OK) {
        st_tmans_free(out);
        st_tstrs_free(names);
        st_tfiles_free(moved);
    }
    return rc;
}
