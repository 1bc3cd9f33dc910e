/* SPDX-License-Identifier: MIT */
/*
 * The intent protocol (see strata/tier.h), one for every job that writes an object: a flush
 * (flush.c) and a compaction (compact.c). Three steps, each one staged batch:
 *
 *   intend   'P' owner 0 seq -> key, and the owner's next number past seq (so no number, and no
 *            key, is used twice); the job's worker starts only once this batch is durable.
 *   swap     the intent still stands (and the objects replaced are still in the manifest), the
 *            kind's side, 'P' out, the replaced objects out with their deletion recorded (held,
 *            hold.c: deleted once no kept snapshot or backup point may name them),
 *            the new object in ('F', its column stats 'I' beside it: colstats.c), the owner's
 *            dirty mark (dirty.c), the owner's cold summary ('W') moved: readers see the old
 *            rows or the new object, never both, never neither.
 *            Retention's drop is a swap without an intent (pseq 0) and without a new object.
 *   abandon  a job whose swap did not happen: its object, if its intent is already gone, is
 *            doomed here; an intent still there is an orphan for the owner's sweep (tier.c),
 *            which the caller runs next. A job whose key held another object already
 *            (ST_EEXIST: the store refused to overwrite; an earlier attempt of its own, an S3 PUT
 *            whose answer was lost, holds the same bytes and counts as written, objstore.c) wrote
 *            nothing: its intent just goes, and the object that is there stays, whoever wrote it
 *            (even under this store's incarnation: a copy of this data dir); the retry takes the
 *            owner's next number. A key that exists but cannot be read back is a failed write
 *            (ST_EIO, objstore.c), abandoned as above: its key, which names this store's
 *            incarnation, is doomed (a copy of this data dir, outside SPEC §5, could lose an
 *            object that way).
 *
 * A crash between the steps leaves a 'P' without its 'F' (an orphan, swept at start-up) or 'D'
 * records (finished by the reaper at start-up).
 */
#include "internal.h"

#include <string.h>

int st__tier_intend(st_store_t *s, const char *o, size_t ol, uint64_t seq, const st_buf_t *key,
                    st_tier_stat_t *st, uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    int rc = st_store_put(s, k, st__tier_mkey(k, 'P', o, ol, true, seq), key->data, key->len, wait);
    st->next_seq = seq + 1;
    if (rc == ST_OK)
        rc = st_store_put(s, k, st__tier_mkey(k, 'W', o, ol, false, 0), st, sizeof *st, wait);
    return rc;
}

/* Whether the intent and every object the swap replaces are still what the job planned on
 * (ST_ECONFLICT when not: swept as an orphan, or the manifest changed meanwhile). */
static int st__check(st_store_t *s, const char *o, size_t ol, const st_tier_swap_t *sw,
                     uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    const void *v;
    size_t vl;
    int rc = ST_OK;
    if (sw->pseq)
        rc = st_store_get(s, k, st__tier_mkey(k, 'P', o, ol, true, sw->pseq), &v, &vl, wait);
    for (size_t i = 0; rc == ST_OK && i < sw->nold; i++) {
        rc = st_store_get(s, k, st__tier_mkey(k, 'F', o, ol, true, sw->old[i].seq), &v, &vl, wait);
        size_t kl = strlen(sw->old[i].key), sl;
        const uint8_t *stats;
        if (rc == ST_OK &&
            (vl < sizeof(st_tier_file_t) || st_tier_rec_split(v, vl, &stats, &sl) != kl ||
             memcmp((const char *)v + sizeof(st_tier_file_t), sw->old[i].key, kl)))
            rc = ST_ENOTFOUND;
    }
    return rc == ST_ENOTFOUND ? ST_ECONFLICT : rc;
}

