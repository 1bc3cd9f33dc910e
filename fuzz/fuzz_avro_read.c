/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for the Avro container reader (src/tables/avro_read.c) and the manifest
 * readers on it (manifest_read.c): manifests and manifest lists come from object storage (another
 * writer's, or damaged), so whatever the bytes, the readers accept or refuse them and never crash,
 * leak or read past the buffer. The input is read three ways: as a manifest list, as a manifest,
 * and by a generic walk (records of longs, strings and array blocks chosen by the input's bytes).
 * Seeds: files the writer makes (fuzz/corpus/avro_read/, from tests/tables/test_avro_read.c's
 * shapes; any file strata's manifest.c writes).
 */
#include "strata/iceberg.h"

#include <stdlib.h>
#include <string.h>

static void walk(const uint8_t *data, size_t size)
{
    st_avro_r_t *r;
    if (st_avro_r_open(&r, data, size) != ST_OK) return;
    size_t k = 0;
    for (int rec = 0; rec < 100000 && st_avro_r_next(r) == ST_OK; rec++) {
        for (int i = 0; i < 8 && st_avro_r_status(r) == ST_OK; i++) {
            int64_t v, n;
            const char *s;
            size_t sl;
            const void *fx;
            bool b;
            int br;
            switch (data[k++ % size] % 7) {
            case 0:
                st_avro_r_long(r, &v);
                break;
            case 1:
                st_avro_r_bool(r, &b);
                break;
            case 2:
                st_avro_r_string(r, &s, &sl);
                break;
            case 3:
                st_avro_r_fixed(r, 4, &fx);
                break;
            case 4:
                st_avro_r_union(r, 2, &br);
                break;
            case 5:
                while (st_avro_r_block(r, &n) == ST_OK && n > 0)
                    for (int64_t j = 0; j < n && st_avro_r_long(r, &v) == ST_OK; j++) {
                    }
                break;
            default:
                i = 8;
                break;
            }
        }
    }
    st_avro_r_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    st_ice_mlist_t l;
    if (st_ice_manifest_list_read(&l, data, size) == ST_OK) {
        for (size_t i = 0; i < l.n; i++)
            if (!l.v[i].path) abort();
        st_ice_mlist_free(&l);
    }
    st_ice_entries_t e;
    if (st_ice_manifest_read(&e, data, size) == ST_OK) {
        for (size_t i = 0; i < e.n; i++)
            if (!e.v[i].path) abort();
        st_ice_entries_free(&e);
    }
    walk(data, size);
    return 0;
}
