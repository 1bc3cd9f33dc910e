/* SPDX-License-Identifier: MIT */
/*
 * What start-up reads: event definitions, the seat maps (in 1 KiB chunks: 'S' event 0 u16
 * section u32 chunk -> i64 updated_at | 2-bit states) and the index of bookings still reserved
 * ('H' id -> i64 expires_at). A change to seats stages the chunks it touched in the same batch
 * as the booking record, so the maps on disk always equal a replay of the bookings — but
 * start-up never replays them: it costs the seats and the active holds, not the bookings ever
 * made. A data dir from before the chunks ('V' "seats" absent) is converted once, by the old
 * replay, on its first start.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__LAYOUT 2

static const uint8_t st__vkey[] = {ST_KS_SEATS_V, 's', 'e', 'a', 't', 's'};

static size_t st__chunk_key(uint8_t *key, const st_event_t *e, size_t sec, uint32_t chunk)
{
    size_t n = 0;
    key[n++] = ST_KS_SEATMAP;
    memcpy(key + n, e->id, e->id_len);
    n += e->id_len;
    key[n++] = 0;
    st_be16_put(key + n, (uint16_t)sec);
    st_be32_put(key + n + 2, chunk);
    return n + 6;
}

static int st__chunk_put(st_seats_t *s, const st_event_t *e, const st_section_t *sec,
                         uint32_t chunk, uint64_t *wait)
{
    uint8_t key[1 + ST_NAME_MAX + 7];
    size_t nbytes = (size_t)((sec->rows * sec->cols + 3) / 4);
    size_t off = (size_t)chunk * ST_SEATS_CHUNK_BYTES;
    size_t len = nbytes - off < ST_SEATS_CHUNK_BYTES ? nbytes - off : ST_SEATS_CHUNK_BYTES;
    uint8_t val[8 + ST_SEATS_CHUNK_BYTES];
    memcpy(val, &e->updated_at, 8);
    memcpy(val + 8, sec->bits + off, len);
    size_t klen = st__chunk_key(key, e, (size_t)(sec - e->sections), chunk);
    return st_store_put(s->store, key, klen, val, 8 + len, wait);
}

int st__chunks_save(st_seats_t *s, st_event_t *e, st_section_t *sec, const uint32_t *seats,
                    size_t n, uint64_t *wait)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t chunk = seats[i] / ST_SEATS_CHUNK_SEATS;
        bool done = false;
        for (size_t k = 0; k < i && !done; k++)
            done = seats[k] / ST_SEATS_CHUNK_SEATS == chunk;
        if (done) continue;
        /* rewritten in place when the same chunk changes again within the open batch */
        int rc = st__chunk_put(s, e, sec, chunk, wait);
        if (rc) return rc;
    }
    return ST_OK;
}

int st__hold_index(st_seats_t *s, uint64_t id, int64_t expires_at, bool add, uint64_t *wait)
{
    uint8_t key[9];
    size_t klen = st__bkey(key, id, ST_KS_HOLD);
    if (add) return st_store_put(s->store, key, klen, &expires_at, sizeof expires_at, wait);
    return st_store_del(s->store, key, klen, wait);
}

/* ---- start-up ---- */

static int st__load_chunk(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_seats_t *s = arg;
    const uint8_t *k = key;
    const uint8_t *z = klen > 8 ? memchr(k + 1, 0, klen - 1) : NULL;
    if (!z || (size_t)(k + klen - z) != 7 || vlen < 8) goto corrupt;
    st_event_t *e = st__event_find(s, (const char *)k + 1, (size_t)(z - k - 1), NULL);
    size_t si = st_be16_get(z + 1);
    uint32_t chunk = st_be32_get(z + 3);
    if (!e || si >= e->nsections) goto corrupt;
    st_section_t *sec = &e->sections[si];
    size_t nbytes = (size_t)((sec->rows * sec->cols + 3) / 4);
    size_t off = (size_t)chunk * ST_SEATS_CHUNK_BYTES;
    if (off >= nbytes || vlen - 8 > nbytes - off) goto corrupt;
    memcpy(sec->bits + off, (const uint8_t *)val + 8, vlen - 8);
    sec->loaded = true;
    int64_t upd;
    memcpy(&upd, val, 8);
    if (upd > e->updated_at) e->updated_at = upd;
    return 0;
corrupt:
    st_error("seats: a seat-map chunk (key of %zu bytes) is corrupt or orphaned; skipped", klen);
    return 0;
}

static int st__load_hold(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_seats_t *s = arg;
    if (klen != 9 || vlen != 8) return 0;
    uint64_t id = st_be64_get((const uint8_t *)key + 1);
    int64_t at;
    memcpy(&at, val, 8);
    st__hold_push(s, at, id);
    return 0;
}

