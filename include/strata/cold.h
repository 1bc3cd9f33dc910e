/* SPDX-License-Identifier: MIT */
/*
 * cold: the columnar tier (SPEC §5). Any kind's Parquet objects (its rows through the
 * schema-driven codec of strata/parquet.h: chat's messages, finished bookings, …; cold/ knows
 * their schemas only), and object storage behind one interface: a local directory (file://) or
 * any S3-compatible service (s3://bucket/prefix, signed by libcurl's AWS SigV4).
 *
 * Codecs and object I/O are plain blocking functions, safe to call from worker threads (one
 * st_objstore_t serves several, reusing its connections). The cold cache (st_coldcache_*) is the
 * loop's way in: it never blocks, and runs every fetch and decode on the worker pool.
 */
#ifndef STRATA_COLD_H
#define STRATA_COLD_H

#include "strata/core.h"
#include "strata/metrics.h"
#include "strata/parquet.h"

#include <uv.h>

/* ---- object storage ---- */
typedef struct st_objstore st_objstore_t;

typedef struct {
    const char *url;        /* file:///abs/dir, file://./rel/dir or s3://bucket/prefix */
    const char *endpoint;   /* s3: http(s)://host:port; empty = AWS for the region */
    const char *region;     /* s3: default us-east-1 */
    const char *access_key; /* s3 credentials */
    const char *secret_key;
    unsigned timeout_ms; /* s3: a whole request (0: 30 s); connecting gets at most 3 s of it */
    unsigned retries;    /* s3: retries of an idempotent request (GET, PUT, HEAD, DELETE, list,
                            an upload's start and parts) that failed in transport or with a 5xx
                            (503 SlowDown included), after ~100 ms, ~200 ms, … with jitter */
    int path_style;      /* s3: 1 endpoint/bucket/key, -1 virtual-hosted bucket.host/key, 0 auto:
                            path style with a custom endpoint, virtual-hosted for AWS's */
    const char *ca_file; /* s3: CA bundle (PEM) to verify an HTTPS endpoint with; NULL/empty: the
                            system's */
} st_objstore_opts_t;

int st_objstore_open(st_objstore_t **out, const st_objstore_opts_t *o);
void st_objstore_close(st_objstore_t *s);
/* A printable description (the URL without credentials). */
const char *st_objstore_describe(const st_objstore_t *s);
/* Appends key as an absolute URI (Iceberg's manifests name files so, SPEC v5 §5.1):
 * "file://" + the directory's real path + "/" + key, or "s3://bucket[/prefix]/key". No I/O.
 * out stays NUL-terminated (the NUL not counted in out->len). */
void st_objstore_uri(const st_objstore_t *s, const char *key, st_buf_t *out);
/* Creates key holding data atomically: readers see all of it or nothing (temp file + fsync +
 * link, or one PUT). Never over an existing object (SPEC §5): ST_EEXIST when key holds another
 * object (S3: a HEAD first, then the PUT with If-None-Match: *, which AWS, MinIO and Ceph enforce
 * atomically); ST_OK when it holds these very bytes (an earlier attempt whose answer was lost).
 * ST_EINVAL when the backend can never store that key (a path or key longer than it allows):
 * retrying is pointless. ST_EIO for what may pass on a retry. */
int st_objstore_put(st_objstore_t *s, const char *key, const void *data, size_t len);
/* The same, over whatever is there (temp file + rename, or a plain PUT): only for the store's own
 * bookkeeping that is rewritten in place (the members' markers under .strata/), never for data. */
int st_objstore_replace(st_objstore_t *s, const char *key, const void *data, size_t len);
/* Appends bytes [off, off+len) of key to out; ST_ENOTFOUND if the object is missing, ST_EIO if
 * it is shorter. */
int st_objstore_get(st_objstore_t *s, const char *key, uint64_t off, size_t len, st_buf_t *out);
int st_objstore_delete(st_objstore_t *s, const char *key);
/* Appends the whole object key to out when it holds at most max bytes: ST_ENOTFOUND if it is
 * missing, ST_ETOOLARGE if it is longer (out unchanged then), ST_EIO. For small objects whose
 * size nobody recorded (an Iceberg table's metadata files). */
