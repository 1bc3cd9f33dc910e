/* SPDX-License-Identifier: MIT */
/*
 * WebSocket streams on libwebsockets, adopted onto strata's libuv loop. Each connection keeps
 * its subscriptions and an outbound queue of frames, each tagged with the batch it shows; a
 * frame leaves only once that batch is durable (SPEC §3: only durable state is published), in
 * order. A connection whose queue outgrows its limit is closed with 1008 "slow consumer", so a
 * reader that never reads cannot grow server memory.
 */
#include "strata/ws.h"
#include "strata/counters.h"
#include "strata/chat.h"
#include "strata/metrics.h"
#include "strata/seats.h"

#include <cjson/cJSON.h>
#include <libwebsockets.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST__WS_MAX_SUBS   64
#define ST__WS_MAX_IN     (64 * 1024)
#define ST__WS_MAX_QUEUED (1u << 20)

typedef struct st_wsmsg {
    struct st_wsmsg *next;
    uint64_t wait;
    size_t len;
    unsigned char data[]; /* LWS_PRE bytes of headroom, then the payload */
} st_wsmsg_t;

typedef enum { ST_TOPIC_COUNTER, ST_TOPIC_SEATS, ST_TOPIC_MESSAGES } st_topic_t;

#define ST__REPLAY_PAGE      256
#define ST__REPLAY_LOW_WATER (256u * 1024)

typedef struct st_wssub {
    struct st_wssub *next;
    st_topic_t topic;
    char *id;
    char *name;      /* counter name, event id, or user */
    char *conv;      /* messages: one conversation or NULL */
    uint64_t cursor; /* messages: the last msg_id replayed or sent */
    bool replaying;  /* messages: replay not finished; live ones come through the replay */
} st_wssub_t;

typedef struct st_wsconn {
    struct st_wsconn *prev, *next;
    struct lws *wsi;
    st_wssub_t *subs;
    size_t nsubs;
    st_wsmsg_t *head, *tail;
    size_t queued;
    bool slow;
    char *subject; /* authenticated principal ("" when auth is off) */
    st_buf_t in;   /* a message arriving in fragments */
} st_wsconn_t;

struct st_ws {
    uv_loop_t *loop;
    st_app_t *app;
    struct lws_context *ctx;
    struct lws_vhost *vh;
    st_wsconn_t *conns;
    st_store_listener_t listener;
    const char *adopting; /* subject of the connection being adopted, during st_ws_adopt */
    st_metric_t *m_subs, *m_conns, *m_slow, *m_sent;
};

static st_ws_t *st__ws(struct lws *wsi)
{
    return lws_context_user(lws_get_context(wsi));
}

/* ---- outbound ---- */

static void st__queue(st_ws_t *ws, st_wsconn_t *c, const st_buf_t *payload, uint64_t wait)
{
    if (c->slow) return;
    if (c->queued + payload->len > ST__WS_MAX_QUEUED) {
        c->slow = true; /* closed from the writable callback, with its reason */
        st_metric_add(ws->m_slow, 1);
        lws_callback_on_writable(c->wsi);
        return;
    }
    st_wsmsg_t *m = st_malloc(sizeof *m + LWS_PRE + payload->len);
    m->next = NULL;
    m->wait = wait;
    m->len = payload->len;
    memcpy(m->data + LWS_PRE, payload->data, payload->len);
    if (c->tail)
        c->tail->next = m;
    else
        c->head = m;
    c->tail = m;
    c->queued += payload->len;
    if (wait <= st_store_durable_id(ws->app->store)) lws_callback_on_writable(c->wsi);
}

/* Starts a frame in b: {"type":"<type>","id":"<sid>" — the caller adds fields and the '}'. */
static void st__frame_begin(st_buf_t *b, const char *type, const char *sid)
{
    st_buf_reset(b);
    st_buf_printf(b, "{\"type\":\"%s\",\"id\":", type);
    st_buf_append_json_str(b, sid, strlen(sid));
}

