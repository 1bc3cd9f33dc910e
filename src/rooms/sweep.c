/* SPDX-License-Identifier: MIT */
/* The author index's entries of the posts retention dropped (issue 48: "memory is the flags'").
 *
 * Retention drops a room's oldest objects whole (and compaction the expired rows of one that
 * mixes them with live ones) and does not know their authors, so it leaves their 'a' entries
 * (authors.c, ~30 bytes each): a busy room with retention grew its index without bound while its
 * messages stayed bounded. Here chat's expired hook counts, in the batch that drops the rows, how
 * many the room's index has left behind; once that count reaches ST__SWEEP_MIN and the number of
 * author runs the room's last sweep visited, the room is queued, and the background slices
 * (st_rooms_sweep_step, run by main.c's erasure timer: only on the member that serves writes,
 * within the loop turn's budget) delete its entries below the room's floor, one batch a slice.
 *
 * The floor: the smallest msg_id of the room's objects left in the manifest, or, with none left,
 * its cold watermark + 1 (the tier's flush invariant: every hot id is above every cold id, so an
 * id below that floor is in no object and not hot: dropped). Computed once per sweep, from the
 * manifest records (objects, not rows).
 *
 * The cost follows the garbage, not the room: an author's entries of one kind are in seq order,
 * and so in msg_id order, so a run's garbage is its first entries; at the first entry of a run
 * at or above the floor the walk jumps past the run. A sweep visits its garbage and one entry per
 * run; queued once the garbage counted reaches the runs the last sweep visited, its work is at
 * most twice the entries it deletes.
 *
 * State ("\0rooms_sweep" then a tag; each written in the batch that changes it, so a restart or
 * a new leader resumes where the last slice ended):
 *   'c' room  be64 dropped since the last sweep | be64 runs the last sweep visited
 *   'q' room  a queued sweep: be64 counted at its start | be64 floor (0: not started) |
 *             be64 runs visited | the 'a' key the next slice starts at (empty: the first)
 *   't'       be64 the sum of the rooms' 'c' counts (strata_rooms_index_unswept) */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char st__sweep_pre[] = "\0rooms_sweep"; /* with its 0 terminator: 13 bytes */
#define ST__SWEEP_PL  sizeof st__sweep_pre
#define ST__SWEEP_MIN 256 /* dropped entries before a room is swept at all */
#define ST__SWEEP_HDR 24  /* a 'q' value's fixed part */

static size_t st__rsweep_key(uint8_t *k, char tag, const char *room, size_t rl)
{
    memcpy(k, st__sweep_pre, ST__SWEEP_PL);
    k[ST__SWEEP_PL] = (uint8_t)tag;
    memcpy(k + ST__SWEEP_PL + 1, room, rl);
    return ST__SWEEP_PL + 1 + rl;
}

/* be64 values 0..n of key (absent or short: 0). */
static void st__rsweep_get(st_rooms_t *r, const uint8_t *k, size_t kl, uint64_t *v, size_t n,
                           uint64_t *wait)
{
    const uint8_t *p;
    size_t vl;
    bool ok = st_store_get(r->store, k, kl, (const void **)&p, &vl, wait) == ST_OK;
    for (size_t i = 0; i < n; i++)
        v[i] = ok && vl >= 8 * (i + 1) ? st_be64_get(p + 8 * i) : 0;
}

static int st__rsweep_put(st_rooms_t *r, const uint8_t *k, size_t kl, const uint64_t *v, size_t n,
                          const void *tail, size_t tl, uint64_t *wait)
{
    uint8_t b[ST__SWEEP_HDR + ST__ROOMS_KEY_CAP];
    for (size_t i = 0; i < n; i++)
        st_be64_put(b + 8 * i, v[i]);
    if (tl) memcpy(b + 8 * n, tail, tl);
    return st_store_put(r->store, k, kl, b, 8 * n + tl, wait);
}

/* The sum of the counts moves by d (the gauge). */
static int st__rsweep_total(st_rooms_t *r, int64_t d, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rsweep_key(k, 't', "", 0);
    uint64_t t;
    st__rsweep_get(r, k, kl, &t, 1, wait);
    int64_t n = (int64_t)t + d;
    t = n > 0 ? (uint64_t)n : 0;
    return st__rsweep_put(r, k, kl, &t, 1, NULL, 0, wait);
}

/* Queued when the count reaches what the sweep will visit besides the garbage. */
static int st__rsweep_maybe_queue(st_rooms_t *r, const char *room, size_t rl, uint64_t dropped,
                                  uint64_t runs, uint64_t *wait)
{
    if (dropped < ST__SWEEP_MIN || dropped < runs) return ST_OK;
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rsweep_key(k, 'q', room, rl);
    const void *v;
    size_t vl;
    if (st_store_get(r->store, k, kl, &v, &vl, wait) == ST_OK) return ST_OK; /* queued already */
    uint64_t q[3] = {0, 0, 0};
    return st__rsweep_put(r, k, kl, q, 3, NULL, 0, wait);
}

