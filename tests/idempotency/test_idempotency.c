/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for Idempotency-Key answers (src/http/idempotency.c) on a real store: replay and
 * its wait, a key bound to its request, and an expiry sweep that keeps up with any write rate;
 * answers stored in time order with their index in memory, rebuilt after a restart and after
 * someone else's writes; answers of the format before (format 2) still replayed and swept; the
 * index bounded by --idempotency-index, answers past it found through the store (issue 48).
 */
#include "../test.h"
#include "../fixture.h"
#include "../../src/http/internal.h"

static st_store_t *open_store(fx_t *f)
{
    st_idem_limit(0, NULL);
    st__idem_forget();
    return fx_store(f, 256 << 20, 0);
}

static st_idem_req_t req_of(int i, int body)
{
    st_idem_req_t r;
    memset(&r, 0, sizeof r);
    memcpy(r.scope, &i, sizeof i);
    memcpy(r.fp, &body, sizeof body);
    return r;
}

static int64_t count(st_store_t *s, char ks)
{
    int64_t n = 0;
    uint64_t w = 0;
    CHECK_EQ(st_store_count(s, &ks, 1, &n, &w), ST_OK);
    return n;
}

/* Writes answer i as a server from before issue 48 did (format 2): 'i' scope -> created, status
 * with the format bit, the fingerprint of req_of(i, 0), the body; 'x' be64(created) scope ->
 * about. */
static void put_v2(st_store_t *s, int i, int64_t created, uint16_t status, const char *body,
                   const char *about)
{
    st_idem_req_t r = req_of(i, 0);
    uint8_t key[33] = {ST_KS_IDEM}, xkey[41] = {ST_KS_IDEM_EXP};
    memcpy(key + 1, r.scope, 32);
    st_be64_put(xkey + 1, (uint64_t)created);
    memcpy(xkey + 9, r.scope, 32);
    st_buf_t v = {0};
    uint16_t st = (uint16_t)(status | 0x8000);
    st_buf_append(&v, &created, 8);
    st_buf_append(&v, &st, 2);
    st_buf_append(&v, r.fp, 32);
    st_buf_puts(&v, body);
    uint64_t wait = 0;
    CHECK_EQ(st_store_put(s, key, sizeof key, v.data, v.len, &wait), ST_OK);
    CHECK_EQ(st_store_put(s, xkey, sizeof xkey, about, strlen(about), &wait), ST_OK);
    st_buf_free(&v);
}

/* Answers 0..n-1 of req_of(i, 0), 201 {"n":i}, created at t0 + i; all durable after. */
static void record_n(fx_t *fx, st_store_t *s, int n, int64_t ttl, int64_t t0)
{
    uint64_t wait = 0;
    for (int i = 0; i < n; i++) {
        st_idem_req_t r = req_of(i, 0);
        char body[32];
        int bl = snprintf(body, sizeof body, "{\"n\":%d}", i);
        CHECK_EQ(st__idem_record_at(s, &r, ttl, 201, body, (size_t)bl, t0 + i, &wait), ST_OK);
        if (i % 200 == 199) fx_settle(fx, s);
    }
    fx_settle(fx, s);
}

TEST(idempotency_records_replay_until_ttl_and_a_replay_waits_for_the_first_answer)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    st_idem_req_t r = req_of(1, 1);
    uint64_t wait = 0;
    int status;
    const char *body;
    size_t blen;
    CHECK_EQ(st_idem_lookup(s, &r, 1000000, &status, &body, &blen, &wait), ST_ENOTFOUND);
    CHECK_EQ(st_idem_record(s, &r, 1000000, 201, "{\"a\":1}", 7, &wait), ST_OK);
    uint64_t w2 = 0;
    CHECK_EQ(st_idem_lookup(s, &r, 1000000, &status, &body, &blen, &w2), ST_OK);
    CHECK_EQ(status, 201);
    CHECK(blen == 7 && memcmp(body, "{\"a\":1}", 7) == 0);
    CHECK_EQ(w2, wait); /* a replay of a staged answer waits for it too */
    CHECK_EQ(st_idem_lookup(s, &r, -1, &status, &body, &blen, &w2), ST_ENOTFOUND); /* expired */
    fx_close_store(&fx, s);
    fx_end(&fx);
}

