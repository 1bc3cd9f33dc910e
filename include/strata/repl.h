/* SPDX-License-Identifier: MIT */
/*
 * repl: replicated groups (SPEC §8) on C-Raft, running on strata's own libuv loop. In a group
 * every sealed group-commit batch becomes one Raft entry; its responses and stream frames leave
 * once the entry is committed on a majority and applied here. Every member applies committed
 * entries into its LMDB (with the Raft index stored beside the data, so replays are no-ops) and
 * publishes the stream frames they carry. Only the leader decides: followers hold their store
 * read-only (standby) and the HTTP layer redirects their /v1 requests to the leader.
 *
 * Loop-thread only.
 */
#ifndef STRATA_REPL_H
#define STRATA_REPL_H

#include "strata/core.h"
#include "strata/store.h"

#include <uv.h>

#define ST_REPL_MAX_MEMBERS 9

/* A worker thread (blocking, timeout_ms at most): POST body to base + path, following redirects
 * to a leader; with a secret, carrying a short-lived admin token signed with it (a group's
 * --cluster-secret, never a client's); header (optional) is one more "Name: value" line. The
 * answer's body is appended to resp, *status is its HTTP status, ip (optional) gets the address
 * that answered. ST_EUNAVAIL when no answer came. */
int st_repl_post(const char *base, const char *path, const char *body, const char *secret,
                 const char *header, long timeout_ms, st_buf_t *resp, long *status, char *ip,
                 size_t iplen);

typedef struct {
    uint64_t id;    /* 1..1023 */
    char raft[256]; /* HOST:PORT of its Raft endpoint */
} st_repl_member_t;

/* Parses "1=HOST:PORT,2=HOST:PORT,...". Ids must be unique and within 1..1023, addresses
 * HOST:PORT and unique. ST_EINVAL (with *why set to a static string) otherwise. */
int st_repl_parse_members(const char *spec, st_repl_member_t *out, size_t max, size_t *n,
                          const char **why);

/* The election timeout (ms) of member `self` of the n members when the configured one is et:
 * et + rank x step, rank = how many members have a lower id, step = et / max(5, n - 1), so every
 * member's differs from the next (by more than et / 10, for et >= 100), none is
 * below et and none above 2 et (repl.c says why). */
unsigned st_repl_election_timeout(const st_repl_member_t *m, size_t n, uint64_t self, unsigned et);

typedef struct st_repl st_repl_t;

typedef struct {
    const char *cluster;         /* --cluster */
    uint64_t self;               /* --cluster-self */
    const char *advertise;       /* this member's HTTP base URL, no trailing slash */
    const char *listen_host;     /* the host HTTP listens on (snapshot copies are served there) */
    const char *data_dir;        /* Raft's files go to DATA_DIR/raft */
    unsigned election_timeout;   /* ms */
    unsigned snapshot_threshold; /* entries between snapshots (and kept after one); 0: by size */
    const char *cluster_secret;  /* --cluster-secret: signs internal calls to other members */
} st_repl_opts_t;

/* Opens the member: starts Raft on the loop and switches the store to group mode (standby
 * until this member leads). */
int st_repl_open(st_repl_t **out, uv_loop_t *loop, st_store_t *store, const st_repl_opts_t *o);
/* Stops Raft; done(arg) runs once every handle is closed (the loop must keep running). */
void st_repl_close(st_repl_t *r, void (*done)(void *arg), void *arg);

/* Called (on the loop) when this member has become a leader that may serve writes: it holds
 * every committed entry in LMDB. Rebuild in-memory views from the store here. */
void st_repl_on_lead(st_repl_t *r, void (*fn)(void *arg), void *arg);
/* Called (on the loop) when this member stops leading, after its pending writes failed. */
void st_repl_on_follow(st_repl_t *r, void (*fn)(void *arg), void *arg);
/* fn(arg): is a stream open on this member? While none is (and it follows, and no read waits),
 * the store applies lazily (st_store_apply_lazy). */
