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
