/* SPDX-License-Identifier: MIT */
/*
 * chatrows: chat's message files (SPEC §5), chat's own rows in the schema-driven Parquet codec of
 * strata/parquet.h: the owner column and ten more, one row group per conversation with min/max
 * statistics. The row type, the footer summary and row-group decoding chat reads them with
 * (src/chat/parquet_msg.c), the cold cache's view of them, and chat's merge of them
 * (src/chat/merge.c).
 * cold/ knows none of this: it reads and caches these objects through st_pq_msg_schema and
 * st_chat_msg_view like any kind's. Plain blocking functions, safe on any thread.
 */
#ifndef STRATA_CHATROWS_H
#define STRATA_CHATROWS_H

#include "strata/cold.h"
#include "strata/owner.h"
#include "strata/tier.h"

/* One earlier version of a message (SPEC §2.2's edit_history entry). Strings are borrowed;
 * content and metadata (raw JSON text) NULL mean SQL NULL. */
typedef struct {
    const char *content, *metadata;
    uint32_t content_len, metadata_len;
    int64_t edited_at; /* µs since the epoch, UTC: when this version was written */
} st_msgedit_t;

/* One message as a row. Strings are borrowed; from, content and metadata NULL mean SQL NULL (a
 * tombstone's content and metadata, an erased author's from, SPEC v5 §5.1). */
typedef struct {
    uint64_t msg_id;
    int64_t timestamp; /* µs since the epoch, UTC */
    int64_t seq;
    const char *conv, *from, *content, *metadata;
    uint32_t conv_len, from_len, content_len, metadata_len;
    int64_t edited_at,
        deleted_at; /* µs since the epoch, UTC; 0: null (never edited, not deleted) */
    /* edit_history, oldest first (borrowed): null when has_hist is false (a message never edited,
     * whose answers have no edit_history), a list of nhist otherwise (a tombstone's empty, as
     * its answers' "edit_history":[]) */
    const st_msgedit_t *hist;
    uint32_t nhist;
    bool has_hist;
} st_msgrow_t;

/* The owner column (a user's: user; a room's: room_id; field id 1, SPEC v5 §5.1), then msg_id,
 * conversation_id, from, timestamp, seq, content, metadata, edited_at, deleted_at (field ids 2 to
 * 10; the last two null in files written before them) and edit_history (11: a LIST, element 12,
 * of a STRUCT of content, metadata and edited_at, 13 to 15; null in files written before it):
 * ST_PQ_MSG_FIELDS top-level fields, ST_PQ_COLUMNS leaves (column chunks, numbered in that
 * order: edit_history's three are the last). */
#define ST_PQ_MSG_FIELDS 11
#define ST_PQ_COLUMNS    13
/* The message files' schemas (key: conversation_id, sorted by msg_id): a user's and a room's,
 * which differ only in the owner column's name. Either reads every message file, a user's or a
 * room's (the owner column matches by its field id), and those written before the owner column
 * (it then reads as null). */
extern const st_pq_schema_t st_pq_msg_schema, st_pq_room_schema;
/* The schema an owner's files are written with (its kind's; the owner column's value is o->id). */
const st_pq_schema_t *st_pq_msg_schema_of(const st_owner_t *o);

/* Encodes rows of the owner o into a whole Parquet file appended to out. Rows must be grouped by
 * conversation and sorted by msg_id inside each group: each group becomes one row group. */
int st_parquet_encode(const st_msgrow_t *rows, size_t n, const st_owner_t *o, int zstd_level,
                      st_buf_t *out);

/* A row group as the footer describes it: enough to prune by statistics and to fetch only its
 * bytes. conv points into the meta's own memory. */
typedef struct {
    uint64_t min_id, max_id;
    int64_t min_ts, max_ts;   /* the timestamp column's statistics (0 if absent) */
    int64_t min_seq, max_seq; /* the seq column's statistics (0 if absent) */
    const char *conv;
    size_t conv_len;
    int64_t rows;
    uint64_t offset, length; /* the byte range of all its column chunks */
    uint64_t col_offset[ST_PQ_COLUMNS], col_length[ST_PQ_COLUMNS];
    bool col_required[ST_PQ_COLUMNS]; /* the chunk's st_pq_chunk_t.required (an older file) */
} st_pq_group_t;

typedef struct {
    st_pq_group_t *groups;
    size_t ngroups;
    int64_t rows;
    char *strings; /* owned */
} st_pq_meta_t;

/* The last 8 bytes of a file give the footer's length; ST_EINVAL if they are not Parquet's. */
int st_parquet_footer_len(const uint8_t tail[8], uint64_t file_size, uint32_t *len);
/* Parses a footer (the len bytes before the tail) of a file strata wrote. Anything else, or a
 * corrupt footer, is ST_EINVAL with nothing allocated. Free with st_parquet_meta_free. */
int st_parquet_parse_footer(const uint8_t *p, size_t len, uint64_t file_size, st_pq_meta_t *out);
/* The same summary of a footer already parsed against st_pq_msg_schema. */
int st_parquet_meta_of(const st_pq_file_t *f, st_pq_meta_t *out);
void st_parquet_meta_free(st_pq_meta_t *m);

/* Decoded rows of one row group; every pointer is into mem, owned, freed by _rows_free. */
typedef struct {
    st_msgrow_t *rows;
    size_t n;
    void **mem;
    size_t nmem;
} st_pq_rows_t;

