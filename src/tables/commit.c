/* SPDX-License-Identifier: MIT */
/*
 * One table's commit, on a worker (object storage blocks): a manifest of every live file, a
 * manifest list, metadata/v{N+1}.metadata.json created exclusively (the atomic swap; a lost race
 * re-reads the winner and commits on top of it), then version-hint.text; then what expired goes.
 * Names never repeat: a commit's manifest list is snap-{id}-{uuid}-w{inc}.avro and its own
 * manifest {uuid}-w{inc}-m0.avro (the same random uuid; inc the writer's incarnation), so
 * expiring a snapshot deletes both by name, and only when they are this writer's (shared.c: the
 * tables may be shared by several groups; the parent's manifests of other writers carry over).
 * A create of v{N+1} that fails without an answer (ST_EIO, a timeout) is settled by reading
 * v{N+1} back: this writer's snapshot there is a commit won.
 * Snapshots older than --table-keep expire at each commit. A commit that carries an erasure (the
 * tier told the module that an erasure deleted objects of the table: tables.c) expires every
 * earlier snapshot, whatever else it holds; when the table's files did not change (the erased
 * objects were in no current snapshot, only in older ones) it is a version with no new snapshot
 * that only expires them (Iceberg's expire-snapshots). Retention's and a deleted conversation's
 * commits are ordinary snapshots: time travel keeps working within --table-keep (SPEC v5 §5.1).
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define ST__TRIES 8 /* races lost in a row before a commit gives up until the next tick */

static void st__meta_vkey(st_buf_t *b, const st_table_def_t *d, int64_t v)
{
    b->len = 0;
    st_buf_printf(b, "%s/metadata/v%lld.metadata.json", d->ice.name, (long long)v);
    st_buf_appendc(b, 0);
}

static int st__read_version(st_objstore_t *ms, const st_table_def_t *d, int64_t v, cJSON **out)
{
    st_buf_t k = {0}, b = {0};
    st__meta_vkey(&k, d, v);
    int rc = st_objstore_read(ms, k.data, ST_TABLES_META_MAX, &b);
    if (rc == ST_OK && (rc = st_tables_meta_parse(b.data, b.len, out)) != ST_OK)
        st_error("tables: %s is not a metadata file strata can read", k.data);
    st_buf_free(&k);
    st_buf_free(&b);
    return rc;
}

static int st__write_hint(st_objstore_t *ms, const st_table_def_t *d, int64_t v)
{
    char k[128], digits[24];
    snprintf(k, sizeof k, "%s/metadata/version-hint.text", d->ice.name);
    int n = snprintf(digits, sizeof digits, "%lld", (long long)v);
    return st_objstore_replace(ms, k, digits, (size_t)n);
}

/* The committer's take (newest.c): a version strata cannot read stops the load (strict). */
static int st__load_take(void *arg, int64_t v, const char *key, st_buf_t *text)
{
    (void)v;
    cJSON **doc = arg, *next;
    if (st_tables_meta_parse(text->data, text->len, &next) != ST_OK) {
        st_error("tables: %s is not a metadata file strata can read", key);
        return ST_EINVAL;
    }
    cJSON_Delete(*doc);
    *doc = next;
    return ST_OK;
}

int st_table_load(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m, bool create)
{
    for (int tries = 0; tries < ST__TRIES; tries++) {
        int64_t have = 0;
        cJSON *doc = NULL;
        st_tables_take_t take = {st__load_take, &doc, true};
        int rc = st_tables_newest(ms, d->ice.name, 0, true, &take, &have);
        if (rc != ST_OK) {
            cJSON_Delete(doc);
            return rc;
        }
        if (doc) {
            cJSON_Delete(m->doc);
            m->doc = doc;
            m->version = have;
            return ST_OK;
        }
        if (!create) return ST_ENOTFOUND;
        st_buf_t loc = {0}, k = {0};
        st_objstore_uri(ms, d->ice.name, &loc);
        st_buf_appendc(&loc, 0);
        doc = st_tmeta_v1(d, loc.data, st_now_us() / 1000);
        char *text = cJSON_PrintUnformatted(doc);
        st__meta_vkey(&k, d, 1);
        rc = text ? st_objstore_put(ms, k.data, text, strlen(text)) : ST_ENOMEM;
        free(text);
        st_buf_free(&loc);
        st_buf_free(&k);
        if (rc == ST_OK) {
            cJSON_Delete(m->doc);
            m->doc = doc;
            m->version = 1;
            st__write_hint(ms, d, 1);
            st_info("tables: %s created (v1)", d->ice.name);
            return ST_OK;
        }
        cJSON_Delete(doc);
        if (rc != ST_EEXIST) return rc; /* EEXIST: another writer made v1: adopt it */
    }
    return ST_ECONFLICT;
}

