/* SPDX-License-Identifier: MIT */
/*
 * Redo log file, in two halves. Each half starts with a 4 KiB header {magic, generation, crc,
 * salt, salt's crc} followed by records {u32 len, u32 crc, u64 generation, u64 seq,
 * payload[len]} back to back. The crc covers generation, seq and payload, and for a record
 * written apart (st_wal_reserve) the half's random salt first, so that no bytes a client chose
 * pass for one where replay looks for it. A record is valid only with its half's
 * generation, so bytes left over from an older generation can never be replayed. Appends fill
 * one half; when it is full they go on in the other under a new generation, which the store
 * allows once LMDB holds (and has synced) everything the other half held. LMDB catches up with
 * the full half in the background, so a checkpoint no longer stops the writes.
 *
 * A log written before the halves (magic STRATAWAL1: one region, the whole file) is replayed
 * and appended to as it is; its first reset turns the file into halves.
 *
 * Appends go through a second descriptor opened O_DIRECT|O_DSYNC where the file system allows
 * it: one write per group that reaches the disk without the page cache, and no fdatasync call.
 * Direct I/O wants whole aligned blocks, so an append rewrites the block it starts in (its
 * head is the previous record's tail, kept in memory) and pads its last block with zeros.
 * Where O_DIRECT is refused (tmpfs), the same blocks are written through the page cache and
 * fdatasync'd.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include "wal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#define ST__MAGIC_ONE  "STRATAWAL1" /* one region: the whole file */
#define ST__MAGIC_HALF "STRATAWAL2" /* this half of two */
#define ST__REC_HDR    24
#define ST__BLK        4096u /* direct I/O alignment: enough for any device's logical block */

typedef struct {
    uint64_t start, end; /* the half's bytes, its header first */
    uint64_t gen;
    uint64_t salt; /* in the CRC of a record written apart (0: none is, nor looked for) */
    bool valid;
    uint64_t last_seq; /* the last record replayed from it (0: none) */
} st__half_t;

struct st_wal {
    int fd;      /* buffered: initialisation and replay */
    int afd;     /* appends and headers: O_DIRECT|O_DSYNC, or fd itself (then fdatasync) */
    bool direct; /* afd is direct and synchronous */
    bool legacy; /* the current generation is one region over the whole file */
    uint64_t size;
    st__half_t half[2];
    int cur;      /* the half appends go to */
    uint64_t off; /* where the next record goes */
    char *buf;    /* replay: a record's payload */
    size_t cap;
    char *wbuf; /* appends: ST__BLK-aligned blocks */
    size_t wcap;
    char *tail;     /* the bytes of the block holding off that come before it */
    int old_afd;    /* a direct descriptor given up while a write may have used it (-1: none) */
    st_wal_io_t io; /* st_wal_append's */
};

static uint64_t st__down(uint64_t v)
{
    return v & ~(uint64_t)(ST__BLK - 1);
}

static uint64_t st__up(uint64_t v)
{
    return st__down(v + ST__BLK - 1);
}

/* salt 0: a record written in place (and headers); else one written apart, whose CRC a client
 * cannot make up: it may hold bytes where one is looked for (a failed or torn record's payload). */
static uint32_t st__crc_salted(uint64_t salt, uint64_t gen, uint64_t seq, const char *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    if (salt) c = crc32(c, (const Bytef *)&salt, 8);
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

static uint32_t st__crc(uint64_t gen, uint64_t seq, const char *p, size_t n)
{
    return st__crc_salted(0, gen, seq, p, n);
}

/* A half's secret: not 0, and not something a client could guess. */
static uint64_t st__new_salt(const st_wal_t *w)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
        v = st_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)w;
    return v ? v : 1;
}

/* *buf made an aligned buffer of at least n bytes (kept for the next write). */
static char *st__aligned(char **buf, size_t *cap, size_t n)
{
    if (*cap < n) {
        free(*buf);
        void *p = NULL;
        if (posix_memalign(&p, ST__BLK, n) != 0) st_fatal("out of memory (%zu bytes)", n);
        *buf = p;
        *cap = n;
    }
    return *buf;
}

