/* SPDX-License-Identifier: MIT */
/* repl internals: the Raft member (repl.c) and its transport (transport.c). */
#ifndef STRATA_REPL_INTERNAL_H
#define STRATA_REPL_INTERNAL_H

#include "strata/repl.h"
#include "strata/store_group.h"

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

/* One member (repl.c); the members' records are announce.c's. */
struct st_repl {
    uv_loop_t *loop;
    st_store_t *store;
    st_store_group_t group; /* first: the store hands it back */
    st_repl_member_t members[ST_REPL_MAX_MEMBERS];
    size_t nmembers;
    uint64_t self;
    char advertise[512];
    char dir[1100];
    st_transport_t transport;
    struct raft_io io;
    struct raft_fsm fsm;
    struct raft raft;
    uv_timer_t poll, retry;
    char listen_host[256];
    char secret[512]; /* --cluster-secret: the group's members sign their internal calls */
    /* snapshot install (snapshot.c): the entries applied while the store is being replaced */
    bool restoring, fetching;
    uint64_t restore_index;
    char restore_url[512];
    uv_work_t fetch;
    int fetch_rc;
    uint64_t fetched;
    st_buf_t deferred;       /* {u64 index, u64 len, bytes}* */
    bool leading;            /* Raft says leader (for lead_term) */
    bool barrier_pending;    /* a barrier of lead_term is in flight */
    bool caught_up;          /* the barrier of lead_term committed */
    bool serving;            /* views rebuilt, standby off */
    unsigned election_ms;    /* this member's election timeout, ordered by id (repl.c) */
    uint64_t lease_ns;       /* how long a majority's acceptance proves leadership (repl.c) */
    uint64_t lease_until_ns; /* uv_hrtime() until which reads need no proof; 0: none */
    uint64_t lead_term;
    bool snap_auto;        /* snapshots by log size (repl.c), not a fixed entry count */
    uint64_t snap_bytes;   /* bytes of the entries applied since the last threshold update */
    uint64_t snap_entries; /* and how many */
    void (*on_lead)(void *arg);
    void *on_lead_arg;
    void (*on_follow)(void *arg);
    void *on_follow_arg;
    /* members' records (announce.c) */
    char cold_nonce[33]; /* this member's cold-store marker nonce (coldshare.h), or "" */
    uv_timer_t announce; /* a follower posts its record to the leader until the group has it */
    uv_work_t ann_work;
    bool announcing; /* a post is on the worker pool */
    char ann_leader[512];
    char ann_body[700];
    int ann_rc;
    /* read index rounds of a member that does not serve (readindex.c) */
    uint64_t ri_next;   /* the last ticket handed out */
    uint64_t ri_round;  /* the tickets up to this one are covered by the round in flight */
    uint64_t ri_done;   /* the tickets up to this one completed */
    uint64_t ri_failed; /* the tickets up to this one failed (those above ri_done) */
    uint64_t ri_index;  /* the leader's commit index the round brought back */
    uint64_t ri_shown;  /* 1 + the store index to show once Raft applied ri_index (0: not yet) */
    uint64_t ri_deadline_ns; /* the round fails if this member shows ri_index no sooner */
    bool ri_notify;          /* a round resolved: the callback runs from the timer */
    bool ri_busy;            /* the request is on the worker pool */
    bool ri_applying;        /* the answer came: waiting for this member to show ri_index */
    int ri_rc;
    unsigned ri_timeout_ms;
    char ri_leader[512];
    uv_work_t ri_work;
    uv_timer_t ri_timer; /* checks how far this member applied, while ri_applying */
    void (*ri_fn)(void *arg);
    void *ri_arg;
    bool (*streams)(void *arg); /* st_repl_on_streams */
    void *streams_arg;
    bool apply_lazy; /* told to the store last */
    void (*closed_cb)(void *arg);
    void *closed_arg;
    int closing;
};

/* The snapshot marker: C-Raft keeps it; the data is the LMDB file itself. */
#define ST_REPL_MARKER_MAGIC 0x5354524d4b523031ULL /* "STRMKR01" */
typedef struct {
    uint64_t magic;
    uint64_t index; /* the last entry in the store when it was taken */
    char url[512];  /* the advertised URL of the member that took it: where to fetch the data */
} st_repl_marker_t;

/* announce.c: every member's advertised URL and cold-store nonce, replicated keys */
/* Starts the follower's announcement timer (repl.c calls it once, at open). */
void st__announce_start(st_repl_t *r);
/* The leader writes its own record (if it differs from the group's). */
void st__record_self(st_repl_t *r);
/* Member id's advertised URL as the group knows it (this member's own, for self). */
bool st__member_url(st_repl_t *r, uint64_t id, char *buf, size_t cap);
/* Called by repl.c's close sequence once per handle or job closed. */
void st__closed_step(st_repl_t *r);

/* post.c: a member's POST to another member (on a worker thread, blocking, timeout_ms at
 * most). Follows a redirect to the leader; with a secret, carries a short-lived admin token signed
 * with it. Appends the answer's body to resp; *status is its HTTP status; ip (optional) gets the
 * address answered from. ST_EUNAVAIL if no answer came. */
int st__member_post(const char *base, const char *path, const char *body, const char *secret,
                    long timeout_ms, st_buf_t *resp, long *status, char *ip, size_t iplen);

/* readindex.c */
void st__read_index_init(st_repl_t *r, unsigned election_timeout_ms);

/* snapshot.c */
/* The leader: opens a one-shot port on host whose thread streams a copy of the store to the
 * first connection that presents the token. */
int st__snapshot_offer(st_store_t *store, const char *host, int *port, char token[33]);
/* A worker thread: fetches a copy through url's offer into path, loads it into the store, and
 * gives the Raft index it holds. */
int st__snapshot_fetch(st_store_t *store, const char *url, const char *secret, const char *path,
                       uint64_t *applied);

/* repl.c: tells the store whether anyone waits for this member's applies (st_store_apply_lazy) */
void st__lazy_update(st_repl_t *r);

#endif
