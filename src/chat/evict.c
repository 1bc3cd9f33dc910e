/* SPDX-License-Identifier: MIT */
/*
 * Idle eviction (SPEC §6): a conversation untouched for --hot-ttl whose messages are all cold
 * loses its hot record at the next flush pass; reads fall back to the cold tier's footers.
 */
#include "internal.h"

#include <string.h>

typedef struct {
    int64_t before;
    st_buf_t keys; /* each: u16 length, then the 'C' key */
} st_evict_t;

static int st__evict_pick(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_evict_t *e = arg;
    st_conv_t cv;
    if (!st__chat_conv_decode(val, vlen, &cv) || klen > ST__KEY_CAP) return 0;
    if (cv.hot_total != 0 || cv.updated >= e->before) return 0; /* still has hot rows, or fresh */
    /* emptied by retention: nothing cold to rebuild it from, and its record is all that keeps
     * its last seq (and its place in the list) */
    if (cv.base_total <= 0) return 0;
    uint16_t l = (uint16_t)klen;
    st_buf_append(&e->keys, &l, sizeof l);
    st_buf_append(&e->keys, key, klen);
    return 0;
}

/* Conversations untouched for the hot TTL whose messages are all cold lose their hot record:
 * reads rebuild it from the footers (the cold fall-back: counts, ids, times and the last seq
 * from the seq column's statistics), the next post re-warms it. The newest-first index entry
 * stays, so the conversation is still listed. */
size_t st__chat_evict(st_chat_t *c)
{
    st_chatcold_t *cc = c->cold;
    if (!cc) return 0;
    st_evict_t e = {st_now_us() - (int64_t)cc->hot_ttl_us, {0}};
    uint64_t wait = 0;
    char pre = 'C';
    st_store_scan(c->store, &pre, 1, st__evict_pick, &e, &wait);
    size_t n = 0;
    for (size_t i = 0; i + sizeof(uint16_t) <= e.keys.len; n++) {
        uint16_t l;
        memcpy(&l, e.keys.data + i, sizeof l);
        st_store_del(c->store, e.keys.data + i + sizeof l, l, &wait);
        i += sizeof l + l;
    }
    st_buf_free(&e.keys);
    if (n) {
        st_metric_add(cc->m_evicted, (double)n);
        st_info("cold: evicted %zu idle conversations from the hot store", n);
    }
    return n;
}
