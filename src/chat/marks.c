/* SPDX-License-Identifier: MIT */
/*
 * Which conversations may have cold rows, known from the hot store alone (SPEC §7: the loop
 * never waits on object storage). A conversation with no hot record is either new or evicted
 * (evict.c), and only the cold tier's footers told which: a post to a new conversation read every
 * footer of its owner, so with storage down it was refused and with storage slow it waited.
 *
 * 'R' u 0 c is written in the batch that records an object holding rows of c (the flush's, in
 * flush.c; rebuild-meta's, in rebuild.c): cold rows of a conversation exist only if its marker
 * does. Compactions and folds only ever write rows of objects already recorded, so they need
 * none; a marker outlives its rows (retention): it then costs a footer read, never a wrong answer.
 * An erasure removes them (erase.c), with everything of the owner; a deleted conversation's goes
 * in the batch of its delete (edit.c, st__chat_cold_unmark): its rows are all masked from then on
 * ('Q': ids up to its last), so a footer read could find none of them anyway (st__chat_conv_load
 * leaves masked groups out), and the seq of one re-created under the name goes on from the mask's
 * last seq (SPEC §2: never issued twice), not from the rows. Whatever of the name an object holds
 * later is a re-created one's, written by a flush after the delete, which marks it again — also a
 * flush that read the deleted rows before the delete and records them after (masked; a marker
 * too many costs a footer read).
 *
 * Stores written before markers have objects without them: 'L' u says the owner's markers are
 * complete, so their absence can be trusted. It is set in the batch of the owner's first flush
 * (no object recorded before it: every one since has its markers), and by rebuild-meta for an
 * owner whose recorded objects it read all of. An owner without it keeps the footer read.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

bool st__chat_marks_off(void)
{
    /* test-only: STRATA_TEST_NO_MARKS=1 writes stores as releases before the marks did (no 'R', no
     * 'L', no backfill), for the tests of what a newer binary makes of them */
    static int off = -1;
    if (off < 0) {
        const char *e = getenv("STRATA_TEST_NO_MARKS");
        off = e && strcmp(e, "1") == 0;
    }
    return off;
}

static size_t st__mark_key(uint8_t *k, const char *u, size_t ul, const char *conv, size_t cl)
{
    size_t n = st__chat_ukey(k, 'R', u, ul);
    return n + st__chat_conv_part(k + n, ul, conv, cl);
}

/* Stages an empty record at k unless one is there: a read, not a put, for a record written
 * before (no page of LMDB rewritten). */
static int st__put_once(st_chat_t *c, const uint8_t *k, size_t kl, uint64_t *wait)
{
    if (st__chat_marks_off()) return ST_OK;
    const void *v;
    size_t vl;
    int rc = st_store_get(c->store, k, kl, &v, &vl, wait);
    if (rc == ST_ENOTFOUND) rc = st_store_put(c->store, k, kl, "", 0, wait);
    return rc;
}

int st__chat_cold_mark(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                       uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    return st__put_once(c, k, st__mark_key(k, u, ul, conv, cl), wait);
}

int st__chat_cold_unmark(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                         uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    int rc = st_store_del(c->store, k, st__mark_key(k, u, ul, conv, cl), wait);
    return rc == ST_ENOTFOUND ? ST_OK : rc;
}

int st__chat_marks_complete(st_chat_t *c, const char *u, size_t ul, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    return st__put_once(c, k, st__chat_ukey(k, 'L', u, ul) - 1, wait);
}

bool st__chat_marks_known(st_chat_t *c, const char *u, size_t ul, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    const void *v;
    size_t vl;
    return st_store_get(c->store, k, st__chat_ukey(k, 'L', u, ul) - 1, &v, &vl, wait) == ST_OK;
}

bool st__chat_cold_none(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                        uint64_t *wait)
{
    if (!st__chat_marks_known(c, u, ul, wait)) return false; /* an older store's owner */
    uint8_t k[ST__KEY_CAP];
    const void *v;
    size_t vl;
    /* any answer but "not there" (an error) keeps the footer read: never a wrong "none" */
    return st_store_get(c->store, k, st__mark_key(k, u, ul, conv, cl), &v, &vl, wait) ==
           ST_ENOTFOUND;
}
