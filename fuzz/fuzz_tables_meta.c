/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for the Iceberg metadata reader (src/tables/meta.c): metadata files come from
 * object storage (another writer's, or damaged), so whatever the bytes, st_tables_meta_parse
 * accepts a document strata can commit on top of, or refuses it, and never crashes or leaks. An
 * accepted document is then taken through st_tmeta_next (a commit on top of it, with expiry).
 */
#include "../src/tables/internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *doc;
    if (st_tables_meta_parse(data, size, &doc) != ST_OK) return 0;
    st_tsnap_t s = {.id = 7,
                    .parent = st_tmeta_i64(doc, "current-snapshot-id", -1),
                    .seq = st_tmeta_i64(doc, "last-sequence-number", 0) + 1,
                    .ts_ms = 1800000000000,
                    .op = size % 2 ? "delete" : "append",
                    .list_uri = "file:///t/metadata/snap-7-u.avro",
                    .prev_uri = "file:///t/metadata/v1.metadata.json",
                    .keep_ms = 1000,
                    .expire_all = size % 2};
    st_tstrs_t expired = {0}, dropped = {0};
    cJSON *next = st_tmeta_next(doc, &s, &expired, &dropped);
    char *text = next ? cJSON_PrintUnformatted(next) : NULL;
    if (text) { /* what strata writes, it reads back */
        cJSON *again;
        if (st_tables_meta_parse(text, strlen(text), &again) != ST_OK) abort();
        cJSON_Delete(again);
    }
    free(text);
    cJSON_Delete(next);
    cJSON_Delete(doc);
    st_tstrs_free(&expired);
    st_tstrs_free(&dropped);
    return 0;
}