static char *st__wbuf(st_wal_t *w, size_t n)
{
    return st__aligned(&w->wbuf, &w->wcap, n);
}

static int st__write_all(int fd, const void *p, size_t n, uint64_t off)
{
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EINVAL) return ST_EINVAL; /* a direct write the file system refuses */
            return errno == ENOSPC || errno == EDQUOT ? ST_EFULL : ST_EIO;
        }
        c += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return ST_OK;
}

/* Makes writes through afd durable: nothing to do when it is O_DSYNC. */
static int st__sync(st_wal_t *w)
{
    return w->direct || fdatasync(w->afd) == 0 ? ST_OK : ST_EIO;
}

/* Writes whole aligned blocks through afd, durably. A direct write the file system refuses
 * (EINVAL: it took O_DIRECT at open, not at write) moves the log to buffered writes + fdatasync
 * and is written again: the same bytes, nothing of them was written. */
static int st__put_blocks(st_wal_t *w, const char *b, size_t n, uint64_t at)
{
    int rc = st__write_all(w->afd, b, n, at);
    if (rc == ST_EINVAL && w->direct) {
        st_warn("wal: the file system refused a direct write: buffered writes and fdatasync");
        w->old_afd = w->afd; /* closed with the log (direct until now: the first fallback) */
        w->afd = w->fd;
        w->direct = false;
        rc = st__write_all(w->afd, b, n, at);
    }
    if (rc == ST_EINVAL) rc = ST_EIO;
    return rc == ST_OK ? st__sync(w) : rc;
}

/* {magic[16], gen, crc, pad, salt, salt's crc}: the salt and its crc are zero in a header from
 * before records were written apart (older binaries read such a header as they did). */
static int st__write_header(st_wal_t *w, uint64_t at, const char *magic, uint64_t gen,
                            uint64_t salt)
{
    _Static_assert(ST_WAL_HEADER % ST__BLK == 0, "the header is whole blocks");
    char *h = st__wbuf(w, ST_WAL_HEADER);
    memset(h, 0, ST_WAL_HEADER);
    memcpy(h, magic, strlen(magic));
    memcpy(h + 16, &gen, 8);
    uint32_t c = st__crc(gen, 0, h, 16);
    memcpy(h + 24, &c, 4);
    if (salt) {
        uint32_t sc = st__crc_salted(salt, gen, 0, "", 0);
        memcpy(h + 32, &salt, 8);
        memcpy(h + 40, &sc, 4);
    }
    return st__put_blocks(w, h, ST_WAL_HEADER, at);
}

/* Reads the header at `at`: its generation if it carries `magic` and a good crc, and its salt
 * (0 if it has none, or a damaged one: then nothing written apart replays). */
static bool st__read_header(st_wal_t *w, uint64_t at, const char *magic, uint64_t *gen,
                            uint64_t *salt)
{
    char h[44];
    uint32_t c, sc;
    uint64_t g, sl;
    if (pread(w->fd, h, sizeof h, (off_t)at) != (ssize_t)sizeof h ||
        memcmp(h, magic, strlen(magic)) != 0)
        return false;
    memcpy(&g, h + 16, 8);
    memcpy(&c, h + 24, 4);
    if (c != st__crc(g, 0, h, 16)) return false;
    memcpy(&sl, h + 32, 8);
    memcpy(&sc, h + 40, 4);
    *gen = g;
    *salt = sl && sc == st__crc_salted(sl, g, 0, "", 0) ? sl : 0;
    return true;
}

/* Whether a direct write works on fd: some file systems take O_DIRECT at open and refuse the
 * writes (EINVAL). The first block is written back as it is. */
static bool st__direct_works(st_wal_t *w, int fd)
{
    char *b = st__wbuf(w, ST__BLK);
    if (pread(w->fd, b, ST__BLK, 0) != (ssize_t)ST__BLK) return false;
    ssize_t n;
    do
        n = pwrite(fd, b, ST__BLK, 0);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)ST__BLK;
}