/* Decodes a row group from the bytes [g->offset, g->offset + g->length) of its file. */
int st_parquet_read_group(const st_pq_group_t *g, const uint8_t *bytes, size_t len,
                          st_pq_rows_t *out);
void st_parquet_rows_free(st_pq_rows_t *r);

/* The cold cache's view of message files: footers as st_pq_meta_t, row groups as st_pq_rows_t
 * (sorted by msg_id, checked). Through the tier's cache, loop thread only, like
 * st_coldcache_view_footer/_group: *out borrowed until the loop runs again. */
extern const st_coldview_t st_chat_msg_view;
int st_chat_cold_footer(st_coldcache_t *cc, const char *key, uint64_t size,
                        const st_pq_meta_t **out);
/* The same for a read of the object's rows (st_coldcache_view_footer_rows: a small object's row
 * groups come with it). */
int st_chat_cold_footer_rows(st_coldcache_t *cc, const char *key, uint64_t size,
                             const st_pq_meta_t **out);
int st_chat_cold_group(st_coldcache_t *cc, const char *key, size_t gi, const st_pq_group_t *g,
                       const st_pq_rows_t **out);

/* ---- chat's merge of message objects (merge.c), on a compaction's worker ---- */
/* The tier's merge of any schema (st_tier_pq_merge_with, by conversation then id) with chat's row
 * hook: the objects' rows (of the owner o) merged into key in the shape
 * st_pq_msg_schema_of gives (an older object's rows get the owner column), those older than
 * cutoff left out; each row given to fix
 * (may be NULL) first: a kind folding changes in (fix may point a row's strings at its own memory,
 * live until the merge returns; a row it returns false for is left out, and is the caller's to
 * account for). *dropped (free with st_chat_dropped_free) counts the rows left out by the cutoff
 * per conversation, read back with st_chat_dropped_next. */
int st_chat_parquet_merge(int zstd_level, const st_owner_t *o, st_objstore_t *obj,
                          const st_tier_obj_t *objs, size_t nold, int64_t cutoff, const char *key,
                          st_tier_file_t *out, void **dropped, int64_t *ndropped,
                          bool (*fix)(void *arg, st_msgrow_t *r), void *fix_arg);
/* The next conversation of dropped from *pos (0 first): its rows left out; false at the end. */
bool st_chat_dropped_next(const void *dropped, size_t *pos, const char **g, size_t *gl,
                          int64_t *rows);
void st_chat_dropped_free(void *arg, void *dropped);
/* The order of rows in an object: by conversation, then id (qsort). */
int st_chat_cmp_rows(const void *a, const void *b);

/* Chat's rows as Iceberg columns (SPEC v5 §5.1): the fields every message table ends with after
 * its owner column (1) and msg_id (2), field ids 4 to 15 fixed (the Parquet writer stamps the same
 * ids), closing the schema's JSON text; and their schema.name-mapping.default entries, closing the
 * mapping's. The messages table (src/chat/table.c) and room_messages (src/rooms/table.c) are
 * built of them. */
#define ST_CHAT_SCHEMA_TAIL                                                                        \
    "{\"id\":4,\"name\":\"from\",\"required\":false,\"type\":\"string\"},"                         \
    "{\"id\":5,\"name\":\"timestamp\",\"required\":true,\"type\":\"timestamptz\"},"                \
    "{\"id\":6,\"name\":\"seq\",\"required\":true,\"type\":\"long\"},"                             \
    "{\"id\":7,\"name\":\"content\",\"required\":false,\"type\":\"string\"},"                      \
    "{\"id\":8,\"name\":\"metadata\",\"required\":false,\"type\":\"string\"},"                     \
    "{\"id\":9,\"name\":\"edited_at\",\"required\":false,\"type\":\"timestamptz\"},"               \
    "{\"id\":10,\"name\":\"deleted_at\",\"required\":false,\"type\":\"timestamptz\"},"             \
    "{\"id\":11,\"name\":\"edit_history\",\"required\":false,\"type\":{\"type\":\"list\","         \
    "\"element-id\":12,\"element-required\":true,\"element\":{\"type\":\"struct\",\"fields\":["    \
    "{\"id\":13,\"name\":\"content\",\"required\":false,\"type\":\"string\"},"                     \
    "{\"id\":14,\"name\":\"metadata\",\"required\":false,\"type\":\"string\"},"                    \
    "{\"id\":15,\"name\":\"edited_at\",\"required\":true,\"type\":\"timestamptz\"}]}}}]}"
#define ST_CHAT_MAP_TAIL                                                                           \
    "{\"field-id\":4,\"names\":[\"from\"]},{\"field-id\":5,\"names\":[\"timestamp\"]},"            \
    "{\"field-id\":6,\"names\":[\"seq\"]},{\"field-id\":7,\"names\":[\"content\"]},"               \
    "{\"field-id\":8,\"names\":[\"metadata\"]},{\"field-id\":9,\"names\":[\"edited_at\"]},"        \
    "{\"field-id\":10,\"names\":[\"deleted_at\"]},{\"field-id\":11,\"names\":[\"edit_history\"],"  \
    "\"fields\":[{\"field-id\":12,\"names\":[\"element\"],\"fields\":["                            \
    "{\"field-id\":13,\"names\":[\"content\"]},{\"field-id\":14,\"names\":[\"metadata\"]},"        \
    "{\"field-id\":15,\"names\":[\"edited_at\"]}]}]}]"

#endif
