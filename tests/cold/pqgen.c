/* SPDX-License-Identifier: MIT */
/*
 * strata-pqgen: a test-only tool (never part of the strata binary) that writes a booking-shaped
 * Parquet file through the schema-driven writer, or reads one back through the reader, and
 * prints its rows as JSON lines, so the e2e tests can hold DuckDB, hyparquet and arrow-rs
 * (parquet-wasm) to the exact values.
 *   strata-pqgen write FILE ROWS SEED GROUP_ROWS   writes FILE, prints the rows it wrote
 *   strata-pqgen read FILE                         prints the rows strata's reader finds
 */
#include "pq_booking.h"

#include <stdlib.h>

static int st__write(const char *path, size_t n, uint32_t seed, size_t group_rows)
{
    st_arena_t a = {0};
    bk_row_t *rows = bk_generate(seed, n, &a);
    st_buf_t f = {0}, out = {0};
    st_pq_write_t w = {.schema = &bk_schema,
                       .nrows = n,
                       .row = bk_put,
                       .arg = rows,
                       .group_rows = group_rows,
                       .zstd_level = 3};
    int rc = st_pq_write(&w, &f);
    FILE *fp = rc == ST_OK ? fopen(path, "wb") : NULL;
    if (!fp || fwrite(f.data, 1, f.len, fp) != f.len || fclose(fp) != 0) {
        fprintf(stderr, "pqgen: cannot write %s\n", path);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        st_buf_reset(&out);
        bk_json(&out, &rows[i]);
        st_buf_appendc(&out, '\n');
        fwrite(out.data, 1, out.len, stdout);
    }
    st_buf_free(&f);
    st_buf_free(&out);
    st_arena_free(&a);
    return 0;
}

static int st__read(const char *path)
{
    st_buf_t f = {0}, out = {0};
    FILE *fp = fopen(path, "rb");
    char chunk[65536];
    size_t got;
    while (fp && (got = fread(chunk, 1, sizeof chunk, fp)) > 0)
        st_buf_append(&f, chunk, got);
    if (fp) fclose(fp);
    uint32_t fl;
    st_pq_file_t m;
    if (f.len < 8 || st_pq_footer_len((const uint8_t *)f.data + f.len - 8, f.len, &fl) != ST_OK ||
        st_pq_parse_footer(&bk_schema, (const uint8_t *)f.data + f.len - 8 - fl, fl, f.len, &m) !=
            ST_OK) {
        fprintf(stderr, "pqgen: %s is not a booking file\n", path);
        return 1;
    }
    int rc = ST_OK;
    for (size_t g = 0; g < m.ngroups && rc == ST_OK; g++) {
        const st_pq_rowgroup_t *G = &m.groups[g];
        st_pq_table_t t;
        rc = st_pq_read_group(&bk_schema, G, (const uint8_t *)f.data + G->offset, G->length, &t);
        if (rc != ST_OK) break;
        st_pq_cur_t c;
        st_arena_t a = {0};
        st_pq_cur_init(&c, &t);
        while (st_pq_cur_next(&c)) {
            bk_row_t r;
            bk_get(&c, &r, &a);
            st_buf_reset(&out);
            bk_json(&out, &r);
            st_buf_appendc(&out, '\n');
            fwrite(out.data, 1, out.len, stdout);
        }
        rc = st_pq_cur_done(&c);
        st_pq_table_free(&t);
        st_arena_free(&a);
    }
    st_pq_file_free(&m);
    st_buf_free(&f);
    st_buf_free(&out);
    if (rc != ST_OK) fprintf(stderr, "pqgen: %s: a row group does not decode\n", path);
    return rc == ST_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "write") == 0)
        return st__write(argv[2], strtoul(argv[3], NULL, 10), (uint32_t)strtoul(argv[4], NULL, 10),
                         strtoul(argv[5], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "read") == 0) return st__read(argv[2]);
    fprintf(stderr, "usage: strata-pqgen write FILE ROWS SEED GROUP_ROWS | read FILE\n");
    return 2;
}