static void st__send_error(st_ws_t *ws, st_wsconn_t *c, const char *id, const char *code,
                           const char *msg)
{
    st_buf_t b = {0};
    st_buf_puts(&b, "{\"type\":\"error\",");
    if (id) {
        st_buf_puts(&b, "\"id\":");
        st_buf_append_json_str(&b, id, strlen(id));
        st_buf_appendc(&b, ',');
    }
    st_buf_printf(&b, "\"code\":\"%s\",\"message\":", code);
    st_buf_append_json_str(&b, msg, strlen(msg));
    st_buf_appendc(&b, '}');
    st__queue(ws, c, &b, 0);
    st_buf_free(&b);
}

static void st__counter_frame(st_buf_t *b, const char *id, const char *name, size_t nlen,
                              int64_t value)
{
    st__frame_begin(b, "counter", id);
    st_buf_puts(b, ",\"name\":\"");
    st_buf_append(b, name, nlen);
    st_buf_puts(b, "\",\"value\":");
    st_buf_append_i64(b, value);
    st_buf_appendc(b, '}');
}

static void st__replay_more(st_ws_t *ws, st_wsconn_t *c);

/* Sends the first frame that may leave; one write per writable callback, as lws wants. */
static int st__on_writable(st_ws_t *ws, st_wsconn_t *c)
{
    if (c->slow) {
        /* libwebsockets sends this close reason "if possible"; see the note on issue 5 */
        lws_close_reason(c->wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION,
                         (unsigned char *)"slow consumer", 13);
        return -1;
    }
    st_wsmsg_t *m = c->head;
    if (!m || m->wait > st_store_durable_id(ws->app->store)) return 0;
    c->head = m->next;
    if (!c->head) c->tail = NULL;
    c->queued -= m->len;
    int n = lws_write(c->wsi, m->data + LWS_PRE, m->len, LWS_WRITE_TEXT);
    free(m);
    if (n < 0) return -1;
    st_metric_add(ws->m_sent, 1);
    st__replay_more(ws, c);
    if (c->head && c->head->wait <= st_store_durable_id(ws->app->store))
        lws_callback_on_writable(c->wsi);
    return 0;
}

/* Batches from `first` on were rolled back: what they would have shown must never be sent. */
static void st__seats_changed(void *arg, const char *event_id, size_t elen, const char *tail,
                              size_t tlen, uint64_t wait);
static void st__message_posted(void *arg, const char *user, size_t ulen, const char *conv,
                               size_t clen, uint64_t msg_id, const char *json, size_t len,
                               uint64_t wait);

static void st__on_failed(st_store_listener_t *l, uint64_t first, int err)
{
    st_ws_t *ws = (st_ws_t *)((char *)l - offsetof(st_ws_t, listener));
    (void)err;
    for (st_wsconn_t *c = ws->conns; c; c = c->next) {
        st_wsmsg_t **p = &c->head;
        c->tail = NULL;
        while (*p) {
            st_wsmsg_t *m = *p;
            if (m->wait >= first) {
                *p = m->next;
                c->queued -= m->len;
                free(m);
            } else {
                c->tail = m;
                p = &m->next;
            }
        }
    }
}

static void st__on_durable(st_store_listener_t *l, uint64_t id)
{
    st_ws_t *ws = (st_ws_t *)((char *)l - offsetof(st_ws_t, listener));
    for (st_wsconn_t *c = ws->conns; c; c = c->next)
        if (c->head && c->head->wait <= id) lws_callback_on_writable(c->wsi);
}

/* ---- inbound ---- */

typedef struct {
    st_ws_t *ws;
    st_wsconn_t *c;
    st_wssub_t *s;
    uint64_t wait;
} st_replay_ctx_t;

static void st__message_frame(st_buf_t *b, const char *sid, const char *json, size_t len)
{
    st__frame_begin(b, "message", sid);
    st_buf_puts(b, ",\"message\":");
    st_buf_append(b, json, len);
    st_buf_appendc(b, '}');
}

static void st__replay_one(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    st_replay_ctx_t *r = arg;
    st_buf_t b = {0};
    st__message_frame(&b, r->s->id, json, len);
    st__queue(r->ws, r->c, &b, r->wait);
    st_buf_free(&b);
    r->s->cursor = msg_id;
}

/* One page of replay (hot store; the cold tier joins here later). When the page reaches the
 * end, replay_done goes out and the subscription turns live in the same loop turn: every
 * message is either in the replay or live, never both, never neither. */
