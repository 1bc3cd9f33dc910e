/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for the Parquet reader: the input is a whole object as found in cold
 * storage. The footer is parsed, and every row group it describes that lies inside the input is
 * decoded, as a cold read would. Damaged input must give ST_EINVAL, never a crash or a leak.
 */
#include "strata/cold.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t flen;
    if (size < 8 || st_parquet_footer_len(data + size - 8, size, &flen) != ST_OK) return 0;
    st_pq_meta_t m;
    if (st_parquet_parse_footer(data + size - 8 - flen, flen, size, &m) != ST_OK) return 0;
    for (size_t g = 0; g < m.ngroups; g++) {
        const st_pq_group_t *G = &m.groups[g];
        if (G->offset > size || G->length > size - G->offset) abort(); /* the parser checks this */
        st_pq_rows_t r;
        if (st_parquet_read_group(G, data + G->offset, (size_t)G->length, &r) != ST_OK) continue;
        for (size_t i = 0; i < r.n; i++) /* touch every value the decoder produced */
            if (r.rows[i].content_len && r.rows[i].content[r.rows[i].content_len - 1] == 0x7f &&
                r.rows[i].msg_id == 0x7f)
                abort();
        st_parquet_rows_free(&r);
    }
    st_parquet_meta_free(&m);
    return 0;
}
