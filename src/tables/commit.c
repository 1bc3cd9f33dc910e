/* SPDX-License-Identifier: MIT */
/*
 * One table's commit, on a worker (object storage blocks): the manifests of what it changes
 * (fastappend.c: the parent's manifests carried over, those naming a removed file rewritten, one
 * of the added files), a manifest list, metadata/v{N+1}.metadata.json created exclusively (the
 * atomic swap; a lost race re-reads the winner and commits on top of it), then
 * version-hint.text; then what expired goes.
 * Names never repeat: a commit's manifest list is snap-{id}-{uuid}-w{inc}.avro and the manifests
 * it writes {uuid}-w{inc}-m{k}.avro (the same random uuid; inc the writer's incarnation). A
 * manifest is listed by every snapshot from the one that wrote it to the last one that carried
 * it over, so expiry deletes an expired list of this writer's by name and a manifest of this
 * writer's only once no kept snapshot lists it (st__sweep_manifests; shared.c: the tables may be
 * shared by several groups; the parent's manifests of other writers carry over).
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

/* The manifest lists of next's snapshots nearest to sequence number q below and above it, into
 * *near (borrowed from next). */
static void st__neighbours(const cJSON *next, int64_t q, st_tstrs_t *near)
{
    const char *lo = NULL, *hi = NULL;
    int64_t lq = -1, hq = INT64_MAX;
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(next, "snapshots"))
    {
        int64_t sq = st_tmeta_i64(s, "sequence-number", -1);
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(s, "manifest-list");
        if (!cJSON_IsString(ml)) continue;
        if (sq < q && sq > lq) lq = sq, lo = ml->valuestring;
        if (sq > q && sq < hq) hq = sq, hi = ml->valuestring;
    }
    const char *both[] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        bool have = !both[i];
        for (size_t j = 0; !have && j < near->n; j++)
            have = strcmp(near->v[j], both[i]) == 0;
        if (!have) st_vec_push(near, (char *)both[i]);
    }
}

/* The manifests a manifest list (uri) names, appended to *out (owned URIs): ST_OK, or the read's
 * error. */
static int st__list_names(st_objstore_t *ms, const st_buf_t *root, const char *uri, st_tstrs_t *out)
{
    const char *key = st_tables_key_of(uri, root);
    st_buf_t b = {0};
    st_ice_mlist_t l = {0};
    int rc = key ? st_objstore_read(ms, key, ST_TABLES_META_MAX, &b) : ST_ENOTIMPL;
    if (rc == ST_OK) rc = st_ice_manifest_list_read(&l, b.data, b.len);
    for (size_t i = 0; rc == ST_OK && i < l.n; i++)
        st_vec_push(out, st_strndup(l.v[i].path, strlen(l.v[i].path)));
    st_ice_mlist_free(&l);
    st_buf_free(&b);
    return rc;
}

/* This writer's manifests the expired lists named that no kept snapshot of next lists, deleted.
 * A manifest is carried from snapshot to snapshot until a commit rewrites or merges it, never
 * named again after (names do not repeat), and snapshots are one line: the kept snapshots that
 * could still list one an expired list named are the two nearest that list's, so those are all
 * a sweep reads. A kept list unreadable: nothing deleted here (orphans.c sweeps later). */