/* The sequence number of the snapshot of old whose manifest list is uri (-1: none). */
static int64_t st__list_seq(const cJSON *doc, const char *uri)
{
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(doc, "snapshots"))
    {
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(s, "manifest-list");
        if (cJSON_IsString(ml) && strcmp(ml->valuestring, uri) == 0)
            return st_tmeta_i64(s, "sequence-number", -1);
    }
    return -1;
}

/* Whether a snapshot kept in next may still list the manifest an expired list of ours (uri, in
 * old) added: snapshots are linear, so the other writers' snapshots committed after it and before
 * our next own one carried it over. Such a manifest is left (an orphan once they expire too). */
static bool st__manifest_named(const cJSON *old, const cJSON *next, const char *uri,
                               const st_tier_writer_t *w)
{
    int64_t q = st__list_seq(old, uri), own = INT64_MAX;
    if (q < 0) return false;
    const cJSON *snaps = cJSON_GetObjectItemCaseSensitive(next, "snapshots"), *s;
    for (int pass = 0; pass < 2; pass++)
        cJSON_ArrayForEach(s, snaps)
        {
            int64_t sq = st_tmeta_i64(s, "sequence-number", -1);
            const cJSON *ml = cJSON_GetObjectItemCaseSensitive(s, "manifest-list");
            if (sq <= q || sq >= own || !cJSON_IsString(ml)) continue;
            bool mine = st_tables_list_mine(w, ml->valuestring);
            if (pass == 0 && mine) own = sq; /* our next own snapshot */
            if (pass == 1 && !mine) return true;
        }
    return false;
}

/* Deletes what expired: manifest lists (and the manifest each of strata's names) and metadata
 * files out of metadata-log. Failures are logged and left (orphans, named nowhere). */
static void st__sweep(st_objstore_t *ms, const st_tstrs_t *expired, const st_tstrs_t *dropped,
                      const st_tier_writer_t *w, const cJSON *old, const cJSON *next)
{
    st_buf_t root = {0}, k = {0};
    st_objstore_uri(ms, "", &root);
    for (size_t i = 0; i < expired->n + dropped->n; i++) {
        bool list = i < expired->n;
        const char *uri = list ? expired->v[i] : dropped->v[i - expired->n];
        const char *key = st_tables_key_of(uri, &root);
        if (!key || (list && !st_tables_list_mine(w, uri))) continue; /* another writer's */
        if (st_objstore_delete(ms, key) != ST_OK) st_warn("tables: cannot delete %s", key);
        const char *base = strrchr(key, '/');
        const char *uuid = base ? strchr(base + 6, '-') : NULL;
        if (!list || !base || strncmp(base, "/snap-", 6) != 0 || !uuid) continue;
        if (st__manifest_named(old, next, uri, w)) continue; /* a kept snapshot lists it */
        k.len = 0;
        st_buf_printf(&k, "%.*s/%.*s-m0.avro", (int)(base - key), key, (int)strcspn(uuid + 1, "."),
                      uuid + 1);
        st_buf_appendc(&k, 0);
        if (st_objstore_delete(ms, k.data) != ST_OK) st_warn("tables: cannot delete %s", k.data);
    }
    st_buf_free(&root);
    st_buf_free(&k);
}