static void st__replay_step(st_ws_t *ws, st_wsconn_t *c, st_wssub_t *s)
{
    st_message_query_t q = {.conv = s->conv,
                            .conv_len = s->conv ? strlen(s->conv) : 0,
                            .after = s->cursor,
                            .limit = ST__REPLAY_PAGE};
    st_replay_ctx_t r = {ws, c, s, 0};
    bool more = false;
    uint64_t last = 0;
    int rc = st_chat_each(ws->app->chat, s->name, strlen(s->name), &q, st__replay_one, &r, &more,
                          &last, &r.wait);
    if (rc != ST_OK) {
        st__send_error(ws, c, s->id, "unavailable", "replay failed; resubscribe with after");
        s->replaying = false;
        return;
    }
    if (!more) {
        st_buf_t b = {0};
        st__frame_begin(&b, "replay_done", s->id);
        st_buf_appendc(&b, '}');
        st__queue(ws, c, &b, r.wait);
        st_buf_free(&b);
        s->replaying = false;
    }
}

static void st__replay_more(st_ws_t *ws, st_wsconn_t *c)
{
    for (st_wssub_t *s = c->subs; s && !c->slow; s = s->next)
        if (s->replaying && c->queued < ST__REPLAY_LOW_WATER) st__replay_step(ws, c, s);
}

static void st__subscribe(st_ws_t *ws, st_wsconn_t *c, const char *id, const cJSON *j)
{
    const cJSON *topic = cJSON_GetObjectItemCaseSensitive(j, "topic");
    if (!cJSON_IsString(topic)) {
        st__send_error(ws, c, id, "invalid_argument", "'topic' must be a string");
        return;
    }
    bool seats = strcmp(topic->valuestring, "seats") == 0;
    bool messages = strcmp(topic->valuestring, "messages") == 0;
    if (!seats && !messages && strcmp(topic->valuestring, "counter") != 0) {
        st__send_error(ws, c, id, "invalid_argument", "unknown topic (counter, messages, seats)");
        return;
    }
    const char *field = seats ? "event_id" : messages ? "user" : "name";
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, field);
    if (!cJSON_IsString(name) || !st_name_valid(name->valuestring, strlen(name->valuestring))) {
        char msg[96];
        snprintf(msg, sizeof msg, "'%s' must be 1-255 characters of [A-Za-z0-9_.:-]", field);
        st__send_error(ws, c, id, "invalid_argument", msg);
        return;
    }
    const cJSON *conv = messages ? cJSON_GetObjectItemCaseSensitive(j, "conversation_id") : NULL;
    const cJSON *after = messages ? cJSON_GetObjectItemCaseSensitive(j, "after") : NULL;
    uint64_t after_id = 0;
    if (messages) {
        if (conv && !(cJSON_IsString(conv) &&
                      st_name_valid(conv->valuestring, strlen(conv->valuestring)))) {
            st__send_error(ws, c, id, "invalid_argument",
                           "'conversation_id' must be 1-255 characters of [A-Za-z0-9_.:-]");
            return;
        }
        if (after && !cJSON_IsNull(after)) {
            const char *a = cJSON_IsString(after) ? after->valuestring : "";
            size_t n = strlen(a);
            bool ok = n > 0 && n <= 20;
            for (size_t i = 0; ok && i < n; i++)
                ok = a[i] >= '0' && a[i] <= '9';
            unsigned long long v = ok ? strtoull(a, NULL, 10) : 0;
            if (!ok || (n == 20 && strcmp(a, "18446744073709551615") > 0)) {
                st__send_error(ws, c, id, "invalid_argument", "'after' must be a msg_id string");
                return;
            }
            after_id = v;
        }
        if (*ws->app->cfg->jwt_secret && strcmp(c->subject ? c->subject : "", name->valuestring)) {
            st__send_error(ws, c, id, "forbidden",
                           "the token's subject may only stream its own user");
            return;
        }
        if (!ws->app->chat) {
            st__send_error(ws, c, id, "unavailable", "messages are not served here");
            return;
        }
    }
    for (st_wssub_t *s = c->subs; s; s = s->next)
        if (strcmp(s->id, id) == 0) {
            st__send_error(ws, c, id, "conflict", "a subscription with this id exists");
            return;
        }
    if (c->nsubs >= ST__WS_MAX_SUBS) {
        st__send_error(ws, c, id, "too_many_requests", "too many subscriptions on this stream");
        return;
    }
    /* The snapshot (or current value) is read now and queued with the batch it shows, so
     * nothing published after it can overtake it and nothing before it is missed. */
    st_buf_t snap = {0}, b = {0};
    uint64_t wait = 0;
    if (seats) {
        if (!ws->app->seats ||
            st_seats_event_json(ws->app->seats, name->valuestring, strlen(name->valuestring), &snap,
                                &wait) != ST_OK) {
            st_buf_free(&snap);
            st__send_error(ws, c, id, "not_found", "no such event");
            return;
        }
    }
    st_wssub_t *s = st_calloc(1, sizeof *s);
    s->topic = seats ? ST_TOPIC_SEATS : messages ? ST_TOPIC_MESSAGES : ST_TOPIC_COUNTER;
    s->conv = conv ? st_strndup(conv->valuestring, strlen(conv->valuestring)) : NULL;
    s->cursor = after_id;
    s->replaying = messages;
    s->id = st_strndup(id, strlen(id));
    s->name = st_strndup(name->valuestring, strlen(name->valuestring));
    s->next = c->subs;
    c->subs = s;
    c->nsubs++;
    st_metric_add(ws->m_subs, 1);
    st__frame_begin(&b, "subscribed", id);
    st_buf_appendc(&b, '}');
    st__queue(ws, c, &b, 0);
    if (messages) {
        st__replay_step(ws, c, s);
    } else if (seats) {
        st__frame_begin(&b, "seats", id);
        st_buf_puts(&b, ",\"event_id\":");
        st_buf_append_json_str(&b, s->name, strlen(s->name));
        st_buf_puts(&b, ",\"snapshot\":");
        st_buf_append(&b, snap.data, snap.len);
        st_buf_appendc(&b, '}');
        st__queue(ws, c, &b, wait);
    } else {
        st_counter_t ctr = {ST_COUNTER_PLAIN, 0, 0};
        int rc = st_counter_get(ws->app->store, s->name, strlen(s->name), &ctr, &wait);
        if (rc == ST_OK || rc == ST_ENOTFOUND) {
            st__counter_frame(&b, id, s->name, strlen(s->name), st_counter_value(&ctr));
            st__queue(ws, c, &b, wait);
        }
    }
    st_buf_free(&snap);
    st_buf_free(&b);
}