TEST(idempotency_key_reused_with_another_request_is_refused_and_waits)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    st_idem_req_t a = req_of(7, 1), b = req_of(7, 2);
    uint64_t wait = 0, w2 = 0;
    int status;
    const char *body;
    size_t blen;
    CHECK_EQ(st_idem_record(s, &a, 1000000, 201, "{}", 2, &wait), ST_OK);
    CHECK_EQ(st_idem_lookup(s, &b, 1000000, &status, &body, &blen, &w2), ST_EIDEMREUSED);
    CHECK_EQ(w2, wait); /* the 422 reports the first request: it waits for it */
    CHECK_EQ(st_err_status(ST_EIDEMREUSED), 422);
    CHECK_STR(st_err_code(ST_EIDEMREUSED), "idempotency_key_reused");
    CHECK(!st_idem_storable(400) && !st_idem_storable(413) && !st_idem_storable(415));
    CHECK(!st_idem_storable(422) && !st_idem_storable(503) && !st_idem_storable(507));
    CHECK(st_idem_storable(200) && st_idem_storable(201) && st_idem_storable(404));
    CHECK(st_idem_storable(409));
    fx_close_store(&fx, s);
    fx_end(&fx);
}

/* The old sweep visited at most 2,000 records a second, expired or not: above that keyed write
 * rate the store grew without bound. Simulated clock: 3,000 keys/s for 40 s, then 20,000 keys/s
 * for 10 s, a 5 s TTL, one timer sweep a second with the server's budget of 2,000. */
TEST(idempotency_sweep_keeps_up_with_a_sustained_rate_above_its_budget)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    enum { SECS = 40 };
    const int64_t ttl = 5000000, t0 = 1000000000000LL;
    int made[SECS], id = 0;
    uint64_t wait = 0;
    for (int t = 0; t < SECS; t++) {
        int64_t now = t0 + (int64_t)t * 1000000;
        made[t] = t < 30 ? 3000 : 20000;
        for (int i = 0; i < made[t]; i++) {
            st_idem_req_t r = req_of(id++, 0);
            CHECK_EQ(st__idem_record_at(s, &r, ttl, 200, "{}", 2, now + i, &wait), ST_OK);
            if (i % 2000 == 1999) fx_settle(&fx, s);
        }
        fx_settle(&fx, s);
        st__idem_sweep_at(s, ttl, 2000, now + 999999);
        fx_settle(&fx, s);
        /* what the TTL keeps (the last 5-7 s of keys) and the marker; never the whole history */
        int64_t recent = 1;
        for (int k = t; k >= 0 && k > t - 7; k--)
            recent += made[k];
        CHECK(count(s, ST_KS_IDEM) <= recent);
        CHECK(count(s, ST_KS_IDEM_EXP) <= recent);
    }
    fx_close_store(&fx, s);
    fx_end(&fx);
}

TEST(idempotency_sweep_deletes_only_expired_answers_and_spares_a_key_recorded_again)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    const int64_t t0 = 1000000000000LL, ttl = 10000000;
    uint64_t wait = 0;
    for (int i = 0; i < 100; i++) {
        st_idem_req_t r = req_of(i, 0);
        CHECK_EQ(st__idem_record_at(s, &r, ttl, 200, "{}", 2, t0 + i, &wait), ST_OK);
    }
    st_idem_req_t again = req_of(5, 0); /* expired, then used again: the new answer stays */
    CHECK_EQ(st__idem_record_at(s, &again, ttl, 201, "{}", 2, t0 + ttl + 50, &wait), ST_OK);
    fx_settle(&fx, s);
    CHECK_EQ(st__idem_sweep_at(s, ttl, 2000, t0 + ttl - 1), 0); /* nothing is old yet */
    fx_settle(&fx, s);
    /* the 100 first answers, key 5's first one too: its new answer is another record */
    CHECK_EQ(st__idem_sweep_at(s, ttl, 2000, t0 + ttl + 100), 100);
    fx_settle(&fx, s);
    int status;
    const char *body;
    size_t blen;
    uint64_t w = 0;
    CHECK_EQ(st__idem_lookup_at(s, &again, ttl, t0 + ttl + 100, &status, &body, &blen, &w), ST_OK);
    CHECK_EQ(status, 201);
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), 1);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

