/* SPDX-License-Identifier: MIT */
/*
 * catalog: what strata's read-only Iceberg REST catalog serves (SPEC v5 §5.1) — the newest
 * metadata of each table as the tables' metadata store holds it, read back from that store (the
 * objects `{table}/metadata/v{N}.metadata.json` and the hint `{table}/metadata/version-hint.text`)
 * and never from a committer's memory, so any member of a group serves the newest version it can
 * see. A refresh runs on the worker pool at start-up and then about every second while engines
 * ask (every 30 s once nobody asked for a minute: an idle node does not read an S3 tier's hints
 * every second); the loop reads only the cache. Loop-thread only, except what the refresh does on
 * its worker.
 */
#ifndef STRATA_CATALOG_H
#define STRATA_CATALOG_H

#include "strata/core.h"

#include <uv.h>

typedef struct st_catalog st_catalog_t;
typedef struct st_objstore st_objstore_t;

/* The i-th table of namespace "strata" (the kinds' tables: st_tables_n, strata/iceberg.h), or
 * NULL past the last. Any thread. */
const char *st_catalog_table(size_t i);

/* A table's newest metadata known. Every pointer is owned by the catalog and valid until the
 * loop runs again (a refresh replaces it on the loop). */
typedef struct {
    uint64_t version;     /* N of v{N}.metadata.json */
    const char *location; /* its absolute URI (st_objstore_uri), NUL-terminated */
    const char *json;     /* its text, byte for byte (a JSON object), NUL-terminated */
    size_t json_len;
} st_catalog_entry_t;

/* Starts refreshing from obj (borrowed: it must outlive the catalog, i.e. stay open until the
 * loop ran after st_catalog_close). refresh_ms 0: every 1000 ms. *out is owned: st_catalog_close.
 * obj NULL: a catalog that knows no table. */
int st_catalog_open(st_catalog_t **out, uv_loop_t *loop, st_objstore_t *obj, unsigned refresh_ms);
/* Stops refreshing; the catalog frees itself once a refresh in flight is back (run the loop).
 * NULL is a no-op. */
void st_catalog_close(st_catalog_t *c);
/* The newest metadata of table name (n bytes, any bytes): ST_OK with *e (borrowed, see above),
 * counting as a question (the catalog refreshes every second again),
 * or ST_ENOTFOUND when it is not a table of the namespace or none of its versions was found yet.
 * c may be NULL (no table). */
int st_catalog_get(st_catalog_t *c, const char *name, size_t n, st_catalog_entry_t *e);
/* This node committed to the tables: refresh now, and every second for a minute (so what the
 * committer wrote is served at once even after an idle spell). NULL is a no-op. */
void st_catalog_nudge(st_catalog_t *c);
/* Whether name is one of the tables (st_catalog_table). */
bool st_catalog_is_table(const char *name, size_t n);

#endif
