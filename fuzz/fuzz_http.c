/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for the whole HTTP request path: bytes -> parser (limits, pipelining) ->
 * router -> handlers -> JSON bodies -> store staging, with group commits in between. Anything a
 * client can send must end in a response or a clean connection error, never a crash. Upgrade
 * requests go through the WebSocket handshake check, whose hand-off must stay small.
 */
#include "harness.h"

static int on_request(void *arg, const st_http_request_t *req)
{
    (void)arg;
    if (req->upgrade) {
        st_buf_t out = {0};
        const char *msg;
        if (st_http_ws_handshake(req, &out, &msg) == ST_OK && out.len > 1024) abort();
        st_buf_free(&out);
    }
    int status = fz_dispatch(req);
    if (status < 100 || status > 599) abort();
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const st_http_parser_cb_t cb = {on_request, NULL};
    st_http_parser_t *p = st_http_parser_new(&cb, NULL, fz_cfg.max_header, fz_cfg.max_body);
    /* Feed in two pieces to exercise resumption at an arbitrary split. */
    size_t cut = size ? data[0] % (size + 1) : 0, used;
    if (st_http_parser_feed(p, (const char *)data, cut, &used) == ST_OK)
        st_http_parser_feed(p, (const char *)data + cut, size - cut, &used);
    st_http_parser_free(p);
    fz_settle();
    return 0;
}