typedef struct {
    int64_t added_files, added_rows, deleted_files, deleted_rows, total_rows;
    bool changed; /* an added file changed rows (st_tfile_t.changed) */
} st__diff_t;

static st__diff_t st__diff(const st_tfiles_t *live, const st_tfiles_t *prev)
{
    st__diff_t x = {0};
    for (size_t i = 0; i < live->n; i++) {
        x.total_rows += live->v[i].rows;
        if (live->v[i].snap == 0) {
            x.added_files++;
            x.added_rows += live->v[i].rows;
            x.changed |= live->v[i].changed;
        }
    }
    for (size_t i = 0; i < prev->n; i++)
        if (!st_tfiles_find(live, prev->v[i].key)) {
            x.deleted_files++;
            x.deleted_rows += prev->v[i].rows;
        }
    return x;
}

/* The manifest of every live file into mb, and its line in the manifest list (*mf; its partition
 * bounds borrowed from live). */
static int st__manifest(const st_table_def_t *d, const st_tfiles_t *live, int64_t id, int64_t seq,
                        st_buf_t *mb, st_ice_mfile_t *mf)
{
    st_ice_file_t *f = st_calloc(live->n, sizeof *f);
    mf->min_seq = seq;
    for (size_t i = 0; i < live->n; i++) {
        const st_tfile_t *t = &live->v[i];
        bool old = t->snap != 0;
        f[i] = (st_ice_file_t){.status = old ? ST_ICE_EXISTING : ST_ICE_ADDED,
                               .snapshot_id = old ? t->snap : id,
                               .data_seq = old ? t->seq : seq,
                               .file_seq = old ? t->seq : seq,
                               .content = ST_ICE_DATA,
                               .path = t->uri,
                               .part = t->part,
                               .part_len = strlen(t->part),
                               .records = t->rows,
                               .size = t->size};
        if (f[i].data_seq < mf->min_seq) mf->min_seq = f[i].data_seq;
        if (old) {
            mf->existing_files++;
            mf->existing_rows += t->rows;
        } else {
            mf->added_files++;
            mf->added_rows += t->rows;
        }
        if (!mf->lower || strcmp(t->part, mf->lower) < 0) mf->lower = t->part;
        if (!mf->upper || strcmp(t->part, mf->upper) > 0) mf->upper = t->part;
    }
    mf->lower_len = mf->lower ? strlen(mf->lower) : 0;
    mf->upper_len = mf->upper ? strlen(mf->upper) : 0;
    int rc = st_ice_manifest(mb, &d->ice, ST_ICE_DATA, f, live->n, true);
    free(f);
    return rc;
}

static int64_t st__snapshot_id(void)
{
    uint64_t r;
    st_tables_random(&r, sizeof r);
    r &= (1ull << 52) - 1; /* positive, exact in every JSON reader */
    return r ? (int64_t)r : 1;
}

/* The manifests of the current snapshot (parent) of doc that carry over (shared.c), read from
 * its manifest list in the tables' store. */
static int st__carry(st_objstore_t *ms, const st_table_def_t *d, const cJSON *doc, int64_t parent,
                     const st_tier_writer_t *w, st_ice_mlist_t *out, int64_t *rows, int64_t *files)
{
    memset(out, 0, sizeof *out);
    *rows = *files = 0;
    if (parent < 0) return ST_OK;
    const char *uri = NULL;
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(doc, "snapshots"))
    {
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(s, "manifest-list");
        if (st_tmeta_i64(s, "snapshot-id", -1) == parent && cJSON_IsString(ml))
            uri = ml->valuestring;
    }
    if (!uri) return ST_OK; /* the parent expired from the document: nothing to carry */
    st_buf_t root = {0}, b = {0};
    st_objstore_uri(ms, "", &root);
    const char *key = st_tables_key_of(uri, &root);
    int rc = key ? st_objstore_read(ms, key, ST_TABLES_META_MAX, &b) : ST_ENOTIMPL;
    if (rc == ST_OK) rc = st_tables_carry(b.data, b.len, uri, w, out, rows, files);
    if (rc != ST_OK)
        st_error("tables: %s: the current snapshot's manifest list %s cannot be carried over (%s)",
                 d->ice.name, uri, st_strerror(rc));
    st_buf_free(&root);
    st_buf_free(&b);
    return rc;
}

