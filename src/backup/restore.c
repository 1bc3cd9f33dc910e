/* SPDX-License-Identifier: MIT */
/*
 * `strata restore`: the newest snapshot at or before the target time, then the records of its
 * timeline up to that time, into an empty data dir. Records are applied exactly as the redo log
 * would replay them (st_store_offline_apply), in seq order; a missing record ends the replay
 * there (what follows cannot be applied on top of a hole), and the summary says how far it got.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

/* What a restore writes in its data dir besides the marker: the snapshot's LMDB file and lock,
 * then (st_cli_restore's resume) the redo log. The marker names them, so a retry removes only
 * what the restore it follows wrote. */
#define ST__RS_WROTE  "data.mdb lock.mdb strata.wal"
#define ST__RS_HEAD   "strata restore has not finished here: "
#define ST__RS_LEGACY ST__RS_HEAD "restore again into an empty directory\n" /* before "wrote:" */
static const char st__rs_marker_text[] =
    ST__RS_HEAD "run the same restore again (it removes what it wrote here) or restore into an "
                "empty directory\nwrote: " ST__RS_WROTE "\n";

/* Whether name is one of the space-separated names. */
static bool st__rs_named(const char *names, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = names; *p;) {
        size_t l = strcspn(p, " ");
        if (l == nl && memcmp(p, name, l) == 0) return true;
        p += l;
        while (*p == ' ')
            p++;
    }
    return false;
}

/* The names the marker at path says its restore wrote, space-separated, into names; false when
 * it is not a marker a restore wrote, or names a file no restore writes (then nothing of the
 * directory may go). */
static bool st__rs_marker_names(const char *path, char *names, size_t cap)
{
    char buf[1024];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    if (strcmp(buf, ST__RS_LEGACY) == 0) { /* an older restore's: it wrote the same files */
        snprintf(names, cap, "%s", ST__RS_WROTE);
        return true;
    }
    if (strncmp(buf, ST__RS_HEAD, sizeof ST__RS_HEAD - 1) != 0) return false;
    const char *w = strstr(buf, "\nwrote: ");
    if (!w) return false;
    w += 8;
    size_t len = strcspn(w, "\n");
    if (w[len] != '\n' || len >= cap) return false;
    memcpy(names, w, len);
    names[len] = '\0';
    for (const char *p = names; *p;) { /* only names a restore writes (never a path) */
        size_t l = strcspn(p, " ");
        char one[32];
        if (l == 0 || l >= sizeof one) return false;
        memcpy(one, p, l);
        one[l] = '\0';
        if (!st__rs_named(ST__RS_WROTE, one)) return false;
        p += l;
        while (*p == ' ')
            p++;
    }
    return true;
}

/* A data dir that holds only an unfinished restore (its marker and files the marker names, each
 * a regular file) is emptied: the restore that wrote them failed or was killed, and nothing
 * else was ever there (the marker is written first, into an empty directory). Anything else
 * there, or a restore still running in it (it holds a lock on its marker), and the directory is
 * refused, untouched. ST_EINVAL: refused (with a message). */