static void st__unsubscribe(st_ws_t *ws, st_wsconn_t *c, const char *id)
{
    for (st_wssub_t **p = &c->subs; *p; p = &(*p)->next)
        if (strcmp((*p)->id, id) == 0) {
            st_wssub_t *s = *p;
            *p = s->next;
            free(s->id);
            free(s->name);
            free(s->conv);
            free(s);
            c->nsubs--;
            st_metric_add(ws->m_subs, -1);
            return;
        }
    st__send_error(ws, c, id, "not_found", "no subscription with this id");
}

static void st__on_message(st_ws_t *ws, st_wsconn_t *c, const char *p, size_t n)
{
    cJSON *j = cJSON_ParseWithLength(p, n);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        st__send_error(ws, c, NULL, "invalid_json", "frames must be JSON objects");
        return;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    const char *ids = cJSON_IsString(id) && strlen(id->valuestring) <= 64 ? id->valuestring : NULL;
    if (!cJSON_IsString(type))
        st__send_error(ws, c, ids, "invalid_argument", "'type' must be a string");
    else if (!ids || !*ids)
        st__send_error(ws, c, NULL, "invalid_argument", "'id' must be a string of 1-64 bytes");
    else if (strcmp(type->valuestring, "subscribe") == 0)
        st__subscribe(ws, c, ids, j);
    else if (strcmp(type->valuestring, "unsubscribe") == 0)
        st__unsubscribe(ws, c, ids);
    else
        st__send_error(ws, c, ids, "invalid_argument", "unknown type (subscribe, unsubscribe)");
    cJSON_Delete(j);
}