TEST(idempotency_answers_of_the_old_format_are_indexed_then_swept)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    uint64_t wait = 0;
    const int64_t t0 = 1000000000000LL;
    for (int i = 0; i < 50; i++) { /* i64 created | u16 status | body, no fingerprint */
        uint8_t key[33] = {ST_KS_IDEM};
        memcpy(key + 1, &i, sizeof i);
        char v[12];
        int64_t created = t0 + i;
        uint16_t st = 200;
        memcpy(v, &created, 8);
        memcpy(v + 8, &st, 2);
        memcpy(v + 10, "{}", 2);
        CHECK_EQ(st_store_put(s, key, sizeof key, v, sizeof v, &wait), ST_OK);
    }
    fx_settle(&fx, s);
    st__idem_forget(); /* as after a restart on such a data dir */
    int64_t now = t0 + 3600LL * 1000000;
    size_t gone = 0;
    for (int round = 0; round < 10; round++) {
        gone += st__idem_sweep_at(s, 1000000, 20, now);
        fx_settle(&fx, s);
    }
    CHECK_EQ(gone, 50);
    CHECK_EQ(count(s, ST_KS_IDEM), 1); /* the marker: every old record was indexed */
    fx_close_store(&fx, s);
    fx_end(&fx);
}

static bool gone_ida(void *arg, const char *u, size_t ul, int64_t since)
{
    (void)arg, (void)since;
    return ul == 3 && memcmp(u, "ida", 3) == 0;
}

/* ida's erasure was asked for at 1000000000000050 (and is done: not pending) */
static bool erased_ida_at_50(void *arg, const char *u, size_t ul, int64_t since)
{
    (void)arg;
    return since > 0 && since <= 1000000000050LL && ul == 3 && memcmp(u, "ida", 3) == 0;
}

/* Records answer i (a 201 {"content":"x"}, ttl 10 s) about a user and a room's virtual user
 * (NULL: none). */
static void record_about(st_store_t *s, int i, const char *about, const char *room, int64_t at)
{
    uint64_t wait = 0;
    st_idem_req_t r = req_of(i, 0);
    r.about = about;
    r.about_len = about ? strlen(about) : 0;
    r.room = room;
    r.room_len = room ? strlen(room) : 0;
    CHECK_EQ(st__idem_record_at(s, &r, 10000000, 201, "{\"content\":\"x\"}", 15, at, &wait), ST_OK);
}

/* SPEC §2.2: the answers about a user go with its erasure (st_http_idem_erase: a walk of the
 * expiry index in slices); the others expire as before; an answer about a user being erased is
 * neither replayed nor recorded. */