static int st__rs_clear(const char *dir, DIR *d)
{
    size_t dl = strlen(dir);
    char *path = st_malloc(dl + 512);
    char names[256];
    snprintf(path, dl + 512, "%s/%s", dir, ST_RESTORE_MARKER);
    int rc = ST_OK;
    if (!st__rs_marker_names(path, names, sizeof names)) {
        st_error("restore: %s is not empty: restore into a new directory", dir);
        rc = ST_EINVAL;
    }
    struct dirent *e;
    rewinddir(d);
    while (rc == ST_OK && (e = readdir(d))) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !strcmp(e->d_name, ST_RESTORE_MARKER))
            continue;
        snprintf(path, dl + 512, "%s/%s", dir, e->d_name);
        if (!st__rs_named(names, e->d_name) || lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            st_error("restore: %s holds an unfinished restore but also %s, which no restore wrote: "
                     "nothing removed; restore into a new directory",
                     dir, e->d_name);
            rc = ST_EINVAL;
        }
    }
    int fd = -1;
    if (rc == ST_OK) {
        snprintf(path, dl + 512, "%s/%s", dir, ST_RESTORE_MARKER);
        fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
            st_error("restore: %s: %s", dir,
                     fd >= 0 && errno == EWOULDBLOCK ? "another restore is running into it"
                                                     : "its restore marker changed meanwhile");
            rc = ST_EINVAL;
        }
    }
    for (const char *p = names; rc == ST_OK && *p;) { /* the files, then the marker */
        size_t l = strcspn(p, " ");
        snprintf(path, dl + 512, "%s/%.*s", dir, (int)l, p);
        if (unlink(path) != 0 && errno != ENOENT) {
            st_error("restore: removing %s failed: %s", path, strerror(errno));
            rc = ST_EIO;
        }
        p += l;
        while (*p == ' ')
            p++;
    }
    if (rc == ST_OK) {
        snprintf(path, dl + 512, "%s/%s", dir, ST_RESTORE_MARKER);
        if (unlink(path) != 0) rc = ST_EIO;
        if (rc == ST_OK)
            st_info("restore: %s held an unfinished restore: removed what it wrote (%s, %s); "
                    "restoring again",
                    dir, names, ST_RESTORE_MARKER);
    }
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

/* The data dir: made when missing; empty; or holding only an unfinished restore (cleared). */
static int st__rs_check_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? st_mkdirs(dir) : ST_EIO;
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = false;
    int rc = empty ? ST_OK : st__rs_clear(dir, d);
    closedir(d);
    return rc;
}

static int st__rs_fetch(st_objstore_t *os, const st_bk_obj_t *obj, st_buf_t *out)
{
    st_buf_t z = {0};
    int rc = st_objstore_get(os, obj->key, 0, (size_t)obj->size, &z);
    if (rc != ST_OK)
        st_error("restore: reading %s failed: %s", obj->key, st_strerror(rc));
    else if (st__bk_decompress(z.data, z.len, out) != ST_OK)
        rc = ST_ECOLD; /* damaged, as opposed to unreachable */
    st_buf_free(&z);
    return rc;
}

static int st__rs_write(int fd, const void *p, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, (const char *)p + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return ST_EIO;
        off += (size_t)n;
    }
    return ST_OK;
}

#define ST__RS_CHUNK (4u << 20)    /* bytes of a snapshot fetched at a time */
#define ST__RS_TICK  1000000000ull /* ns between progress lines */

/* Whether a progress line is due (one a second): a long restore shows it is moving. */
static bool st__rs_due(uint64_t *last)
{
    uint64_t now = st_mono_ns();
    if (*last && now - *last < ST__RS_TICK) return false;
    if (!*last) { /* the first second is quiet: a short restore prints only its summary */
        *last = now;
        return false;
    }
    *last = now;
    return true;
}

/* Fetches the snapshot a range at a time and decompresses it into path as it comes: memory
 * stays at a chunk whatever the snapshot's size. ST_ECOLD: damaged. */
