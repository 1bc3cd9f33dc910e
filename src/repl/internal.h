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
    uint64_t index; /* the Raft index the store had applied when it was taken */
} st_repl_marker_t;

#endif