TEST(idempotency_answers_about_a_user_go_with_its_erasure)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    const int64_t t0 = 1000000000000LL, ttl = 10000000;
    uint64_t wait = 0;
    for (int i = 0; i < 10; i++) /* 0-5 about ida, 6-8 about ola, 9 about no one */
        record_about(s, i, i < 6 ? "ida" : i < 9 ? "ola" : NULL, NULL, t0 + i);
    fx_settle(&fx, s);
    /* while ida is being erased: her answers are not replayed, a new one not recorded */
    int status;
    const char *body;
    size_t blen;
    uint64_t w = 0;
    st_idem_req_t r0 = req_of(0, 0), r6 = req_of(6, 0), r20 = req_of(20, 0);
    r0.gone = r6.gone = r20.gone = gone_ida;
    CHECK_EQ(st__idem_lookup_at(s, &r0, ttl, t0 + 100, &status, &body, &blen, &w), ST_ENOTFOUND);
    CHECK_EQ(st__idem_lookup_at(s, &r6, ttl, t0 + 100, &status, &body, &blen, &w), ST_OK);
    CHECK(blen == 15 && memcmp(body, "{\"content\":\"x\"}", 15) == 0);
    r20.about = "ida";
    r20.about_len = 3;
    CHECK_EQ(st__idem_record_at(s, &r20, ttl, 404, "{}", 2, t0 + 100, &wait), ST_OK);
    fx_settle(&fx, s);
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), 11); /* the 404 is kept, naming nobody */
    /* the erasure, 4 at a time */
    int slices = 0;
    while (st_http_idem_erase(s, ST_USER("ida", 3), 7, 4)) {
        fx_settle(&fx, s);
        CHECK(++slices <= 3);
    }
    fx_settle(&fx, s);
    CHECK_EQ(slices, 2);
    CHECK(!st_http_idem_erase(s, ST_USER("ida", 3), 7,
                              4)); /* the same erasure: its walk stays done */
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), 5);
    r0.gone = NULL;
    CHECK_EQ(st__idem_lookup_at(s, &r0, ttl, t0 + 100, &status, &body, &blen, &w), ST_ENOTFOUND);
    /* the 404 recorded during the erasure is replayed after it (SPEC §0: never a fresh 201) */
    r20.gone = NULL;
    CHECK_EQ(st__idem_lookup_at(s, &r20, ttl, t0 + 200, &status, &body, &blen, &w), ST_OK);
    CHECK_EQ(status, 404);
    /* a format 2 answer from before answers named their user (expiry entry ""), about ida by
     * its path: replayed unless an erasure of ida was asked for after it */
    st_idem_req_t old = req_of(30, 0), old2 = req_of(31, 0);
    put_v2(s, 30, t0 + 40, 200, "{\"content\":\"y\"}", "");
    put_v2(s, 31, t0 + 60, 200, "{\"content\":\"z\"}", "");
    fx_settle(&fx, s);
    st__idem_forget(); /* as after the upgrade's restart: format 2 answers are looked for */
    old.about = old2.about = "ida";
    old.about_len = old2.about_len = 3;
    old.gone = old2.gone = erased_ida_at_50;
    CHECK_EQ(st__idem_lookup_at(s, &old, ttl, t0 + 200, &status, &body, &blen, &w), ST_ENOTFOUND);
    CHECK_EQ(st__idem_lookup_at(s, &old2, ttl, t0 + 200, &status, &body, &blen, &w), ST_OK);
    /* a later erasure of the same name (another id) walks afresh */
    st_idem_req_t again = req_of(40, 0);
    again.about = "ida";
    again.about_len = 3;
    CHECK_EQ(st__idem_record_at(s, &again, ttl, 201, "{}", 2, t0 + 150, &wait), ST_OK);
    fx_settle(&fx, s);
    CHECK(st_http_idem_erase(s, ST_USER("ida", 3), 8, 4));
    fx_settle(&fx, s);
    while (st_http_idem_erase(s, ST_USER("ida", 3), 8, 4))
        fx_settle(&fx, s);
    fx_settle(&fx, s);
    again.gone = NULL;
    CHECK_EQ(st__idem_lookup_at(s, &again, ttl, t0 + 200, &status, &body, &blen, &w), ST_ENOTFOUND);
    /* the others' answers expire (format 2's records with their index entries) */
    CHECK_EQ(count(s, ST_KS_IDEM), 2);
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), 7);
    CHECK_EQ(st__idem_sweep_at(s, ttl, 2000, t0 + ttl + 300), 7);
    fx_settle(&fx, s);
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), 0);
    CHECK_EQ(count(s, ST_KS_IDEM), 1); /* the marker: no answer of the oldest format left */
    fx_close_store(&fx, s);
    fx_end(&fx);
}

/* The walk goes on across slices of 4,096 index entries and of `max` deletions, from where the
 * last slice stopped, to the end of the index. */
static bool gone_room(void *arg, const char *u, size_t ul, int64_t since)
{
    (void)arg, (void)since;
    return ul == 4 && memcmp(u, "~rrm", 4) == 0;
}

/* SPEC §2.1 v5: a room route's answer names its author and its room (the room's owner bytes,
 * st_chat_owner_bytes: "~rrm" for room rm): the room's deletion deletes it and stops its replay
 * at once; the author's erasure deletes it too; other answers stay. */