int st__rooms_expired(void *arg, const st_owner_t *o, const char *conv, size_t cl, int64_t rows,
                      uint64_t *wait)
{
    st_rooms_t *r = arg;
    (void)conv, (void)cl; /* a room's one conversation */
    if (o->kind != ST_OWNER_ROOM || rows <= 0 || o->len > ST_NAME_MAX) return ST_OK;
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rsweep_key(k, 'c', o->id, o->len);
    uint64_t c[2];
    st__rsweep_get(r, k, kl, c, 2, wait);
    c[0] += (uint64_t)rows;
    int rc = st__rsweep_put(r, k, kl, c, 2, NULL, 0, wait);
    if (rc == ST_OK) rc = st__rsweep_total(r, rows, wait);
    if (rc == ST_OK) rc = st__rsweep_maybe_queue(r, o->id, o->len, c[0], c[1], wait);
    return rc;
}

typedef struct {
    uint64_t floor;
    size_t seen, max;
    st_buf_t dead; /* (size_t length, key) each */
    bool kept, full;
    uint8_t at[ST__ROOMS_KEY_CAP]; /* the entry the walk stopped at */
    size_t atl;
} st_sweep_walk_t;

static int st__rsweep_visit(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_sweep_walk_t *w = arg;
    if (klen < 10 || klen > ST_KEY_MAX) return 0;
    if (w->seen >= w->max)
        w->full = true;
    else if (vlen != 8 || st_be64_get(val) >= w->floor)
        w->kept = true;
    if (w->full || w->kept) {
        memcpy(w->at, key, klen);
        w->atl = klen;
        return 1;
    }
    w->seen++;
    st_buf_append(&w->dead, &klen, sizeof klen);
    st_buf_append(&w->dead, key, klen);
    return 0;
}

/* The sweep of room done: its count less what was counted at the start (drops since stay
 * counted), the runs it visited kept for the next trigger. */
static int st__rsweep_done(st_rooms_t *r, const char *room, size_t rl, uint64_t counted,
                           uint64_t runs, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    int rc = st_store_del(r->store, k, st__rsweep_key(k, 'q', room, rl), wait);
    if (rc == ST_ENOTFOUND) rc = ST_OK;
    size_t kl = st__rsweep_key(k, 'c', room, rl);
    uint64_t c[2];
    st__rsweep_get(r, k, kl, c, 2, wait);
    if (counted > c[0]) counted = c[0];
    c[0] -= counted;
    c[1] = runs;
    if (rc == ST_OK) rc = st__rsweep_put(r, k, kl, c, 2, NULL, 0, wait);
    if (rc == ST_OK) rc = st__rsweep_total(r, -(int64_t)counted, wait);
    if (rc == ST_OK) rc = st__rsweep_maybe_queue(r, room, rl, c[0], c[1], wait);
    return rc;
}

/* One slice of the sweep of room (its 'q' value v): at most max entries visited, the garbage
 * among them deleted and the state moved on, in this batch. */
static int st__rsweep_slice(st_rooms_t *r, const char *room, size_t rl, const uint8_t *v, size_t vl,
                            size_t max, uint64_t *wait)
{
    uint64_t q[3] = {st_be64_get(v), st_be64_get(v + 8), st_be64_get(v + 16)};
    uint8_t pre[ST__ROOMS_KEY_CAP], k[ST__ROOMS_KEY_CAP];
    size_t pl = st__rooms_key(pre, room, rl);
    pre[0] = ST__KS_AUTHOR;
    pre[pl++] = 0;
    if (!q[1]) { /* its start: the floor, and the count it takes */
        uint64_t c[2];
        st__rsweep_get(r, k, st__rsweep_key(k, 'c', room, rl), c, 2, wait);
        q[0] = c[0];
        q[1] = st_chat_dropped_below(r->chat, ST_ROOM(room, rl), wait);
        if (!q[1]) return st__rsweep_done(r, room, rl, q[0], q[2], wait); /* nothing known gone */
    }
    st_sweep_walk_t w = {.floor = q[1], .max = max ? max : 1};
    size_t from = vl - ST__SWEEP_HDR;
    memcpy(w.at, from ? v + ST__SWEEP_HDR : pre, from ? from : pl);
    w.atl = from ? from : pl;
    int rc = ST_OK;
    bool done = false;
    while (rc == ST_OK && !done) {
        memcpy(k, w.at, w.atl);
        size_t kl = w.atl;
        w.kept = w.full = false;
        rc = st_store_scan_from(r->store, pre, pl, k, kl, st__rsweep_visit, &w, wait);
        rc = rc < 0 ? rc : ST_OK;
        if (w.full) break;
        if (!w.kept) {
            done = true;
            break;
        }
        /* kept: the rest of its run (author, kind) is above the floor; the next run starts
         * after its last possible seq */
        q[2]++;
        memset(w.at + w.atl - 8, 0xff, 8);
        if (++w.seen >= w.max) break;
    }
    size_t n = 0;
    for (size_t off = 0; rc == ST_OK && off < w.dead.len; n++) {
        size_t dl;
        memcpy(&dl, w.dead.data + off, sizeof dl);
        rc = st_store_del(r->store, w.dead.data + off + sizeof dl, dl, wait);
        off += sizeof dl + dl;
    }
    st_buf_free(&w.dead);
    st_metric_add(r->m_swept, (double)n);
    if (rc != ST_OK) return rc;
    if (done) return st__rsweep_done(r, room, rl, q[0], q[2], wait);
    return st__rsweep_put(r, k, st__rsweep_key(k, 'q', room, rl), q, 3, w.at, w.atl, wait);
}

