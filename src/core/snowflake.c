/* SPDX-License-Identifier: MIT */
/* Snowflake ids: time-ordered, unique per node, never reissued by one generator. */
#include "strata/core.h"

void st_snowflake_init(st_snowflake_t *sf, uint64_t node)
{
    sf->node = node & 1023;
    sf->last_ms = 0;
    sf->seq = 0;
}

uint64_t st_snowflake_next(st_snowflake_t *sf)
{
    int64_t ms = st_now_us() / 1000 - ST_SNOWFLAKE_EPOCH_MS;
    if (ms < sf->last_ms)
        ms = sf->last_ms; /* the clock went back: keep counting on the last millisecond */
    if (ms == sf->last_ms) {
        if (++sf->seq > 4095) {
            /* 4096 ids in one millisecond: borrow the next one rather than wait */
            ms++;
            sf->seq = 0;
        }
    } else {
        sf->seq = 0;
    }
    sf->last_ms = ms;
    return ((uint64_t)ms << 22) | (sf->node << 12) | sf->seq;
}

void st_snowflake_floor(st_snowflake_t *sf, uint64_t id)
{
    int64_t ms = (int64_t)(id >> 22);
    uint64_t node = (id >> 12) & 1023, seq = id & 4095;
    if (ms < sf->last_ms) return;
    /* The node bits rank above the sequence: an id of a higher node (the node id was changed)
     * is above every id of ours in its millisecond, so ours must start the next one; of a lower
     * node, below all of them. */
    if (node > sf->node) seq = 4095;
    if (node < sf->node) seq = 0;
    if (ms > sf->last_ms) {
        sf->last_ms = ms;
        sf->seq = seq;
    } else if (seq > sf->seq) {
        sf->seq = seq;
    }
}

int64_t st_snowflake_time_us(uint64_t id)
{
    return ((int64_t)(id >> 22) + ST_SNOWFLAKE_EPOCH_MS) * 1000;
}