TEST(idempotency_answers_about_a_room_go_with_its_deletion)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    const int64_t t0 = 1000000000000LL, ttl = 10000000;
    for (int i = 0; i < 6; i++) /* 0-1 ida's posts in rm, 2-3 rm's members (no author), 4-5 ola */
        record_about(s, i, i < 2 ? "ida" : i >= 4 ? "ola" : NULL, i < 4 ? "~rrm" : NULL, t0 + i);
    fx_settle(&fx, s);
    int status;
    const char *body;
    size_t blen;
    uint64_t w = 0;
    st_idem_req_t rq[6];
    for (int i = 0; i < 6; i++) {
        rq[i] = req_of(i, 0);
        rq[i].gone = gone_room; /* rm is being deleted: its answers are not replayed */
        CHECK_EQ(st__idem_lookup_at(s, &rq[i], ttl, t0 + 100, &status, &body, &blen, &w),
                 i < 4 ? ST_ENOTFOUND : ST_OK);
        rq[i].gone = NULL;
    }
    /* ida's erasure takes her answers, the room's deletion every other answer about the room */
    const st_owner_t erased[] = {{ST_OWNER_USER, "ida", 3}, {ST_OWNER_ROOM, "rm", 2}};
    const size_t left[] = {4, 2};
    for (int e = 0; e < 2; e++) {
        while (st_http_idem_erase(s, &erased[e], 7 + (uint64_t)e, 4))
            fx_settle(&fx, s);
        fx_settle(&fx, s);
        CHECK_EQ(count(s, ST_KS_IDEM_EXP), left[e]);
    }
    for (int i = 0; i < 6; i++)
        CHECK_EQ(st__idem_lookup_at(s, &rq[i], ttl, t0 + 100, &status, &body, &blen, &w),
                 i < 4 ? ST_ENOTFOUND : ST_OK);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

TEST(idempotency_erasure_walk_resumes_across_slices)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    const int64_t t0 = 1000000000000LL, ttl = 100000000;
    uint64_t wait = 0;
    for (int i = 0; i < 9000; i++) {
        st_idem_req_t r = req_of(1000 + i, 0);
        r.about = i % 1000 == 999 ? "ida" : "ola";
        r.about_len = 3;
        CHECK_EQ(st__idem_record_at(s, &r, ttl, 201, "{}", 2, t0 + i, &wait), ST_OK);
        if (i % 1000 == 0) fx_settle(&fx, s);
    }
    fx_settle(&fx, s);
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), 9000);
    int slices = 0;
    while (st_http_idem_erase(s, ST_USER("ida", 3), 99, 2)) {
        fx_settle(&fx, s);
        CHECK(++slices <= 20);
    }
    fx_settle(&fx, s);
    CHECK(slices >= 3); /* 9,000 entries: at least three slices of 4,096 */
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), 8991);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

typedef struct {
    int n;
    int64_t last;
    bool ordered;
} keys_t;

static int key_visit(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val, (void)vlen;
    keys_t *k = arg;
    int64_t t = klen == 42 ? (int64_t)st_be64_get((const uint8_t *)key + 1) : -1;
    k->ordered = k->ordered && t > k->last && ((const uint8_t *)key)[41] == 3;
    k->last = t;
    k->n++;
    return 0;
}

/* Issue 48: an answer is one write, at its time's place ('x' be64(created) scope 3), never a
 * record under its random scope ('i'): the B-tree takes it at its right edge. */
TEST(idempotency_an_answer_is_one_write_in_time_order)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    const int64_t t0 = 1000000000000LL, ttl = 10000000;
    uint64_t wait = 0;
    for (int i = 0; i < 50; i++) { /* scopes in no time order */
        st_idem_req_t r = req_of((i * 7919) % 50, 0);
        CHECK_EQ(st__idem_record_at(s, &r, ttl, 201, "{}", 2, t0 + i, &wait), ST_OK);
    }
    fx_settle(&fx, s);
    CHECK_EQ(count(s, ST_KS_IDEM), 0);
    keys_t k = {.last = 0, .ordered = true};
    uint8_t x = ST_KS_IDEM_EXP;
    uint64_t w = 0;
    CHECK_EQ(st_store_scan(s, &x, 1, key_visit, &k, &w), 0);
    CHECK_EQ(k.n, 50);
    CHECK(k.ordered);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