void st_repl_on_streams(st_repl_t *r, bool (*fn)(void *arg), void *arg);

/* True while some member (maybe this one) is known to lead. */
bool st_repl_has_leader(st_repl_t *r);
/* Whether the serving leader may answer a read from its own state now (SPEC §8: reads are
 * linearizable): VALID; RENEW — valid, but the lease runs out soon, so stage a fence now and the
 * next read needs none; EXPIRED — not the serving leader, or no proof of leadership within the
 * lease: the answer must wait for a fence (st_store_fence). */
enum { ST_REPL_LEASE_VALID, ST_REPL_LEASE_RENEW, ST_REPL_LEASE_EXPIRED };
int st_repl_read_lease(const st_repl_t *r);
/* A read on this member (SPEC §8): on the serving leader, raises *wait to a fence's batch when
 * its lease does not cover the read now (the answer waits for that batch; if it fails, this
 * member was deposed). Nothing on a member that does not serve. */
void st_repl_read_fence(st_repl_t *r, uint64_t *wait);
/* A read on a member that does not serve (a stream's snapshot on a follower): asks the leader
 * for its commit index (a ReadIndex round, POST /v1/cluster/read-index, which the leader answers
 * only while it can prove it leads) and waits until this member shows every entry up to it.
 * Returns a ticket; the callback set with st_repl_on_read_index runs whenever tickets complete.
 * One round serves every ticket taken before it was sent. */
uint64_t st_repl_read_index_begin(st_repl_t *r);
/* 1 once the ticket's round completed (this member's state is current as of the ticket), -1 if
 * it failed (no leader, or the leader did not answer), 0 while it runs. */
int st_repl_read_index_state(const st_repl_t *r, uint64_t ticket);
void st_repl_on_read_index(st_repl_t *r, void (*fn)(void *arg), void *arg);
/* The leader's side of a round: its commit index, for an answer sent after the read fence. */
uint64_t st_repl_commit_index(const st_repl_t *r);
/* True once this member leads and has caught up (after its barrier). */
bool st_repl_serving(const st_repl_t *r);
/* The current leader's advertised base URL, written into buf (NUL-terminated); ST_ENOLEADER
 * when no leader or its URL is known, or when this member is the leader but not serving yet. */
int st_repl_leader_url(st_repl_t *r, char *buf, size_t cap);
/* POST /v1/cluster/snapshot on the leader: opens a one-shot port that streams a copy of the
 * store (for a member behind the group's snapshot) to whoever presents the token. */
int st_repl_snapshot_offer(st_repl_t *r, int *port, char token[33]);
/* POST /v1/cluster/announce on the leader: member id serves at url and its cold-store marker
 * holds nonce ("" if it has none); recorded for the group unless it has it already (*wait as for
 * st_store_put). ST_ENOLEADER on a member that does not serve, ST_EINVAL for an unknown id, a
 * URL that is not http(s)://… or a nonce that is not 32 lowercase hex digits. */
int st_repl_announce(st_repl_t *r, uint64_t id, const char *url, const char *nonce, uint64_t *wait);
/* Member id's cold-store nonce as the group knows it (this member's own as soon as it is set):
 * into nonce[33], true if known. */
bool st_repl_member_nonce(st_repl_t *r, uint64_t id, char nonce[33]);
/* This member's cold-store nonce (borrowed for the call): announced to the group. */
void st_repl_set_cold_nonce(st_repl_t *r, const char *nonce);
/* The group's member ids (up to max) into ids; returns how many. */
size_t st_repl_member_ids(const st_repl_t *r, uint64_t *ids, size_t max);
/* Another member's HTTP base URL, as it announced it: ST_OK; ST_ENOTFOUND for this member itself
 * or one not announced yet. */
int st_repl_member_url(st_repl_t *r, uint64_t id, char *buf, size_t cap);
/* Appends the body of GET /v1/cluster. */
void st_repl_status_json(st_repl_t *r, st_buf_t *out);

#endif