static void st__conn_free(st_ws_t *ws, st_wsconn_t *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (ws->conns == c)
        ws->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    while (c->subs) {
        st_wssub_t *s = c->subs;
        c->subs = s->next;
        free(s->id);
        free(s->name);
        free(s->conv);
        free(s);
        st_metric_add(ws->m_subs, -1);
    }
    free(c->subject);
    while (c->head) {
        st_wsmsg_t *m = c->head;
        c->head = m->next;
        free(m);
    }
    st_buf_free(&c->in);
    st_metric_add(ws->m_conns, -1);
}

static int st__callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                        size_t len)
{
    st_wsconn_t *c = user;
    switch (reason) {
    case LWS_CALLBACK_ESTABLISHED: {
        st_ws_t *ws = st__ws(wsi);
        memset(c, 0, sizeof *c);
        c->wsi = wsi;
        /* lws services the read-ahead inside st_ws_adopt, so the subject is usually still in
         * ws->adopting; a handshake completed later finds it on the wsi instead */
        c->subject = lws_get_opaque_user_data(wsi);
        lws_set_opaque_user_data(wsi, NULL);
        if (!c->subject)
            c->subject = st_strndup(ws->adopting ? ws->adopting : "",
                                    ws->adopting ? strlen(ws->adopting) : 0);
        c->next = ws->conns;
        if (ws->conns) ws->conns->prev = c;
        ws->conns = c;
        st_metric_add(ws->m_conns, 1);
        return 0;
    }
    case LWS_CALLBACK_RECEIVE: {
        st_ws_t *ws = st__ws(wsi);
        if (lws_frame_is_binary(wsi)) {
            if (lws_is_final_fragment(wsi))
                st__send_error(ws, c, NULL, "invalid_argument", "binary frames are not used");
            return 0;
        }
        if (c->in.len + len > ST__WS_MAX_IN) {
            lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
                             (unsigned char *)"message too large", 17);
            return -1;
        }
        st_buf_append(&c->in, in, len);
        if (lws_is_final_fragment(wsi) && !lws_remaining_packet_payload(wsi)) {
            st__on_message(ws, c, c->in.data, c->in.len);
            st_buf_reset(&c->in);
        }
        return 0;
    }
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return st__on_writable(st__ws(wsi), c);
    case LWS_CALLBACK_CLOSED:
        st__conn_free(st__ws(wsi), c);
        return 0;
    case LWS_CALLBACK_WSI_DESTROY:
        /* a connection that never became a stream still owns its subject */
        free(lws_get_opaque_user_data(wsi));
        lws_set_opaque_user_data(wsi, NULL);
        return 0;
    default:
        return 0;
    }
}