/* After a restart the index is rebuilt from the answers: a lookup indexes a slice and answers
 * 503 (ST_EUNAVAIL, nothing staged) while more is left, the timer's slices finish it, and then
 * every answer is found again; the sweep takes expired answers out of the index too. */
TEST(idempotency_index_is_rebuilt_after_a_restart_and_is_503_until_whole)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    const int64_t t0 = 1000000000000LL, ttl = 100000000;
    enum { N = 10000 };
    record_n(&fx, s, N, ttl, t0);
    st__idem_forget(); /* the restart */
    CHECK(st_idem_gauge(NULL) < 0);
    int status;
    const char *body;
    size_t blen;
    uint64_t w = 0;
    st_idem_req_t last = req_of(N - 1, 0), other = req_of(N - 1, 1);
    CHECK_EQ(st__idem_lookup_at(s, &last, ttl, t0 + N, &status, &body, &blen, &w), ST_EUNAVAIL);
    CHECK(!st_idem_warm(s, 1000, false)); /* a slice further, not whole yet */
    int turns = 0;
    while (!st_idem_warm(s, 1000, false))
        CHECK(++turns < 10);
    CHECK_EQ(st_idem_gauge(NULL), N);
    CHECK_EQ(st__idem_lookup_at(s, &last, ttl, t0 + N, &status, &body, &blen, &w), ST_OK);
    CHECK_EQ(status, 201);
    CHECK(blen == 10 && memcmp(body, "{\"n\":9999}", 10) == 0);
    CHECK_EQ(st__idem_lookup_at(s, &other, ttl, t0 + N, &status, &body, &blen, &w), ST_EIDEMREUSED);
    st_idem_req_t first = req_of(0, 0);
    CHECK_EQ(st__idem_lookup_at(s, &first, ttl, t0 + N, &status, &body, &blen, &w), ST_OK);
    CHECK(blen == 7 && memcmp(body, "{\"n\":0}", 7) == 0);
    /* the oldest half expires: gone from the store and from the index */
    CHECK_EQ(st__idem_sweep_at(s, ttl, 2 * N, t0 + ttl + N / 2), N / 2);
    fx_settle(&fx, s);
    CHECK_EQ(st_idem_gauge(NULL), N / 2);
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), N / 2);
    CHECK_EQ(st__idem_lookup_at(s, &first, 2 * ttl, t0 + N, &status, &body, &blen, &w),
             ST_ENOTFOUND);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

/* A group's follower applies its leader's answers without this module: its index notices the
 * store's writes it did not make (st_store_writes_of) and is rebuilt before it is believed, so a
 * new leader replays what the old one answered. */
TEST(idempotency_index_follows_answers_written_by_someone_else)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    const int64_t t0 = 1000000000000LL, ttl = 10000000;
    uint64_t wait = 0;
    int status;
    const char *body;
    size_t blen;
    uint64_t w = 0;
    st_idem_req_t mine = req_of(1, 0), theirs = req_of(2, 0);
    CHECK_EQ(st__idem_record_at(s, &mine, ttl, 201, "{}", 2, t0, &wait), ST_OK);
    CHECK_EQ(st__idem_lookup_at(s, &theirs, ttl, t0 + 5, &status, &body, &blen, &w), ST_ENOTFOUND);
    /* the leader's answer, as its batch lands in this store */
    uint8_t key[42] = {ST_KS_IDEM_EXP};
    st_be64_put(key + 1, (uint64_t)(t0 + 3));
    memcpy(key + 9, theirs.scope, 32);
    key[41] = 3;
    uint8_t v[2 + 32 + 2 + 7] = {0};
    uint16_t st = 409;
    memcpy(v, &st, 2);
    memcpy(v + 2, theirs.fp, 32);
    memcpy(v + 36, "{\"x\":1}", 7);
    CHECK_EQ(st_store_put(s, key, sizeof key, v, sizeof v, &wait), ST_OK);
    fx_settle(&fx, s);
    w = 0;
    CHECK_EQ(st__idem_lookup_at(s, &theirs, ttl, t0 + 5, &status, &body, &blen, &w), ST_OK);
    CHECK_EQ(status, 409);
    CHECK(blen == 7 && memcmp(body, "{\"x\":1}", 7) == 0);
    CHECK_EQ(st__idem_lookup_at(s, &mine, ttl, t0 + 5, &status, &body, &blen, &w), ST_OK);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

