/* SPDX-License-Identifier: MIT */
/*
 * The shipper. The store's tap (sync thread, right after a group is durable) copies its record
 * into a backlog; one worker thread owns every object-store call: it ships the backlog as one
 * segment per interval, takes a snapshot when one is due, prunes, and retries while the object
 * store is down. The loop thread only reads figures (a timer copies them into /metrics).
 *
 * Why a backlog in memory rather than reading the redo log: the log is reused after every
 * checkpoint, and the shipper must never hold the store back. A backlog past --backup-backlog-mb
 * (or a group the log could not hold, or a restart, which loses the backlog) is a break: what was
 * not shipped is dropped and a new timeline begins with a fresh snapshot, which holds all of it;
 * until that snapshot is up the lag keeps counting from the oldest write it stands for.
 *
 * Barriers (reservations of sequence numbers and conversation seqs): before a group holding one
 * is logged, the store hands its reservation ops to st__bk_ahead, which queues them as an ahead
 * record and waits until a segment holding it is shipped — at most --backup-barrier-timeout-ms.
 * Past that the store fails the group unlogged (503, nothing applied), so an ack never waits on
 * the target for longer than the bound and no range is issued from unless the backup holds its
 * reservation. While the target fails, the store refuses requests that would need a barrier (503)
 * at once instead of letting each wait for the bound.
 *
 * In a replicated group every member runs a shipper but only the leader's ships
 * (st_backup_lead): it starts a new timeline, whose snapshot holds every committed entry, and
 * follows the entries it applies; losing the lead drops the backlog and idles the worker. There
 * a reservation's entry is committed before the tap sees it: the tap waits (at most
 * --backup-barrier-timeout-ms) for the segment that holds it, and the store holds the answers
 * meanwhile, failing them if the wait fails.
 */
#include "internal.h"
#include "strata/metrics.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define ST__BK_SEG_MAX   (16u << 20) /* bytes of records per segment */
#define ST__BK_RETRY_MS  1000
#define ST__BK_FIGURE_MS 500

struct st_backup {
    st_store_t *store;
    st_objstore_t *obj;
    char *scratch; /* the snapshot's temporary file */
    uint64_t interval_ms, snapshot_ms, keep, max_backlog, barrier_ms, part_size;
    uv_thread_t thread;
    uv_timer_t figures;

    uv_mutex_t mu;
    uv_cond_t cv, cv_shipped;
    st_list_t queue;           /* st_bk_rec_t, by link, oldest first */
    st_bk_rec_t *inflight_end; /* last record being shipped (the tap must not free it) */
    uint64_t backlog_bytes;
    uint64_t tickets, want_ticket, shipped_ticket; /* ahead records: issued, wanted, shipped */
    bool stop, closing;
    bool leading;      /* a single node always; in a group, while this member leads */
    bool group;        /* a replicated group's member (o->standby) */
    uint64_t timeline; /* worker only */
    bool need_snapshot;
    uint64_t tapped_seq; /* the last record the tap took */
    uint64_t snap_need;  /* the next snapshot must hold every record up to this one */
    int64_t
        owed_since; /* µs: the oldest write only a snapshot not yet shipped will hold (0: none) */
    bool dropped;   /* the backlog went past max_backlog and that snapshot is not shipped yet */
    bool ready;     /* told to the store: barriers are taken */
    int64_t oldest; /* µs: the oldest kept snapshot's time, as the last prune listed (0: none) */
    uint64_t bytes_total, failures, snapshots;

    st_metric_t *m_lag, *m_bytes, *m_failures, *m_snapshots;
    uint64_t seen_bytes, seen_failures, seen_snapshots;
};

static uint64_t st__ms(void)
{
    return st_mono_ns() / 1000000;
}

/* ---- the tap (sync thread) ---- */

/* The oldest record queued, or NULL. */
static st_bk_rec_t *st__bk_head(st_backup_t *b)
{
    return st_list_empty(&b->queue) ? NULL : ST_LIST_ITEM(b->queue.next, st_bk_rec_t, link);
}