static void st__sweep_manifests(st_objstore_t *ms, const st_buf_t *root, const st_tstrs_t *expired,
                                const st_tier_writer_t *w, const cJSON *old, const cJSON *next)
{
    st_tstrs_t cand = {0}, named = {0}, near = {0}, names = {0};
    int rc = ST_OK;
    for (size_t i = 0; i < expired->n; i++) {
        /* a list not read (another writer's already deleted, another engine's) offers nothing */
        int64_t q = st__list_seq(old, expired->v[i]);
        int lrc = q < 0 ? ST_ENOTFOUND : st__list_names(ms, root, expired->v[i], &names);
        for (size_t j = 0; j < names.n; j++) {
            if (lrc == ST_OK && st_tables_manifest_mine(w, names.v[j], expired->v[i]))
                st_vec_push(&cand, names.v[j]);
            else
                free(names.v[j]);
        }
        names.n = 0;
        if (lrc == ST_OK) st__neighbours(next, q, &near);
    }
    for (size_t i = 0; rc == ST_OK && i < near.n; i++)
        rc = st__list_names(ms, root, near.v[i], &named);
    if (named.n > 1) qsort(named.v, named.n, sizeof *named.v, st_tstrs_cmp);
    if (cand.n > 1) qsort(cand.v, cand.n, sizeof *cand.v, st_tstrs_cmp);
    for (size_t i = 0; rc == ST_OK && i < cand.n; i++) {
        const char *key = st_tables_key_of(cand.v[i], root);
        if (!key || (i && strcmp(cand.v[i], cand.v[i - 1]) == 0) ||
            (named.n && bsearch(&cand.v[i], named.v, named.n, sizeof *named.v, st_tstrs_cmp)))
            continue;
        if (st_objstore_delete(ms, key) != ST_OK) st_warn("tables: cannot delete %s", key);
    }
    if (rc != ST_OK)
        st_warn("tables: expired manifests not swept (%s): left to the orphans' sweep",
                st_strerror(rc));
    st_tstrs_free(&cand);
    st_tstrs_free(&named);
    st_tstrs_free(&names);
    st_vec_free(&near);
}

/* Deletes what expired: this writer's manifest lists and the manifests no kept snapshot lists
 * any more, and the metadata files out of metadata-log. Failures are logged and left (orphans,
 * named nowhere). */
static void st__sweep(st_objstore_t *ms, const st_tstrs_t *expired, const st_tstrs_t *dropped,
                      const st_tier_writer_t *w, const cJSON *old, const cJSON *next)
{
    st_buf_t root = {0};
    st_objstore_uri(ms, "", &root);
    st__sweep_manifests(ms, &root, expired, w, old, next);
    for (size_t i = 0; i < expired->n + dropped->n; i++) {
        bool list = i < expired->n;
        const char *uri = list ? expired->v[i] : dropped->v[i - expired->n];
        const char *key = st_tables_key_of(uri, &root);
        if (!key || (list && !st_tables_list_mine(w, uri))) continue; /* another writer's */
        if (st_objstore_delete(ms, key) != ST_OK) st_warn("tables: cannot delete %s", key);
    }
    st_buf_free(&root);
}

typedef struct {
    int64_t added_files, added_rows, deleted_files, deleted_rows;
    bool changed; /* an added file changed rows (st_tfile_t.changed) */
} st__diff_t;

static st__diff_t st__diff(const st_tfiles_t *live, const st_tfiles_t *prev)
{
    st__diff_t x = {0};
    for (size_t i = 0; i < live->n; i++) {
        if (live->v[i].snap == 0) {
            x.added_files++;
            x.added_rows += live->v[i].rows;
            x.changed |= live->v[i].changed;
        }
    }
    for (size_t i = 0, j = 0; i < prev->n; i++) { /* both sorted by key: one walk */
        int c = 1;
        while (j < live->n && (c = strcmp(live->v[j].key, prev->v[i].key)) < 0)
            j++;
        if (c != 0) {
            x.deleted_files++;
            x.deleted_rows += prev->v[i].rows;
        }
    }
    return x;
}

static int64_t st__snapshot_id(void)
{
    uint64_t r;
    st_tables_random(&r, sizeof r);
    r &= (1ull << 52) - 1; /* positive, exact in every JSON reader */
    return r ? (int64_t)r : 1;
}

/* The manifests of the current snapshot (parent) of doc that carry over (shared.c) into *out,
 * this writer's into *mine, read from its manifest list in the tables' store. */