/* The append descriptor: direct and synchronous where the file system takes it. */
static void st__open_append(st_wal_t *w, const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_DIRECT | O_DSYNC);
    if (fd >= 0 && st__direct_works(w, fd)) {
        w->afd = fd;
        w->direct = true;
        return;
    }
    st_info("wal: %s: no direct I/O here (%s): buffered writes and fdatasync", path,
            strerror(errno));
    if (fd >= 0) close(fd);
    w->afd = w->fd;
    w->direct = false;
}

/* Appends go to half h from its first record on, under generation gen. */
static void st__wal_enter(st_wal_t *w, int h, uint64_t gen, uint64_t salt)
{
    w->cur = h;
    w->half[h].gen = gen;
    w->half[h].salt = salt;
    w->half[h].valid = true;
    w->half[h].last_seq = 0;
    w->off = w->half[h].start + ST_WAL_HEADER;
    memset(w->tail, 0, ST__BLK);
}

/* Starts a new generation in half h (its old records become unreadable). */
static int st__start_half(st_wal_t *w, int h)
{
    uint64_t gen = (w->half[0].gen > w->half[1].gen ? w->half[0].gen : w->half[1].gen) + 1;
    uint64_t salt = st__new_salt(w);
    int rc = st__write_header(w, w->half[h].start, ST__MAGIC_HALF, gen, salt);
    if (rc == ST_OK) st__wal_enter(w, h, gen, salt);
    return rc;
}