static void st__bk_append(st_backup_t *b, st_bk_rec_t *r)
{
    st_list_insert(&b->queue, &r->link);
    b->backlog_bytes += r->len;
}

/* Drops every record not in flight and leaves a break: the next snapshot covers them. The
 * break keeps the time of the oldest one, so the lag (the loss window) still counts from it. */
static void st__bk_drop(st_backup_t *b)
{
    st_list_t *from = b->inflight_end ? b->inflight_end->link.next : b->queue.next;
    int64_t oldest = from != &b->queue ? ST_LIST_ITEM(from, st_bk_rec_t, link)->time : st_now_us();
    b->dropped = true;
    for (st_list_t *l = from, *next; l != &b->queue; l = next) {
        st_bk_rec_t *r = ST_LIST_ITEM(l, st_bk_rec_t, link);
        next = l->next;
        st_list_unlink(l);
        b->backlog_bytes -= r->len;
        free(r);
    }
    st_bk_rec_t *brk = st_calloc(1, sizeof *brk);
    brk->time = oldest;
    brk->upto = b->tapped_seq;
    st__bk_append(b, brk);
}

/* With mu held: waits until the record with this ticket is shipped, at most barrier_ms (or
 * until shipping stops here). ST_EUNAVAIL if it was not. */
static int st__bk_wait(st_backup_t *b, uint64_t ticket)
{
    uint64_t until = st_mono_ns() + b->barrier_ms * 1000000, now;
    if (b->want_ticket < ticket) b->want_ticket = ticket;
    uv_cond_signal(&b->cv);
    while (b->shipped_ticket < ticket && !b->closing && b->leading && (now = st_mono_ns()) < until)
        uv_cond_timedwait(&b->cv_shipped, &b->mu, until - now);
    if (b->shipped_ticket >= ticket) return ST_OK;
    st_warn("backup: a reservation was not taken by %s within %llu ms: its requests are "
            "refused (503)",
            st_objstore_describe(b->obj), (unsigned long long)b->barrier_ms);
    return ST_EUNAVAIL;
}

/* The store's tap. barrier in a replicated group: a reservation's entry, which must be shipped
 * before the answers held for it are released (a single node's went ahead, st__bk_ahead). */
static int st__bk_tap(void *arg, uint64_t seq, const void *rec, size_t len, bool barrier)
{
    st_backup_t *b = arg;
    st_bk_rec_t *r = st_malloc(sizeof *r + (seq ? len : 0));
    r->seq = seq;
    r->ticket = 0;
    r->upto = 0;
    r->time = st_now_us();
    r->len = seq ? len : 0; /* a break needs no data: LMDB already holds the group */
    if (seq) memcpy(r->data, rec, len);
    uv_mutex_lock(&b->mu);
    if (!b->leading) { /* lost the lead meanwhile: the next leader's timeline covers it */
        uv_mutex_unlock(&b->mu);
        free(r);
        return barrier && b->group ? ST_EUNAVAIL : ST_OK;
    }
    if (b->backlog_bytes + r->len > b->max_backlog) {
        st_warn("backup: backlog past %llu bytes: dropped for a new snapshot",
                (unsigned long long)b->max_backlog);
        st__bk_drop(b);
    }
    if (seq)
        b->tapped_seq = seq;
    else
        r->upto = b->tapped_seq; /* committed straight to LMDB: any later copy holds it */
    uint64_t ticket = r->ticket = barrier && seq && b->group ? ++b->tickets : 0;
    st__bk_append(b, r); /* the worker may ship and free r once we wait */
    int rc = ticket ? st__bk_wait(b, ticket) : ST_OK;
    uv_mutex_unlock(&b->mu);
    return rc;
}

/* The store's ahead tap: the reservations of group seq, shipped before it is logged. Refused at
 * once while the target fails; otherwise waits for the segment that holds them, at most
 * barrier_ms (past it the record stays queued: harmless when it lands later, it only raises). */