/* After a create of v{version} failed without an answer: whether it holds snapshot id with list
 * luri (ST_OK: won, *doc the version read), holds another's (ST_EEXIST), or is not there
 * (ST_ENOTFOUND); another error: still unknown. */
static int st__commit_settle(st_objstore_t *ms, const st_table_def_t *d, int64_t version,
                             int64_t id, const char *luri, cJSON **doc)
{
    *doc = NULL;
    int rc = st__read_version(ms, d, version, doc);
    if (rc != ST_OK) return rc;
    int64_t cur = st_tmeta_i64(*doc, "current-snapshot-id", -1);
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(*doc, "snapshots"))
    {
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(s, "manifest-list");
        if (cur == id && st_tmeta_i64(s, "snapshot-id", -1) == id && cJSON_IsString(ml) &&
            strcmp(ml->valuestring, luri) == 0)
            return ST_OK;
    }
    cJSON_Delete(*doc);
    *doc = NULL;
    return ST_EEXIST;
}

/* v{version+1} (*next, taken) was created: what expired goes, m moves on to it, the hint follows.
 * Orphans (leftovers of a commit killed mid-way) are swept at the first commit since this member
 * led, and at an erasure's (lists of ours another writer's erasure expired go too). */
static void st__advance(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m, cJSON **next,
                        const st_tstrs_t *expired, const st_tstrs_t *dropped, bool erase,
                        const st_tier_writer_t *w)
{
    st__sweep(ms, expired, dropped, w, m->doc, *next);
    cJSON_Delete(m->doc);
    m->doc = *next;
    *next = NULL;
    m->version++;
    if (st__write_hint(ms, d, m->version) != ST_OK)
        st_warn("tables: %s: version-hint.text not updated (readers probe upward)", d->ice.name);
    size_t orphans;
    if (!m->swept || erase) {
        if (st_table_orphans(ms, d, m->doc, w, &orphans) == ST_OK)
            m->swept = true;
        else
            st_warn("tables: %s: orphans not swept (a manifest list unreadable)", d->ice.name);
    }
}

/* One attempt at a version that only expires every snapshot but the current one (an erasure's
 * objects the current snapshot does not name: the snapshots before it may): ST_EEXIST when
 * another writer made v{version+1} first. Nothing to expire: nothing written. */
static int st__expire_attempt(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m,
                              const st_tier_writer_t *w, st_tcommit_t *res)
{
    int64_t cur = st_tmeta_i64(m->doc, "current-snapshot-id", -1), ts = st_now_us() / 1000;
    int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m->doc, "snapshots"));
    if (cur < 0 || n <= 1) {
        size_t orphans; /* a list of ours an earlier expiry could not delete goes now */
        if (st_table_orphans(ms, d, m->doc, w, &orphans) != ST_OK)
            st_warn("tables: %s: orphans not swept (a manifest list unreadable)", d->ice.name);
        return ST_OK;
    }
    st_buf_t vk = {0}, puri = {0};
    st__meta_vkey(&vk, d, m->version);
    st_objstore_uri(ms, vk.data, &puri);
    st_buf_appendc(&puri, 0);
    st_tstrs_t expired = {0}, dropped = {0};
    cJSON *next = st_tmeta_expire(m->doc, ts, puri.data, &expired, &dropped);
    char *text = next ? cJSON_PrintUnformatted(next) : NULL;
    int rc = text ? ST_OK : ST_ENOMEM;
    if (rc == ST_OK) {
        st__meta_vkey(&vk, d, m->version + 1);
        /* no answer (a timeout): not settled here; the next try finds v{N+1} taken, re-reads it
         * and expires what is left */
        rc = st_objstore_put(ms, vk.data, text, strlen(text));
    }
    if (rc == ST_OK) {
        st__advance(ms, d, m, &next, &expired, &dropped, true, w);
        *res = (st_tcommit_t){.done = true,
                              .snap = cur,
                              .seq = st_tmeta_i64(m->doc, "last-sequence-number", 0),
                              .ts_ms = ts};
        st_info("tables: %s v%lld: an erasure expired %zu earlier snapshot(s)", d->ice.name,
                (long long)m->version, expired.n);
    }
    cJSON_Delete(next);
    free(text);
    st_tstrs_free(&expired);
    st_tstrs_free(&dropped);
    st_buf_free(&vk);
    st_buf_free(&puri);
    return rc;
}