/* Newest booking id: the snowflake generator must never hand it out again. */
static int st__last_booking(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_seats_t *s = arg;
    (void)val;
    (void)vlen;
    if (klen != 9) return 0;
    uint64_t id = st_be64_get((const uint8_t *)key + 1);
    st_snowflake_floor(&s->ids, id);
    return 1;
}

/* ---- the one-time conversion of a data dir from before chunks: replay every booking ---- */

static int st__replay_booking(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_seats_t *s = arg;
    st_booking_t b;
    (void)key;
    (void)klen;
    if (st__booking_decode(val, vlen, &b) != ST_OK) {
        st_error("seats: a booking record (%zu bytes) is corrupt; skipped", vlen);
        return 0;
    }
    st_event_t *e = st__event_find(s, b.event_id, b.event_len, NULL);
    bool live = b.status == ST_BK_RESERVED || b.status == ST_BK_SOLD;
    for (size_t k = 0; e && live && k < b.nitems; k++) {
        const st_bitem_t *it = &b.items[k];
        st_section_t *sec = st__section_find(e, it->section, it->section_len);
        uint64_t n = sec ? (uint64_t)(sec->rows * sec->cols) : 0;
        for (uint32_t i = 0; i < it->n; i++)
            if (b.seats[it->off + i] < n)
                st__seat_set(e, sec, b.seats[it->off + i],
                             b.status == ST_BK_SOLD ? ST_SEAT_SOLD : ST_SEAT_RESERVED);
    }
    if (e && b.status == ST_BK_RESERVED) {
        uint64_t w = 0;
        st__hold_index(s, b.id, b.expires_at, true, &w);
    }
    if (e && b.updated_at > e->updated_at) e->updated_at = b.updated_at;
    free(b.seats);
    return 0;
}

static int st__convert(st_seats_t *s)
{
    uint8_t ks = ST_KS_BOOKING;
    uint64_t w = 0;
    int rc = st_store_scan(s->store, &ks, 1, st__replay_booking, s, &w);
    for (size_t k = 0; !rc && k < s->sorted.n; k++) {
        st_event_t *e = s->sorted.v[k];
        for (size_t i = 0; !rc && i < e->nsections; i++) {
            st_section_t *sec = &e->sections[i];
            size_t nbytes = (size_t)((sec->rows * sec->cols + 3) / 4);
            for (size_t off = 0; !rc && off < nbytes; off += ST_SEATS_CHUNK_BYTES) {
                size_t len =
                    nbytes - off < ST_SEATS_CHUNK_BYTES ? nbytes - off : ST_SEATS_CHUNK_BYTES;
                bool any = false;
                for (size_t j = 0; j < len && !any; j++)
                    any = sec->bits[off + j] != 0;
                if (any) rc = st__chunk_put(s, e, sec, (uint32_t)(off / ST_SEATS_CHUNK_BYTES), &w);
            }
        }
    }
    uint8_t v = ST__LAYOUT;
    if (!rc) rc = st_store_put(s->store, st__vkey, sizeof st__vkey, &v, 1, &w);
    if (!rc && s->sorted.n) st_info("seats: converted the seat maps to chunks (once)");
    return rc;
}

int st__rebuild(st_seats_t *s)
{
    uint64_t w = 0;
    uint8_t ks = ST_KS_EVENT;
    int rc = st_store_scan(s->store, &ks, 1, st__load_event, s, &w);
    const void *v;
    size_t vlen;
    bool chunked = !rc && st_store_get(s->store, st__vkey, sizeof st__vkey, &v, &vlen, &w) == ST_OK;
    if (!rc && !chunked) {
        rc = st__convert(s);
    } else if (!rc) {
        ks = ST_KS_SEATMAP;
        rc = st_store_scan(s->store, &ks, 1, st__load_chunk, s, &w);
        for (size_t k = 0; !rc && k < s->sorted.n; k++)
            for (size_t i = 0; i < s->sorted.v[k]->nsections; i++)
                if (s->sorted.v[k]->sections[i].loaded)
                    st__section_recount(s->sorted.v[k], &s->sorted.v[k]->sections[i]);
    }
    ks = ST_KS_HOLD;
    if (!rc) rc = st_store_scan(s->store, &ks, 1, st__load_hold, s, &w);
    ks = ST_KS_BOOKING;
    if (!rc) {
        rc = st_store_range(s->store, &ks, 1, NULL, 0, NULL, 0, true, st__last_booking, s, &w);
        if (rc == 1) rc = ST_OK;
    }
    if (!rc) rc = st__cold_floor(s);
    if (!rc) rc = st__history_migrate(s);
    st__arm_timer(s); /* holds that ran out while we were down expire at once */
    return rc;
}