static int st__bk_ahead(void *arg, uint64_t seq, const void *rec, size_t len)
{
    st_backup_t *b = arg;
    st_bk_rec_t *r = st_malloc(sizeof *r + len);
    r->seq = seq | ST_BK_AHEAD;
    r->upto = 0;
    r->time = st_now_us();
    r->len = len;
    memcpy(r->data, rec, len);
    uv_mutex_lock(&b->mu);
    if (!b->ready || b->closing) {
        uv_mutex_unlock(&b->mu);
        free(r);
        return ST_EUNAVAIL;
    }
    if (b->backlog_bytes + r->len > b->max_backlog) st__bk_drop(b);
    uint64_t ticket = r->ticket = ++b->tickets;
    st__bk_append(b, r);
    int rc = st__bk_wait(b, ticket);
    uv_mutex_unlock(&b->mu);
    return rc;
}

/* ---- the worker ---- */

/* Uploads one part of the snapshot (starting the upload on the first), keeping what is past
 * part_size for the next. */
static int st__bk_part(st_backup_t *b, const char *key, st_objstore_upload_t **up, st_buf_t *z)
{
    int rc = *up ? ST_OK : st_objstore_upload_begin(b->obj, key, up);
    if (rc == ST_OK) rc = st_objstore_upload_part(*up, z->data, b->part_size);
    if (rc != ST_OK) return rc;
    memmove(z->data, z->data + b->part_size, z->len - b->part_size);
    z->len -= b->part_size;
    return ST_OK;
}

/* Compresses the copy in fd as it reads it and uploads it in parts of part_size: memory stays
 * near one part whatever the store's size. A snapshot that fits in one part is one PUT. */
static int st__bk_upload(st_backup_t *b, int fd, const char *key, uint64_t *zbytes)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return ST_EIO;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setPledgedSrcSize(cc, (unsigned long long)st.st_size); /* restore sizes from it */
    size_t inlen = 1u << 20, outmin = ZSTD_CStreamOutSize();
    char *in = st_malloc(inlen);
    st_buf_t z = {0};
    st_objstore_upload_t *up = NULL;
    int rc = ST_OK;
    *zbytes = 0;
    for (off_t off = 0; rc == ST_OK;) {
        ssize_t n = pread(fd, in, inlen, off);
        if (n < 0 || (n == 0 && off < st.st_size)) {
            rc = ST_EIO;
            break;
        }
        off += n;
        bool end = off >= st.st_size;
        ZSTD_inBuffer ib = {in, (size_t)n, 0};
        for (bool done = false; !done && rc == ST_OK;) {
            st_buf_reserve(&z, outmin);
            ZSTD_outBuffer ob = {z.data + z.len, z.cap - z.len, 0};
            size_t left = ZSTD_compressStream2(cc, &ob, &ib, end ? ZSTD_e_end : ZSTD_e_continue);
            if (ZSTD_isError(left)) rc = ST_EINTERNAL;
            z.len += ob.pos;
            *zbytes += ob.pos;
            while (rc == ST_OK && z.len >= b->part_size)
                rc = st__bk_part(b, key, &up, &z);
            done = end ? left == 0 : ib.pos == ib.size;
        }
        if (end) break;
    }
    if (rc == ST_OK && !up) {
        rc = st_objstore_put(b->obj, key, z.data, z.len);
    } else if (rc == ST_OK) {
        if (z.len) rc = st_objstore_upload_part(up, z.data, z.len);
        if (rc == ST_OK)
            rc = st_objstore_upload_finish(up);
        else
            st_objstore_upload_abort(up);
    } else {
        st_objstore_upload_abort(up);
    }
    st_buf_free(&z);
    free(in);
    ZSTD_freeCCtx(cc);
    return rc;
}

