/* SPDX-License-Identifier: MIT */
/* Unit tests for chat: seq and hybrid fields, paging bounds, isolation, long ids, restart. */
#include "../test.h"
#include "../fixture.h"
#include "strata/chat.h"
#include "strata/metrics.h"

#include <stdlib.h>

static fx_t fx;
static st_store_t *store;
static st_chat_t *chat;

static void open_all(bool fresh)
{
    if (fresh) fx_begin(&fx);
    store = fx_store(&fx, 64 << 20, 0);
    if (st_chat_open(&chat, store, 3) != ST_OK) abort();
}

/* remove: also drop the data dir (otherwise the next open_all(false) reopens it). */
static void close_all(bool remove)
{
    fx_settle(&fx, store);
    st_chat_close(chat);
    fx_close_store(&fx, store);
    if (remove)
        fx_end(&fx);
    else
        st_metrics_shutdown();
}

static uint64_t post(const char *user, const char *conv, const char *text, st_buf_t *out)
{
    st_message_in_t m = {user, strlen(user), conv,         strlen(conv), "me",
                         2,    text,         strlen(text), NULL,         0};
    uint64_t w = 0;
    st_buf_reset(out);
    CHECK_EQ(st_chat_post(chat, &m, out, &w), ST_OK);
    return strtoull(strstr(out->data, "\"msg_id\":\"") + 10, NULL, 10);
}

TEST(seq_is_gapless_per_conversation_and_fields_follow)
{
    open_all(true);
    st_buf_t out = {0};
    uint64_t a1 = post("u", "a", "1", &out);
    CHECK(strstr(out.data, "\"seq\":1"));
    post("u", "b", "x", &out);
    uint64_t a2 = post("u", "a", "2", &out);
    CHECK(strstr(out.data, "\"seq\":2"));
    CHECK(a2 > a1);
    st_buf_reset(&out);
    uint64_t w = 0;
    CHECK_EQ(st_chat_conversation(chat, "u", 1, "a", 1, &out, &w), ST_OK);
    CHECK(strstr(out.data, "\"total_messages\":2"));
    char want[64];
    snprintf(want, sizeof want, "\"last_msg_id\":\"%llu\"", (unsigned long long)a2);
    CHECK(strstr(out.data, want));
    st_buf_reset(&out);
    CHECK_EQ(st_chat_conversation(chat, "v", 1, "a", 1, &out, &w), ST_ENOTFOUND); /* isolation */
    st_buf_free(&out);
    close_all(true);
}

TEST(paging_respects_bounds_both_ways)
{
    open_all(true);
    st_buf_t out = {0};
    uint64_t ids[5];
    for (int i = 0; i < 5; i++)
        ids[i] = post("p", "c", "m", &out);
    st_message_query_t q = {"c", 1, ids[0], ids[4], 2, false};
    uint64_t w = 0;
    st_buf_reset(&out);
    CHECK_EQ(st_chat_messages(chat, "p", 1, &q, &out, &w), ST_OK);
    char id1[32], next[48];
    snprintf(id1, sizeof id1, "%llu", (unsigned long long)ids[1]);
    snprintf(next, sizeof next, "\"next\":\"%llu\"", (unsigned long long)ids[2]);
    CHECK(strstr(out.data, id1));
    CHECK(strstr(out.data, next)); /* 3 in (ids0, ids4): a page of 2 and more to come */
    q.desc = true;
    q.limit = 10;
    st_buf_reset(&out);
    CHECK_EQ(st_chat_messages(chat, "p", 1, &q, &out, &w), ST_OK);
    CHECK(strstr(out.data, "\"next\":null"));
    char *first = strstr(out.data, "\"msg_id\":\"") + 10;
    CHECK_EQ(strtoull(first, NULL, 10), ids[3]);
    st_buf_free(&out);
    close_all(true);
}

TEST(long_user_and_conversation_ids_fit_and_ids_never_go_back_after_restart)
{
    open_all(true);
    char user[256], conv[256];
    memset(user, 'u', 255);
    memset(conv, 'c', 255);
    user[255] = conv[255] = '\0';
    st_buf_t out = {0};
    uint64_t a = post(user, conv, "long", &out);
    post(user, conv, "long2", &out);
    close_all(false);
    open_all(false);
    uint64_t w = 0;
    st_buf_reset(&out);
    CHECK_EQ(st_chat_conversation(chat, user, 255, conv, 255, &out, &w), ST_OK);
    CHECK(strstr(out.data, "\"total_messages\":2"));
    CHECK(post(user, conv, "after", &out) > a);
    CHECK(strstr(out.data, "\"seq\":3"));
    st_buf_free(&out);
    close_all(true);
}

RUN_TESTS("chat")
