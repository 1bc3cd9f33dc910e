/* SPDX-License-Identifier: MIT */
/*
 * tier: the cold tier's pass over the hot store (SPEC §5, §7). Every --flush-interval, with the
 * hot store at 80 % and on POST /v1/admin/flush, one pass visits every key space that has work
 * to do in the background: chat's users (retention, flushes queued), the counters (hot
 * increments into their baselines), chat's idle conversations (eviction). Each is a source: a
 * key prefix and what to do with each key, implemented by the module that owns those keys, so
 * the tier knows nothing of counters or messages (the way Redis keeps rdb.c/aof.c out of its
 * data-type files).
 *
 * The pass runs in slices, one per loop turn on an idle handle, each a few pages of keys within
 * about 1 ms of loop time, so a pass over millions of keys never stalls the loop. Sources run in
 * ascending `order`; each walks its keys in key order from the last key it visited, so every key
 * there for the whole pass is visited once (one added behind the cursor waits for the next pass).
 * A pass asked for while one runs is queued: one more pass follows it (flags OR-ed).
 * Loop thread only.
 */
#ifndef STRATA_TIER_H
#define STRATA_TIER_H

#include "strata/store.h"

#include <uv.h>

typedef struct st_tier_source {
    const char *name; /* for logs */
    char prefix;      /* the source's keys: every key starting with this byte */
    size_t page;      /* keys scanned per page */
    int order;        /* sources run in ascending order */
    /* Whether to act on a key: called inside the store's scan, so it only reads (key, val). */
    bool (*want)(void *arg, const void *key, size_t klen, const void *val, size_t vlen);
    /* Acts on a wanted key, after the page's scan (it may stage writes). */
    void (*act)(void *arg, const void *key, size_t klen);
    /* Optional: the pass reaches this source (flags as given to st_tier_pass_start), or is done
     * with it. */
    void (*begin)(void *arg, int flags);
    void (*end)(void *arg);
    void *arg;
    struct st_tier_source *next; /* the pass's list */
} st_tier_source_t;

/* Orders of the pass's sources: a data kind's users first, the eviction of what is idle last,
 * everything else between (counters: ST_TIER_ORDER_MIDDLE). */
enum { ST_TIER_ORDER_FIRST = 0, ST_TIER_ORDER_MIDDLE = 50, ST_TIER_ORDER_LAST = 100 };

typedef struct st_tier_pass st_tier_pass_t;

/* after_slice (optional) runs after every slice: what the slice queued can start. *out is owned:
 * st_tier_pass_close. */
int st_tier_pass_open(st_tier_pass_t **out, uv_loop_t *loop, st_store_t *store,
                      void (*after_slice)(void *arg), void *arg);
/* Adds a source (borrowed: it must outlive the pass). Not while a pass runs. */
void st_tier_pass_add(st_tier_pass_t *p, st_tier_source_t *src);
/* Starts a pass and runs its first slice now; one asked for while a pass runs follows it. */
void st_tier_pass_start(st_tier_pass_t *p, int flags);
/* Whether a pass is running. */
bool st_tier_pass_running(const st_tier_pass_t *p);
/* Stops: no more slices; closed(arg) once the pass is freed (after the loop runs). */
void st_tier_pass_close(st_tier_pass_t *p, void (*closed)(void *arg), void *arg);

/* ---- the reaper: objects out of storage once their deletion is durable ---- */
/* A batch that takes an object out of a manifest (or finds it orphaned) records its deletion:
 * 'D' owner 0 seq -> the object key. The reaper deletes the objects of durable 'D' records on a
 * worker, then drops the records; a failed delete is retried after 30 s. */
typedef struct st_tier_reaper st_tier_reaper_t;
typedef struct st_objstore st_objstore_t;
/* store and obj are borrowed (they must outlive the reaper). */
int st_tier_reaper_open(st_tier_reaper_t **out, uv_loop_t *loop, st_store_t *store,
                        st_objstore_t *obj);
/* A pass over up to 256 durable 'D' records, unless one is out or it backs off. NULL: no-op. */
void st_tier_reap(st_tier_reaper_t *r);
/* Closes: freed now, or once its pass in flight is back; then closed(arg). */
void st_tier_reaper_close(st_tier_reaper_t *r, void (*closed)(void *arg), void *arg);

#endif
