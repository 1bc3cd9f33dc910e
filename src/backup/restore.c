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
#include <unistd.h>
#include <zstd.h>

static int st__rs_check_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? st_mkdirs(dir) : ST_EIO;
    struct dirent *e;
    int rc = ST_OK;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) rc = ST_EINVAL;
    closedir(d);
    if (rc) st_error("restore: %s is not empty: restore into a new directory", dir);
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

#define ST__RS_CHUNK (4u << 20) /* bytes of a snapshot fetched at a time */

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
    for (uint64_t off = 0; rc == ST_OK && off < obj->size;) {
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
static const st_bk_obj_t *st__rs_pick(const st_bk_obj_t *v, size_t n, int64_t to_time)
{
    const st_bk_obj_t *best = NULL;
    for (size_t i = 0; i < n && v[i].snap; i++)
        if ((!to_time || v[i].time <= to_time) &&
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

static int st__rs_run(st_objstore_t *os, const st_restore_opts_t *o, st_restore_result_t *res)
{
    st_bk_obj_t *v;
    size_t n;
    int rc = st__bk_list(os, &v, &n);
    if (rc != ST_OK) {
        st_error("restore: listing %s failed: %s", st_objstore_describe(os), st_strerror(rc));
        return rc;
    }
    const st_bk_obj_t *snap = st__rs_pick(v, n, o->to_time);
    if (!snap) {
        st_error("restore: no snapshot in %s at or before the requested time",
                 st_objstore_describe(os));
        free(v);
        return ST_ENOTFOUND;
    }
    size_t plen = strlen(o->data_dir) + 16;
    char *path = st_malloc(plen);
    snprintf(path, plen, "%s/data.mdb", o->data_dir);
    rc = st__rs_snapshot(os, snap, path);
    if (rc == ST_ECOLD) st_error("restore: snapshot %s is damaged", snap->key);
    free(path);
    st_rs_replay_t r = {.to_time = o->to_time, .last_time = snap->time};
    if (rc == ST_OK) rc = st_store_offline_open(&r.off, o->data_dir, o->map_size, &r.applied);
    if (rc == ST_OK) {
        snprintf(res->snapshot, sizeof res->snapshot, "%s", snap->key);
        res->snapshot_seq = r.applied;
        rc = st__rs_segments(os, v, n, snap, &r);
        int crc = st_store_offline_close(r.off);
        if (rc == ST_OK) rc = crc;
        res->records = r.records;
        res->last_seq = r.applied;
        res->last_time = r.last_time;
    }
    free(v);
    return rc;
}

int st_backup_restore(const st_restore_opts_t *o, st_restore_result_t *res)
{
    memset(res, 0, sizeof *res);
    int rc = st__rs_check_empty(o->data_dir);
    if (rc != ST_OK) return rc;
    st_objstore_t *os;
    rc = st_objstore_open(&os, &o->obj);
    if (rc != ST_OK) return rc;
    rc = st__rs_run(os, o, res);
    st_objstore_close(os);
    return rc;
}