static int st__bk_snapshot(st_backup_t *b, uint64_t timeline)
{
    int fd = open(b->scratch, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return ST_EIO;
    int64_t t = st_now_us();
    uint64_t applied = 0, zbytes = 0;
    char key[128];
    uv_mutex_lock(&b->mu);
    uint64_t need = b->snap_need;
    uv_mutex_unlock(&b->mu);
    int rc = st_store_copy(b->store, fd, &applied);
    /* A new timeline's snapshot must hold what the old one did not ship: LMDB trails the redo
     * log by a few ms, so a copy taken too early is taken again. */
    for (int i = 0; rc == ST_OK && applied < need && i < 100; i++) {
        uv_sleep(20);
        if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) rc = ST_EIO;
        if (rc == ST_OK) rc = st_store_copy(b->store, fd, &applied);
    }
    if (rc == ST_OK && applied < need) rc = ST_EUNAVAIL; /* applying is stuck: retried later */
    st__bk_snap_key(key, sizeof key, timeline, applied, t);
    if (rc == ST_OK) rc = st__bk_upload(b, fd, key, &zbytes);
    close(fd);
    unlink(b->scratch);
    if (rc == ST_OK) {
        st_info("backup: snapshot %s (%llu bytes)", key, (unsigned long long)zbytes);
        uv_mutex_lock(&b->mu);
        b->bytes_total += zbytes;
        b->snapshots++;
        uv_mutex_unlock(&b->mu);
    }
    return rc;
}

/* Deletes snapshots past --backup-keep, and segments no kept snapshot needs. */
static void st__bk_prune(st_backup_t *b)
{
    st_bk_obj_t *v;
    size_t n, nsnap = 0;
    if (st__bk_list(b->obj, &v, &n) != ST_OK) return;
    while (nsnap < n && v[nsnap].snap)
        nsnap++;
    size_t drop = nsnap > b->keep ? nsnap - b->keep : 0;
    int64_t first_t = 0; /* of those kept: the oldest point a restore can reach */
    for (size_t i = drop; i < nsnap; i++)
        if (v[i].time > 0 && (!first_t || v[i].time < first_t)) first_t = v[i].time;
    uv_mutex_lock(&b->mu);
    b->oldest = first_t;
    uv_mutex_unlock(&b->mu);
    if (drop) {
        /* snapshots sort by (timeline, applied): the first ones are the oldest */
        const st_bk_obj_t *oldest = &v[drop];
        for (size_t i = 0; i < drop; i++)
            st_objstore_delete(b->obj, v[i].key);
        for (size_t i = nsnap; i < n; i++)
            if (v[i].timeline < oldest->timeline ||
                (v[i].timeline == oldest->timeline && v[i].last <= oldest->first))
                st_objstore_delete(b->obj, v[i].key);
    }
    free(v);
}

/* Ships the records from the head up to a break (at most ST__BK_SEG_MAX bytes). Called with
 * mu held; drops it during the upload. */
static int st__bk_ship(st_backup_t *b)
{
    size_t cnt = 0, bytes = 0;
    st_bk_rec_t *first = st__bk_head(b), *last = NULL;
    for (ST_LIST_EACH(l, n, &b->queue)) {
        st_bk_rec_t *r = ST_LIST_ITEM(l, st_bk_rec_t, link);
        if (!r->seq || (cnt > 0 && bytes + r->len > ST__BK_SEG_MAX)) break;
        last = r;
        cnt++;
        bytes += r->len;
    }
    if (!cnt) return ST_OK;
    b->inflight_end = last;
    uint64_t timeline = b->timeline;
    uv_mutex_unlock(&b->mu);
    st_buf_t raw = {0}, z = {0};
    st__bk_seg_encode(&raw, timeline, first, cnt);
    int rc = st__bk_compress(raw.data, raw.len, &z);
    char key[128];
    st__bk_seg_key(key, sizeof key, timeline, first->seq & ~ST_BK_AHEAD, last->seq & ~ST_BK_AHEAD,
                   first->time);
    if (rc == ST_OK) rc = st_objstore_put(b->obj, key, z.data, z.len);
    st_buf_free(&raw);
    uv_mutex_lock(&b->mu);
    b->inflight_end = NULL;
    if (rc == ST_OK) {
        b->bytes_total += z.len;
        for (size_t i = 0; i < cnt; i++) { /* first..last: still the queue's oldest */
            st_bk_rec_t *r = st__bk_head(b);
            st_list_unlink(&r->link);
            if (r->ticket) b->shipped_ticket = r->ticket;
            b->backlog_bytes -= r->len;
            free(r);
        }
        uv_cond_broadcast(&b->cv_shipped);
    }
    st_buf_free(&z);
    return rc;
}