uint64_t st__disk_avail(const char *dir)
{
    struct statvfs v;
    if (statvfs(dir, &v) != 0) return UINT64_MAX;
    return (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
}

/* Fresh log: real zeros (not a sparse file), so later in-place writes never have to update
 * block allocation metadata; then an empty generation in each half. */
static int st__wal_init(st_wal_t *w, const char *dir, const char *path)
{
    char *zeros = st_calloc(1, 1 << 20);
    int rc = ST_OK;
    for (uint64_t off = 0; off < w->size && rc == ST_OK; off += 1 << 20)
        rc = st__write_all(w->fd, zeros, w->size - off < (1 << 20) ? w->size - off : 1 << 20, off);
    free(zeros);
    if (rc == ST_OK && fsync(w->fd) != 0) rc = ST_EIO;
    if (rc == ST_OK) {
        st__open_append(w, path);
        rc = st__write_header(w, w->half[1].start, ST__MAGIC_HALF, 0, 0);
        if (rc == ST_OK) {
            st__wal_enter(w, 1, 0, 0);
            rc = st__start_half(w, 0); /* generation 1 */
        }
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return rc;
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
    w->afd = -1;
    w->old_afd = -1;
    w->size = st__down(size);
    w->tail = st_calloc(1, ST__BLK);
    uint64_t mid = st__down(w->size / 2);
    w->half[0] = (st__half_t){.start = 0, .end = mid};
    w->half[1] = (st__half_t){.start = mid, .end = w->size};
    off_t have = lseek(fd, 0, SEEK_END);
    bool valid = false;
    if (have >= (off_t)w->size) {
        uint64_t g, sl;
        if (st__read_header(w, 0, ST__MAGIC_ONE, &g, &sl)) {
            w->legacy = valid = true;
            w->half[0] =
                (st__half_t){.start = 0, .end = w->size, .gen = g, .salt = sl, .valid = true};
        } else {
            for (int h = 0; h < 2; h++)
                w->half[h].valid = st__read_header(w, w->half[h].start, ST__MAGIC_HALF,
                                                   &w->half[h].gen, &w->half[h].salt);
            valid = w->half[0].valid || w->half[1].valid;
        }
    }
    if (!valid) {
        int rc = st__wal_init(w, dir, path);
        if (rc != ST_OK) {
            st_error("wal: cannot initialise %s (%llu bytes, written in full; %llu bytes free): %s",
                     path, (unsigned long long)w->size, (unsigned long long)st__disk_avail(dir),
                     st_strerror(rc));
            st_wal_close(w);
            /* It held no valid log (that is why it was being initialised): leave the disk as
             * it was instead of a half-written file that fills it. */
            unlink(path);
            return rc;
        }
    }
    if (w->afd < 0) st__open_append(w, path);
    *out = w;
    return ST_OK;
}

void st_wal_close(st_wal_t *w)
{
    if (!w) return;
    if (w->afd >= 0 && w->afd != w->fd) close(w->afd);
    if (w->old_afd >= 0) close(w->old_afd);
    close(w->fd);
    free(w->io.buf);
    free(w->buf);
    free(w->wbuf);
    free(w->tail);
    free(w);
}

uint64_t st_wal_record_size(size_t payload_len)
{
    return ST__REC_HDR + (uint64_t)payload_len;
}

uint64_t st_wal_remaining(const st_wal_t *w)
{
    return w->half[w->cur].end - w->off;
}

bool st_wal_fits_empty(const st_wal_t *w, size_t payload_len)
{
    /* the halves' sizes, also for a log from before them: the reset that makes room for the
     * record turns it into halves, and then it must fit one (else the append after that reset
     * failed with ST_ETOOLARGE instead of the record being committed directly) */
    uint64_t mid = st__down(w->size / 2), smaller = mid < w->size - mid ? mid : w->size - mid;
    return st_wal_record_size(payload_len) <= smaller - ST_WAL_HEADER;
}

/* Whether a valid record of half hf starts at off, going on from last_seq (0: any seq), with
 * the CRC of one written in place or (apart) of one written apart: its payload is then read
 * into w->buf, its seq stored after it, and its length in *len. */
static bool st__record_at(st_wal_t *w, const st__half_t *hf, uint64_t off, uint64_t last_seq,
                          bool apart, uint64_t *len)
{
    char hdr[ST__REC_HDR];
    if (off + ST__REC_HDR > hf->end || pread(w->fd, hdr, ST__REC_HDR, (off_t)off) != ST__REC_HDR)
        return false;
    uint32_t n, crc;
    uint64_t gen, seq;
    memcpy(&n, hdr, 4);
    memcpy(&crc, hdr + 4, 4);
    memcpy(&gen, hdr + 8, 8);
    memcpy(&seq, hdr + 16, 8);
    if (n == 0 || gen != hf->gen || off + ST__REC_HDR + n > hf->end ||
        (last_seq && seq != last_seq + 1))
        return false;
    if (w->cap < (size_t)n + 8) {
        w->buf = st_realloc(w->buf, (size_t)n + 8);
        w->cap = (size_t)n + 8;
    }
    if (pread(w->fd, w->buf, n, (off_t)(off + ST__REC_HDR)) != (ssize_t)n ||
        st__crc_salted(apart ? hf->salt : 0, gen, seq, w->buf, n) != crc)
        return false;
    memcpy(w->buf + n, &seq, 8);
    *len = n;
    return true;
}

/* Replays the valid records of half h; leaves off after the last one. `prev` is the last seq
 * the older half replayed (0: none): the newer half must go on from it, or nothing of it
 * replays (the older half was damaged before its end; what follows the gap is not applied). */
static int st__replay_half(st_wal_t *w, int h, uint64_t prev, st_wal_replay_fn fn, void *arg)
{
    st__half_t *hf = &w->half[h];
    uint64_t off = hf->start + ST_WAL_HEADER, last_seq = 0;
    for (;;) {
        /* After a record, the next one is where it ends, or (written while the record's own
         * write was in flight: st_wal_reserve's `apart`) at the first block past the empty
         * header that follows it, with the half's salt in its CRC (what a client's value left
         * there, in a failed or torn record, cannot pass for it). Either must go on from the
         * record's seq. */
        uint64_t len = 0, at = off;
        if (!st__record_at(w, hf, at, last_seq, false, &len) &&
            (!last_seq || !hf->salt ||
             !st__record_at(w, hf, at = st__up(off + ST__REC_HDR), last_seq, true, &len)))
            break; /* the end, or a torn tail: never acknowledged */
        uint64_t seq;
        memcpy(&seq, w->buf + len, 8);
        if (!last_seq && prev && seq != prev + 1) {
            st_error("wal: the older half ends at seq %llu but the newer one starts at %llu (the "
                     "older half is damaged): replay stops there",
                     (unsigned long long)prev, (unsigned long long)seq);
            break;
        }
        int rc = fn(arg, seq, w->buf, len);
        if (rc) return rc;
        last_seq = seq;
        off = at + ST__REC_HDR + len;
    }
    hf->last_seq = last_seq;
    w->cur = h;
    w->off = off;
    return ST_OK;
}

int st_wal_replay(st_wal_t *w, st_wal_replay_fn fn, void *arg)
{
    int order[2] = {0, 1}, n = 0;
    if (w->legacy || !w->half[1].valid) {
        n = 1;
    } else if (!w->half[0].valid) {
        order[0] = 1;
        n = 1;
    } else {
        n = 2;
        if (w->half[1].gen < w->half[0].gen) order[0] = 1, order[1] = 0;
    }
    for (int i = 0; i < n; i++) {
        int rc = st__replay_half(w, order[i], i ? w->half[order[0]].last_seq : 0, fn, arg);
        if (rc) return rc;
    }
    /* the next append rewrites the block it starts in: keep what comes before it */
    uint64_t at = st__down(w->off);
    if (w->off > at && pread(w->fd, w->tail, w->off - at, (off_t)at) != (ssize_t)(w->off - at))
        return ST_EIO;
    return ST_OK;
}

uint64_t st_wal_older_last(const st_wal_t *w)
{
    if (w->legacy) return 0;
    const st__half_t *o = &w->half[1 - w->cur];
    return o->valid ? o->last_seq : 0;
}

bool st_wal_legacy(const st_wal_t *w)
{
    return w->legacy;
}

int st_wal_reserve(st_wal_t *w, uint64_t seq, size_t len, bool apart, st_wal_io_t *io)
{
    uint64_t need = st_wal_record_size(len), room = st_wal_remaining(w);
    /* apart: the write in flight covers the block at off and the empty header after its
     * record; this record starts after both (replay looks there when the header is empty) */
    uint64_t at = apart ? st__up(w->off + ST__REC_HDR) : w->off;
    if (len == 0 || len > UINT32_MAX || at - w->off + need > room) return ST_ETOOLARGE;
    /* a half from before records were written apart: replay would not look for one */
    if (apart && !w->half[w->cur].salt) return ST_ETOOLARGE;
    room -= at - w->off;
    /* An empty header after the record ends replay there, whatever an earlier write that
     * failed half-way left behind (the next record overwrites it). */
    uint64_t end = at + need + (need + ST__REC_HDR <= room ? ST__REC_HDR : 0);
    io->from = st__down(at);
    io->to = st__up(end);
    io->at = at;
    io->need = need;
    io->gen = w->half[w->cur].gen;
    io->salt = apart ? w->half[w->cur].salt : 0;
    io->seq = seq;
    io->fd = w->afd;
    io->direct = w->direct;
    st__aligned(&io->buf, &io->cap, (size_t)(io->to - io->from));
    /* the head of the first block is what the log holds before the record (nothing: apart) */
    memset(io->buf, 0, (size_t)(at - io->from));
    if (!apart) memcpy(io->buf, w->tail, (size_t)(at - io->from));
    w->off = at + need;
    w->half[w->cur].last_seq = seq;
    return ST_OK;
}

void st_wal_build(st_wal_io_t *io, const char *payload, size_t len)
{
    uint32_t l = (uint32_t)len, crc = st__crc_salted(io->salt, io->gen, io->seq, payload, len);
    char *r = io->buf + (io->at - io->from);
    memcpy(r, &l, 4);
    memcpy(r + 4, &crc, 4);
    memcpy(r + 8, &io->gen, 8);
    memcpy(r + 16, &io->seq, 8);
    memcpy(r + ST__REC_HDR, payload, len);
    memset(r + io->need, 0, (size_t)(io->to - io->at - io->need));
}

int st_wal_write(const st_wal_io_t *io)
{
    int rc = st__write_all(io->fd, io->buf, (size_t)(io->to - io->from), io->from);
    if (rc == ST_OK && !io->direct && fdatasync(io->fd) != 0) rc = ST_EIO;
    return rc;
}

int st_wal_done(st_wal_t *w, st_wal_io_t *io, int rc)
{
    if (rc == ST_EINVAL && io->direct) {
        /* A direct write the file system refuses (it took O_DIRECT at open, not at write):
         * the log moves to buffered writes and fdatasync, and the same blocks are written
         * again (nothing of them was written). The old descriptor stays open until the log
         * closes: another write may still be using it. */
        if (w->direct) {
            st_warn("wal: the file system refused a direct write: buffered writes and fdatasync");
            w->old_afd = w->afd;
            w->afd = w->fd;
            w->direct = false;
        }
        io->fd = w->fd;
        io->direct = false;
        rc = st_wal_write(io);
    }
    if (rc == ST_EINVAL) rc = ST_EIO;
    /* A failed fdatasync may have dropped dirty pages that a later one would not report: the
     * log's contents are unknown from here on (the caller stops using it). */
    if (rc != ST_OK) return rc;
    /* what comes before off in its block: the head of the next record written in place */
    uint64_t e = io->at + io->need, b = st__down(e);
    memcpy(w->tail, io->buf + (b - io->from), (size_t)(e - b));
    return ST_OK;
}

int st_wal_append(st_wal_t *w, uint64_t seq, const char *payload, size_t len)
{
    st_wal_io_t *io = &w->io;
    uint64_t off = w->off, last = w->half[w->cur].last_seq;
    int rc = st_wal_reserve(w, seq, len, false, io);
    if (rc != ST_OK) return rc;
    st_wal_build(io, payload, len);
    rc = st_wal_done(w, io, st_wal_write(io));
    if (rc != ST_OK) { /* ST_EFULL: the next record goes in the same place */
        w->off = off;
        w->half[w->cur].last_seq = last;
    }
    return rc;
}

int st_wal_clear_tail(st_wal_t *w)
{
    static const char zeros[1 << 16];
    uint64_t from = st__up(w->off), end = w->half[w->cur].end;
    for (uint64_t o = from; o < end;) {
        size_t n = end - o < sizeof zeros ? (size_t)(end - o) : sizeof zeros;
        int rc = st__write_all(w->fd, zeros, n, o);
        if (rc != ST_OK) return rc == ST_EINVAL ? ST_EIO : rc;
        o += n;
    }
    return fdatasync(w->fd) == 0 ? ST_OK : ST_EIO;
}

bool st_wal_direct(const st_wal_t *w)
{
    return w->direct;
}

int st_wal_switch(st_wal_t *w)
{
    if (w->legacy) return ST_EINVAL;
    return st__start_half(w, 1 - w->cur);
}

/* Makes half h unreadable (its records are durable elsewhere). */
static int st__drop_half(st_wal_t *w, int h)
{
    char *z = st__wbuf(w, ST_WAL_HEADER);
    memset(z, 0, ST_WAL_HEADER);
    int rc = st__put_blocks(w, z, ST_WAL_HEADER, w->half[h].start);
    if (rc == ST_OK) w->half[h].valid = false;
    return rc;
}

int st_wal_reset(st_wal_t *w)
{
    if (!w->legacy) {
        /* the new generation first: a crash in between leaves both, the old one replayed first
         * and skipped (it is all in LMDB) */
        int old = w->cur, rc = st__start_half(w, 1 - w->cur);
        return rc == ST_OK ? st__drop_half(w, old) : rc;
    }
    /* from one region to halves: the second half first, so that a crash in between leaves
     * either the old log (its header intact) or an empty new one */
    uint64_t gen = w->half[0].gen, mid = st__down(w->size / 2);
    w->half[0] = (st__half_t){.start = 0, .end = mid, .gen = gen};
    w->half[1] = (st__half_t){.start = mid, .end = w->size, .gen = gen};
    int rc = st__start_half(w, 1);
    if (rc == ST_OK) rc = st__start_half(w, 0);
    if (rc == ST_OK) w->legacy = false;
    return rc;
}
