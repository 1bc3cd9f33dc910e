/* SPDX-License-Identifier: MIT */
/*
 * Idle eviction (SPEC §6): a conversation untouched for --hot-ttl whose messages are all cold
 * loses its hot record at the next flush pass (pass.c deletes the records this picks); reads
 * rebuild it from the cold tier's footers (counts, ids, times and the last seq from the seq
 * column's statistics), the next post re-warms it. The newest-first index entry stays, so the
 * conversation is still listed.
 */
#include "internal.h"

bool st__chat_evictable(const void *key, size_t klen, const void *val, size_t vlen, int64_t before)
{
    st_conv_t cv;
    (void)key;
    if (!st__chat_conv_decode(val, vlen, &cv) || klen > ST__KEY_CAP) return false;
    if (cv.hot_total != 0 || cv.updated >= before) return false; /* hot rows, or fresh */
    /* emptied by retention: nothing cold to rebuild it from, and its record is all that keeps
     * its last seq (and its place in the list) */
    return cv.base_total > 0;
}