/* A key of this timeline exists already (another writer on the same backup URL took the same
 * timeline: SPEC §5, no key is written twice): a new timeline, which starts with a snapshot. */
static int st__bk_collided(st_backup_t *b, int rc)
{
    if (rc != ST_EEXIST) return rc;
    uint64_t now = (uint64_t)st_now_us();
    b->timeline = now > b->timeline ? now : b->timeline + 1;
    b->need_snapshot = true;
    st_warn("backup: a key of this timeline exists in %s already; going on in timeline %016llx",
            st_objstore_describe(b->obj), (unsigned long long)b->timeline);
    return ST_OK;
}

/* One step of work, or 0 and *sleep_ms when there is none. Called with mu held. */
static int st__bk_step(st_backup_t *b, uint64_t *next_ship, uint64_t *next_snap, bool *did)
{
    uint64_t now = st__ms();
    *did = true;
    st_bk_rec_t *head = st__bk_head(b);
    if (head && !head->seq) { /* a break: a new timeline, which starts with a snapshot */
        st_bk_rec_t *brk = head;
        if (!b->owed_since || brk->time < b->owed_since) b->owed_since = brk->time;
        if (b->snap_need < brk->upto) b->snap_need = brk->upto;
        st_list_unlink(&brk->link);
        free(brk);
        b->timeline = (uint64_t)st_now_us();
        b->need_snapshot = true;
    }
    if (b->need_snapshot || now >= *next_snap) {
        uint64_t timeline = b->timeline;
        uv_mutex_unlock(&b->mu);
        int rc = st__bk_snapshot(b, timeline);
        if (rc == ST_OK) st__bk_prune(b);
        uv_mutex_lock(&b->mu);
        if (rc != ST_OK) return st__bk_collided(b, rc);
        b->need_snapshot = false;
        bool brk = false; /* another break waits: its snapshot is still owed */
        for (st_list_t *l = b->queue.next; l != &b->queue && !brk; l = l->next)
            brk = !ST_LIST_ITEM(l, st_bk_rec_t, link)->seq;
        if (!brk) {
            b->owed_since = 0;
            b->dropped = false;
        }
        *next_snap = st__ms() + b->snapshot_ms;
        return ST_OK;
    }
    if (!st_list_empty(&b->queue) && (b->want_ticket > b->shipped_ticket || now >= *next_ship)) {
        int rc = st__bk_ship(b);
        if (rc == ST_OK && (st_list_empty(&b->queue) || b->want_ticket <= b->shipped_ticket))
            *next_ship = st__ms() + b->interval_ms;
        return st__bk_collided(b, rc);
    }
    *did = false;
    return ST_OK;
}

static void st__bk_worker(void *arg)
{
    st_backup_t *b = arg;
    uint64_t next_ship = st__ms() + b->interval_ms, next_snap = 0, retry_at = 0;
    uv_mutex_lock(&b->mu);
    while (!b->stop) {
        if (!b->leading) { /* a follower ships nothing */
            uv_cond_wait(&b->cv, &b->mu);
            continue;
        }
        bool did = false;
        int rc = ST_OK;
        if (st__ms() >= retry_at) rc = st__bk_step(b, &next_ship, &next_snap, &did);
        /* not ready while a new timeline waits for its snapshot (a break may have come in during
         * an upload) */
        bool ready = rc == ST_OK && !b->need_snapshot && !(st__bk_head(b) && !st__bk_head(b)->seq);
        if ((did || rc != ST_OK) && ready != b->ready) {
            b->ready = ready; /* barriers are refused while the target fails (store.h) */
            st_store_tap_ready(b->store, ready);
        }
        if (rc != ST_OK) {
            if (b->failures++ % 60 == 0)
                st_warn("backup: writing to %s failed (%s); retrying", st_objstore_describe(b->obj),
                        st_strerror(rc));
            retry_at = st__ms() + ST__BK_RETRY_MS;
        }
        if (did && rc == ST_OK) continue;
        uint64_t now = st__ms(), until;
        if (retry_at > now) {
            until = retry_at;
        } else {
            if (now >= next_ship) next_ship = now + b->interval_ms; /* nothing was waiting */
            until = next_ship < next_snap ? next_ship : next_snap;
        }
        if (until > now) uv_cond_timedwait(&b->cv, &b->mu, (until - now) * 1000000);
    }
    /* stopping: one last try at what the backlog holds (a new timeline would need a snapshot) */
    if (b->leading && st__bk_head(b) && st__bk_head(b)->seq && !b->need_snapshot &&
        st__bk_ship(b) != ST_OK)
        b->failures++;
    uv_mutex_unlock(&b->mu);
}

