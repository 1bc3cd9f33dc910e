/* SPDX-License-Identifier: MIT */
/*
 * Redo log file. Layout: a 4 KiB header {magic, generation, crc} then records
 * {u32 len, u32 crc, u64 generation, u64 seq, payload[len]} back to back. The crc covers
 * generation, seq and payload. A record is valid only with the header's generation, so bytes
 * left over from an older generation can never be replayed.
 */
#include "wal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#define ST__WAL_MAGIC "STRATAWAL1"
#define ST__REC_HDR   24

struct st_wal {
    int fd;
    uint64_t size;
    uint64_t gen;
    uint64_t off;
    char *buf;
    size_t cap;
};

static uint32_t st__crc(uint64_t gen, uint64_t seq, const char *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, (const Bytef *)&gen, 8);
    c = crc32(c, (const Bytef *)&seq, 8);
    /* zlib takes uInt lengths: feed big payloads in pieces */
    while (n) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, (const Bytef *)p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

static int st__write_all(int fd, const void *p, size_t n, uint64_t off)
{
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno == ENOSPC || errno == EDQUOT ? ST_EFULL : ST_EIO;
        }
        c += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return ST_OK;
}

static int st__write_header(st_wal_t *w)
{
    char h[ST_WAL_HEADER] = {0};
    memcpy(h, ST__WAL_MAGIC, sizeof ST__WAL_MAGIC - 1);
    memcpy(h + 16, &w->gen, 8);
    uint32_t c = st__crc(w->gen, 0, h, 16);
    memcpy(h + 24, &c, 4);
    int rc = st__write_all(w->fd, h, sizeof h, 0);
    if (rc == ST_OK && fdatasync(w->fd) != 0) rc = ST_EIO;
    return rc;
}

uint64_t st__disk_avail(const char *dir)
{
    struct statvfs v;
    if (statvfs(dir, &v) != 0) return UINT64_MAX;
    return (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
}

int st_wal_open(const char *dir, uint64_t size, st_wal_t **out)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/strata.wal", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        st_error("wal: cannot open %s: %s", path, strerror(errno));
        return ST_EIO;
    }
    st_wal_t *w = st_calloc(1, sizeof *w);
    w->fd = fd;
    w->size = size;
    off_t have = lseek(fd, 0, SEEK_END);
    char h[ST_WAL_HEADER];
    bool valid = false;
    if (have >= (off_t)size && pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h &&
        memcmp(h, ST__WAL_MAGIC, sizeof ST__WAL_MAGIC - 1) == 0) {
        uint32_t c;
        memcpy(&w->gen, h + 16, 8);
        memcpy(&c, h + 24, 4);
        valid = c == st__crc(w->gen, 0, h, 16);
    }
    if (!valid) {
        /* Fresh log: real zeros (not a sparse file), so later in-place writes plus fdatasync
         * never have to update block allocation metadata. */
        char *zeros = st_calloc(1, 1 << 20);
        int rc = ST_OK;
        for (uint64_t off = 0; off < size && rc == ST_OK; off += 1 << 20)
            rc = st__write_all(fd, zeros, size - off < (1 << 20) ? size - off : 1 << 20, off);
        free(zeros);
        w->gen = 1;
        if (rc == ST_OK && fsync(fd) != 0) rc = ST_EIO;
        if (rc == ST_OK) rc = st__write_header(w);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        if (rc != ST_OK) {
            st_error("wal: cannot initialise %s (%llu bytes, written in full; %llu bytes free): %s",
                     path, (unsigned long long)size, (unsigned long long)st__disk_avail(dir),
                     st_strerror(rc));
            st_wal_close(w);
            /* It held no valid log (that is why it was being initialised): leave the disk as
             * it was instead of a half-written file that fills it. */
            unlink(path);
            return rc;
        }
    }
    w->off = ST_WAL_HEADER;
    *out = w;
    return ST_OK;
}

void st_wal_close(st_wal_t *w)
{
    if (!w) return;
    close(w->fd);
    free(w->buf);
    free(w);
}

uint64_t st_wal_record_size(size_t payload_len)
{
    return ST__REC_HDR + (uint64_t)payload_len;
}

uint64_t st_wal_remaining(const st_wal_t *w)
{
    return w->size - w->off;
}

int st_wal_replay(st_wal_t *w, st_wal_replay_fn fn, void *arg)
{
    uint64_t off = ST_WAL_HEADER, last_seq = 0;
    for (;;) {
        char hdr[ST__REC_HDR];
        if (off + ST__REC_HDR > w->size ||
            pread(w->fd, hdr, ST__REC_HDR, (off_t)off) != ST__REC_HDR)
            break;
        uint32_t len, crc;
        uint64_t gen, seq;
        memcpy(&len, hdr, 4);
        memcpy(&crc, hdr + 4, 4);
        memcpy(&gen, hdr + 8, 8);
        memcpy(&seq, hdr + 16, 8);
        if (len == 0 || gen != w->gen || off + ST__REC_HDR + len > w->size ||
            (last_seq && seq != last_seq + 1))
            break;
        if (w->cap < len) {
            w->buf = st_realloc(w->buf, len);
            w->cap = len;
        }
        if (pread(w->fd, w->buf, len, (off_t)(off + ST__REC_HDR)) != (ssize_t)len ||
            st__crc(gen, seq, w->buf, len) != crc)
            break; /* torn tail: never acknowledged */
        int rc = fn(arg, seq, w->buf, len);
        if (rc) return rc;
        last_seq = seq;
        off += ST__REC_HDR + len;
    }
    w->off = off;
    return ST_OK;
}

int st_wal_append(st_wal_t *w, uint64_t seq, const char *payload, size_t len)
{
    uint64_t need = st_wal_record_size(len);
    if (len == 0 || len > UINT32_MAX || need > st_wal_remaining(w)) return ST_ETOOLARGE;
    /* An empty header after the record ends replay there, whatever an earlier write that
     * failed half-way left behind (the next record overwrites it). */
    uint64_t out = need + ST__REC_HDR <= st_wal_remaining(w) ? need + ST__REC_HDR : need;
    if (w->cap < out) {
        w->buf = st_realloc(w->buf, out);
        w->cap = out;
    }
    uint32_t l = (uint32_t)len, crc = st__crc(w->gen, seq, payload, len);
    memcpy(w->buf, &l, 4);
    memcpy(w->buf + 4, &crc, 4);
    memcpy(w->buf + 8, &w->gen, 8);
    memcpy(w->buf + 16, &seq, 8);
    memcpy(w->buf + ST__REC_HDR, payload, len);
    memset(w->buf + need, 0, out - need);
    int rc = st__write_all(w->fd, w->buf, out, w->off);
    /* A failed fdatasync may have dropped dirty pages that a later one would not report: the
     * log's contents are unknown from here on (the caller stops using it). */
    if (rc == ST_OK && fdatasync(w->fd) != 0) rc = ST_EIO;
    if (rc == ST_OK) w->off += need;
    return rc;
}

int st_wal_reset(st_wal_t *w)
{
    w->gen++;
    int rc = st__write_header(w);
    if (rc == ST_OK) w->off = ST_WAL_HEADER;
    return rc;
}