static int st__rs_snapshot(st_objstore_t *os, const st_bk_obj_t *obj, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        st_error("restore: writing %s failed: %s", path, strerror(errno));
        return ST_EIO;
    }
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    size_t outlen = ZSTD_DStreamOutSize();
    char *out = st_malloc(outlen);
    st_buf_t z = {0};
    size_t left = 1; /* ZSTD_decompressStream's hint: 0 once the frame is whole */
    int rc = ST_OK;
    uint64_t tick = 0;
    st__rs_due(&tick);
    for (uint64_t off = 0; rc == ST_OK && off < obj->size;) {
        if (st__rs_due(&tick))
            st_info("restore: snapshot %.1f of %.1f MiB fetched", (double)off / 1048576.0,
                    (double)obj->size / 1048576.0);
        size_t n = obj->size - off < ST__RS_CHUNK ? (size_t)(obj->size - off) : ST__RS_CHUNK;
        st_buf_reset(&z);
        rc = st_objstore_get(os, obj->key, off, n, &z);
        if (rc != ST_OK) {
            st_error("restore: reading %s failed: %s", obj->key, st_strerror(rc));
            break;
        }
        off += n;
        ZSTD_inBuffer ib = {z.data, z.len, 0};
        while (rc == ST_OK && ib.pos < ib.size) {
            ZSTD_outBuffer ob = {out, outlen, 0};
            left = ZSTD_decompressStream(dc, &ob, &ib);
            if (ZSTD_isError(left)) rc = ST_ECOLD;
            if (rc == ST_OK && (rc = st__rs_write(fd, out, ob.pos)) != ST_OK)
                st_error("restore: writing %s failed: %s", path, strerror(errno));
        }
    }
    if (rc == ST_OK && left != 0) rc = ST_ECOLD; /* cut short */
    if (rc == ST_OK && fsync(fd) != 0) rc = ST_EIO;
    close(fd);
    st_buf_free(&z);
    free(out);
    ZSTD_freeDCtx(dc);
    return rc;
}

/* The newest snapshot that began at or before to_time (0: the newest of all), of the newest
 * timeline that has one. Timelines follow each other (a restart, a new leader of a group): a
 * group's deposed leader that has not noticed yet may still put a snapshot in its old timeline,
 * later than the new leader's first one but behind it. */
static const st_bk_obj_t *st__rs_pick(const st_bk_obj_t *v, size_t n, int64_t to_time,
                                      const bool *bad)
{
    const st_bk_obj_t *best = NULL;
    for (size_t i = 0; i < n && v[i].snap; i++)
        if (!bad[i] && (!to_time || v[i].time <= to_time) &&
            (!best || v[i].timeline > best->timeline ||
             (v[i].timeline == best->timeline && v[i].time > best->time)))
            best = &v[i];
    return best;
}

typedef struct {
    st_store_offline_t *off;
    int64_t to_time;
    uint64_t applied, records;
    int64_t last_time;
    bool done; /* reached the target time or a hole */
    int err;
    uint64_t tick, bytes; /* progress: the last line's time, segment bytes fetched */
} st_rs_replay_t;

#define ST__RS_STOP 1 /* reached the target or a hole */
#define ST__RS_FAIL 2 /* applying failed: r->err */

/* An ahead record (a group's reservations, shipped before it was logged): applied on top of the
 * record before it, without counting its group as applied. */
static int st__rs_ahead(st_rs_replay_t *r, uint64_t seq, int64_t time, const char *p, size_t len)
{
    if (seq <= r->applied) return 0;
    if (seq != r->applied + 1 || (r->to_time && time > r->to_time)) return 0; /* see the next */
    int rc = st_store_offline_apply(r->off, 0, p, len);
    if (rc != ST_OK) {
        r->err = rc;
        return ST__RS_FAIL;
    }
    return 0;
}

static int st__rs_record(void *arg, uint64_t seq, int64_t time, const char *p, size_t len)
{
    st_rs_replay_t *r = arg;
    if (seq & ST_BK_AHEAD) return st__rs_ahead(r, seq & ~ST_BK_AHEAD, time, p, len);
    if (seq <= r->applied) return 0; /* the snapshot already holds it */
    if (r->to_time && time > r->to_time) {
        r->done = true;
        return ST__RS_STOP;
    }
    if (seq != r->applied + 1) {
        st_warn("restore: record %llu is missing from the backup: stopping at %llu",
                (unsigned long long)(r->applied + 1), (unsigned long long)r->applied);
        r->done = true;
        return ST__RS_STOP;
    }
    int rc = st_store_offline_apply(r->off, seq, p, len);
    if (rc != ST_OK) {
        r->err = rc;
        return ST__RS_FAIL;
    }
    r->applied = seq;
    r->records++;
    r->last_time = time;
    return 0;
}

