/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for the Parquet reader: the input is a whole object as found in cold
 * storage. The footer is parsed, and every row group it describes that lies inside the input is
 * decoded, as a cold read would: once as a message file (flat columns and the edit_history LIST
 * of STRUCTs, or files without it) and once as a booking-shaped file (optional fields, a LIST of
 * STRUCTs holding a LIST), whose rows are then walked with the cursor. Damaged input must give
 * ST_EINVAL, never a crash or a leak.
 */
#include "strata/chatrows.h"
#include "strata/cold.h"
#include "../tests/cold/pq_booking.h"

#include <stdlib.h>
#include <string.h>

static void st__messages(const uint8_t *data, size_t size, uint32_t flen)
{
    st_pq_meta_t m;
    if (st_parquet_parse_footer(data + size - 8 - flen, flen, size, &m) != ST_OK) return;
    for (size_t g = 0; g < m.ngroups; g++) {
        const st_pq_group_t *G = &m.groups[g];
        if (G->offset > size || G->length > size - G->offset) abort(); /* the parser checks this */
        st_pq_rows_t r;
        if (st_parquet_read_group(G, data + G->offset, (size_t)G->length, &r) != ST_OK) continue;
        /* touch every value the decoder produced (from, content, metadata: NULL when null) */
        for (size_t i = 0; i < r.n; i++) {
            const st_msgrow_t *x = &r.rows[i];
            if (x->content_len && x->content[x->content_len - 1] == 0x7f && x->msg_id == 0x7f)
                abort();
            if ((x->from_len && !x->from) || (x->content_len && !x->content) ||
                (x->metadata_len && !x->metadata) || (x->nhist && (!x->has_hist || !x->hist)))
                abort();
            for (uint32_t k = 0; k < x->nhist; k++) { /* and every edit_history entry's */
                const st_msgedit_t *e = &x->hist[k];
                if ((e->content_len && !e->content) || (e->metadata_len && !e->metadata) ||
                    (e->content_len && e->content[e->content_len - 1] == 0x7f && e->metadata_len &&
                     e->metadata[e->metadata_len - 1] == 0x7f))
                    abort();
            }
        }
        st_parquet_rows_free(&r);
    }
    st_parquet_meta_free(&m);
}

static void st__bookings(const uint8_t *data, size_t size, uint32_t flen)
{
    st_pq_file_t m;
    if (st_pq_parse_footer(&bk_schema, data + size - 8 - flen, flen, size, &m) != ST_OK) return;
    for (size_t g = 0; g < m.ngroups; g++) {
        const st_pq_rowgroup_t *G = &m.groups[g];
        if (G->offset > size || G->length > size - G->offset) abort();
        st_pq_table_t t;
        if (st_pq_read_group(&bk_schema, G, data + G->offset, (size_t)G->length, &t) != ST_OK)
            continue;
        st_arena_t a = {0};
        st_pq_cur_t c;
        st_pq_cur_init(&c, &t);
        while (st_pq_cur_next(&c)) {
            bk_row_t r;
            bk_get(&c, &r, &a); /* copies every string: touches every byte the cursor gives */
            st_arena_reset(&a);
        }
        st_pq_cur_done(&c);
        st_arena_free(&a);
        st_pq_table_free(&t);
    }
    st_pq_file_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t flen;
    if (size < 8 || st_parquet_footer_len(data + size - 8, size, &flen) != ST_OK) return 0;
    st__messages(data, size, flen);
    st__bookings(data, size, flen);
    return 0;
}
