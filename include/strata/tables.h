/* SPDX-License-Identifier: MIT */
/*
 * tables: the cold tier's Apache Iceberg tables, the writer side (SPEC v5 §5.1).
 *
 * Which objects are in which table: the tier's manifest ('F' records, strata/tier.h) holds every
 * live object; an owner's tag names its table (0: `messages`, a user's; 'r': `room_messages`;
 * 'b': `bookings`; chat's delta objects, 'e', are no table's). Every --table-commit-interval the
 * loop reads, in one turn (one consistent view: a compaction's swap is one batch), the 'F' records
 * of the owners whose file set changed since the last commit (the tier's dirty marks,
 * strata/tier.h) — every 'F' record only once when it starts to lead and after a failed batch —
 * and a worker merges that with the committed set (src/tables/view.c), so a commit's loop work is
 * in proportion to what changed, not to the objects the tables hold; the marks a commit covered
 * go once it is done. When a table's set of objects differs from its last snapshot, the worker
 * writes a manifest of the objects it adds, rewrites only the manifests naming objects it removes
 * (Iceberg's fast append; past 100 manifests of this writer the small ones merge:
 * src/tables/fastappend.c), a manifest list and metadata/v{N}.metadata.json (create-exclusive:
 * losing the race re-reads the winner and commits on top of it as v{N+1}), then
 * version-hint.text.
 * Each object's provenance (the snapshot and sequence number that added it, the manifest naming
 * it) is kept in the hot store under "\0tables" (replicated and backed up with it), written once
 * its commit is done.
 * Only the member that flushes commits (a group's leader); followers commit nothing.
 * Several groups may share one --tables-url: a group's manifests and lists carry its writer token
 * (strata/tier.h), its commit carries every other writer's manifest of the current snapshot over
 * unchanged, and it deletes only its own (src/tables/shared.c, orphans.c).
 *
 * Expiry: snapshots older than --table-keep go at each commit, with their manifest lists and the
 * manifests no kept snapshot lists any more. A commit that carries an erasure (the tier told
 * st_tables_erased of objects an erasure deleted: the user's, a deleted room's, those a hold let
 * go) expires every earlier snapshot, so no manifest the table still holds names what went; any
 * other commit (retention, a deleted conversation, a compaction) is an ordinary snapshot, and time
 * travel works within --table-keep.
 * Objects a compaction replaced stay in storage while a kept snapshot may name them: the tier's
 * reaper holds their deletion until the oldest kept snapshot is newer (st_tables_oldest_us,
 * src/cold/hold.c).
 *
 * Loop thread only, but for st_tables_meta_* (pure, any thread).
 */
#ifndef STRATA_TABLES_H
#define STRATA_TABLES_H

#include "strata/cold.h"
#include "strata/config.h"
#include "strata/store.h"
#include "strata/tier.h"

#include <uv.h>

typedef struct st_tables st_tables_t;

/* Opens the module and starts its commit timer. loop, store, cold (the tier's object store) and
 * meta (the tables' metadata store) are borrowed and must outlive it. *out is owned:
 * st_tables_close. Claims the "\0tables" key prefix. */
int st_tables_open(st_tables_t **out, uv_loop_t *loop, st_store_t *store, st_objstore_t *cold,
                   st_objstore_t *meta, const st_config_t *cfg);
/* fn(arg) runs on the loop after every commit that wrote a snapshot (the catalog refreshes: see
 * st_catalog_nudge). One at a time; NULL clears it. */
void st_tables_on_commit(st_tables_t *t, void (*fn)(void *arg), void *arg);
/* The tier's observer of merges that changed rows (st_tier_on_rows_changed; arg: the module):
 * the object of key is marked in the same batch, and the snapshot that adds it is an overwrite,
 * not a replace (SPEC v5 §5.1). */
void st_tables_rows_changed(void *arg, const char *key, uint64_t *wait);
/* The tier's observer of an erasure's objects (st_tier_on_erased; arg: the module): the object
 * of key is marked in the same batch, and the next commit of its table expires every earlier
 * snapshot (SPEC v5 §5.1: an erasure overrides --table-keep), whatever else it holds. */
void st_tables_erased(void *arg, const char *o, size_t ol, const char *key, uint64_t *wait);
/* The tier's file observer (st_tier_on_file): a file record put or deleted moves its table's
 * pending count (GET /v1/admin/tables) in the same batch (src/tables/look.c). Needs only the
 * store (claimed by st_tables_open). */
void st_tables_file_changed(st_store_t *s, const char *o, size_t ol, const char *key, bool put,
                            uint64_t *wait);
/* rebuild-meta (offline, after it put the file records back): every table's pending count
 * recounted from its dirty owners' records, staged. */
int st_tables_pending_recount(st_store_t *s, uint64_t *wait);
/* Stops the timer; freed now, or once a commit in flight is back (run the loop). NULL: no-op. */
void st_tables_close(st_tables_t *t);
/* GET /v1/admin/tables: {"tables":[{"table","snapshot_id","sequence_number","committed_at",
 * "pending"}]} into out (committed_at: µs since the epoch like the other admin routes' times; it
 * and snapshot_id null before the first snapshot; pending: each table's running count,
 * src/tables/look.c, exact and O(1) a table; 0 once every object written is in a snapshot). */
int st_tables_json(st_tables_t *t, st_buf_t *out);

/* The time (µs) of the oldest snapshot any table keeps, for the tier's hold on replaced objects
 * (st_tier_hold_t.tables_oldest_us): 0 when none is kept (or commits are off), -1 until every
 * table's document has been read since this member began to commit. NULL: 0. */
int64_t st_tables_oldest_us(const st_tables_t *t);

/* ---- rebuild-meta (truth.c): offline, blocking ---- */
/* The data files the current snapshot of the table of owners tagged tag names, as keys of cold
 * (files under another store's root are left out), sorted, into *out (owned: st_tier_named_free),
 * read from the tables' metadata store meta through the catalog's and committer's loader.
 * No table, or none with a snapshot yet: ST_OK with out->known false (said in the log: the
 * bucket's listing stands in). ST_ENOTFOUND: tag is no table's. A file that cannot be read:
 * its error (logged). */
int st_tables_named(st_objstore_t *meta, st_objstore_t *cold, char tag, st_tier_named_t *out);

/* ---- metadata documents (meta.c): pure ---- */
/* Parses and checks one metadata file (format version 2, the members strata reads, their types).
 * *out is owned (cJSON_Delete). ST_EINVAL for anything else. */
struct cJSON;
int st_tables_meta_parse(const void *data, size_t len, struct cJSON **out);

#endif
