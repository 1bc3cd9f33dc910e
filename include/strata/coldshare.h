/* SPDX-License-Identifier: MIT */
/*
 * coldshare: do the members of a replicated group share one cold store? (SPEC §8)
 *
 * A group's cold tier must be one store every member reads: the leader flushes hot rows into it
 * and deletes them from the hot store, and after a failover the next leader (and every member's
 * stream replay) reads them back from there. A member started with a store of its own (the
 * embedded default, `file://` inside its data dir) would lose every flushed message with the
 * machine that holds it.
 *
 * Each member writes a marker object, `.strata/members/{id}`, holding a random nonce made at
 * start-up; the nonce travels to every member through the group (a replicated key, see
 * st_repl_member_nonce). Each member then reads every member's marker from its own store and
 * compares: a marker that holds the nonce the group knows can only have been written by that
 * member, into this store. Until every member's marker checks out — and again whenever one is
 * missing or holds another nonce (a store that does not answer changes no verdict: the tier's
 * own requests fail and retry then) — the tier is held: no flush starts and no object is written or
 * deleted (st_coldshare_held), and /healthz says `cold_not_shared`. Rows stay hot meanwhile;
 * nothing is lost. A name starting with '.' is never a user's folder (chat writes such names with
 * '~'), so the markers are no one's data.
 *
 * Loop thread only, except the object-store calls, which run on the worker pool.
 */
#ifndef STRATA_COLDSHARE_H
#define STRATA_COLDSHARE_H

#include "strata/cold.h"

#include <uv.h>

typedef struct st_coldshare st_coldshare_t;

/* What the group says member id's marker must hold: writes its 32-hex-digit nonce into
 * nonce[33] and returns true, or false while the group does not know it yet. */
typedef bool (*st_coldshare_expect_fn)(void *arg, uint64_t id, char nonce[33]);

/* Starts checking: writes this member's marker, then reads every member's (ids borrowed for the
 * call; obj borrowed, it must outlive the checker). The tier is held from now until the first
 * check passes. */
int st_coldshare_open(st_coldshare_t **out, uv_loop_t *loop, st_objstore_t *obj, uint64_t self,
                      const uint64_t *ids, size_t n, st_coldshare_expect_fn expect, void *arg);
/* This member's nonce (32 hex digits, valid as long as the checker). */
const char *st_coldshare_nonce(const st_coldshare_t *s);
/* Whether every member's marker was read back as the group knows it (last check). */
bool st_coldshare_ok(const st_coldshare_t *s);
/* Stops; the checker is freed now, or once its check in flight is back. */
void st_coldshare_close(st_coldshare_t *s);

/* Whether the cold tier must not write or delete objects now (a group whose store is not known
 * to be shared). Always false for a single node. */
bool st_coldshare_held(void);

#endif