/* One attempt at v{version+1}: ST_EEXIST when another writer made it first. */
static int st__attempt(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m, st_tfiles_t *live,
                       const st__diff_t *x, const char *op, int64_t keep_ms, bool erase,
                       const st_tier_writer_t *w, st_tcommit_t *res)
{
    int64_t parent = st_tmeta_i64(m->doc, "current-snapshot-id", -1);
    int64_t seq = st_tmeta_i64(m->doc, "last-sequence-number", 0) + 1;
    int64_t id = st__snapshot_id(), ts = st_now_us() / 1000;
    char uuid[37];
    st_tables_uuid(uuid);
    st_buf_t mkey = {0}, lkey = {0}, muri = {0}, luri = {0}, puri = {0}, mb = {0}, lb = {0},
             vk = {0}, tok = {0};
    st_tier_key_writer(&tok, w->current);
    st_buf_appendc(&tok, 0);
    st_ice_mfile_t mf = {.content = ST_ICE_DATA, .seq = seq, .added_snapshot_id = id};
    st_buf_printf(&mkey, "%s/metadata/%s-%s-m0.avro", d->ice.name, uuid, tok.data);
    st_buf_appendc(&mkey, 0);
    st_buf_printf(&lkey, "%s/metadata/snap-%lld-%s-%s.avro", d->ice.name, (long long)id, uuid,
                  tok.data);
    st_buf_appendc(&lkey, 0);
    st_objstore_uri(ms, mkey.data, &muri);
    st_buf_appendc(&muri, 0);
    st_objstore_uri(ms, lkey.data, &luri);
    st_buf_appendc(&luri, 0);
    st__meta_vkey(&vk, d, m->version);
    st_objstore_uri(ms, vk.data, &puri);
    st_buf_appendc(&puri, 0);
    st_tstrs_t expired = {0}, dropped = {0};
    st_ice_mlist_t carried = {0};
    st_ice_mfile_t *mfs = NULL;
    size_t nmf = 0;
    int64_t crows = 0, cfiles = 0;
    cJSON *next = NULL;
    char *text = NULL;
    bool unknown = false; /* whether v{N+1} may name our manifest and list */
    int rc = st__carry(ms, d, m->doc, parent, w, &carried, &crows, &cfiles);
    if (rc == ST_OK && live->n) {
        rc = st__manifest(d, live, id, seq, &mb, &mf);
        mf.path = muri.data;
        mf.length = (int64_t)mb.len;
        if (rc == ST_OK) rc = st_objstore_put(ms, mkey.data, mb.data, mb.len);
    }
    if (rc == ST_OK) { /* the others' manifests as they were, then ours */
        mfs = st_calloc(carried.n + 1, sizeof *mfs);
        for (size_t i = 0; i < carried.n; i++)
            mfs[nmf++] = carried.v[i];
        if (live->n) mfs[nmf++] = mf;
        rc = st_ice_manifest_list(&lb, id, parent, seq, mfs, nmf, true);
    }
    if (rc == ST_OK) rc = st_objstore_put(ms, lkey.data, lb.data, lb.len);
    st_tsnap_t s = {.id = id,
                    .parent = parent,
                    .seq = seq,
                    .ts_ms = ts,
                    .op = op,
                    .list_uri = luri.data,
                    .prev_uri = m->version > 0 ? puri.data : NULL,
                    .added_files = x->added_files,
                    .deleted_files = x->deleted_files,
                    .added_rows = x->added_rows,
                    .deleted_rows = x->deleted_rows,
                    .total_rows = x->total_rows + crows,
                    .total_files = (int64_t)live->n + cfiles,
                    .keep_ms = keep_ms,
                    .expire_all = erase};
    if (rc == ST_OK && !(next = st_tmeta_next(m->doc, &s, &expired, &dropped))) rc = ST_ENOMEM;
    if (rc == ST_OK && !(text = cJSON_PrintUnformatted(next))) rc = ST_ENOMEM;
    if (rc == ST_OK) {
        st__meta_vkey(&vk, d, m->version + 1);
        rc = st_objstore_put(ms, vk.data, text, strlen(text));
        if (rc != ST_OK && rc != ST_EEXIST) { /* no answer (a timeout): did it land? */
            cJSON *got;
            int was = rc;
            rc = st__commit_settle(ms, d, m->version + 1, id, luri.data, &got);
            if (rc == ST_OK) {
                st_info("tables: %s: v%lld was ours after all (%s on its create)", d->ice.name,
                        (long long)m->version + 1, st_strerror(was));
                cJSON_Delete(got);
            } else if (rc == ST_ENOTFOUND) {
                rc = was; /* not made: retried at the next tick */
            } else if (rc != ST_EEXIST) {
                unknown = true; /* v{N+1} unreadable: it may name ours, keep them */
                rc = was;
            }
        }
    }
    if (rc == ST_OK) {
        st__advance(ms, d, m, &next, &expired, &dropped, erase, w);
        for (size_t i = 0; i < live->n; i++)
            if (live->v[i].snap == 0) {
                live->v[i].snap = id;
                live->v[i].seq = seq;
            }
        *res = (st_tcommit_t){.done = true, .snap = id, .seq = seq, .ts_ms = ts};
        st_info("tables: %s v%lld: snapshot %lld (%s, %zu files; %zu manifests of other writers "
                "kept)",
                d->ice.name, (long long)m->version, (long long)id, op, live->n, carried.n);
    } else if (!unknown) { /* nothing names them: out (a lost race, or a failure) */
        st_objstore_delete(ms, mkey.data);
        st_objstore_delete(ms, lkey.data);
    }
    cJSON_Delete(next);
    free(text);
    free(mfs);
    st_ice_mlist_free(&carried);
    st_tstrs_free(&expired);
    st_tstrs_free(&dropped);
    st_buf_t *bufs[] = {&mkey, &lkey, &muri, &luri, &puri, &mb, &lb, &vk, &tok};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        st_buf_free(bufs[i]);
    return rc;
}