int st_objstore_read(st_objstore_t *s, const char *key, size_t max, st_buf_t *out);
/* Calls fn for every object whose key starts with prefix (key relative to the store's root,
 * borrowed for the call); stops early when fn returns non-zero. */
typedef int (*st_objstore_list_fn)(void *arg, const char *key, uint64_t size);
int st_objstore_list(st_objstore_t *s, const char *prefix, st_objstore_list_fn fn, void *arg);
/* An object written in parts, for objects too large to hold in memory: S3 multipart upload
 * (parts of >= 5 MiB except the last; completed whole or aborted) or, in a directory, a
 * temporary file synced and linked into place. Same atomicity, and create only (ST_EEXIST from
 * begin or finish), as st_objstore_put. Calls block
 * (worker threads only). */
typedef struct st_objstore_upload st_objstore_upload_t;
int st_objstore_upload_begin(st_objstore_t *s, const char *key, st_objstore_upload_t **out);
/* Appends the next part (data borrowed for the call). On S3, a part under 5 MiB is held back
 * and joined to what follows (only the last part may be smaller). On failure, abort the
 * upload. */
int st_objstore_upload_part(st_objstore_upload_t *u, const void *data, size_t len);
/* The object appears whole (at least one part). Frees u, whatever happens; aborts on failure. */
int st_objstore_upload_finish(st_objstore_upload_t *u);
/* Drops the upload and whatever parts it had; frees u. NULL is a no-op. */
void st_objstore_upload_abort(st_objstore_upload_t *u);
/* Requests made so far by verb: 0 GET, 1 PUT, 2 DELETE, 3 LIST (all stores of the process). */
uint64_t st_objstore_requests(int verb);

/* ---- the cold cache: asynchronous reads for the loop ----
 * Parsed footers and decoded row groups of cold objects, kept in memory within one byte budget
 * (--cold-cache) for both: each entry counts its real heap (the entry, its keys, the parsed
 * footer's groups, chunks and statistics or the decoded group, and a view's form of either), and
 * the least recently used entry goes first, footer or row group (so what a lookup gives is
 * borrowed only until the loop runs again or its wait is released). A lookup never blocks: it
 * answers from memory, or ST_ECOLD for an object that failed, or ST_EPARKED after noting what is
 * missing in the cache's want list. st_coldcache_wait then fetches and decodes everything wanted on
 * the worker pool and calls done on the loop once it is all in memory, where it stays (pinned by
 * the wait) until st_coldcache_release: the caller re-runs its read, which now finds everything.
 * Loop-thread only. */
typedef struct st_coldcache st_coldcache_t;
typedef struct st_coldwait st_coldwait_t;
typedef void (*st_coldwait_fn)(void *arg);

typedef struct {
    st_objstore_t *obj;    /* borrowed; must outlive the cache */
    uint64_t budget;       /* bytes of footers and row groups kept (pinned ones may exceed it) */
    st_metric_t *m_groups; /* counts row groups decoded (may be NULL) */
} st_coldcache_opts_t;

/* What a cache holds now (ready entries): per part, entries and the bytes counted for them. */
typedef struct {
    size_t footers, groups;
    uint64_t footer_bytes, group_bytes;
} st_coldcache_usage_t;

/* The cache's /metrics gauges: strata_cold_cache_bytes and strata_cold_cache_entries, each with
 * part="footers" and part="row_groups", and strata_cold_cache_capacity_bytes (the budget). */
void st_coldcache_open(st_coldcache_t **out, uv_loop_t *loop, const st_coldcache_opts_t *o);
void st_coldcache_usage(const st_coldcache_t *cc, st_coldcache_usage_t *out);
/* Waits still open are cancelled (their done never runs); the memory goes once the last job
 * in flight has come back, so run the loop afterwards. */