/* The owner's cold summary after the swap. */
static int st__restat(st_store_t *s, const char *o, size_t ol, const st_tier_swap_t *sw,
                      uint64_t *wait)
{
    int64_t old_rows = 0, old_bytes = 0;
    for (size_t i = 0; i < sw->nold; i++) {
        old_rows += sw->old[i].file.rows;
        old_bytes += (int64_t)sw->old[i].file.size;
    }
    uint8_t k[ST__TIER_MKEY_MAX];
    st_tier_stat_t st;
    int rc = st_tier_stat(s, o, ol, &st, wait);
    if (rc != ST_OK) return rc;
    if (sw->watermark) st.watermark = sw->file->max_id;
    st.rows += sw->file->rows - old_rows;
    st.bytes += (int64_t)sw->file->size - old_bytes;
    st.files += (sw->file->rows ? 1 : 0) - (int64_t)sw->nold;
    if (sw->pseq && st.next_seq < sw->pseq + 1) st.next_seq = sw->pseq + 1;
    return st_store_put(s, k, st__tier_mkey(k, 'W', o, ol, false, 0), &st, sizeof st, wait);
}

int st__tier_swap(st_store_t *s, const char *o, size_t ol, const st_tier_swap_t *sw, uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    int rc = st__check(s, o, ol, sw, wait); /* everything checked before anything is written */
    int64_t now = st_now_us();
    /* the kind's side first, while the manifest still holds the old objects */
    if (rc == ST_OK && sw->kind) rc = sw->kind(sw->arg, wait);
    if (rc == ST_OK && sw->pseq)
        rc = st_store_del(s, k, st__tier_mkey(k, 'P', o, ol, true, sw->pseq), wait);
    for (size_t i = 0; rc == ST_OK && i < sw->nold; i++) {
        rc = st_store_del(s, k, st__tier_mkey(k, 'F', o, ol, true, sw->old[i].seq), wait);
        if (rc == ST_OK) rc = st__tier_stats_del(s, o, ol, sw->old[i].seq, wait);
        if (rc == ST_OK) st__tier_file_changed(s, o, ol, sw->old[i].key, false, wait);
        /* 'D' numbers stay unique: the first old object's number goes on with the new one, so
         * its deletion is recorded under the intent's (no 'F' ever has it) */
        uint64_t dseq = i || !sw->pseq ? sw->old[i].seq : sw->pseq;
        /* held while a kept snapshot or backup point may name it (hold.c) */
        if (rc == ST_OK) rc = st_tier_defer(s, o, ol, dseq, sw->old[i].key, now, wait);
    }
    if (rc == ST_OK && sw->file->rows) {
        st_buf_t v = {0};
        /* the record of the shape an older binary checks (st__check there: exactly the file and
         * the key), the stats under their own key (colstats.c) */
        st_tier_rec_value(&v, sw->file, sw->key, NULL, 0);
        rc = st_store_put(s, k, st__tier_mkey(k, 'F', o, ol, true, sw->fseq), v.data, v.len, wait);
        st_buf_free(&v);
        if (rc == ST_OK)
            rc = st__tier_stats_put(s, o, ol, sw->fseq, sw->key, sw->stats, sw->stats_len, wait);
        if (rc == ST_OK) st__tier_file_changed(s, o, ol, sw->key, true, wait);
    }
    if (rc == ST_OK && (sw->nold || sw->file->rows)) rc = st__tier_dirty(s, o, ol, wait);
    if (rc == ST_OK) rc = st__restat(s, o, ol, sw, wait);
    return rc;
}

int st__tier_collided(st_store_t *s, const char *o, size_t ol, uint64_t pseq, uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    int rc = st_store_del(s, k, st__tier_mkey(k, 'P', o, ol, true, pseq), wait);
    return rc == ST_ENOTFOUND ? ST_OK : rc;
}

int st__tier_abandon(st_store_t *s, const char *o, size_t ol, uint64_t pseq, const char *key,
                     uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    const void *v;
    size_t vl;
    int rc = st_store_get(s, k, st__tier_mkey(k, 'P', o, ol, true, pseq), &v, &vl, wait);
    if (rc == ST_ENOTFOUND) rc = st_tier_doom(s, o, ol, pseq, key, wait);
    return rc;
}