/* ---- the loop side ---- */

static void st__bk_figures(uv_timer_t *t)
{
    st_backup_t *b = t->data;
    uv_mutex_lock(&b->mu);
    uint64_t bytes = b->bytes_total, fails = b->failures, snaps = b->snapshots;
    uv_mutex_unlock(&b->mu);
    st_metric_set(b->m_lag, st_backup_lag(b));
    st_metric_add(b->m_bytes, (double)(bytes - b->seen_bytes));
    st_metric_add(b->m_failures, (double)(fails - b->seen_failures));
    st_metric_add(b->m_snapshots, (double)(snaps - b->seen_snapshots));
    b->seen_bytes = bytes;
    b->seen_failures = fails;
    b->seen_snapshots = snaps;
}

static void st__bk_metrics(st_backup_t *b)
{
    b->m_lag = st_metrics_gauge("strata_backup_lag_seconds",
                                "age of the oldest durable write not yet in the backup", "");
    b->m_bytes = st_metrics_counter("strata_backup_bytes_total",
                                    "bytes written to the backup (segments and snapshots)", "");
    b->m_failures = st_metrics_counter("strata_backup_failures_total",
                                       "backup uploads that failed (each is retried)", "");
    b->m_snapshots =
        st_metrics_counter("strata_backup_snapshots_total", "store snapshots shipped", "");
}

int st_backup_open(st_backup_t **out, uv_loop_t *loop, st_store_t *store, const st_backup_opts_t *o)
{
    st_backup_t *b = st_calloc(1, sizeof *b);
    st_list_init(&b->queue);
    int rc = st_objstore_open(&b->obj, &o->obj);
    if (rc != ST_OK) {
        free(b);
        return rc;
    }
    size_t n = strlen(o->data_dir) + 32;
    b->scratch = st_malloc(n);
    snprintf(b->scratch, n, "%s/backup-snapshot.tmp", o->data_dir);
    b->store = store;
    b->interval_ms = o->interval_ms ? o->interval_ms : 1000;
    b->snapshot_ms = (o->snapshot_s ? o->snapshot_s : 3600) * 1000;
    b->keep = o->keep ? o->keep : 1;
    b->max_backlog = o->max_backlog ? o->max_backlog : 256u << 20;
    b->barrier_ms = o->barrier_ms ? o->barrier_ms : 2000;
    b->part_size = o->part_size ? o->part_size : 16u << 20;
    b->timeline = (uint64_t)st_now_us();
    b->need_snapshot = true; /* every timeline starts with one: it holds all acknowledged state */
    b->leading = !o->standby;
    b->group = o->standby;
    uv_mutex_init(&b->mu);
    uv_cond_init(&b->cv);
    uv_cond_init(&b->cv_shipped);
    st__bk_metrics(b);
    uv_timer_init(loop, &b->figures);
    b->figures.data = b;
    uv_timer_start(&b->figures, st__bk_figures, ST__BK_FIGURE_MS, ST__BK_FIGURE_MS);
    uv_unref((uv_handle_t *)&b->figures);
    st_store_tap(store, st__bk_tap, b);
    st_store_tap_ahead(store, st__bk_ahead);
    uv_thread_create(&b->thread, st__bk_worker, b);
    st_info("backup: shipping to %s every %llu ms, a snapshot every %llu s, keeping %llu%s",
            st_objstore_describe(b->obj), (unsigned long long)b->interval_ms,
            (unsigned long long)(b->snapshot_ms / 1000), (unsigned long long)b->keep,
            o->standby ? " (while this member leads)" : "");
    *out = b;
    return ST_OK;
}