void st_coldcache_close(st_coldcache_t *cc);
/* Any kind's objects, read through its schema (s, borrowed: it must outlive the cache; one
 * object is always read with one schema): the parsed footer, and row group gi decoded into a
 * table (g: the footer's description of it, nleaves chunks), for the kind to walk with a cursor
 * (st_pq_cur_init). Borrowed like a footer. */
int st_coldcache_pqfile(st_coldcache_t *cc, const st_pq_schema_t *s, const char *key, uint64_t size,
                        const st_pq_file_t **out);
int st_coldcache_table(st_coldcache_t *cc, const st_pq_schema_t *s, const char *key, size_t gi,
                       const st_pq_rowgroup_t *g, size_t nleaves, const st_pq_table_t **out);
/* A kind's own form of what the cache holds (its rows as structs, a footer's summary), made once
 * per entry and kept, and freed, with it. footer: on the loop, the first time the object's footer
 * is asked for through the view (f borrowed; ST_EINVAL: the object cannot be read). group: on a
 * worker, right after the row group was decoded: it may take the table's memory (leaving those
 * fields NULL/0; the rest is freed right after). *bytes (both): what it holds, for the budget. */
typedef struct {
    const st_pq_schema_t *schema;
    int (*footer)(const st_pq_file_t *f, void **out, size_t *bytes);
    void (*free_footer)(void *v);
    int (*group)(st_pq_table_t *t, void **out, size_t *bytes);
    void (*free_group)(void *v);
} st_coldview_t;
/* The same lookups through a view (v borrowed, must outlive the cache): the footer's and row group
 * gi's view, borrowed like a footer. The footer is the entry st_coldcache_pqfile gives. */
int st_coldcache_view_footer(st_coldcache_t *cc, const st_coldview_t *v, const char *key,
                             uint64_t size, const void **out);
/* The same footer for a reader of its rows: when its fetch reads the whole object (a small one),
 * the same job decodes its row groups too, and they are in the cache with the footer (later
 * st_coldcache_view_group lookups find them ready): one wait instead of two. */
int st_coldcache_view_footer_rows(st_coldcache_t *cc, const st_coldview_t *v, const char *key,
                                  uint64_t size, const void **out);
int st_coldcache_view_group(st_coldcache_t *cc, const st_coldview_t *v, const char *key, size_t gi,
                            const st_pq_rowgroup_t *g, size_t nleaves, const void **out);
/* The last object a fetch found missing (NOT_FOUND in storage) if that was within the last
 * within_ms and it has not been read since; NULL otherwise. Borrowed until the next loop turn.
 * (A missing object that a manifest references is a lost object: /healthz names it.) */
const char *st_coldcache_missing(const st_coldcache_t *cc, uint64_t within_ms);
/* Whether lookups since the last wait reported anything missing. */
bool st_coldcache_wanting(const st_coldcache_t *cc);
/* Fetches what is wanted. *w: NULL, or a wait of the same reader still held (it keeps its pins
 * and gains the new ones). Returns true when done(arg) will be called on the loop; false when
 * all of it is already in memory (re-run now; nothing is called). With done NULL it is a
 * prefetch: nothing is pinned or called, *w may be NULL, and only a few fetches start (the rest
 * of the want list is dropped), so background work never floods the pool ahead of readers. */
bool st_coldcache_wait(st_coldcache_t *cc, st_coldwait_t **w, st_coldwait_fn done, void *arg);
/* Drops the want list (a reader that will not wait after all). */
void st_coldcache_forget(st_coldcache_t *cc);
/* Unpins what w held and frees it; a wait still under way is cancelled (done never runs). */
void st_coldcache_release(st_coldcache_t *cc, st_coldwait_t *w);
/* Deletes an object on the worker pool; done(arg, rc) on the loop (done may be NULL), also
 * after st_coldcache_close. */
void st_coldcache_delete(st_coldcache_t *cc, const char *key, void (*done)(void *arg, int rc),
                         void *arg);

#endif