int st_table_commit(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m, st_tfiles_t *live,
                    const st_tfiles_t *prev, int64_t keep_ms, bool erase, const st_tier_writer_t *w,
                    st_tcommit_t *res)
{
    memset(res, 0, sizeof *res);
    st__diff_t x = st__diff(live, prev);
    bool same = x.added_files == 0 && x.deleted_files == 0;
    if (same && !erase) return ST_OK;
    /* replace only for a compaction that changes no row (SPEC v5 §5.1): a fold is an overwrite */
    const char *op = x.deleted_files == 0                           ? "append"
                     : x.added_files == 0                           ? "delete"
                     : x.added_rows == x.deleted_rows && !x.changed ? "replace"
                                                                    : "overwrite";
    for (int tries = 0; tries < ST__TRIES; tries++) {
        int rc = same ? st__expire_attempt(ms, d, m, w, res)
                      : st__attempt(ms, d, m, live, &x, op, keep_ms, erase, w, res);
        if (rc != ST_EEXIST) return rc;
        /* another writer committed v{N+1}: on top of theirs (their snapshot stays in history, their
         * manifests in ours) */
        st_info("tables: %s: v%lld was taken by another writer; reading it", d->ice.name,
                (long long)m->version + 1);
        if ((rc = st_table_load(ms, d, m, false)) != ST_OK) return rc;
    }
    return ST_ECONFLICT;
}
