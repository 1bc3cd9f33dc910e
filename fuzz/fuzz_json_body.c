/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for JSON request bodies: the input is the body of every POST route in turn
 * (with and without an Idempotency-Key), straight into dispatch, skipping HTTP framing so the
 * fuzzer spends its time in cJSON and the field validation. The strict JSON check that runs
 * before cJSON is held against it: whatever it accepts cJSON must parse, and the raw metadata
 * text it finds must be a JSON value on its own.
 */
#include "harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_init();
    /* the messages route needs chat (it was NULL here: no input reached a valid post) */
    if (st_chat_open(&fz_app.chat, fz_app.store, 0) != ST_OK) abort();
    return 0;
}

static void fz_check_strict(const char *s, size_t n)
{
    st_json_info_t info = {.member = "metadata"};
    if (st_json_check(s, n, &info) != ST_OK) return;
    cJSON *j = cJSON_ParseWithLength(s, n);
    if (!j) {
        fprintf(stderr, "strict check accepted what cJSON refuses\n");
        abort();
    }
    const cJSON *m = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "metadata") : NULL;
    if (!info.nul && (m != NULL) != (info.value != NULL)) {
        fprintf(stderr, "metadata found by one parser only\n");
        abort();
    }
    if (info.value) {
        st_json_info_t inner = {0};
        if (st_json_check(info.value, info.value_len, &inner) != ST_OK) abort();
    }
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_check_strict((const char *)data, size);
    static const char *paths[] = {"/v1/counters/f/incr",    "/v1/counters/fd/distinct",
                                  "/v1/sequences/fs/next",  "/v1/events",
                                  "/v1/events/fz/bookings", "/v1/users/fz/messages"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        st_http_request_t r = {.method = ST_HTTP_POST,
                               .method_name = "POST",
                               .path = paths[i],
                               .path_len = strlen(paths[i]),
                               .query = "",
                               .body = (const char *)data,
                               .body_len = size,
                               .content_type = "application/json",
                               .content_type_len = 16,
                               .idem_key = (size & 1) ? "fuzz-key" : NULL,
                               .idem_len = (size & 1) ? 8 : 0,
                               .keep_alive = true};
        int status = fz_dispatch(&r);
        /* every answer must be one a client can act on; a 5xx would be a server fault (507: the
         * seats budget, once the fuzzer has made enough big events) */
        if (status != 200 && status != 201 && status != 400 && status != 404 && status != 409 &&
            status != 413 && status != 422 && status != 507) {
            fprintf(stderr, "unexpected status %d for %s\n", status, paths[i]);
            abort();
        }
    }
    fz_settle();
    return 0;
}
