/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for JSON request bodies: the input is the body of every POST route in turn
 * (with and without an Idempotency-Key), straight into dispatch, skipping HTTP framing so the
 * fuzzer spends its time in cJSON and the field validation.
 */
#include "harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
