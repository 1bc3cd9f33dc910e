/* SPDX-License-Identifier: MIT */
/*
 * Quota and disk room: whether the store may take a write, and why not (SPEC §7's /healthz
 * reasons). The figures come from the threads (LMDB's pages in use and free, the backlog not
 * applied yet) and from statvfs on the data directory and the cold tier's; a full state is
 * latched until there is clearly room again, so writes do not flap between 201 and 507.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void st__space_init(st__space_t *sp, const st_store_opts_t *opts)
{
    if (opts->watch_dir) {
        size_t n = strlen(opts->watch_dir) + 1;
        sp->watch_dir = memcpy(st_calloc(1, n), opts->watch_dir, n);
    }
    sp->quota = opts->map_size;
    uint64_t max_write = opts->max_write ? opts->max_write : 8ULL << 20;
    sp->reserve = max_write * 2 > (16ULL << 20) ? max_write * 2 : 16ULL << 20;
}

void st__space_free(st__space_t *sp)
{
    free(sp->watch_dir);
    sp->watch_dir = NULL;
}

/* Free space changes behind our back (flushes, other programs, an operator making room): look
 * again at most every 50 ms of loop time. statvfs reads counters kept in memory. */
static void st__refresh_disk(st_store_t *s)
{
    st__space_t *sp = &s->space;
    uint64_t now = uv_now(s->loop);
    if (sp->disk_checked_ms && now < sp->disk_checked_ms + 50) return;
    sp->disk_checked_ms = now;
    sp->disk_avail = st__disk_avail(s->dir);
    if (!sp->watch_dir) return;
    struct stat a, b;
    sp->watch_same_fs =
        stat(s->dir, &a) == 0 && stat(sp->watch_dir, &b) == 0 && a.st_dev == b.st_dev;
    sp->watch_avail = sp->watch_same_fs ? UINT64_MAX : st__disk_avail(sp->watch_dir);
}

static int st__refuse(const st_store_health_t *h, int apply_err)
{
    if (h->flags & ST_STORE_LOG_FAILED) return ST_EIO;
    if (h->flags & (ST_STORE_FULL | ST_STORE_DISK_FULL | ST_STORE_COLD_DISK_FULL)) return ST_EFULL;
    if (h->flags & ST_STORE_APPLY_STALLED) return apply_err == ST_EFULL ? ST_EFULL : ST_EIO;
    return ST_OK;
}

void st_store_health(st_store_t *s, st_store_health_t *h)
{
    st__space_t *sp = &s->space;
    st__refresh_disk(s);
    /* without mu: every write asks (st__publish_threads's copies; a figure a moment old is fine) */
    uint64_t applied = __atomic_load_n(&s->th.pub.used_bytes, __ATOMIC_RELAXED);
    uint64_t pending = st__pending_bytes(s) + s->open->bytes;
    uint64_t lmdb_free = __atomic_load_n(&s->th.pub.lmdb_free, __ATOMIC_RELAXED);
    uint64_t stall_ns = __atomic_load_n(&s->th.pub.apply_stall_ns, __ATOMIC_RELAXED);
    int log_err = __atomic_load_n(&s->th.pub.log_err, __ATOMIC_RELAXED);
    int apply_err = __atomic_load_n(&s->th.pub.apply_err, __ATOMIC_RELAXED);
    memset(h, 0, sizeof *h);
    h->quota = sp->quota;
    h->used = applied + pending;
    h->backlog = pending;
    h->disk_free = sp->disk_avail;
    /* What the disk can still take: its free space plus LMDB's reusable pages, less what the
     * backlog will need once applied, less a reserve (LMDB's copy-on-write, the cold tier). */
    uint64_t room =
        sp->disk_avail > UINT64_MAX - lmdb_free ? UINT64_MAX : sp->disk_avail + lmdb_free;
    uint64_t need = pending + sp->reserve;
    uint64_t left = room > need ? room - need : 0;
    /* Once full, the store stays full until there is clearly room again (a flush, an operator):
     * the estimate of what is not applied yet may turn out high once it is, and writes should
     * not flap between 201 and 507 at the mark. */
    if (h->used >= sp->quota)
        sp->full_latched = true;
    else if (h->used + sp->quota / 64 < sp->quota)
        sp->full_latched = false;
    if (left == 0)
        sp->disk_latched = true;
    else if (left > sp->reserve / 8)
        sp->disk_latched = false;
    uint64_t to_quota = sp->quota > h->used ? sp->quota - h->used : 0;
    h->capacity = sp->disk_latched ? h->used : h->used + (left < to_quota ? left : to_quota);
    if (log_err) h->flags |= ST_STORE_LOG_FAILED;
    if (sp->full_latched) h->flags |= ST_STORE_FULL;
    if (sp->disk_latched) h->flags |= ST_STORE_DISK_FULL;
    if (sp->watch_dir && sp->watch_avail < sp->reserve) h->flags |= ST_STORE_COLD_DISK_FULL;
    if (apply_err) {
        h->flags |= ST_STORE_APPLY_STALLED;
        h->stalled_ms = (st_mono_ns() - stall_ns) / 1000000;
    }
    h->refuse = st__refuse(h, apply_err);
}

const char *st_store_reason(unsigned flag)
{
    switch (flag) {
    case ST_STORE_LOG_FAILED:
        return "redo_log_failed";
    case ST_STORE_FULL:
        return "store_full";
    case ST_STORE_DISK_FULL:
        return "disk_full";
    case ST_STORE_APPLY_STALLED:
        return "apply_stalled";
    case ST_STORE_COLD_DISK_FULL:
        return "cold_disk_full";
    default:
        return "unknown";
    }
}

void st_store_usage(st_store_t *s, uint64_t *used, uint64_t *size)
{
    st_store_health_t h;
    st_store_health(s, &h);
    *used = h.used;
    *size = h.capacity;
}

int st_store_writable(st_store_t *s)
{
    if (st_store_standby(s)) return ST_ENOLEADER;
    st_store_health_t h;
    st_store_health(s, &h);
    return h.refuse;
}

const char *st_store_refusal(st_store_t *s)
{
    st__space_t *sp = &s->space;
    st_store_health_t h;
    st_store_health(s, &h);
    if (h.flags & ST_STORE_LOG_FAILED) {
        uv_mutex_lock(&s->th.mu);
        snprintf(sp->why, sizeof sp->why, "%s; restart strata to recover", s->th.log_why);
        uv_mutex_unlock(&s->th.mu);
    } else if (h.flags & ST_STORE_FULL) {
        snprintf(sp->why, sizeof sp->why, "the hot store is full (%llu of %llu bytes, --map-size)",
                 (unsigned long long)h.used, (unsigned long long)h.quota);
    } else if (h.flags & ST_STORE_DISK_FULL) {
        snprintf(sp->why, sizeof sp->why,
                 "the data directory's disk is full (%llu bytes free, %llu needed)",
                 (unsigned long long)h.disk_free, (unsigned long long)(h.backlog + sp->reserve));
    } else if (h.flags & ST_STORE_COLD_DISK_FULL) {
        snprintf(sp->why, sizeof sp->why, "the cold tier's disk is full (%llu bytes free)",
                 (unsigned long long)sp->watch_avail);
    } else if (h.flags & ST_STORE_APPLY_STALLED) {
        snprintf(sp->why, sizeof sp->why,
                 "acknowledged writes cannot be applied to LMDB (%s, for %llu ms)",
                 st_strerror(h.refuse), (unsigned long long)h.stalled_ms);
    } else {
        snprintf(sp->why, sizeof sp->why, "the store takes writes");
    }
    return sp->why;
}