static int st__carry(st_objstore_t *ms, const st_table_def_t *d, const cJSON *doc, int64_t parent,
                     const st_tier_writer_t *w, st_ice_mlist_t *out, st_ice_mlist_t *mine,
                     int64_t *rows, int64_t *files)
{
    memset(out, 0, sizeof *out);
    memset(mine, 0, sizeof *mine);
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
    if (rc == ST_OK) rc = st_tables_carry_mine(b.data, b.len, uri, w, out, mine, rows, files);
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
    cJSON *prev = m->doc;
    m->doc = *next;
    *next = NULL;
    m->version++;
    /* the hint first, then what expired goes (the order this file's header gives, and
     * Iceberg's): a reader that starts from the hint is not sent to a version whose lists are
     * being deleted; a crash between the two leaves orphans, which the orphans' sweep takes */
    if (st__write_hint(ms, d, m->version) != ST_OK)
        st_warn("tables: %s: version-hint.text not updated (readers probe upward)", d->ice.name);
    st__sweep(ms, expired, dropped, w, prev, m->doc);
    cJSON_Delete(prev);
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

/* What one commit is given. */
typedef struct {
    const st_tcommit_in_t *c;
    const st__diff_t *x;
    const char *op;
} st__cin_t;

/* Puts the manifests this commit writes (plan), then the manifest list of the others' (carried)
 * and ours into lb and at lkey. */
static int st__put_lists(st_objstore_t *ms, const st_ice_mlist_t *carried, const st_tmans_t *plan,
                         int64_t id, int64_t parent, int64_t seq, const char *lkey, st_buf_t *lb)
{
    int rc = ST_OK;
    for (size_t i = 0; rc == ST_OK && i < plan->n; i++)
        if (plan->v[i].bytes.len)
            rc = st_objstore_put(ms, plan->v[i].key, plan->v[i].bytes.data, plan->v[i].bytes.len);
    if (rc != ST_OK) return rc;
    st_ice_mfile_t *mfs = st_calloc(carried->n + plan->n + 1, sizeof *mfs);
    size_t n = 0;
    for (size_t i = 0; i < carried->n; i++) /* the others' manifests as they were, then ours */
        mfs[n++] = carried->v[i];
    for (size_t i = 0; i < plan->n; i++)
        mfs[n++] = plan->v[i].mf;
    rc = st_ice_manifest_list(lb, id, parent, seq, mfs, n, true);
    free(mfs);
    if (rc == ST_OK) rc = st_objstore_put(ms, lkey, lb->data, lb->len);
    return rc;
}

/* A create of v{version+1} that failed without an answer (was): did it land? ST_OK (ours after
 * all), ST_EEXIST, or was; *unknown when v{N+1} cannot be read (it may name our files). */
static int st__create_settle(st_objstore_t *ms, const st_table_def_t *d, const st_tmeta_t *m,
                             int64_t id, const char *luri, int was, bool *unknown)
{
    cJSON *got;
    int rc = st__commit_settle(ms, d, m->version + 1, id, luri, &got);
    if (rc == ST_OK) {
        st_info("tables: %s: v%lld was ours after all (%s on its create)", d->ice.name,
                (long long)m->version + 1, st_strerror(was));
        cJSON_Delete(got);
    } else if (rc == ST_ENOTFOUND) {
        rc = was; /* not made: retried at the next tick */
    } else if (rc != ST_EEXIST) {
        *unknown = true; /* v{N+1} unreadable: it may name ours, keep them */
        rc = was;
    }
    return rc;
}

/* One attempt at v{version+1}: ST_EEXIST when another writer made it first. */
static int st__attempt(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m,
                       const st__cin_t *in, st_tcommit_t *res)
{
    int64_t parent = st_tmeta_i64(m->doc, "current-snapshot-id", -1);
    int64_t seq = st_tmeta_i64(m->doc, "last-sequence-number", 0) + 1;
    int64_t id = st__snapshot_id(), ts = st_now_us() / 1000;
    char uuid[37];
    st_tables_uuid(uuid);
    st_buf_t lkey = {0}, mpfx = {0}, upfx = {0}, luri = {0}, puri = {0}, lb = {0}, vk = {0},
             tok = {0};
    const st_tcommit_in_t *c = in->c;
    st_tier_key_writer(&tok, c->w->current);
    st_buf_appendc(&tok, 0);
    st_buf_printf(&mpfx, "%s/metadata/%s-%s-m", d->ice.name, uuid, tok.data);
    st_buf_appendc(&mpfx, 0);
    st_objstore_uri(ms, "", &upfx);
    st_buf_appendc(&upfx, 0);
    st_buf_printf(&lkey, "%s/metadata/snap-%lld-%s-%s.avro", d->ice.name, (long long)id, uuid,
                  tok.data);
    st_buf_appendc(&lkey, 0);
    st_objstore_uri(ms, lkey.data, &luri);
    st_buf_appendc(&luri, 0);
    st__meta_vkey(&vk, d, m->version);
    st_objstore_uri(ms, vk.data, &puri);
    st_buf_appendc(&puri, 0);
    st_tstrs_t expired = {0}, dropped = {0}, names = {0};
    st_ice_mlist_t carried = {0}, mine = {0};
    st_tmans_t plan = {0};
    st_tfiles_t moved = {0};
    uint32_t *man = st_calloc(c->live->n + 1, sizeof *man);
    int64_t crows = 0, cfiles = 0;
    cJSON *next = NULL;
    char *text = NULL;
    bool unknown = false; /* whether v{N+1} may name our manifests and list */
    int rc = st__carry(ms, d, m->doc, parent, c->w, &carried, &mine, &crows, &cfiles);
    st_tplan_in_t pin = {.ms = ms,
                         .cold = c->cold,
                         .d = d,
                         .croot = c->croot,
                         .id = id,
                         .seq = seq,
                         .mpfx = mpfx.data,
                         .upfx = upfx.data,
                         .mine = &mine,
                         .live = c->live,
                         .prev = c->prev,
                         .prev_mans = c->prev_mans};
    if (rc == ST_OK) rc = st_tables_plan(&pin, &plan, &names, man, &moved);
    int64_t orows = 0, ofiles = 0; /* ours in the new snapshot: its manifests' counts */
    for (size_t i = 0; rc == ST_OK && i < plan.n; i++) {
        ofiles += (int64_t)plan.v[i].mf.added_files + plan.v[i].mf.existing_files;
        orows += plan.v[i].mf.added_rows + plan.v[i].mf.existing_rows;
    }
    if (rc == ST_OK) rc = st__put_lists(ms, &carried, &plan, id, parent, seq, lkey.data, &lb);
    st_tsnap_t s = {.id = id,
                    .parent = parent,
                    .seq = seq,
                    .ts_ms = ts,
                    .op = in->op,
                    .list_uri = luri.data,
                    .prev_uri = m->version > 0 ? puri.data : NULL,
                    .added_files = in->x->added_files,
                    .deleted_files = in->x->deleted_files,
                    .added_rows = in->x->added_rows,
                    .deleted_rows = in->x->deleted_rows,
                    .total_rows = orows + crows,
                    .total_files = ofiles + cfiles,
                    .keep_ms = c->keep_ms,
                    .expire_all = c->erase};
    if (rc == ST_OK && !(next = st_tmeta_next(m->doc, &s, &expired, &dropped))) rc = ST_ENOMEM;
    /* the metrics modes, also on a table an older binary made (its manifests' old entries
     * simply keep no metrics) */
    if (rc == ST_OK)
        st_tables_metrics_props(d, cJSON_GetObjectItemCaseSensitive(next, "properties"));
    if (rc == ST_OK && !(text = cJSON_PrintUnformatted(next))) rc = ST_ENOMEM;
    if (rc == ST_OK) {
        st__meta_vkey(&vk, d, m->version + 1);
        rc = st_objstore_put(ms, vk.data, text, strlen(text));
        if (rc != ST_OK && rc != ST_EEXIST) /* no answer (a timeout) */
            rc = st__create_settle(ms, d, m, id, luri.data, rc, &unknown);
    }
    if (rc == ST_OK) {
        st__advance(ms, d, m, &next, &expired, &dropped, c->erase, c->w);
        for (size_t i = 0; i < c->live->n; i++) {
            st_tfile_t *f = &c->live->v[i];
            if (f->snap == 0) {
                f->snap = id;
                f->seq = seq;
            }
            f->man = man[i];
        }
        *res = (st_tcommit_t){.done = true,
                              .snap = id,
                              .seq = seq,
                              .ts_ms = ts,
                              .mans_set = true,
                              .mans = names,
                              .moved = moved};
        names = (st_tstrs_t){0};
        moved = (st_tfiles_t){0};
        size_t wrote = 0;
        for (size_t i = 0; i < plan.n; i++)
            wrote += plan.v[i].bytes.len != 0;
        st_info("tables: %s v%lld: snapshot %lld (%s, %zu files; %zu manifests of ours, %zu "
                "written; %zu of other writers kept)",
                d->ice.name, (long long)m->version, (long long)id, in->op, (size_t)ofiles, plan.n,
                wrote, carried.n);
    } else if (!unknown) { /* nothing names them: out (a lost race, or a failure) */
        for (size_t i = 0; i < plan.n; i++)
            if (plan.v[i].bytes.len) st_objstore_delete(ms, plan.v[i].key);
        st_objstore_delete(ms, lkey.data);
    }
    cJSON_Delete(next);
    free(text);
    free(man);
    st_tmans_free(&plan);
    st_tfiles_free(&moved);
    st_ice_mlist_free(&carried);
    st_ice_mlist_free(&mine);
    st_tstrs_free(&expired);
    st_tstrs_free(&dropped);
    st_tstrs_free(&names);
    st_buf_t *bufs[] = {&lkey, &mpfx, &upfx, &luri, &puri, &lb, &vk, &tok};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        st_buf_free(bufs[i]);
    return rc;
}

int st_table_commit(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m, st_tfiles_t *live,
                    const st_tfiles_t *prev, const st_tstrs_t *prev_mans, int64_t keep_ms,
                    bool erase, const st_tier_writer_t *w, st_tcommit_t *res)
{
    st_tcommit_in_t in = {live, prev, prev_mans, NULL, keep_ms, erase, w, NULL};
    return st_table_commit_in(ms, d, m, &in, res);
}

int st_table_commit_in(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m,
                       const st_tcommit_in_t *c, st_tcommit_t *res)
{
    memset(res, 0, sizeof *res);
    st__diff_t x = st__diff(c->live, c->prev);
    bool same = x.added_files == 0 && x.deleted_files == 0;
    if (same && !c->erase) return ST_OK;
    /* replace only for a compaction that changes no row (SPEC v5 §5.1): a fold is an overwrite */
    const char *op = x.deleted_files == 0                           ? "append"
                     : x.added_files == 0                           ? "delete"
                     : x.added_rows == x.deleted_rows && !x.changed ? "replace"
                                                                    : "overwrite";
    st__cin_t in = {c, &x, op};
    for (int tries = 0; tries < ST__TRIES; tries++) {
        int rc = same ? st__expire_attempt(ms, d, m, c->w, res) : st__attempt(ms, d, m, &in, res);
        if (rc != ST_EEXIST) return rc;
        /* another writer committed v{N+1}: on top of theirs (their snapshot stays in history, their
         * manifests in ours) */
        st_info("tables: %s: v%lld was taken by another writer; reading it", d->ice.name,
                (long long)m->version + 1);
        if ((rc = st_table_load(ms, d, m, false)) != ST_OK) return rc;
    }
    return ST_ECONFLICT;
}
