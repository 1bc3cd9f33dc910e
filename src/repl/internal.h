/* SPDX-License-Identifier: MIT */
/* repl internals: the Raft member (repl.c) and its transport (transport.c). */
#ifndef STRATA_REPL_INTERNAL_H
#define STRATA_REPL_INTERNAL_H

#include "strata/repl.h"

#include <raft.h>
#include <raft/uv.h>
#include <string.h>

/* A raft_uv_transport that wraps raft_uv_tcp and sets TCP_NODELAY on its streams. */
typedef struct {
    struct raft_uv_transport outer; /* what raft_uv_init is given */
    struct raft_uv_transport inner; /* raft_uv_tcp */
    raft_uv_accept_cb accept_cb;
    raft_uv_transport_close_cb close_cb;
} st_transport_t;

int st__transport_init(st_transport_t *w, uv_loop_t *loop);
/* After the transport was closed through raft_uv_close. */
void st__transport_free(st_transport_t *w);

/* The snapshot marker: C-Raft keeps it; the data is the LMDB file itself. */
#define ST_REPL_MARKER_MAGIC 0x5354524d4b523031ULL /* "STRMKR01" */
typedef struct {
    uint64_t magic;
    uint64_t index; /* the last entry in the store when it was taken */
    char url[512];  /* the advertised URL of the member that took it: where to fetch the data */
} st_repl_marker_t;

/* snapshot.c */
/* The leader: opens a one-shot port on host whose thread streams a copy of the store to the
 * first connection that presents the token. */
int st__snapshot_offer(st_store_t *store, const char *host, int *port, char token[33]);
/* A worker thread: fetches a copy through url's offer into path, loads it into the store, and
 * gives the Raft index it holds. */
int st__snapshot_fetch(st_store_t *store, const char *url, const char *secret, const char *path,
                       uint64_t *applied);

#endif