/* Answers a server from before issue 48 stored (format 2) are replayed, bound to their request,
 * after the upgrade, and swept with their index entries; then lookups stop looking for them. */
TEST(idempotency_answers_of_format_2_are_replayed_then_swept)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    const int64_t t0 = 1000000000000LL, ttl = 10000000;
    for (int i = 0; i < 20; i++)
        put_v2(s, i, t0 + i, 201, "{\"v\":2}", i < 10 ? "ida" : "");
    fx_settle(&fx, s);
    st__idem_forget(); /* the upgrade's restart */
    int status;
    const char *body;
    size_t blen;
    uint64_t w = 0, wait = 0;
    st_idem_req_t r = req_of(3, 0), r2 = req_of(3, 1);
    CHECK_EQ(st__idem_lookup_at(s, &r, ttl, t0 + 100, &status, &body, &blen, &w), ST_OK);
    CHECK_EQ(status, 201);
    CHECK(blen == 7 && memcmp(body, "{\"v\":2}", 7) == 0);
    CHECK_EQ(st__idem_lookup_at(s, &r2, ttl, t0 + 100, &status, &body, &blen, &w), ST_EIDEMREUSED);
    st_idem_req_t fresh = req_of(100, 0);
    CHECK_EQ(st__idem_record_at(s, &fresh, ttl, 201, "{}", 2, t0 + 50, &wait), ST_OK);
    fx_settle(&fx, s);
    /* ida's erasure takes her format 2 answers too */
    while (st_http_idem_erase(s, ST_USER("ida", 3), 5, 100))
        fx_settle(&fx, s);
    fx_settle(&fx, s);
    CHECK_EQ(st__idem_lookup_at(s, &r, ttl, t0 + 100, &status, &body, &blen, &w), ST_ENOTFOUND);
    CHECK_EQ(count(s, ST_KS_IDEM), 10);
    CHECK_EQ(st__idem_sweep_at(s, ttl, 2000, t0 + ttl + 30), 10);
    fx_settle(&fx, s);
    CHECK_EQ(count(s, ST_KS_IDEM), 1);     /* the marker: no answer of the oldest format left */
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), 1); /* the new answer, not expired yet */
    CHECK_EQ(st__idem_lookup_at(s, &fresh, ttl, t0 + 100, &status, &body, &blen, &w), ST_OK);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

/* The index never takes more than its ceiling (an add past it is refused, the caller holds that
 * answer elsewhere), and gives memory back as its entries go (issue 48). */
TEST(idempotency_index_stays_under_its_ceiling_and_shrinks_after_a_burst)
{
    st_idem_idx_t x;
    memset(&x, 0, sizeof x);
    st__idx_limit(&x, 4096); /* 256 slots */
    size_t added = 0;
    for (uint64_t t = 1; t <= 1000; t++)
        added += st__idx_add(&x, t * 7919, (int64_t)t);
    CHECK(st__idx_bytes(&x) <= 4096);
    CHECK_EQ(added, x.n);
    CHECK(x.n >= 150 && x.n < 256);
    CHECK(st__idx_full(&x));
    CHECK(st__idx_add(&x, 7919, 1)); /* there already: not refused */
    for (uint64_t t = 1; t <= added; t++) {
        int64_t c[4];
        CHECK_EQ(st__idx_find(&x, t * 7919, c, 4), 1);
        CHECK_EQ(c[0], (int64_t)t);
    }
    CHECK(!st__idx_add(&x, 1, 1));
    st__idx_free(&x);
    CHECK_EQ(x.max, 256); /* the ceiling stays */

    st_idem_idx_t y; /* no ceiling: a burst of 100,000, then all but 10 expire */
    memset(&y, 0, sizeof y);
    enum { BURST = 100000 };
    for (uint64_t t = 1; t <= BURST; t++)
        CHECK(st__idx_add(&y, t, (int64_t)t));
    size_t peak = st__idx_bytes(&y);
    CHECK(peak >= BURST * 16);
    for (uint64_t t = 1; t <= BURST - 10; t++)
        CHECK(st__idx_del(&y, t, (int64_t)t));
    CHECK(!st__idx_del(&y, 1, 1));
    CHECK_EQ(y.n, 10);
    CHECK(st__idx_bytes(&y) <= 1024 * 16);
    for (uint64_t t = BURST - 9; t <= BURST; t++) {
        int64_t c[4];
        CHECK_EQ(st__idx_find(&y, t, c, 4), 1);
        CHECK_EQ(c[0], (int64_t)t);
    }
    st__idx_free(&y);
}