static const struct lws_protocols st__protocols[] = {
    {"strata", st__callback, sizeof(st_wsconn_t), 4096, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* Ping after 30 s of silence, hang up after 90 s (SPEC §3). */
static const lws_retry_bo_t st__keepalive = {.secs_since_valid_ping = 30,
                                             .secs_since_valid_hangup = 90};

static void st__lws_log(int level, const char *line)
{
    /* lws reports a routine adoption at error level; keep real errors visible */
    if (level == LLL_ERR && !strstr(line, "calling service"))
        st_error("ws: %.*s", (int)strcspn(line, "\n"), line);
    else
        st_debug("ws: %.*s", (int)strcspn(line, "\n"), line);
}

int st_ws_open(st_ws_t **out, uv_loop_t *loop, st_app_t *app)
{
    st_ws_t *ws = st_calloc(1, sizeof *ws);
    ws->loop = loop;
    ws->app = app;
    lws_set_log_level(LLL_ERR | LLL_WARN, st__lws_log);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[] = {loop};
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
    info.foreign_loops = loops;
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
    info.protocols = st__protocols;
    info.user = ws;
    info.retry_and_idle_policy = &st__keepalive;
    ws->ctx = lws_create_context(&info);
    if (ws->ctx) ws->vh = lws_create_vhost(ws->ctx, &info);
    if (!ws->ctx || !ws->vh) {
        st_error("ws: cannot start libwebsockets on the loop");
        if (ws->ctx) lws_context_destroy(ws->ctx);
        free(ws);
        return ST_EINTERNAL;
    }
    ws->m_conns = st_metrics_gauge("strata_ws_connections", "Open WebSocket streams", "");
    ws->m_subs = st_metrics_gauge("strata_ws_subscribers", "Active subscriptions", "");
    ws->m_slow = st_metrics_counter("strata_ws_slow_consumer_drops_total",
                                    "Streams closed 1008 for not reading", "");
    ws->m_sent = st_metrics_counter("strata_ws_frames_sent_total", "Frames sent", "");
    if (app->seats) st_seats_observe(app->seats, st__seats_changed, ws);
    if (app->chat) st_chat_observe(app->chat, st__message_posted, ws);
    ws->listener.on_durable = st__on_durable;
    ws->listener.on_failed = st__on_failed;
    st_store_listen(app->store, &ws->listener);
    *out = ws;
    return ST_OK;
}

void st_ws_close(st_ws_t *ws)
{
    lws_context_destroy(ws->ctx); /* starts closing its handles on our loop */
}

void st_ws_free(st_ws_t *ws)
{
    /* With a foreign loop, libwebsockets 4.1 frees its context only when destroy is called
     * again after the loop has run its close callbacks. */
    lws_context_destroy(ws->ctx);
    free(ws);
}

int st_ws_adopt(st_ws_t *ws, int fd, const char *buf, size_t len, const char *subject)
{
    if (len > ST_WS_MAX_HANDOFF) {
        close(fd);
        return ST_EHEADERS;
    }
    ws->adopting = subject ? subject : "";
    struct lws *wsi = lws_adopt_socket_vhost_readbuf(ws->vh, fd, buf, len);
    ws->adopting = NULL;
    if (!wsi) return ST_EUNAVAIL; /* lws has closed fd */
    st_wsconn_t *c = lws_wsi_user(wsi);
    if (!c || c->wsi != wsi) /* not established yet: keep the subject on the wsi */
        lws_set_opaque_user_data(wsi,
                                 st_strndup(subject ? subject : "", subject ? strlen(subject) : 0));
    return ST_OK;
}

void st_ws_counter_changed(st_ws_t *ws, const char *name, size_t nlen, int64_t value, uint64_t wait)
{
    if (!ws) return;
    st_buf_t b = {0};
    for (st_wsconn_t *c = ws->conns; c; c = c->next)
        for (st_wssub_t *s = c->subs; s; s = s->next)
            if (s->topic == ST_TOPIC_COUNTER && strlen(s->name) == nlen &&
                memcmp(s->name, name, nlen) == 0) {
                st__counter_frame(&b, s->id, name, nlen, value);
                st__queue(ws, c, &b, wait);
            }
    st_buf_free(&b);
}

/* Seat changes of an event go to its subscribers, with their subscription id in front. */
static void st__seats_changed(void *arg, const char *event_id, size_t elen, const char *tail,
                              size_t tlen, uint64_t wait)
{
    st_ws_t *ws = arg;
    st_buf_t b = {0};
    for (st_wsconn_t *c = ws->conns; c; c = c->next)
        for (st_wssub_t *s = c->subs; s; s = s->next)
            if (s->topic == ST_TOPIC_SEATS && strlen(s->name) == elen &&
                memcmp(s->name, event_id, elen) == 0) {
                st__frame_begin(&b, "seats", s->id);
                st_buf_appendc(&b, ',');
                st_buf_append(&b, tail, tlen);
                st__queue(ws, c, &b, wait);
            }
    st_buf_free(&b);
}

/* A new message: subscribers of its user (and conversation) that finished replay get it now;
 * those still replaying will read it in their next page. */
static void st__message_posted(void *arg, const char *user, size_t ulen, const char *conv,
                               size_t clen, uint64_t msg_id, const char *json, size_t len,
                               uint64_t wait)
{
    st_ws_t *ws = arg;
    st_buf_t b = {0};
    for (st_wsconn_t *c = ws->conns; c; c = c->next)
        for (st_wssub_t *s = c->subs; s; s = s->next) {
            if (s->topic != ST_TOPIC_MESSAGES || s->replaying || msg_id <= s->cursor ||
                strlen(s->name) != ulen || memcmp(s->name, user, ulen) != 0 ||
                (s->conv && (strlen(s->conv) != clen || memcmp(s->conv, conv, clen) != 0)))
                continue;
            st__message_frame(&b, s->id, json, len);
            st__queue(ws, c, &b, wait);
            s->cursor = msg_id;
        }
    st_buf_free(&b);
}
