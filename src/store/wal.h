/* SPDX-License-Identifier: MIT */
/*
 * The redo log behind group commit. One preallocated, zero-filled file in two halves, written
 * in place: an append is one synchronous write that never changes the file's size, so the disk
 * does one flush per acknowledged group (LMDB's own commit needs two). Records carry their
 * half's generation and a CRC, so replay stops at the first torn, stale or empty record. When
 * a half is full, appends go on in the other one (st_wal_switch) once the store has made what
 * that one held durable in LMDB: the checkpoint of one half runs while the other fills.
 * Used only by the store's threads; not thread-safe by itself.
 */
#ifndef STRATA_STORE_WAL_H
#define STRATA_STORE_WAL_H

#include "strata/core.h"

typedef struct st_wal st_wal_t;

#define ST_WAL_HEADER 4096

/* Opens (creating and zero-filling if needed) DIR/strata.wal of `size` bytes. */
int st_wal_open(const char *dir, uint64_t size, st_wal_t **out);
void st_wal_close(st_wal_t *w);

/* Calls fn for every valid record in order (the older half's, then the newer's); positions the
 * log after the last one. fn returning non-zero stops replay with that code. */
typedef int (*st_wal_replay_fn)(void *arg, uint64_t seq, const char *payload, size_t len);
int st_wal_replay(st_wal_t *w, st_wal_replay_fn fn, void *arg);

/* Bytes a record with this payload takes, and bytes left in the current half. */
uint64_t st_wal_record_size(size_t payload_len);
uint64_t st_wal_remaining(const st_wal_t *w);
/* Whether such a record fits in an empty half (else it can never be logged). */
bool st_wal_fits_empty(const st_wal_t *w, size_t payload_len);

/* After replay: the last record seq the other (older) half holds, 0 if none. */
uint64_t st_wal_older_last(const st_wal_t *w);
/* The log is one region written before the halves: it cannot switch, only reset. */
bool st_wal_legacy(const st_wal_t *w);
/* Appends go on in the other half under a new generation. Everything that half held must be
 * durable elsewhere. ST_EIO: the header write failed (the caller stops using the log). */
int st_wal_switch(st_wal_t *w);

/* One append's blocks, owned by the caller: reserved in log order (st_wal_reserve, with the
 * log's owner's lock), then built and written by any thread (st_wal_build, st_wal_write), then
 * finished in log order (st_wal_done). Several may be in flight (direct logs only). */
typedef struct {
    char *buf; /* ST__BLK-aligned blocks from `from` to `to` */
    size_t cap;
    uint64_t from, to, at; /* the blocks; where the record starts */
    uint64_t need, gen, seq;
    uint64_t salt; /* the half's, in the CRC of a record written apart (else 0) */
    int fd;        /* written through, and how */
    bool direct;
} st_wal_io_t;
/* Places a record of len payload bytes after the last one reserved. `apart`: a write is still
 * in flight and owns the block the log ends in, so this record starts at the next free block
 * (replay finds it there, by a CRC that takes the half's secret salt). ST_ETOOLARGE: it does
 * not fit the current half, or (apart) the half has no salt (its header predates them). */
int st_wal_reserve(st_wal_t *w, uint64_t seq, size_t len, bool apart, st_wal_io_t *io);
void st_wal_build(st_wal_io_t *io, const char *payload, size_t len);
/* One write of the record's blocks, durable when it returns ST_OK (no log state touched). */
int st_wal_write(const st_wal_io_t *io);
/* In log order, with the write's result: a direct write refused (EINVAL) is done again
 * buffered; on ST_OK the log keeps the record's last block for the next in-place append.
 * Anything but ST_OK: what the log holds is unknown; stop appending. */
int st_wal_done(st_wal_t *w, st_wal_io_t *io, int rc);
/* Zeroes the current half after the last record (a log appended to after a replay, without a
 * reset, must hold nothing beyond it that replay could take for a later record). */
int st_wal_clear_tail(st_wal_t *w);
/* Writes one record and fdatasyncs. ST_ETOOLARGE if it does not fit. ST_EFULL: the write ran
 * out of space, nothing of it can replay, and the log may be used again. ST_EIO: a write or
 * fdatasync failed; what the log holds is unknown, so the caller must stop appending. */
int st_wal_append(st_wal_t *w, uint64_t seq, const char *payload, size_t len);

/* Bytes free for unprivileged users on the disk that holds dir (UINT64_MAX if it cannot be told).
 */
uint64_t st__disk_avail(const char *dir);

/* Whether appends are direct, synchronous writes (else buffered writes + fdatasync). */
bool st_wal_direct(const st_wal_t *w);

/* Starts a new generation in the other half (everything the log holds must already be durable
 * elsewhere); a legacy log becomes two halves. */
int st_wal_reset(st_wal_t *w);

#endif
