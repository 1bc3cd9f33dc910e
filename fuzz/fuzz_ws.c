/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for WebSocket client messages: each input is split at newlines into
 * messages fed to one stream's message handler (no socket: frames are queued, not written),
 * with a real store, seats and chat behind it. Every frame the stream would send must be a
 * JSON object with a "type", whatever the client sent.
 */
#include "harness.h"
#include "../src/ws/internal.h"

#include <cjson/cJSON.h>

static st_ws_t fz_ws;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_init();
    if (st_chat_open(&fz_app.chat, fz_app.store, 0) != ST_OK) abort();
    fz_ws.loop = &fz_loop;
    fz_ws.app = &fz_app;
    st_list_init(&fz_ws.conns);
    st_list_init(&fz_ws.waiting);
    st_list_init(&fz_ws.soon);
    fz_ws.m_conns = st_metrics_gauge("fz_ws_connections", "", "");
    fz_ws.m_subs = st_metrics_gauge("fz_ws_subscribers", "", "");
    fz_ws.m_slow = st_metrics_counter("fz_ws_slow", "", "");
    fz_ws.m_sent = st_metrics_counter("fz_ws_sent", "", "");
    st__ws_topics_init(&fz_ws);
    /* something to replay, an event and a counter to follow */
    const char *setup[][2] = {
        {"/v1/users/u/messages", "{\"conversation_id\":\"c\",\"from\":\"a\",\"content\":\"hi\"}"},
        {"/v1/users/u/messages", "{\"conversation_id\":\"d\",\"from\":\"b\",\"content\":\"yo\"}"},
        {"/v1/events", "{\"event_id\":\"e\",\"sections\":[{\"name\":\"A\",\"rows\":2,"
                       "\"cols\":2,\"price\":1}]}"},
        {"/v1/counters/n/incr", "{}"}};
    for (size_t i = 0; i < sizeof setup / sizeof setup[0]; i++) {
        st_http_request_t r = {.method = ST_HTTP_POST,
                               .method_name = "POST",
                               .path = setup[i][0],
                               .path_len = strlen(setup[i][0]),
                               .query = "",
                               .body = setup[i][1],
                               .body_len = strlen(setup[i][1]),
                               .content_type = "application/json",
                               .content_type_len = 16,
                               .keep_alive = true};
        if (fz_dispatch(&r) >= 300) abort();
    }
    fz_settle();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_wsconn_t c = {0};
    st_list_init(&c.subs); /* a stream that is not in fz_ws.conns: nothing wakes it */
    c.subject = st_strndup((size & 1) ? "u" : "", (size & 1) ? 1 : 0);
    const char *p = (const char *)data, *end = p + size;
    while (p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        st__ws_on_message(&fz_ws, &c, p, n);
        p += n + 1;
    }
    st__ws_replay_more(&fz_ws, &c);
    for (uint32_t i = 0; i < c.qlen; i++) {
        const st_wsent_t *m = &c.q[(c.qhead + i) & (c.qcap - 1)];
        st_buf_t f = {0};
        if (m->prefix) st_buf_append(&f, m->prefix->data, m->prefix->len);
        st_buf_append(&f, m->body->data, m->body->len);
        cJSON *j = cJSON_ParseWithLength(f.data, f.len);
        if (!cJSON_IsObject(j) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "type"))) {
            fprintf(stderr, "bad frame: %.*s\n", (int)f.len, f.data);
            abort();
        }
        cJSON_Delete(j);
        st_buf_free(&f);
    }
    st__ws_unsubscribe_all(&fz_ws, &c);
    st__ws_queue_clear(&fz_ws, &c);
    free(c.subject);
    return 0;
}