/* Applies the snapshot's timeline's segments after it, in order. */
static int st__rs_segments(st_objstore_t *os, const st_bk_obj_t *v, size_t n,
                           const st_bk_obj_t *snap, st_rs_replay_t *r)
{
    for (size_t i = 0; i < n && !r->done; i++) {
        const st_bk_obj_t *g = &v[i];
        if (g->snap || g->timeline != snap->timeline || g->last <= r->applied) continue;
        if (r->to_time && g->time > r->to_time) break;
        if (st__rs_due(&r->tick)) {
            char t[40];
            st_format_time_us(r->last_time, t, sizeof t);
            st_info("restore: %llu record(s) applied from %.1f MiB of segments, up to seq %llu "
                    "(%s)",
                    (unsigned long long)r->records, (double)r->bytes / 1048576.0,
                    (unsigned long long)r->applied, t);
        }
        r->bytes += g->size;
        st_buf_t raw = {0};
        int rc = st__rs_fetch(os, g, &raw);
        if (rc == ST_OK) {
            rc = st__bk_seg_decode(raw.data, raw.len, st__rs_record, r);
            if (rc == ST_EIO) rc = ST_ECOLD; /* the segment's own check failed */
            if (rc == ST__RS_FAIL) rc = r->err;
        }
        if (rc == ST_ECOLD) { /* keep what came before it, as before a hole */
            st_error("restore: segment %s is damaged: stopping at seq %llu", g->key,
                     (unsigned long long)r->applied);
            rc = ST__RS_STOP;
        }
        st_buf_free(&raw);
        if (rc == ST__RS_STOP) break;
        if (rc != ST_OK) return rc;
    }
    return ST_OK;
}

/* Says why there is nothing to restore from: no backup at all, or none old enough. */
static void st__rs_none(st_objstore_t *os, const st_bk_obj_t *v, size_t n, int64_t to_time)
{
    const st_bk_obj_t *oldest = NULL;
    for (size_t i = 0; i < n && v[i].snap; i++)
        if (!oldest || v[i].time < oldest->time) oldest = &v[i];
    if (!oldest) {
        st_error("restore: no backup found at %s (no snapshot there%s)", st_objstore_describe(os),
                 n ? ", only log segments" : "");
        return;
    }
    char t[40], o[40];
    st_format_time_us(to_time, t, sizeof t);
    st_format_time_us(oldest->time, o, sizeof o);
    st_error("restore: no snapshot in %s at or before --to-time %s (%lld µs); the oldest is from "
             "%s (%lld µs): see strata restore --list",
             st_objstore_describe(os), t, (long long)to_time, o, (long long)oldest->time);
}

/* Restores from one snapshot and the segments after it. ST_ECOLD: the snapshot is damaged
 * (nothing of it is kept: the caller may try an older one). */
static int st__rs_from(st_objstore_t *os, const st_restore_opts_t *o, const st_bk_obj_t *v,
                       size_t n, const st_bk_obj_t *snap, st_restore_result_t *res)
{
    st_info("restore: from snapshot %s (%.1f MiB)", snap->key, (double)snap->size / 1048576.0);
    size_t plen = strlen(o->data_dir) + 16;
    char *path = st_malloc(plen);
    snprintf(path, plen, "%s/data.mdb", o->data_dir);
    int rc = st__rs_snapshot(os, snap, path);
    st_rs_replay_t r = {.to_time = o->to_time, .last_time = snap->time};
    if (rc == ST_OK && st_store_offline_open(&r.off, o->data_dir, o->map_size, &r.applied) != ST_OK)
        rc = ST_ECOLD; /* it decompressed, but is no store */
    if (rc != ST_OK) {
        unlink(path); /* a damaged one must not be mistaken for a store */
        snprintf(path, plen, "%s/lock.mdb", o->data_dir);
        unlink(path);
        free(path);
        return rc;
    }
    free(path);
    snprintf(res->snapshot, sizeof res->snapshot, "%s", snap->key);
    res->snapshot_seq = r.applied;
    rc = st__rs_segments(os, v, n, snap, &r);
    int crc = st_store_offline_close(r.off);
    if (rc == ST_OK) rc = crc;
    res->records = r.records;
    res->last_seq = r.applied;
    res->last_time = r.last_time;
    return rc;
}