/* Every answer replayed byte for byte and bound to its request, those past the ceiling through
 * their store entry; a restart finds them all again, with the same ceiling or a lower one; the
 * sweep takes the entries with their answers and the index gives its memory back. */
static void check_all(fx_t *fx, st_store_t *s, int n, int64_t ttl, int64_t now)
{
    int status;
    const char *body;
    size_t blen;
    uint64_t w = 0;
    int turns = 0;
    while (!st_idem_warm(s, 64, true))
        CHECK(++turns < 100);
    fx_settle(fx, s);
    for (int i = 0; i < n; i++) {
        st_idem_req_t r = req_of(i, 0), other = req_of(i, 1);
        char want[32];
        int wl = snprintf(want, sizeof want, "{\"n\":%d}", i);
        CHECK_EQ(st__idem_lookup_at(s, &r, ttl, now, &status, &body, &blen, &w), ST_OK);
        CHECK_EQ(status, 201);
        CHECK(blen == (size_t)wl && memcmp(body, want, blen) == 0);
        CHECK_EQ(st__idem_lookup_at(s, &other, ttl, now, &status, &body, &blen, &w),
                 ST_EIDEMREUSED);
    }
}

TEST(idempotency_answers_past_the_index_ceiling_are_found_through_the_store)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = open_store(&fx);
    st_idem_limit(4096, NULL); /* 256 slots: at most 179 answers */
    const int64_t t0 = 1000000000000LL, ttl = 100000000;
    enum { N = 1000 };
    record_n(&fx, s, N, ttl, t0);
    CHECK(st_idem_bytes_gauge(NULL) <= 4096);
    int64_t held = (int64_t)st__idem_held();
    CHECK(held > 100 && held < 180);
    CHECK_EQ(count(s, ST_KS_IDEM_SPILL), N - held);
    CHECK(st_idem_spilling());
    check_all(&fx, s, N, ttl, t0 + N);
    CHECK_EQ(st_idem_gauge(NULL), held);

    st__idem_forget(); /* a restart with the same ceiling: the same answers in the index */
    check_all(&fx, s, N, ttl, t0 + N);
    CHECK_EQ(st_idem_gauge(NULL), held);
    CHECK_EQ(count(s, ST_KS_IDEM_SPILL), N - held);

    st_idem_limit(1024, NULL); /* and with a lower one: entries for what no longer fits */
    st__idem_forget();
    check_all(&fx, s, N, ttl, t0 + N);
    CHECK(st_idem_bytes_gauge(NULL) <= 1024);
    held = (int64_t)st_idem_gauge(NULL);
    CHECK(held > 20 && held < 45);
    CHECK_EQ(count(s, ST_KS_IDEM_SPILL), N - held);

    /* all expire: answers and entries go, and nothing is looked for in the store any more */
    CHECK_EQ(st__idem_sweep_at(s, ttl, 2 * N, t0 + ttl + N + 1), N);
    fx_settle(&fx, s);
    CHECK_EQ(count(s, ST_KS_IDEM_EXP), 0);
    CHECK_EQ(count(s, ST_KS_IDEM_SPILL), 0);
    CHECK(!st_idem_spilling());
    CHECK_EQ(st_idem_gauge(NULL), 0);
    CHECK(st_idem_bytes_gauge(NULL) <= 1024);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

RUN_TESTS("idempotency")
