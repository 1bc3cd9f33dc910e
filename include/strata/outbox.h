/* SPDX-License-Identifier: MIT */
/*
 * outbox: a room's membership changes on their way to the members' groups (SPEC §10). When
 * strata runs as many groups behind a proxy, a user's room list lives with user:{user}, which may
 * be another group than the room's. Every membership change stages a record in the same batch as
 * the change itself:
 *   'o'             origin (u64, random, made once) | last seq (u64): the outbox's own record
 *   'o' be64(seq)   u8 kind | i64 joined_at | u16 user length | u16 room length | u8 has name |
 *                   user | room | name
 * (kind 0 removed, 1 added, 2 erased) and a sender on this loop POSTs durable records, in order,
 * a few at a time, from a worker thread, a membership change to
 * {--route-url}/v1/users/{user}/rooms/remote?route=user:{user}, an erasure (SPEC §2.2: the
 * user's group erases a user who is or was in a room of another group) to
 * {--route-url}/v1/rooms/{room}/erasures?route=room:{room} with {"user"}, each with
 * Idempotency-Key: outbox-{origin}-{seq} (signed with --cluster-secret when set); a 2xx answer
 * deletes the record (a store batch); a refusal no resend can change (a 4xx but 401, 403, 408,
 * 425 and 429) moves it, with the answer and the time, to the dead letters, in one batch:
 *   'o' 0xff be64(seq)  i64 dead_at | i32 status | u16 answer length | answer | the record
 * and the records behind it go on; anything else (5xx, no answer) is retried with capped,
 * jittered backoff, never dropped. An admin lists both and sends a dead letter again
 * (st_outbox_json, st_outbox_retry). Only the serving leader sends (a follower's store is on
 * standby); the origin and seq are in the store, so a new leader resends what the old one may have
 * sent under the same keys. /metrics: strata_outbox_pending (records), strata_outbox_sent_total,
 * strata_outbox_failures_total, strata_outbox_dead (records in the dead letters),
 * strata_outbox_dead_total (moved there by this member).
 *
 * Loop thread only.
 */
#ifndef STRATA_OUTBOX_H
#define STRATA_OUTBOX_H

#include "strata/store.h"

#include <uv.h>

typedef struct st_outbox st_outbox_t;

typedef struct {
    const char *route_url; /* the proxy's base URL; "" or NULL: off (nothing is ever staged) */
    const char *secret;    /* --cluster-secret, or "" */
} st_outbox_opts_t;

/* store is borrowed. Registers the metrics whether on or off. */
int st_outbox_open(st_outbox_t **out, uv_loop_t *loop, st_store_t *store,
                   const st_outbox_opts_t *o);
bool st_outbox_on(const st_outbox_t *ob);
/* Stages one change of user's membership of room (name may be NULL) into the open batch; *wait
 * is raised to it. */
int st_outbox_stage(st_outbox_t *ob, const char *user, size_t ul, const char *room, size_t rl,
                    const char *name, size_t nl, int64_t joined_at, bool added, uint64_t *wait);
/* Stages the erasure of user for room's group (it erases the user there: its messages in that
 * group's rooms become tombstones, it leaves them) into the open batch; *wait is raised to it. */
int st_outbox_stage_erase(st_outbox_t *ob, const char *user, size_t ul, const char *room, size_t rl,
                          uint64_t *wait);
/* GET /v1/admin/outbox: {"route_url","pending":[record…],"dead":[record + "status","answer",
 * "dead_at"…],"pending_count","dead_count"}, oldest first, at most limit of each; a record is
 * {"id","kind":"added|removed|erased","user","room_id"} (+ "name","joined_at" for a change).
 * ST_ENOTFOUND: the outbox is off. */
int st_outbox_json(st_outbox_t *ob, size_t limit, st_buf_t *out, uint64_t *wait);
/* POST /v1/admin/outbox/{id}/retry: the dead letter id is staged again as the newest pending
 * record (a new seq, so a new Idempotency-Key: the refusal may be remembered under the old
 * one) and leaves the dead letters, in one batch; out gets the pending record with
 * "retried":"{id}". ST_ENOTFOUND: no such dead letter (or the outbox is off). */
int st_outbox_retry(st_outbox_t *ob, uint64_t id, st_buf_t *out, uint64_t *wait);
/* Stops sending; the object is freed once its timer is closed and a POST in flight is back (run
 * the loop). NULL is fine. */
void st_outbox_close(st_outbox_t *ob);

#endif
