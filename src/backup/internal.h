/* SPDX-License-Identifier: MIT */
/* backup internals shared by ship.c (the worker) and restore.c: object keys and segments. */
#ifndef STRATA_BACKUP_INTERNAL_H
#define STRATA_BACKUP_INTERNAL_H

#include "strata/backup.h"
#include "strata/store_tap.h"

/* A record's seq with this bit set holds only the reservations of group seq, shipped before
 * that group was logged (st_store_ahead_fn). A restore applies it on top of seq - 1 without
 * counting seq as applied: the group itself may have failed, or may come later. */
#define ST_BK_AHEAD (1ull << 63)

/* One redo-log record as the tap saw it. */
typedef struct st_bk_rec {
    st_list_t link;  /* in the backup's queue, oldest first */
    uint64_t seq;    /* 0: a break — the log's records do not continue; a new timeline starts */
    uint64_t ticket; /* an ahead record: its number, for the waiting tap (0 otherwise) */
    uint64_t upto;   /* a break: the last record logged before it (the snapshot must hold it) */
    int64_t time;    /* µs when it became durable */
    size_t len;
    char data[];
} st_bk_rec_t;

/* Segment body before compression: "STBSEG01" | u64 timeline | u32 count |
 * {u64 seq (| ST_BK_AHEAD), i64 time, u32 len, bytes}* | u32 crc32 of everything before. */
#define ST_BK_SEG_MAGIC "STBSEG01"

/* Encodes n records linked from first (their links after the n-th are not read). */
void st__bk_seg_encode(st_buf_t *out, uint64_t timeline, const st_bk_rec_t *first, size_t n);
/* Calls fn for each record of a (decompressed) segment after checking it whole; ST_EIO if it
 * is damaged (nothing is called then). */
typedef int (*st_bk_rec_fn)(void *arg, uint64_t seq, int64_t time, const char *p, size_t len);
int st__bk_seg_decode(const char *p, size_t len, st_bk_rec_fn fn, void *arg);

/* zstd of a whole buffer (appended to out); and back. */
int st__bk_compress(const void *p, size_t len, st_buf_t *out);
int st__bk_decompress(const void *p, size_t len, st_buf_t *out);

typedef struct {
    bool snap; /* snap/… or seg/… */
    uint64_t timeline;
    uint64_t first, last; /* snapshot: first = last = its applied lower bound */
    int64_t time;         /* snapshot: copy began; segment: its first record */
    uint64_t size;
    char key[128];
} st_bk_obj_t;

void st__bk_snap_key(char *out, size_t n, uint64_t timeline, uint64_t applied, int64_t time);
void st__bk_seg_key(char *out, size_t n, uint64_t timeline, uint64_t first, uint64_t last,
                    int64_t tfirst);
/* Parses a key this module wrote; false for anything else. */
bool st__bk_parse_key(const char *key, st_bk_obj_t *o);
/* Every snap/ and seg/ object, sorted by (snap, timeline, first). *out owned: free(). */
int st__bk_list(st_objstore_t *os, st_bk_obj_t **out, size_t *n);

#endif