static int st__rs_run(st_objstore_t *os, const st_restore_opts_t *o, st_restore_result_t *res)
{
    st_bk_obj_t *v;
    size_t n;
    int rc = st__bk_list(os, &v, &n);
    if (rc != ST_OK) {
        st_error("restore: listing %s failed: %s", st_objstore_describe(os), st_strerror(rc));
        return rc;
    }
    bool *bad = st_calloc(n ? n : 1, sizeof *bad);
    const st_bk_obj_t *snap = st__rs_pick(v, n, o->to_time, bad);
    if (!snap) {
        st__rs_none(os, v, n, o->to_time);
        rc = ST_ENOTFOUND;
    }
    /* A damaged snapshot (cut short, bad bytes, not a store) is skipped for the next older one
     * it can restore from: the restore then replays more of the log, or ends earlier if the log
     * does not reach that far back, and says so. */
    while (snap && (rc = st__rs_from(os, o, v, n, snap, res)) == ST_ECOLD) {
        st_error("restore: snapshot %s is damaged: trying an older one", snap->key);
        bad[snap - v] = true;
        if (!(snap = st__rs_pick(v, n, o->to_time, bad)))
            st_error("restore: no undamaged snapshot at or before the target time");
    }
    free(bad);
    free(v);
    return rc;
}

/* Opens the backup's store, refusing a file:// directory that does not exist (opening would
 * create it: a mistyped path must not turn into an empty backup). */
static int st__rs_missing(const st_objstore_opts_t *o)
{
    struct stat st;
    if (strncmp(o->url, "file://", 7) == 0 && stat(o->url + 7, &st) != 0) {
        st_error("restore: no backup found at %s: %s", o->url, strerror(errno));
        return ST_ENOTFOUND;
    }
    return ST_OK;
}

static int st__rs_open(st_objstore_t **os, const st_objstore_opts_t *o)
{
    int rc = st__rs_missing(o);
    return rc == ST_OK ? st_objstore_open(os, o) : rc;
}

/* Until the caller removes it, the data dir says it is not a store to start on, and which files
 * the restore writes there. The marker is created new (a second restore into the directory at
 * once fails here) and its descriptor stays open, locked, until the process exits: a retry
 * meanwhile finds the lock and leaves the files alone (the offline commands exit once done). */
static int st__rs_mark(const char *dir)
{
    size_t n = strlen(dir) + sizeof ST_RESTORE_MARKER + 2;
    char *p = st_malloc(n);
    snprintf(p, n, "%s/%s", dir, ST_RESTORE_MARKER);
    const size_t len = sizeof st__rs_marker_text - 1;
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int rc = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
                     write(fd, st__rs_marker_text, len) == (ssize_t)len && fsync(fd) == 0
                 ? ST_OK
                 : ST_EIO;
    if (rc != ST_OK) {
        st_error("restore: writing %s failed: %s", p, strerror(errno));
        if (fd >= 0) close(fd);
    }
    int dfd = rc == ST_OK ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) { /* the marker outlives a crash before the files it names */
        if (fsync(dfd) != 0) rc = ST_EIO;
        close(dfd);
    }
    free(p);
    return rc; /* fd: held until exit (above) */
}

int st_backup_restore(const st_restore_opts_t *o, st_restore_result_t *res)
{
    memset(res, 0, sizeof *res);
    st_objstore_t *os;
    int rc = st__rs_missing(&o->obj); /* before the data dir is made */
    if (rc == ST_OK) rc = st__rs_check_empty(o->data_dir);
    if (rc == ST_OK) rc = st__rs_mark(o->data_dir);
    if (rc != ST_OK) return rc;
    rc = st__rs_open(&os, &o->obj);
    if (rc != ST_OK) return rc;
    rc = st__rs_run(os, o, res);
    st_objstore_close(os);
    return rc;
}