static int st__rsweep_first(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_buf_t *b = arg;
    st_buf_append(b, &klen, sizeof klen);
    st_buf_append(b, key, klen);
    st_buf_append(b, val, vlen);
    return 1;
}

bool st_rooms_sweep_step(st_rooms_t *r, size_t max)
{
    if (r->sweep_slices_left == 0) return false; /* tests: held (st__rooms_sweep_open) */
    if (r->sweep_slices_left > 0) r->sweep_slices_left--;
    uint8_t k[ST__ROOMS_KEY_CAP];
    uint64_t w = 0;
    size_t pl = st__rsweep_key(k, 'q', "", 0);
    st_buf_t b = {0};
    if (st_store_scan(r->store, k, pl, st__rsweep_first, &b, &w) <= 0) {
        st_buf_free(&b);
        return false;
    }
    size_t kl;
    memcpy(&kl, b.data, sizeof kl);
    const char *room = b.data + sizeof kl + pl;
    size_t rl = kl - pl;
    const uint8_t *v = (const uint8_t *)b.data + sizeof kl + kl;
    size_t vl = b.len - sizeof kl - kl;
    int rc;
    if (vl < ST__SWEEP_HDR || st_rooms_exists(r, room, rl, &w) == ST_ENOTFOUND)
        rc = st__rooms_sweep_forget(r, room, rl, &w); /* a deleted room's: its slices */
    else
        rc = st__rsweep_slice(r, room, rl, v, vl, max, &w);
    if (rc != ST_OK) st_warn("rooms: a sweep of the author index failed (%d)", rc);
    st_buf_free(&b);
    return true;
}

int st__rooms_sweep_forget(st_rooms_t *r, const char *room, size_t rl, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rsweep_key(k, 'c', room, rl);
    uint64_t c[2];
    st__rsweep_get(r, k, kl, c, 2, wait);
    int rc = st_store_del(r->store, k, kl, wait);
    if (rc == ST_OK || rc == ST_ENOTFOUND)
        rc = st_store_del(r->store, k, st__rsweep_key(k, 'q', room, rl), wait);
    if (rc == ST_ENOTFOUND) rc = ST_OK;
    if (rc == ST_OK && c[0]) rc = st__rsweep_total(r, -(int64_t)c[0], wait);
    return rc;
}

static double st__rsweep_unswept(void *arg)
{
    st_rooms_t *r = arg;
    uint8_t k[ST__ROOMS_KEY_CAP];
    uint64_t t, w = 0;
    st__rsweep_get(r, k, st__rsweep_key(k, 't', "", 0), &t, 1, &w);
    return (double)t;
}

void st__rooms_sweep_open(st_rooms_t *r)
{
    r->m_swept = st_metrics_counter("strata_rooms_index_swept_total",
                                    "Author index entries of posts retention dropped, deleted by "
                                    "the rooms' sweep",
                                    "");
    st_metrics_gauge_fn("strata_rooms_index_unswept",
                        "Posts retention dropped from rooms since each room's last sweep of its "
                        "author index (their entries wait for one)",
                        "", st__rsweep_unswept, r);
    st_chat_on_expired(r->chat, st__rooms_expired, r);
    /* tests stop a sweep part way: STRATA_TEST_ROOMS_SWEEP_SLICES=n runs n slices, then none */
    const char *e = getenv("STRATA_TEST_ROOMS_SWEEP_SLICES");
    r->sweep_slices_left = e && *e ? atol(e) : -1;
}
