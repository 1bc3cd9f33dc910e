/* SPDX-License-Identifier: MIT */
/*
 * ws: live streams over WebSocket (SPEC §3) on strata's own loop. The HTTP side reads the
 * upgrade request and hands the socket, with every byte read so far, to libwebsockets running
 * on the same libuv loop. Events are queued per connection with the batch id they depend on and
 * sent only once that batch is durable. Only this module includes libwebsockets.h.
 */
#ifndef STRATA_WS_H
#define STRATA_WS_H

#include "strata/http.h"

typedef struct st_ws st_ws_t;

int st_ws_open(st_ws_t **out, uv_loop_t *loop, st_app_t *app);
/* Closes every stream and starts closing the libwebsockets context; run the loop until its
 * handles are closed, then st_ws_free. */
void st_ws_close(st_ws_t *ws);
void st_ws_free(st_ws_t *ws);

/* libwebsockets takes at most this many bytes read ahead of it (its header buffer): the HTTP
 * side hands over a minimal upgrade request (see st_http_ws_handshake), whatever its size was. */
#define ST_WS_MAX_HANDOFF 2048

/* Takes over `fd` (owned by ws from here on, also on failure) whose upgrade request is the
 * start of buf. subject: the authenticated principal ("" when auth is off); times: its token's
 * (borrowed; all 0 with auth off) — the stream is closed 1008 "token expired" once
 * st_http_token_check with --jwt-leeway fails for them, the moment a request with that token
 * would be refused (exp + leeway). admin: the token has role admin (it streams any room). */
int st_ws_adopt(st_ws_t *ws, int fd, const char *buf, size_t len, const char *subject,
                const st_http_token_times_t *times, bool admin);

/* A typing signal (SPEC §2.1 v5): the room's subscribers here get a typing frame, at most one per
 * user per room per second (more are coalesced); forward: hand it to the group's other members
 * too (the leader that took the request; a member that got it handed does not). Never stored. */
int st_ws_typing(st_ws_t *ws, const char *room, size_t rl, const char *user, size_t ul,
                 int64_t until, bool forward);

/* Presence (SPEC §2.1 v5). The body of GET /v1/rooms/{room}/presence into out:
 * {"room_id","online":[user…]}, sorted, the union of every member's word (ws may be NULL). */
void st_ws_presence_json(st_ws_t *ws, const char *room, size_t rl, st_buf_t *out);
/* One (room, user) of another member's announcement (POST /v1/cluster/presence); strings
 * borrowed for the call. */
typedef struct {
    const char *room, *user;
    size_t rl, ul;
    bool online;
} st_ws_presence_t;
/* Member `member` (its boot nonce: a new one voids what it said before) says these of its own
 * streams; entries it does not say again within a few seconds go. ST_ERATE when the group has
 * more members than one has slots. */
int st_ws_presence_peer(st_ws_t *ws, uint64_t member, const char *nonce,
                        const st_ws_presence_t *items, size_t n);

/* Open streams; they count against --max-connections with the HTTP connections. */
size_t st_ws_connections(const st_ws_t *ws);
/* Subscriptions over every open stream. */
size_t st_ws_subscriptions(const st_ws_t *ws);

#endif