void st_backup_lead(st_backup_t *b, bool leading)
{
    if (!b) return;
    /* on: the store is idle (st_repl_on_lead); off: a tap call under way finds !leading below */
    st_store_tap_lead(b->store, leading);
    uv_mutex_lock(&b->mu);
    if (leading != b->leading)
        st_info("backup: %s", leading ? "this member leads: shipping, from a new snapshot"
                                      : "no longer the leader: shipping stops");
    b->leading = leading;
    bool dropped = b->dropped;
    st__bk_drop(b);                  /* leading, a break: a new timeline, its snapshot first */
    b->dropped = dropped && leading; /* a change of leader drops no acknowledged write */
    if (leading)
        ST_LIST_ITEM(b->queue.prev, st_bk_rec_t, link)->time =
            st_now_us(); /* what it owes starts with its lead (not a follower's past) */
    else
        b->owed_since = 0; /* a follower owes the backup nothing */
    b->ready = false;
    uv_cond_broadcast(&b->cv_shipped); /* a barrier waiting in the tap lets go (store.h) */
    uv_cond_signal(&b->cv);
    uv_mutex_unlock(&b->mu);
}

static void st__bk_free(uv_handle_t *h)
{
    st_backup_t *b = h->data;
    for (ST_LIST_EACH(l, n, &b->queue))
        free(ST_LIST_ITEM(l, st_bk_rec_t, link));
    uv_mutex_destroy(&b->mu);
    uv_cond_destroy(&b->cv);
    uv_cond_destroy(&b->cv_shipped);
    st_objstore_close(b->obj);
    free(b->scratch);
    free(b);
}

void st_backup_close(st_backup_t *b)
{
    if (!b) return;
    uv_mutex_lock(&b->mu);
    b->closing = true; /* a barrier waiting in the tap lets go */
    uv_cond_broadcast(&b->cv_shipped);
    uv_mutex_unlock(&b->mu);
    st_store_tap(b->store, NULL, NULL); /* returns once no tap call is running */
    uv_mutex_lock(&b->mu);
    b->stop = true;
    uv_cond_signal(&b->cv);
    uv_mutex_unlock(&b->mu);
    uv_thread_join(&b->thread);
    st__bk_figures(&b->figures);
    uv_close((uv_handle_t *)&b->figures, st__bk_free);
}

double st_backup_lag(st_backup_t *b)
{
    uv_mutex_lock(&b->mu);
    int64_t oldest = b->leading ? b->owed_since : 0; /* a follower's backlog is not its own */
    st_bk_rec_t *head = b->leading ? st__bk_head(b) : NULL;
    if (head && (!oldest || head->time < oldest)) oldest = head->time;
    uv_mutex_unlock(&b->mu);
    if (!oldest) return 0;
    int64_t d = st_now_us() - oldest;
    return d > 0 ? (double)d / 1e6 : 1e-6; /* something is owed: never 0 */
}

int64_t st_backup_oldest_us(st_backup_t *b)
{
    if (!b) return 0;
    uv_mutex_lock(&b->mu);
    int64_t t = b->oldest;
    uv_mutex_unlock(&b->mu);
    return t;
}

bool st_backup_dropped(st_backup_t *b)
{
    uv_mutex_lock(&b->mu);
    bool d = b->dropped;
    uv_mutex_unlock(&b->mu);
    return d;
}

bool st_backup_lagging(st_backup_t *b)
{
    double limit = (double)b->interval_ms * 10 / 1000;
    if (limit < 10) limit = 10;
    return st_backup_lag(b) > limit;
}