/* The commit time of a segment's last record (fetched: the key names only its first). */
static int st__rs_last_time(void *arg, uint64_t seq, int64_t time, const char *p, size_t len)
{
    (void)seq, (void)p, (void)len;
    int64_t *t = arg;
    if (time > *t) *t = time;
    return 0;
}

static void st__rs_print_time(FILE *out, const char *what, int64_t us)
{
    char t[40];
    st_format_time_us(us, t, sizeof t);
    fprintf(out, "%s%s (%lld µs)", what, t, (long long)us);
}

/* One timeline: its snapshots, its records' range, and the times it can restore. */
static void st__rs_list_timeline(FILE *out, st_objstore_t *os, const st_bk_obj_t *v, size_t n,
                                 uint64_t tl)
{
    fprintf(out, "timeline %016llx\n", (unsigned long long)tl);
    int64_t from = INT64_MAX, to = 0;
    const st_bk_obj_t *lo = NULL, *hi = NULL;
    size_t segs = 0;
    for (size_t i = 0; i < n; i++) {
        const st_bk_obj_t *g = &v[i];
        if (g->timeline != tl) continue;
        if (g->snap) {
            fprintf(out, "  snapshot ");
            st__rs_print_time(out, "", g->time);
            fprintf(out, " seq %llu, %.1f MiB\n", (unsigned long long)g->first,
                    (double)g->size / 1048576.0);
            if (g->time < from) from = g->time;
            if (g->time > to) to = g->time;
            continue;
        }
        segs++;
        if (!lo || g->first < lo->first) lo = g;
        if (!hi || g->last > hi->last) hi = g;
    }
    if (hi) {
        int64_t last = hi->time;
        st_buf_t raw = {0};
        if (st__rs_fetch(os, hi, &raw) == ST_OK)
            st__bk_seg_decode(raw.data, raw.len, st__rs_last_time, &last);
        st_buf_free(&raw);
        fprintf(out, "  records  seq %llu..%llu in %zu segment(s), ", (unsigned long long)lo->first,
                (unsigned long long)hi->last, segs);
        st__rs_print_time(out, "", lo->time);
        st__rs_print_time(out, " .. ", last);
        fputc('\n', out);
        if (last > to) to = last;
    }
    if (from == INT64_MAX) {
        fprintf(out, "  no snapshot: not restorable\n");
        return;
    }
    st__rs_print_time(out, "  --to-time from ", from);
    st__rs_print_time(out, " to ", to);
    fputc('\n', out);
}

int st_backup_list_points(const st_objstore_opts_t *o, FILE *out)
{
    st_objstore_t *os;
    int rc = st__rs_open(&os, o);
    if (rc != ST_OK) return rc;
    st_bk_obj_t *v = NULL;
    size_t n = 0;
    rc = st__bk_list(os, &v, &n);
    if (rc != ST_OK) {
        st_error("restore: listing %s failed: %s", st_objstore_describe(os), st_strerror(rc));
    } else if (n == 0 || !v[0].snap) {
        st_error("restore: no backup found at %s (no snapshot there%s)", st_objstore_describe(os),
                 n ? ", only log segments" : "");
        rc = ST_ENOTFOUND;
    } else {
        fprintf(out, "restore points in %s (times in UTC; --to-time takes either form):\n",
                st_objstore_describe(os));
        uint64_t *tls = st_calloc(n, sizeof *tls);
        size_t ntl = 0;
        for (size_t i = 0; i < n; i++) {
            size_t j = 0;
            while (j < ntl && tls[j] != v[i].timeline)
                j++;
            if (j == ntl) tls[ntl++] = v[i].timeline;
        }
        for (size_t a = 1; a < ntl; a++) /* oldest timeline first */
            for (size_t b = a; b > 0 && tls[b - 1] > tls[b]; b--) {
                uint64_t t = tls[b];
                tls[b] = tls[b - 1];
                tls[b - 1] = t;
            }
        for (size_t j = 0; j < ntl; j++)
            st__rs_list_timeline(out, os, v, n, tls[j]);
        free(tls);
    }
    free(v);
    st_objstore_close(os);
    return rc;
}
