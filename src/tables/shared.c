/* SPDX-License-Identifier: MIT */
/*
 * shared: several groups committing to the same tables (one --tables-url, SPEC v5 §5.1: "no
 * group's files are ever dropped by another's commit"). Pure: which manifests and manifest lists
 * are this writer's, and which manifests of a parent snapshot carry over to a new commit.
 *
 * Each group names its manifest lists snap-{id}-{uuid}-w{inc}.avro and its manifests
 * {uuid}-w{inc}-m{k}.avro, inc its writer incarnation (the token of its cold objects' keys,
 * st_tier_key_writer). A commit lists its own manifests (fastappend.c: the parent's carried over
 * or rewritten, one of the files it adds) and, copied unchanged (same path, counts, sequence
 * numbers, so ADDED entries keep inheriting the same snapshot and sequence), every manifest of
 * the parent's list that is not its own. Names from
 * before writer tokens (snap-{id}-{uuid}.avro naming {uuid}-m0.avro) are strata's from the time a
 * --tables-url had one writer: taken as the committer's own (replaced). Any other name is another
 * engine's or another group's: carried over, never deleted.
 */
#include "internal.h"
#include "strata/tier.h"

#include <string.h>

static const char *st__base(const char *uri)
{
    const char *b = strrchr(uri, '/');
    return b ? b + 1 : uri;
}

/* A random (v4) UUID's text at p: 36 characters, '-' at 8, 13, 18, 23. */
static bool st__is_uuid(const char *p)
{
    for (int i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? p[i] != '-' : !((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return false;
    }
    return true;
}

/* The uuid of a pre-token list name "snap-{digits}-{uuid}.avro", or NULL. */
static const char *st__legacy_list_uuid(const char *uri)
{
    const char *b = st__base(uri);
    if (strncmp(b, "snap-", 5) != 0) return NULL;
    const char *p = b + 5;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == b + 5 || *p != '-' || strlen(p + 1) != 36 + 5) return NULL;
    return st__is_uuid(p + 1) && strcmp(p + 37, ".avro") == 0 ? p + 1 : NULL;
}

static bool st__owns_inc(const st_tier_writer_t *w, uint64_t inc)
{
    if (inc == w->current) return true;
    for (size_t i = 0; i < w->n; i++)
        if (w->owned[i] == inc) return true;
    return false;
}

bool st_tables_list_mine(const st_tier_writer_t *w, const char *list_uri)
{
    uint64_t inc = st_tier_key_incarnation(st__base(list_uri));
    return inc ? st__owns_inc(w, inc) : st__legacy_list_uuid(list_uri) != NULL;
}

bool st_tables_manifest_mine(const st_tier_writer_t *w, const char *path, const char *list_uri)
{
    uint64_t inc = st_tier_key_incarnation(st__base(path));
    if (inc) return st__owns_inc(w, inc);
    const char *u = list_uri ? st__legacy_list_uuid(list_uri) : NULL;
    const char *b = st__base(path);
    return u && strncmp(b, u, 36) == 0 && strcmp(b + 36, "-m0.avro") == 0;
}

int st_tables_carry(const void *list, size_t len, const char *list_uri, const st_tier_writer_t *w,
                    st_ice_mlist_t *out, int64_t *rows, int64_t *files)
{
    return st_tables_carry_mine(list, len, list_uri, w, out, NULL, rows, files);
}

int st_tables_carry_mine(const void *list, size_t len, const char *list_uri,
                         const st_tier_writer_t *w, st_ice_mlist_t *out, st_ice_mlist_t *mine,
                         int64_t *rows, int64_t *files)
{
    *rows = *files = 0;
    if (mine) memset(mine, 0, sizeof *mine);
    int rc = st_ice_manifest_list_read(out, list, len);
    if (rc != ST_OK) return rc;
    size_t k = 0;
    for (size_t i = 0; i < out->n; i++) {
        st_ice_mfile_t *m = &out->v[i];
        if (st_tables_manifest_mine(w, m->path, list_uri)) {
            if (mine && m->content == ST_ICE_DATA) {
                st_vec_push(mine, *m);
                continue;
            }
            free((char *)m->path);
            free((char *)m->lower);
            free((char *)m->upper);
            continue;
        }
        if (m->content == ST_ICE_DATA) {
            *rows += m->added_rows + m->existing_rows;
            *files += m->added_files + m->existing_files;
        }
        out->v[k++] = *m;
    }
    out->n = k;
    return ST_OK;
}
