/* SPDX-License-Identifier: MIT */
/* Unit tests for chat: seq and hybrid fields, paging bounds, isolation, long ids, restart. */
#include "../test.h"
#include "../fixture.h"
#include "strata/chat.h"
#include "strata/chatrows.h"
#include "strata/cold.h"
#include "strata/metrics.h"
#include "../../src/chat/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

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
    st_message_in_t m = {{ST_OWNER_USER, user, strlen(user)},
                         conv,
                         strlen(conv),
                         "me",
                         2,
                         text,
                         strlen(text),
                         NULL,
                         0};
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

/* st_chat_erased_since: an erasure asked for at or after a time, found by a walk of the erasure
 * records from about that time on (their ids are snowflakes), pending or not. */
TEST(erased_since_finds_an_erasure_asked_for_after_a_time)
{
    open_all(true);
    int64_t before = st_now_us() - 2000000;
    uint64_t id = 0, w = 0;
    CHECK(!st_chat_erased_since(chat, "eve", 3, before));
    CHECK_EQ(st_chat_erase(chat, ST_USER("eve", 3), &id, &w), ST_OK);
    fx_settle(&fx, store);
    CHECK(st_chat_erased_since(chat, "eve", 3, before));
    CHECK(st_chat_erased_since(chat, "eve", 3, 0));                           /* any time */
    CHECK(!st_chat_erased_since(chat, "eve", 3, st_now_us() + 3600000000LL)); /* not after */
    CHECK(!st_chat_erased_since(chat, "ev", 2, before));                      /* another user */
    CHECK(!st_chat_erased_since(chat, "bob", 3, before));
    close_all(true);
}

TEST(paging_respects_bounds_both_ways)
{
    open_all(true);
    st_buf_t out = {0};
    uint64_t ids[5];
    for (int i = 0; i < 5; i++)
        ids[i] = post("p", "c", "m", &out);
    st_message_query_t q = {
        .conv = "c", .conv_len = 1, .after = ids[0], .before = ids[4], .limit = 2};
    uint64_t w = 0;
    st_buf_reset(&out);
    CHECK_EQ(st_chat_messages(chat, ST_USER("p", 1), &q, &out, &w), ST_OK);
    char id1[32], next[48];
    snprintf(id1, sizeof id1, "%llu", (unsigned long long)ids[1]);
    snprintf(next, sizeof next, "\"next\":\"%llu\"", (unsigned long long)ids[2]);
    CHECK(strstr(out.data, id1));
    CHECK(strstr(out.data, next)); /* 3 in (ids0, ids4): a page of 2 and more to come */
    q.desc = true;
    q.limit = 10;
    st_buf_reset(&out);
    CHECK_EQ(st_chat_messages(chat, ST_USER("p", 1), &q, &out, &w), ST_OK);
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

/* Regression (issue 11.4): eviction deleted a record but not its newest-first index entry, and
 * the list stopped with 404 at the first entry it could not load. */
TEST(list_skips_and_repairs_index_entries_whose_conversation_is_gone)
{
    open_all(true);
    st_buf_t out = {0};
    post("l", "keep1", "a", &out);
    post("l", "gone", "b", &out);
    post("l", "keep2", "c", &out);
    uint64_t w = 0;
    CHECK_EQ(st_store_del(store, "Cl\0gone", 7, &w), ST_OK); /* the record only, as eviction did */
    fx_settle(&fx, store);
    st_buf_reset(&out);
    CHECK_EQ(st_chat_conversations(chat, "l", 1, NULL, 0, 2, &out, &w), ST_OK);
    st_buf_appendc(&out, 0);
    CHECK(strstr(out.data, "keep2") && strstr(out.data, "keep1")); /* the page is still full */
    CHECK(!strstr(out.data, "gone"));
    CHECK(strstr(out.data, "\"next\":null"));
    fx_settle(&fx, store);
    int64_t n = 0;
    CHECK_EQ(st_store_count(store, "Ul\0", 3, &n, &w), ST_OK);
    CHECK_EQ(n, 2); /* the dead entry was dropped */
    st_buf_free(&out);
    close_all(true);
}

/* How many Parquet objects are in dir (not recursive). */
static int count_objects(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".parquet") != NULL;
    if (d) closedir(d);
    return n;
}

/* The redo log's descriptor: a test points it at /dev/full to make a batch fail. */
static int wal_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int fd = -1;
    while (d && (e = readdir(d)) != NULL) {
        char p[300], t[512];
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(p, t, sizeof t - 1);
        if (n > 0 && (t[n] = 0, strstr(t, fx.dir) && strstr(t, "strata.wal"))) fd = atoi(e->d_name);
    }
    if (d) closedir(d);
    return fd;
}

static int64_t stat_of(const char *user, const char *field)
{
    st_buf_t out = {0};
    uint64_t w = 0;
    if (st_chat_stats(chat, user, strlen(user), &out, &w) != ST_OK) abort();
    st_buf_appendc(&out, 0);
    const char *p = strstr(out.data, field);
    int64_t v = p ? strtoll(p + strlen(field) + 1, NULL, 10) : -1;
    st_buf_free(&out);
    return v;
}

/* Regression (issue 11.1): a flush snapshot included writes still staged and its worker wrote
 * them to object storage at once, before their batch was durable; when that batch failed, the
 * object stayed (rows that never existed, readable by DuckDB and rebuild-meta). */
/* A tier on obj with chat its member, as main.c opens it. */
static st_tier_t *tier;

static void tier_on(st_objstore_t *obj)
{
    st_tier_opts_t to = {.obj = obj, .flush_interval_s = 3600, .flush_rows = 1000000};
    CHECK_EQ(st_tier_open(&tier, &fx.loop, store, &to), ST_OK);
    st_chat_cold_opts_t co = {.zstd_level = 3};
    st_tier_join(tier, st_chat_tier_member(chat, tier, &co));
}

/* Stops the tier and runs the loop until every job in flight is back. */
static void tier_off(void)
{
    st_tier_close(tier);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    st_tier_free(tier);
    tier = NULL;
}

TEST(flush_never_writes_rows_whose_batch_is_not_durable_or_failed)
{
    open_all(true);
    char cold[128], dir_a[160], dir_b[160];
    snprintf(cold, sizeof cold, "file://%s/cold", fx.dir);
    snprintf(dir_a, sizeof dir_a, "%s/cold/a", fx.dir);
    snprintf(dir_b, sizeof dir_b, "%s/cold/b", fx.dir);
    st_objstore_t *obj;
    st_objstore_opts_t oo = {.url = cold};
    CHECK_EQ(st_objstore_open(&obj, &oo), ST_OK);
    tier_on(obj);
    st_buf_t out = {0};
    for (int i = 0; i < 5; i++)
        post("a", "c", "staged", &out);
    CHECK_EQ(st_tier_flush_all(tier), 1); /* the rows are staged: their batch is not even sealed */
    usleep(300 * 1000);                   /* a worker would have written the object by now */
    CHECK_EQ(count_objects(dir_a), 0);
    for (int i = 0; i < 2000 && stat_of("a", "\"cold_messages\"") != 5; i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK_EQ(stat_of("a", "\"cold_messages\""), 5); /* once durable, the flush goes ahead */
    CHECK_EQ(count_objects(dir_a), 1);

    /* a batch that fails: its rows are rolled back and a flush of them must never happen */
    int fd = wal_fd(), saved = dup(fd), full = open("/dev/full", O_WRONLY);
    CHECK(fd >= 0 && saved >= 0 && full >= 0);
    fx_settle(&fx, store);
    dup2(full, fd);
    for (int i = 0; i < 3; i++)
        post("b", "c", "doomed", &out);
    CHECK_EQ(st_tier_flush_all(tier), 1);
    fx_settle(&fx, store); /* the batch fails and is rolled back */
    dup2(saved, fd);
    close(saved);
    close(full);
    usleep(300 * 1000);
    for (int i = 0; i < 20; i++)
        uv_run(&fx.loop, UV_RUN_NOWAIT);
    CHECK_EQ(count_objects(dir_b), 0);
    CHECK_EQ(stat_of("b", "\"total_messages\""), 0);
    CHECK_EQ(stat_of("b", "\"cold_messages\""), 0);
    st_buf_free(&out);
    tier_off();
    st_objstore_close(obj);
    close_all(true);
}

static int sum_file(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    int64_t *acc = arg; /* [0] objects, [1] rows, [2] largest, [3] previous max_id, [4] overlaps */
    st_coldfile_t f;
    (void)key;
    (void)klen;
    if (vlen < sizeof f) return 0;
    memcpy(&f, val, sizeof f);
    acc[0]++;
    acc[1] += f.rows;
    if (f.rows > acc[2]) acc[2] = f.rows;
    if ((int64_t)f.min_id <= acc[3]) acc[4]++;
    acc[3] = (int64_t)f.max_id;
    return 0;
}

static void cold_on(st_objstore_t **obj)
{
    char cold[128];
    snprintf(cold, sizeof cold, "file://%s/cold", fx.dir);
    st_objstore_opts_t oo = {.url = cold};
    CHECK_EQ(st_objstore_open(obj, &oo), ST_OK);
    tier_on(*obj);
}

static void cold_off(st_objstore_t *obj)
{
    tier_off();
    st_objstore_close(obj);
}

/* Regression (issue 13): one flush took all of a user's hot rows (up to 100,000) into one
 * snapshot on the loop and deleted them in one batch: ~15 ms loop stalls for a user with 15k
 * rows. A flush now takes at most ST__FLUSH_OBJECT_ROWS rows, shared evenly, and goes on with
 * the rest at once; every row is moved exactly once. */
TEST(a_large_flush_moves_a_user_in_objects_of_bounded_size)
{
    open_all(true);
    st_objstore_t *obj;
    cold_on(&obj);
    st_buf_t out = {0};
    enum { N = 2 * ST__FLUSH_OBJECT_ROWS + 100 };
    const char *convs[] = {"a", "b", "c"};
    for (int i = 0; i < N; i++) {
        post("big", convs[i % 3], "row", &out);
        if (i % 1000 == 999) fx_settle(&fx, store);
    }
    CHECK_EQ(st_tier_flush_all(tier), 1);
    for (int i = 0; i < 20000 && stat_of("big", "\"cold_messages\"") != N; i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK_EQ(stat_of("big", "\"cold_messages\""), N);
    CHECK_EQ(stat_of("big", "\"total_messages\""), N);
    fx_settle(&fx, store);
    int64_t acc[5] = {0, 0, 0, 0, 0}, hot = -1;
    uint64_t w = 0;
    CHECK_EQ(st_store_scan(store, "Fbig", 5, sum_file, acc, &w), ST_OK);
    CHECK_EQ(acc[0], 3);                    /* three objects, not one ... */
    CHECK(acc[2] <= ST__FLUSH_OBJECT_ROWS); /* ... none over the cap ... */
    CHECK(acc[2] <= N / 3 + 1);             /* ... shared evenly */
    CHECK_EQ(acc[1], N);                    /* every row once */
    CHECK_EQ(acc[4], 0);                    /* in msg_id order, no overlap */
    CHECK_EQ(st_store_count(store, "Mbig", 5, &hot, &w), ST_OK);
    CHECK_EQ(hot, 0);
    for (int c = 0; c < 3; c++) {
        st_buf_reset(&out);
        CHECK_EQ(st_chat_conversation(chat, "big", 3, convs[c], 1, &out, &w), ST_OK);
        st_buf_appendc(&out, 0);
        char want[48];
        snprintf(want, sizeof want, "\"total_messages\":%d", N / 3);
        CHECK(strstr(out.data, want));
    }
    st_buf_free(&out);
    cold_off(obj);
    close_all(true);
}

/* marks.c (issue 48): a conversation with no hot record is new only if the hot store proves it
 * (its owner's marks complete, it unmarked): no cold read decides it. The flush that records an
 * object marks its conversations in the same batch; the owner's first one makes the marks
 * complete. */
TEST(a_flush_marks_the_conversations_whose_rows_it_makes_cold)
{
    open_all(true);
    st_objstore_t *obj;
    cold_on(&obj);
    st_buf_t out = {0};
    uint64_t w = 0;
    post("mk", "a", "1", &out);
    post("mk", "a", "2", &out);
    post("mk", "b", "3", &out);
    /* nothing flushed: not known, so nothing is proved (an older store's owner reads as this) */
    CHECK(!st__chat_marks_known(chat, "mk", 2, &w));
    CHECK(!st__chat_cold_none(chat, "mk", 2, "z", 1, &w));
    CHECK_EQ(st_tier_flush_all(tier), 1);
    for (int i = 0; i < 20000 && stat_of("mk", "\"cold_messages\"") != 3; i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK_EQ(stat_of("mk", "\"cold_messages\""), 3);
    CHECK(st__chat_marks_known(chat, "mk", 2, &w));
    CHECK(!st__chat_cold_none(chat, "mk", 2, "a", 1, &w));
    CHECK(!st__chat_cold_none(chat, "mk", 2, "b", 1, &w));
    CHECK(st__chat_cold_none(chat, "mk", 2, "z", 1, &w)); /* never flushed: new */
    post("mk", "c", "4", &out); /* a later flush (not the owner's first) marks its own */
    CHECK_EQ(st_tier_flush_all(tier), 1);
    for (int i = 0; i < 20000 && stat_of("mk", "\"cold_messages\"") != 4; i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK(!st__chat_cold_none(chat, "mk", 2, "c", 1, &w));
    int64_t marks = 0;
    CHECK_EQ(st_store_count(store, "Rmk", 4, &marks, &w), ST_OK);
    CHECK_EQ(marks, 3);
    CHECK(!st__chat_marks_known(chat, "m", 1, &w)); /* another owner's, even a prefix */
    /* an erasure takes them with the rest (a conversation's name is the user's) */
    uint64_t id = 0;
    CHECK_EQ(st_chat_erase(chat, ST_USER("mk", 2), &id, &w), ST_OK);
    CHECK(st_chat_erase_step(chat, 1000));
    CHECK(!st__chat_marks_known(chat, "mk", 2, &w));
    CHECK_EQ(st_store_count(store, "Rmk", 4, &marks, &w), ST_OK);
    CHECK_EQ(marks, 0);
    st_buf_free(&out);
    cold_off(obj);
    close_all(true);
}

/* Regression (review of issue 48's marks): the flush made an owner's marks complete ('L') when
 * its summary ('W') counted no file. rebuild-meta wrote that summary from the objects it read
 * only, leaving records of the others in the manifest, and retention's swaps could then bring
 * the count to 0 with those records (their conversations unmarked) still there: 'L' then told a
 * post to such a conversation that it was new, and it started again at seq 1 under its cold rows.
 * The flush now reads the file records; rebuild-meta counts every record in the summary. */
TEST(a_flush_completes_marks_only_for_an_owner_without_file_records)
{
    open_all(true);
    st_objstore_t *obj;
    cold_on(&obj);
    st_buf_t out = {0};
    uint64_t w = 0;
    post("lw", "a", "1", &out); /* hot rows to flush (nothing recorded yet: no cold read) */
    /* an older store's object, its conversation "old" unmarked; then rebuild-meta's put of a
     * later one that does not list it (its listing lacked it) */
    char k9[] = "lw/batch-999-9.parquet", k12[] = "lw/batch-999-12.parquet";
    st_tier_obj_t o9 = {{100, 101, 2, 10}, 9, k9, NULL, 0},
                  o12 = {{102, 103, 2, 10}, 12, k12, NULL, 0};
    CHECK_EQ(st_tier_rebuild_owner(store, "lw", 2, &o9, 1, &(st_tier_stat_t){0, 0, 0, 0, 1}, &w),
             ST_OK);
    CHECK_EQ(st_tier_rebuild_owner(store, "lw", 2, &o12, 1, &(st_tier_stat_t){0, 0, 0, 0, 1}, &w),
             ST_OK);
    st_tier_stat_t st;
    CHECK_EQ(st_tier_stat(store, "lw", 2, &st, &w), ST_OK);
    CHECK_EQ(st.files, 2); /* both records counted, not only the one listed */
    CHECK_EQ(st.rows, 4);
    CHECK_EQ(st.next_seq, 13);
    CHECK_EQ(st.watermark, 103);
    /* a summary short of its records, as an older rebuild-meta and retention's swaps left it */
    st.files = st.rows = st.bytes = 0;
    const uint8_t wk[] = {'W', 'l', 'w'};
    CHECK_EQ(st_store_put(store, wk, sizeof wk, &st, sizeof st, &w), ST_OK);
    CHECK(!st__chat_marks_known(chat, "lw", 2, &w));
    CHECK_EQ(st_tier_flush_all(tier), 1);
    for (int i = 0; i < 20000 && stat_of("lw", "\"cold_messages\"") != 1; i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK_EQ(stat_of("lw", "\"cold_messages\""), 1);
    CHECK_EQ(stat_of("lw", "\"hot_messages\""), 0);
    /* records of unmarked objects remain: absence of a marker proves nothing */
    CHECK(!st__chat_marks_known(chat, "lw", 2, &w));
    CHECK(!st__chat_cold_none(chat, "lw", 2, "old", 3, &w));
    CHECK(!st__chat_cold_none(chat, "lw", 2, "a", 1, &w)); /* marked by the flush all the same */
    st_buf_free(&out);
    cold_off(obj);
    close_all(true);
}

/* rebuild-meta marks every conversation of the objects it reads, and makes an owner's marks
 * complete only when it read every object its manifest records: one recorded before and not
 * listed now (an older store's) keeps the footer read. */
TEST(rebuild_marks_and_trusts_absence_only_when_it_read_every_recorded_object)
{
    open_all(true);
    char cold[128];
    snprintf(cold, sizeof cold, "file://%s/cold", fx.dir);
    st_objstore_t *obj;
    st_objstore_opts_t oo = {.url = cold};
    CHECK_EQ(st_objstore_open(&obj, &oo), ST_OK);
    st_msgrow_t rows[2];
    for (int i = 0; i < 2; i++)
        rows[i] = (st_msgrow_t){.msg_id = 100 + (uint64_t)i,
                                .timestamp = 1000 + i,
                                .seq = 1 + i,
                                .conv = "c",
                                .conv_len = 1,
                                .from = "f",
                                .from_len = 1,
                                .content = "x",
                                .content_len = 1};
    st_buf_t a = {0}, b = {0};
    CHECK_EQ(st_parquet_encode(rows, 2, ST_USER("u", 1), 1, &a), ST_OK);
    CHECK_EQ(st_parquet_encode(rows, 2, ST_USER("v", 1), 1, &b), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "u/batch-1000-2.parquet", a.data, a.len), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "v/batch-1000-2.parquet", b.data, b.len), ST_OK);
    uint64_t w = 0;
    /* u's manifest records an object the listing lacks: its conversations cannot be known */
    char oldkey[] = "u/batch-999-9.parquet";
    st_tier_obj_t old = {{50, 60, 1, 10}, 9, oldkey, NULL, 0};
    st_tier_stat_t st = {0, 0, 0, 0, 1};
    CHECK_EQ(st_tier_rebuild_owner(store, "u", 1, &old, 1, &st, &w), ST_OK);
    size_t users, convs;
    int64_t n;
    CHECK_EQ(st_chat_rebuild(chat, obj, &users, &convs, &n, &w), ST_OK);
    CHECK(!st__chat_marks_known(chat, "u", 1, &w));
    CHECK(!st__chat_cold_none(chat, "u", 1, "new", 3, &w));
    CHECK(st__chat_marks_known(chat, "v", 1, &w));
    CHECK(!st__chat_cold_none(chat, "v", 1, "c", 1, &w));
    CHECK(st__chat_cold_none(chat, "v", 1, "new", 3, &w));
    int64_t marks = 0;
    CHECK_EQ(st_store_count(store, "Ru", 3, &marks, &w), ST_OK);
    CHECK_EQ(marks, 1); /* u's c is marked all the same */
    st_buf_free(&a);
    st_buf_free(&b);
    st_objstore_close(obj);
    close_all(true);
}

/* Each of four pool jobs waits for the others, so they run on four different threads. */
typedef struct {
    uv_work_t req;
    uv_barrier_t *bar;
    int policy;
} policy_job_t;

static void policy_work(uv_work_t *req)
{
    policy_job_t *j = req->data;
    uv_barrier_wait(j->bar);
    j->policy = sched_getscheduler(0);
}

static void policy_done(uv_work_t *req, int status)
{
    (void)req;
    (void)status;
}

/* Regression (issue 13): a flush worker set its pool thread to SCHED_IDLE and left it so;
 * the thread then ran other jobs (cold reads) at that priority, and took libuv's queue mutexes
 * at it, so the loop queueing work waited for a starved thread (~4 ms stalls, no CPU spent). */
TEST(pool_threads_are_back_at_normal_priority_after_a_flush)
{
    open_all(true);
    st_objstore_t *obj;
    cold_on(&obj);
    st_buf_t out = {0};
    for (int i = 0; i < 10; i++)
        post("p", "c", "row", &out);
    CHECK_EQ(st_tier_flush_all(tier), 1);
    for (int i = 0; i < 2000 && stat_of("p", "\"cold_messages\"") != 10; i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK_EQ(stat_of("p", "\"cold_messages\""), 10);
    uv_barrier_t bar;
    uv_barrier_init(&bar, 4); /* libuv's default pool: 4 threads, so each of them */
    policy_job_t jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (policy_job_t){.bar = &bar, .policy = -1};
        jobs[i].req.data = &jobs[i];
        CHECK_EQ(uv_queue_work(&fx.loop, &jobs[i].req, policy_work, policy_done), 0);
    }
    cold_off(obj); /* runs the loop until everything, these jobs too, is back */
    uv_barrier_destroy(&bar);
    /* its own policy again: SCHED_BATCH once it ran strata's work (st_sched_worker), else
     * SCHED_OTHER; never SCHED_IDLE */
    for (int i = 0; i < 4; i++)
        CHECK(jobs[i].policy == SCHED_OTHER || jobs[i].policy == 3 /* SCHED_BATCH */);
    st_buf_free(&out);
    close_all(true);
}

/* Message files as strata wrote them before SPEC v5 §5.1: seven columns (no owner column), no
 * field ids. */
static const st_pq_field_t v4_fields[] = {
    {"msg_id", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 0},
    {"conversation_id", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_STATS | ST_PQ_DICT,
     NULL, 0, 0},
    {"from", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_STATS | ST_PQ_DICT, NULL, 0, 0},
    {"timestamp", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, ST_PQ_STATS, NULL, 0, 0},
    {"seq", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 0},
    {"content", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, 0, NULL, 0, 0},
    {"metadata", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_JSON, 0, NULL, 0, 0},
};
static const st_pq_schema_t v4_schema = {v4_fields, 7, 0, 1};

static void v4_row(void *arg, size_t i, st_pq_rec_t *r)
{
    const st_msgrow_t *m = (const st_msgrow_t *)arg + i;
    st_pq_put_i64(r, (int64_t)m->msg_id);
    st_pq_put_str(r, m->conv, m->conv_len);
    st_pq_put_str(r, m->from, m->from_len);
    st_pq_put_i64(r, m->timestamp);
    st_pq_put_i64(r, m->seq);
    st_pq_put_str(r, m->content, m->content_len);
    if (m->metadata)
        st_pq_put_str(r, m->metadata, m->metadata_len);
    else
        st_pq_put_null(r);
}

static int encode_v4(const st_msgrow_t *rows, size_t n, st_buf_t *out)
{
    st_pq_write_t w = {
        .schema = &v4_schema, .nrows = n, .row = v4_row, .arg = (void *)rows, .zstd_level = 1};
    return st_pq_write(&w, out);
}

/* Regression (issue 11.1): rebuild-meta imported every object in the bucket, so an orphan of a
 * crashed flush (its rows flushed again into a later object) was counted twice. */
TEST(rebuild_skips_an_orphan_whose_rows_a_later_object_holds)
{
    open_all(true);
    char cold[128];
    snprintf(cold, sizeof cold, "file://%s/cold", fx.dir);
    st_objstore_t *obj;
    st_objstore_opts_t oo = {.url = cold};
    CHECK_EQ(st_objstore_open(&obj, &oo), ST_OK);
    st_msgrow_t rows[5];
    for (int i = 0; i < 5; i++)
        rows[i] = (st_msgrow_t){.msg_id = 100 + (uint64_t)i,
                                .timestamp = 1000 + i,
                                .seq = 1 + i,
                                .conv = "c",
                                .conv_len = 1,
                                .from = "f",
                                .from_len = 1,
                                .content = "x",
                                .content_len = 1};
    st_buf_t a = {0}, b = {0};
    CHECK_EQ(st_parquet_encode(rows, 3, ST_USER("u", 1), 1, &a),
             ST_OK); /* the crashed attempt: rows 1-3 */
    CHECK_EQ(st_parquet_encode(rows, 5, ST_USER("u", 1), 1, &b),
             ST_OK); /* the retry that was recorded: 1-5 */
    CHECK_EQ(st_objstore_put(obj, "u/batch-1000-1.parquet", a.data, a.len), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "u/batch-1000-2.parquet", b.data, b.len), ST_OK);
    size_t users, convs;
    int64_t n;
    uint64_t w = 0;
    CHECK_EQ(st_chat_rebuild(chat, obj, &users, &convs, &n, &w), ST_OK);
    CHECK_EQ(n, 5);
    CHECK_EQ(stat_of("u", "\"total_messages\""), 5);
    int64_t doomed = 0;
    CHECK_EQ(st_store_count(store, "Du\0", 3, &doomed, &w), ST_OK);
    CHECK_EQ(doomed, 1); /* the orphan is deleted at the next start */
    st_buf_t out = {0};
    CHECK(post("u", "c", "next", &out) > 104);
    CHECK(strstr(out.data, "\"seq\":6"));
    st_buf_free(&out);
    st_buf_free(&a);
    st_buf_free(&b);
    st_objstore_close(obj);
    close_all(true);
}

/* rebuild-meta over a bucket a crash left mid-compaction: the merged object (…-1.5.parquet)
 * and some of the objects it replaced are all there; each row is counted once, the merged
 * object is kept, the replaced ones are deleted, and numbers go on past the merge's. Object 1 is
 * one written before the owner column (SPEC v5 §5.1): read alike. */
TEST(rebuild_counts_a_merged_object_once_with_what_it_replaced)
{
    open_all(true);
    char cold[128];
    snprintf(cold, sizeof cold, "file://%s/cold", fx.dir);
    st_objstore_t *obj;
    st_objstore_opts_t oo = {.url = cold};
    CHECK_EQ(st_objstore_open(&obj, &oo), ST_OK);
    st_msgrow_t rows[6];
    for (int i = 0; i < 6; i++)
        rows[i] = (st_msgrow_t){.msg_id = 100 + (uint64_t)i,
                                .timestamp = 1000 + i,
                                .seq = 1 + i,
                                .conv = "c",
                                .conv_len = 1,
                                .from = "f",
                                .from_len = 1,
                                .content = "x",
                                .content_len = 1};
    st_buf_t a = {0}, b = {0}, m = {0}, d = {0};
    CHECK_EQ(encode_v4(rows, 2, &a), ST_OK); /* object 1: rows 1-2 */
    CHECK_EQ(st_parquet_encode(rows + 2, 2, ST_USER("u", 1), 1, &b),
             ST_OK);                                                     /* object 2: rows 3-4 */
    CHECK_EQ(st_parquet_encode(rows, 4, ST_USER("u", 1), 1, &m), ST_OK); /* their merge: 1-4 */
    CHECK_EQ(st_parquet_encode(rows + 4, 2, ST_USER("u", 1), 1, &d),
             ST_OK); /* a later flush: 5-6 */
    CHECK_EQ(st_objstore_put(obj, "u/batch-1000-1.parquet", a.data, a.len), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "u/batch-1000-2.parquet", b.data, b.len), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "u/batch-1000-1.5.parquet", m.data, m.len), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "u/batch-1004-6.parquet", d.data, d.len), ST_OK);
    size_t users, convs;
    int64_t n;
    uint64_t w = 0;
    CHECK_EQ(st_chat_rebuild(chat, obj, &users, &convs, &n, &w), ST_OK);
    CHECK_EQ(n, 6);
    CHECK_EQ(stat_of("u", "\"total_messages\""), 6);
    int64_t doomed = 0, files = 0;
    CHECK_EQ(st_store_count(store, "Du\0", 3, &doomed, &w), ST_OK);
    CHECK_EQ(doomed, 2); /* objects 1 and 2 */
    CHECK_EQ(st_store_count(store, "Fu\0", 3, &files, &w), ST_OK);
    CHECK_EQ(files, 2);
    st_buf_t out = {0};
    CHECK(post("u", "c", "next", &out) > 104);
    CHECK(strstr(out.data, "\"seq\":7"));
    st_buf_free(&out);
    st_buf_free(&a);
    st_buf_free(&b);
    st_buf_free(&m);
    st_buf_free(&d);
    st_objstore_close(obj);
    close_all(true);
}

/* Compaction's plan: after each of a week of 5-minute flushes (5 rows each) the user settles
 * at <= 8 objects, merges only neighbours, and each row is rewritten O(log n) times. */
TEST(compaction_plan_bounds_objects_and_write_amplification)
{
    st_coldfile_t f[64];
    size_t n = 0;
    int64_t rewritten = 0, rows = 0;
    for (int flush = 0; flush < 2016; flush++) {
        f[n++] = (st_coldfile_t){0, 0, 5, 3000};
        rows += 5;
        size_t a, b;
        while (st__chat_compact_plan(f, n, 8, 256ull << 20, 0, &a, &b)) {
            CHECK(b > a + 1 && b <= n);
            st_coldfile_t m = {0, 0, 0, 0};
            for (size_t i = a; i < b; i++) {
                m.rows += f[i].rows;
                m.size += f[i].size;
            }
            rewritten += m.rows;
            f[a] = m;
            memmove(f + a + 1, f + b, (n - b) * sizeof *f);
            n -= b - a - 1;
        }
        CHECK(n <= 8);
    }
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += f[i].rows;
    CHECK_EQ(sum, rows);
    CHECK(rewritten < rows * 12); /* log4(2016) ~ 5.5 classes, plus the bounding merges */
    /* major: every neighbour in one; the oldest mixed object alone */
    size_t a, b;
    CHECK(st__chat_compact_plan(f, n, 8, 256ull << 20, 1, &a, &b) && a == 0 && b == n);
    CHECK(st__chat_compact_plan(f, n, 8, 256ull << 20, 2, &a, &b) && a == 0 && b == 1);
    f[1].rows = 5000000; /* more rows than one merge writes: never merged */
    CHECK(st__chat_compact_plan(f, n, 8, 256ull << 20, 1, &a, &b) && a == 2);
}

/* The major compaction's plan (POST /v1/admin/compact), followed merge after merge: the user ends
 * with as few objects as the size cap allows (no two neighbours fit in one object), none of
 * them over the cap, every row kept; objects of any size take part, one over the cap stays. */
static size_t major_until_done(st_coldfile_t *f, size_t n, uint64_t cap, size_t *merges)
{
    size_t a, b;
    *merges = 0;
    while (st__chat_compact_plan(f, n, 8, cap, 1, &a, &b)) {
        CHECK(b > a + 1 && b <= n);
        st_coldfile_t m = {0, 0, 0, 0};
        for (size_t i = a; i < b; i++) {
            m.rows += f[i].rows;
            m.size += f[i].size;
        }
        CHECK(m.size <= cap);
        m.size = m.size * 3 / 4; /* a merge pays one footer and set of dictionaries, not many */
        f[a] = m;
        memmove(f + a + 1, f + b, (n - b) * sizeof *f);
        n -= b - a - 1;
        (*merges)++;
    }
    for (size_t i = 0; i + 1 < n; i++)
        CHECK(f[i].size + f[i + 1].size > cap || f[i].rows + f[i + 1].rows > 2000000);
    return n;
}

TEST(compaction_major_plan_fewest_objects_under_the_cap)
{
    st_coldfile_t f[64];
    size_t merges;
    for (size_t i = 0; i < 8; i++)
        f[i] = (st_coldfile_t){0, 0, 60, 3000};
    CHECK_EQ(major_until_done(f, 8, 256ull << 20, &merges), 1);
    CHECK_EQ(merges, 1);
    CHECK_EQ(f[0].rows, 480);
    /* a 1 MiB cap, 40 objects of 300 KB: several objects, each under the cap */
    for (size_t i = 0; i < 40; i++)
        f[i] = (st_coldfile_t){0, 0, 4000, 300000};
    size_t n = major_until_done(f, 40, 1u << 20, &merges);
    int64_t rows = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(f[i].size <= 1u << 20);
        rows += f[i].rows;
    }
    CHECK_EQ(rows, 40 * 4000);
    CHECK(n > 1 && n <= 2 * (40 * 300000 * 3 / 4) / (1u << 20) + 1);
    /* objects that tiering leaves alone (a million rows and more) are merged too */
    f[0] = (st_coldfile_t){0, 0, 5, 3000};
    f[1] = (st_coldfile_t){0, 0, 1500000, 30000000};
    f[2] = (st_coldfile_t){0, 0, 5, 3000};
    CHECK_EQ(major_until_done(f, 3, 256ull << 20, &merges), 1);
    /* one over the cap stays as it is; its neighbours merge */
    f[0] = (st_coldfile_t){0, 0, 5, 2u << 20};
    f[1] = (st_coldfile_t){0, 0, 5, 3000};
    f[2] = (st_coldfile_t){0, 0, 5, 3000};
    CHECK_EQ(major_until_done(f, 3, 1u << 20, &merges), 2);
    CHECK_EQ(f[0].size, 2u << 20);
    CHECK_EQ(f[1].rows, 10);
}

TEST(room_folders_never_collide_with_user_folders)
{
    char u[ST_CHAT_OWNER_MAX + 1], ru[ST_CHAT_OWNER_MAX];
    size_t ul;
    st_buf_t b = {0};
    /* a room's objects: shared/conversations/{room}/…, and back to the room */
    size_t rl = st_chat_owner_bytes(ru, ST_ROOM("lobby", 5));
    st__chat_object_key(&b, ru, rl, 7, 0, 1);
    CHECK_STR(b.data, "shared/conversations/lobby/batch-7-1.parquet");
    CHECK(st__chat_folder_user(b.data, strlen("shared/conversations/lobby"), u, &ul));
    st_owner_t o = st_chat_owner_from(u, ul);
    CHECK(o.kind == ST_OWNER_ROOM && o.len == 5 && memcmp(o.id, "lobby", 5) == 0);
    /* a user of the same name is another owner: other bytes, its own folder */
    size_t l2 = st_chat_owner_bytes(u, ST_USER("lobby", 5));
    CHECK(l2 == 5 && !(l2 == rl && memcmp(u, ru, rl) == 0));
    o = st_chat_owner_from(u, l2);
    CHECK(o.kind == ST_OWNER_USER && o.len == 5);
    st_buf_reset(&b);
    st__chat_object_key(&b, u, l2, 7, 0, 1);
    CHECK_STR(b.data, "lobby/batch-7-1.parquet");
    /* a user named "shared" keeps objects directly under shared/ */
    st_buf_reset(&b);
    st__chat_object_key(&b, "shared", 6, 7, 0, 1);
    CHECK_STR(b.data, "shared/batch-7-1.parquet");
    CHECK(st__chat_folder_user(b.data, 6, u, &ul));
    CHECK(ul == 6 && memcmp(u, "shared", 6) == 0);
    /* "shared/conversations" alone, or a room folder with a bad room name, is nobody's */
    CHECK(!st__chat_folder_user("shared/conversations", 20, u, &ul));
    CHECK(!st__chat_folder_user("shared/conversations/", 21, u, &ul));
    CHECK(!st__chat_folder_user("shared/conversations/a/b", 24, u, &ul));
    CHECK(!st__chat_folder_user("shared/x", 8, u, &ul));
    /* the longest room id: its bytes are ST_CHAT_OWNER_MAX and map back */
    char room[ST_NAME_MAX];
    memset(room, 'r', sizeof room);
    rl = st_chat_owner_bytes(ru, ST_ROOM(room, sizeof room));
    CHECK(rl == ST_CHAT_OWNER_MAX);
    st_buf_reset(&b);
    st__chat_object_key(&b, ru, rl, 7, 0, 1);
    CHECK(st__chat_folder_user(b.data, strlen(ST__ROOM_FOLDER) + sizeof room, u, &ul));
    CHECK(ul == rl && memcmp(u, ru, rl) == 0);
    st_buf_free(&b);
}

TEST(a_messages_id_member_is_named_by_its_owners_kind)
{
    char ru[ST_CHAT_OWNER_MAX];
    size_t rl = st_chat_owner_bytes(ru, ST_ROOM("r", 1));
    st_buf_t b = {0};
    /* a room's record from before owners had kinds: rendered again from its members, only the
     * message's own member named room_id, never one in metadata */
    const char *old = "{\"msg_id\":\"12\",\"conversation_id\":\"r\",\"from\":\"a\","
                      "\"metadata\":{\"x\":1,\"conversation_id\":2}}";
    CHECK(st__chat_json_legacy(ru, rl, old, strlen(old)));
    st__chat_put_json(&b, ru, rl, old, strlen(old));
    st_buf_appendc(&b, 0);
    CHECK_STR(b.data, "{\"msg_id\":\"12\",\"room_id\":\"r\",\"from\":\"a\",\"metadata\":"
                      "{\"x\":1,\"conversation_id\":2}}");
    /* a user's record, and a room's written now, go as they are */
    CHECK(!st__chat_json_legacy("u", 1, old, strlen(old)));
    const char *now = "{\"msg_id\":\"13\",\"room_id\":\"r\",\"from\":null}";
    CHECK(!st__chat_json_legacy(ru, rl, now, strlen(now)));
    st_buf_reset(&b);
    st__chat_put_json(&b, ru, rl, now, strlen(now));
    CHECK(b.len == strlen(now) && memcmp(b.data, now, b.len) == 0);
    /* a cold row is rendered with its owner kind's member */
    st_msgrow_t r = {.msg_id = 14, .conv = "r", .conv_len = 1, .from = "a", .from_len = 1};
    st_buf_reset(&b);
    st__chat_render_row(&b, ru, rl, &r);
    st_buf_appendc(&b, 0);
    CHECK(strstr(b.data, "\"room_id\":\"r\"") && !strstr(b.data, "conversation_id"));
    st_buf_reset(&b);
    st__chat_render_row(&b, "u", 1, &r);
    st_buf_appendc(&b, 0);
    CHECK(strstr(b.data, "\"conversation_id\":\"r\"") && !strstr(b.data, "room_id"));
    st_buf_free(&b);
}

TEST(raw_json_members_are_found_whatever_their_values_hold)
{
    static const char j[] = "{\"msg_id\":\"1\",\"content\":\"a \\\"metadata\\\":{,}\","
                            "\"metadata\":{\"x\":[1,{\"y\":\"}\"}],\"n\":12345678901234567890},"
                            "\"deleted_at\":null,\"edit_history\":[]}";
    const char *v;
    size_t vl;
    CHECK(st__chat_jmember(j, strlen(j), "metadata", &v, &vl));
    CHECK_EQ(vl, strlen("{\"x\":[1,{\"y\":\"}\"}],\"n\":12345678901234567890}"));
    CHECK(memcmp(v, "{\"x\"", 4) == 0);
    CHECK(st__chat_jmember(j, strlen(j), "content", &v, &vl));
    CHECK_EQ(vl, strlen("\"a \\\"metadata\\\":{,}\""));
    CHECK(st__chat_jmember(j, strlen(j), "edit_history", &v, &vl));
    CHECK(vl == 2 && memcmp(v, "[]", 2) == 0);
    CHECK(!st__chat_jmember(j, strlen(j), "edited_at", &v, &vl));
    CHECK(!st__chat_json_dead(j, strlen(j)));
    static const char d[] = "{\"content\":null,\"deleted_at\":17}";
    CHECK(st__chat_json_dead(d, strlen(d)));
}

TEST(edits_keep_history_and_deletes_count_live_messages)
{
    open_all(true);
    st_buf_t out = {0};
    st_chat_set_max_history(chat, 2);
    uint64_t a = post("u", "c", "v0", &out);
    uint64_t b = post("u", "c", "other", &out);
    uint64_t w = 0;
    char t[8];
    for (int i = 1; i <= 3; i++) {
        snprintf(t, sizeof t, "v%d", i);
        st_message_edit_t e = {t, strlen(t), NULL, 0};
        st_buf_reset(&out);
        CHECK_EQ(st_chat_edit(chat, ST_USER("u", 1), a, &e, &out, &w), ST_OK);
    }
    st_buf_appendc(&out, 0);
    CHECK(strstr(out.data, "\"content\":\"v3\""));
    CHECK(strstr(out.data, "\"edit_history\":[{\"content\":\"v1\""));
    CHECK(!strstr(out.data, "\"v0\""));
    st_buf_reset(&out);
    CHECK_EQ(st_chat_delete(chat, ST_USER("u", 1), b, &out, &w), ST_OK);
    st_buf_reset(&out);
    CHECK_EQ(
        st_chat_edit(chat, ST_USER("u", 1), b, &(st_message_edit_t){"x", 1, NULL, 0}, &out, &w),
        ST_ECONFLICT);
    CHECK_EQ(st_chat_delete(chat, ST_USER("u", 1), 12345, &out, &w), ST_ENOTFOUND);
    st_buf_reset(&out);
    CHECK_EQ(st_chat_conversation(chat, "u", 1, "c", 1, &out, &w), ST_OK);
    st_buf_appendc(&out, 0);
    CHECK(strstr(out.data, "\"total_messages\":1}"));
    int64_t drift = 0;
    CHECK_EQ(st_chat_recount(chat, ST_USER("u", 1), "c", 1, &drift, &w), ST_OK);
    CHECK_EQ(drift, 0);
    st_buf_free(&out);
    close_all(true);
}

/* ---- chat's message files (src/chat/parquet_msg.c): the codec's instance for messages ---- */

static st_msgrow_t row(uint64_t id, const char *conv, const char *content, const char *meta)
{
    st_msgrow_t r = {.msg_id = id,
                     .timestamp = 1700000000000000 + (int64_t)id,
                     .seq = (int64_t)id % 1000,
                     .conv = conv,
                     .from = id % 2 ? "alice" : "bob",
                     .content = content,
                     .metadata = meta};
    r.conv_len = (uint32_t)strlen(conv);
    r.from_len = (uint32_t)strlen(r.from);
    r.content_len = content ? (uint32_t)strlen(content) : 0;
    r.metadata_len = meta ? (uint32_t)strlen(meta) : 0;
    return r;
}

/* Parses a whole file held in memory into its meta. */
static int parse(const st_buf_t *f, st_pq_meta_t *m)
{
    uint32_t fl;
    if (f->len < 8) return ST_EINVAL;
    int rc = st_parquet_footer_len((const uint8_t *)f->data + f->len - 8, f->len, &fl);
    if (rc) return rc;
    return st_parquet_parse_footer((const uint8_t *)f->data + f->len - 8 - fl, fl, f->len, m);
}

static bool same(const char *a, size_t al, const char *b, size_t bl)
{
    if (!a || !b) return a == b;
    return al == bl && memcmp(a, b, al) == 0;
}

/* Earlier versions for rows' edit_history (SPEC §2.2): a string and raw JSON text, one null. */
static const st_msgedit_t hist3[] = {
    {"first", "{\"v\":1}", 5, 7, 1700000000000100},
    {"ünï", NULL, 5, 0, 1700000000000200},
    {NULL, "[1,{\"x\":null}]", 0, 14, 1700000000000300},
};

/* Whether two rows' edit_history are equal (null, empty and each entry). */
static bool same_hist(const st_msgrow_t *a, const st_msgrow_t *b)
{
    if (a->has_hist != b->has_hist || a->nhist != b->nhist) return false;
    for (uint32_t k = 0; k < a->nhist; k++)
        if (a->hist[k].edited_at != b->hist[k].edited_at ||
            !same(a->hist[k].content, a->hist[k].content_len, b->hist[k].content,
                  b->hist[k].content_len) ||
            !same(a->hist[k].metadata, a->hist[k].metadata_len, b->hist[k].metadata,
                  b->hist[k].metadata_len))
            return false;
    return true;
}

/* Sets row r's edit_history: null (n < 0) or the first n of hist3. */
static void set_hist(st_msgrow_t *r, int n)
{
    r->has_hist = n >= 0;
    r->hist = n > 0 ? hist3 : NULL;
    r->nhist = n > 0 ? (uint32_t)n : 0;
}

TEST(round_trip_keeps_every_field_and_groups_by_conversation)
{
    /* conversation "a": 3 rows, "b": 2000 rows with big contents (several pages) */
    size_t n = 2003;
    st_msgrow_t *rows = calloc(n, sizeof *rows);
    char *big = malloc(3000);
    memset(big, 'x', 2999);
    big[2999] = 0;
    rows[0] = row(10, "a", "hello", "{\"k\":1}");
    rows[1] = row(11, "a", "ünïcødé", NULL);
    rows[2] = row(12, "a", "", "{}");
    for (size_t i = 3; i < n; i++)
        rows[i] = row(100 + i, "b", big, i % 3 ? NULL : "{\"i\":true}");
    rows[1].edited_at = 1700000000123456;
    set_hist(&rows[1], 3);
    for (size_t i = 3; i < n; i += 7) { /* some edited, some deleted, some both */
        rows[i].edited_at = i % 2 ? rows[i].timestamp + 5 : 0;
        rows[i].deleted_at = i % 3 ? rows[i].timestamp + 9 : 0;
        set_hist(&rows[i], rows[i].deleted_at ? 0 : rows[i].edited_at ? (int)(i % 3) + 1 : -1);
    }
    st_buf_t f = {0};
    CHECK_EQ(st_parquet_encode(rows, n, ST_USER("u", 1), 3, &f), ST_OK);
    CHECK(memcmp(f.data, "PAR1", 4) == 0);
    st_pq_meta_t m;
    CHECK_EQ(parse(&f, &m), ST_OK);
    CHECK_EQ(m.ngroups, 2);
    CHECK_EQ(m.rows, (long long)n);
    CHECK(same(m.groups[0].conv, m.groups[0].conv_len, "a", 1));
    CHECK(same(m.groups[1].conv, m.groups[1].conv_len, "b", 1));
    CHECK_EQ(m.groups[0].min_id, 10);
    CHECK_EQ(m.groups[0].max_id, 12);
    CHECK_EQ(m.groups[1].min_id, 103);
    CHECK_EQ(m.groups[1].max_id, 100 + n - 1);
    size_t at = 0;
    for (size_t g = 0; g < m.ngroups; g++) {
        st_pq_rows_t r;
        const st_pq_group_t *G = &m.groups[g];
        CHECK_EQ(st_parquet_read_group(G, (const uint8_t *)f.data + G->offset, G->length, &r),
                 ST_OK);
        CHECK_EQ(r.n, G->rows);
        for (size_t i = 0; i < r.n; i++, at++) {
            const st_msgrow_t *a = &r.rows[i], *b = &rows[at];
            CHECK_EQ(a->msg_id, b->msg_id);
            CHECK_EQ(a->timestamp, b->timestamp);
            CHECK_EQ(a->seq, b->seq);
            CHECK(same(a->conv, a->conv_len, b->conv, b->conv_len));
            CHECK(same(a->from, a->from_len, b->from, b->from_len));
            CHECK(same(a->content, a->content_len, b->content, b->content_len));
            CHECK(same(a->metadata, a->metadata_len, b->metadata, b->metadata_len));
            CHECK_EQ(a->edited_at, b->edited_at);
            CHECK_EQ(a->deleted_at, b->deleted_at);
            CHECK(same_hist(a, b));
        }
        st_parquet_rows_free(&r);
    }
    CHECK_EQ(at, n);
    st_parquet_meta_free(&m);
    st_buf_free(&f);
    free(rows);
    free(big);
}

/* The message files' bytes are fixed: a change of the writer that alters them (a new encoding,
 * another page cut) must be deliberate, since readers in the field and the bucket's older files
 * meet the new ones. The figures were those of the writer before it became schema-driven, until
 * SPEC v5 §5.1 added field ids and the owner column (user "u", a chunk per row group), until
 * from and content became OPTIONAL (issue 45: their definition levels), and until edited_at and
 * deleted_at became columns (issue 45: two OPTIONAL INT64 chunks per row group, some values), and
 * until edit_history did (issue 45: a LIST of STRUCT, three chunks per row group, some lists). */
TEST(message_files_keep_their_exact_bytes)
{
    size_t n = 4000;
    st_msgrow_t *rows = calloc(n, sizeof *rows);
    char(*from)[16] = calloc(n, 16), (*text)[1200] = calloc(n, 1200);
    static const char *convs[] = {"alpha", "beta", "gamma"};
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        size_t c = i < 10 ? 0 : i < 3000 ? 1 : 2;
        x = x * 1103515245u + 12345u;
        /* gamma has more than 256 senders: its from column stays PLAIN */
        snprintf(from[i], sizeof from[i], "u%u", c == 2 ? (unsigned)i : (unsigned)(x >> 28));
        size_t tl = (x >> 8) % 1199;
        for (size_t k = 0; k < tl; k++)
            text[i][k] = (char)('a' + (x >> (k % 24)) % 26);
        rows[i] = row(1000 + i, convs[c], text[i], (x >> 5) % 3 ? NULL : "{\"k\":[1,2]}");
        rows[i].from = from[i];
        rows[i].from_len = (uint32_t)strlen(from[i]);
        if ((x >> 3) % 5 == 0) rows[i].edited_at = rows[i].timestamp + (x >> 12) % 100000;
        if ((x >> 9) % 7 == 0) rows[i].deleted_at = rows[i].timestamp + (x >> 14) % 100000;
        if (rows[i].deleted_at)
            set_hist(&rows[i], 0);
        else if (rows[i].edited_at)
            set_hist(&rows[i], (int)((x >> 20) % 3) + 1);
    }
    st_buf_t f = {0};
    CHECK_EQ(st_parquet_encode(rows, n, ST_USER("u", 1), 3, &f), ST_OK);
    CHECK_EQ(f.len, 106045);
    CHECK_EQ(crc32(0L, (const Bytef *)f.data, (uInt)f.len), 1622798199ul);
    st_buf_free(&f);
    free(rows);
    free(from);
    free(text);
}

TEST(truncated_or_damaged_files_are_errors_never_crashes)
{
    st_msgrow_t rows[4] = {row(1, "c", "one", NULL), row(2, "c", "two", "{}"),
                           row(3, "d", "three", NULL), row(4, "d", "four", "{\"x\":[1]}")};
    st_buf_t f = {0};
    CHECK_EQ(st_parquet_encode(rows, 4, ST_USER("u", 1), 1, &f), ST_OK);
    st_pq_meta_t m;
    /* every truncation */
    for (size_t cut = 0; cut < f.len; cut++) {
        st_buf_t t = {0};
        st_buf_append(&t, f.data, cut);
        if (parse(&t, &m) == ST_OK) st_parquet_meta_free(&m);
        st_buf_free(&t);
    }
    /* every single-byte flip: parse, and read every group the footer still describes */
    srand(7);
    for (size_t i = 0; i < f.len; i++) {
        st_buf_t t = {0};
        st_buf_append(&t, f.data, f.len);
        t.data[i] ^= (char)(1 + rand() % 255);
        if (parse(&t, &m) == ST_OK) {
            for (size_t g = 0; g < m.ngroups; g++) {
                st_pq_rows_t r;
                const st_pq_group_t *G = &m.groups[g];
                if (G->offset + G->length <= t.len &&
                    st_parquet_read_group(G, (const uint8_t *)t.data + G->offset, G->length, &r) ==
                        ST_OK)
                    st_parquet_rows_free(&r);
            }
            st_parquet_meta_free(&m);
        }
        st_buf_free(&t);
    }
    CHECK_EQ(parse(&f, &m), ST_OK);
    st_parquet_meta_free(&m);
    st_buf_free(&f);
}

/* Regression (issue 12, Low): pages carried no checksum, and 71 of 300 single-bit flips in a file
 * decoded to silently wrong messages. With page CRCs every flip in the pages is an error or (in
 * bytes no value depends on) the same rows. */
TEST(a_flipped_bit_in_any_page_is_an_error_never_a_wrong_value)
{
    char text[40][64];
    st_msgrow_t rows[40];
    for (int i = 0; i < 40; i++) {
        snprintf(text[i], sizeof text[i], "message %d with some words %d", i, i * 7919);
        rows[i] = row(1000 + (uint64_t)i, i < 20 ? "c" : "d", text[i], i % 4 ? NULL : "{\"k\":1}");
    }
    st_buf_t f = {0};
    CHECK_EQ(st_parquet_encode(rows, 40, ST_USER("u", 1), 3, &f), ST_OK);
    st_pq_meta_t m;
    CHECK_EQ(parse(&f, &m), ST_OK);
    size_t wrong = 0, errors = 0, flips = 0;
    for (size_t g = 0; g < m.ngroups; g++) {
        const st_pq_group_t *G = &m.groups[g];
        for (uint64_t at = G->offset; at < G->offset + G->length; at++) {
            for (int bit = 0; bit < 8; bit++, flips++) {
                f.data[at] ^= (char)(1 << bit);
                st_pq_rows_t r;
                if (st_parquet_read_group(G, (const uint8_t *)f.data + G->offset, G->length, &r) ==
                    ST_OK) {
                    const st_msgrow_t *want = rows + (g ? 20 : 0);
                    bool same_rows = r.n == 20;
                    for (size_t i = 0; same_rows && i < r.n; i++)
                        same_rows = r.rows[i].msg_id == want[i].msg_id &&
                                    r.rows[i].timestamp == want[i].timestamp &&
                                    r.rows[i].seq == want[i].seq &&
                                    same(r.rows[i].content, r.rows[i].content_len, want[i].content,
                                         want[i].content_len) &&
                                    same(r.rows[i].from, r.rows[i].from_len, want[i].from,
                                         want[i].from_len) &&
                                    same(r.rows[i].conv, r.rows[i].conv_len, want[i].conv,
                                         want[i].conv_len) &&
                                    same(r.rows[i].metadata, r.rows[i].metadata_len,
                                         want[i].metadata, want[i].metadata_len);
                    wrong += !same_rows;
                    st_parquet_rows_free(&r);
                } else {
                    errors++;
                }
                f.data[at] ^= (char)(1 << bit);
            }
        }
    }
    fprintf(stderr, "  %zu flips: %zu errors, %zu wrong\n", flips, errors, wrong);
    CHECK(flips > 1000);
    CHECK_EQ(wrong, 0);
    st_parquet_meta_free(&m);
    st_buf_free(&f);
}

/* Chat's merge (src/chat/merge.c) through the tier's merge of any schema: rows of interleaved
 * conversations come out one row group per conversation in id order, byte for byte what the
 * message writer makes of the same rows; the fix hook changes a row's content and metadata or
 * leaves a row out; rows older than the cutoff are left out and counted per conversation. */
static bool merge_fix(void *arg, st_msgrow_t *r)
{
    (void)arg;
    if (r->msg_id == 3) return false; /* a deleted conversation's, say */
    if (r->msg_id == 5) {
        r->content = "edited";
        r->content_len = 6;
        r->metadata = "{\"e\":1}";
        r->metadata_len = 7;
    }
    return true;
}

TEST(merge_groups_by_conversation_folds_changes_and_counts_expired_rows)
{
    char dir[] = "/tmp/strata-cmerge-XXXXXX";
    st_objstore_t *obj = tmp_store(dir);
    /* object 1: a 1, a 3, b 2; object 2: a 5, b 4, c 6 (timestamps 1700000000000000 + id) */
    st_msgrow_t r1[] = {row(1, "a", "one", NULL), row(3, "a", "three", "{}"),
                        row(2, "b", "two", NULL)};
    st_msgrow_t r2[] = {row(5, "a", "five", NULL), row(4, "b", "four", "{\"k\":2}"),
                        row(6, "c", "six", NULL)};
    st_buf_t f1 = {0}, f2 = {0}, got = {0}, want = {0};
    CHECK_EQ(st_parquet_encode(r1, 3, ST_USER("u", 1), 1, &f1), ST_OK);
    CHECK_EQ(st_parquet_encode(r2, 3, ST_USER("u", 1), 1, &f2), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "u/1.parquet", f1.data, f1.len), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "u/2.parquet", f2.data, f2.len), ST_OK);
    st_tier_obj_t objs[2] = {{.file = {.size = f1.len}, .key = (char *)"u/1.parquet"},
                             {.file = {.size = f2.len}, .key = (char *)"u/2.parquet"}};
    st_tier_file_t out = {0};
    void *dropped = NULL;
    int64_t nd = 0;
    int64_t cutoff = 1700000000000000 + 2; /* row 1 only (its timestamp is older) */
    CHECK_EQ(st_chat_parquet_merge(1, ST_USER("u", 1), obj, objs, 2, cutoff, "u/m.parquet", &out,
                                   &dropped, &nd, merge_fix, NULL),
             ST_OK);
    CHECK_EQ(nd, 1);
    size_t pos = 0;
    const char *g;
    size_t gl;
    int64_t cnt;
    CHECK(st_chat_dropped_next(dropped, &pos, &g, &gl, &cnt));
    CHECK(gl == 1 && g[0] == 'a' && cnt == 1);
    CHECK(!st_chat_dropped_next(dropped, &pos, &g, &gl, &cnt));
    st_chat_dropped_free(NULL, dropped);
    /* kept: a 5 (edited), b 2, b 4, c 6 */
    CHECK(out.rows == 4 && out.min_id == 2 && out.max_id == 6);
    st_msgrow_t w[] = {row(5, "a", "edited", "{\"e\":1}"), row(2, "b", "two", NULL),
                       row(4, "b", "four", "{\"k\":2}"), row(6, "c", "six", NULL)};
    CHECK_EQ(st_parquet_encode(w, 4, ST_USER("u", 1), 1, &want), ST_OK);
    CHECK_EQ(out.size, want.len);
    CHECK_EQ(st_objstore_get(obj, "u/m.parquet", 0, out.size, &got), ST_OK);
    CHECK(got.len == want.len && memcmp(got.data, want.data, got.len) == 0);
    st_pq_meta_t m;
    CHECK_EQ(parse(&got, &m), ST_OK);
    CHECK_EQ(m.ngroups, 3);
    st_parquet_meta_free(&m);
    st_buf_free(&f1);
    st_buf_free(&f2);
    st_buf_free(&got);
    st_buf_free(&want);
    tmp_store_close(obj, dir);
}

/* SPEC v5 §5.1: a user's objects carry the owner column user, a room's room_id (field id 1);
 * files written before it (no owner column, no field ids) read exactly as new ones, through
 * either schema, and a merge of old and new objects writes the new shape. */
static int read_rows(const st_buf_t *f, st_msgrow_t *out, size_t max, st_pq_rows_t *keep)
{
    st_pq_meta_t m;
    if (parse(f, &m) != ST_OK) return -1;
    size_t at = 0;
    for (size_t g = 0; g < m.ngroups; g++) {
        const st_pq_group_t *G = &m.groups[g];
        if (st_parquet_read_group(G, (const uint8_t *)f->data + G->offset, (size_t)G->length,
                                  &keep[g]) != ST_OK)
            return -1;
        for (size_t i = 0; i < keep[g].n && at < max; i++)
            out[at++] = keep[g].rows[i];
    }
    st_parquet_meta_free(&m);
    return (int)at;
}

/* The owner column's values of a file read against schema s: all equal to want (NULL: null). */
static bool owner_is(const st_buf_t *f, const st_pq_schema_t *s, const char *want)
{
    uint32_t fl;
    st_pq_file_t pf;
    if (st_pq_footer_len((const uint8_t *)f->data + f->len - 8, f->len, &fl) != ST_OK ||
        st_pq_parse_footer(s, (const uint8_t *)f->data + f->len - 8 - fl, fl, f->len, &pf) != ST_OK)
        return false;
    bool ok = true;
    for (size_t g = 0; g < pf.ngroups && ok; g++) {
        const st_pq_rowgroup_t *G = &pf.groups[g];
        st_pq_table_t t;
        if (st_pq_read_group(s, G, (const uint8_t *)f->data + G->offset, G->length, &t) != ST_OK) {
            ok = false;
            break;
        }
        st_pq_cur_t c;
        st_pq_cur_init(&c, &t);
        while (st_pq_cur_next(&c)) {
            const char *p;
            size_t n;
            bool there = st_pq_get_str(&c, &p, &n);
            ok = ok && (want ? there && same(p, n, want, strlen(want)) : !there);
            int64_t v;
            st_pq_get_i64(&c, &v);
            for (int k = 0; k < 2; k++)
                st_pq_get_str(&c, &p, &n);
            st_pq_get_i64(&c, &v);
            st_pq_get_i64(&c, &v);
            st_pq_get_str(&c, &p, &n);
            st_pq_get_str(&c, &p, &n);
            st_pq_get_i64(&c, &v); /* edited_at */
            st_pq_get_i64(&c, &v); /* deleted_at */
            size_t nh;
            st_pq_get_list(&c, &nh); /* edit_history */
            for (size_t k = 0; k < nh; k++) {
                st_pq_get_struct(&c);
                st_pq_get_str(&c, &p, &n);
                st_pq_get_str(&c, &p, &n);
                st_pq_get_i64(&c, &v);
            }
        }
        ok = st_pq_cur_done(&c) == ST_OK && ok;
        st_pq_table_free(&t);
    }
    st_pq_file_free(&pf);
    return ok;
}

TEST(owner_column_in_new_files_old_files_read_alike_and_merge_into_the_new_shape)
{
    st_msgrow_t rows[] = {row(1, "a", "one", NULL), row(3, "a", "three", "{}"),
                          row(2, "b", "two", NULL), row(4, "b", "four", "{\"k\":2}")};
    st_buf_t old = {0}, user = {0}, room = {0};
    CHECK_EQ(encode_v4(rows, 4, &old), ST_OK);
    CHECK_EQ(st_parquet_encode(rows, 4, ST_USER("u", 1), 1, &user), ST_OK);
    CHECK_EQ(st_parquet_encode(rows, 4, ST_ROOM("r1", 2), 1, &room), ST_OK);
    CHECK(owner_is(&user, &st_pq_msg_schema, "u"));
    CHECK(owner_is(&room, &st_pq_room_schema, "r1"));
    /* the owner column matches by its field id whatever its name; an old file's reads as null */
    CHECK(owner_is(&room, &st_pq_msg_schema, "r1"));
    CHECK(owner_is(&user, &st_pq_room_schema, "u"));
    CHECK(owner_is(&old, &st_pq_msg_schema, NULL));
    CHECK(owner_is(&old, &st_pq_room_schema, NULL));
    /* every file's rows read alike (footer summaries included) */
    const st_buf_t *files[] = {&old, &user, &room};
    for (int fi = 0; fi < 3; fi++) {
        st_msgrow_t got[8];
        st_pq_rows_t keep[4] = {0};
        CHECK_EQ(read_rows(files[fi], got, 8, keep), 4);
        for (int i = 0; i < 4; i++) {
            CHECK_EQ(got[i].msg_id, rows[i].msg_id);
            CHECK_EQ(got[i].timestamp, rows[i].timestamp);
            CHECK_EQ(got[i].seq, rows[i].seq);
            CHECK(same(got[i].conv, got[i].conv_len, rows[i].conv, rows[i].conv_len));
            CHECK(same(got[i].from, got[i].from_len, rows[i].from, rows[i].from_len));
            CHECK(same(got[i].content, got[i].content_len, rows[i].content, rows[i].content_len));
            CHECK(
                same(got[i].metadata, got[i].metadata_len, rows[i].metadata, rows[i].metadata_len));
        }
        for (int g = 0; g < 4; g++)
            st_parquet_rows_free(&keep[g]);
        st_pq_meta_t m;
        CHECK_EQ(parse(files[fi], &m), ST_OK);
        CHECK(m.ngroups == 2 && m.groups[0].min_id == 1 && m.groups[0].max_id == 3 &&
              m.groups[1].min_ts == rows[2].timestamp && m.groups[1].max_seq == rows[3].seq);
        CHECK(same(m.groups[1].conv, m.groups[1].conv_len, "b", 1));
        st_parquet_meta_free(&m);
    }
    /* an old object merged with a new one: the new shape, byte for byte what the writer makes */
    char dir[] = "/tmp/strata-cowner-XXXXXX";
    st_objstore_t *obj = tmp_store(dir);
    st_msgrow_t later[] = {row(5, "a", "five", NULL), row(6, "c", "six", NULL)};
    st_msgrow_t all[] = {rows[0], rows[1], later[0], rows[2], rows[3], later[1]};
    for (int k = 0; k < 2; k++) { /* a user's, then a room's */
        const st_owner_t *u = k ? ST_ROOM("r1", 2) : ST_USER("u", 1);
        st_buf_t o = {0}, n = {0}, got = {0}, want = {0};
        CHECK_EQ(encode_v4(rows, 4, &o), ST_OK);
        CHECK_EQ(st_parquet_encode(later, 2, u, 1, &n), ST_OK);
        const char *k1 = k ? "o/r1.parquet" : "o/u1.parquet",
                   *k2 = k ? "o/r2.parquet" : "o/u2.parquet";
        CHECK_EQ(st_objstore_put(obj, k1, o.data, o.len), ST_OK);
        CHECK_EQ(st_objstore_put(obj, k2, n.data, n.len), ST_OK);
        st_tier_obj_t objs[2] = {{.file = {.size = o.len}, .key = (char *)k1},
                                 {.file = {.size = n.len}, .key = (char *)k2}};
        st_tier_file_t out = {0};
        void *dropped = NULL;
        int64_t nd = 0;
        const char *key = k ? "o/m1.parquet" : "o/m0.parquet";
        CHECK_EQ(st_chat_parquet_merge(1, u, obj, objs, 2, 0, key, &out, &dropped, &nd, NULL, NULL),
                 ST_OK);
        st_chat_dropped_free(NULL, dropped);
        CHECK(out.rows == 6 && nd == 0);
        CHECK_EQ(st_parquet_encode(all, 6, u, 1, &want), ST_OK);
        CHECK_EQ(st_objstore_get(obj, key, 0, out.size, &got), ST_OK);
        CHECK(got.len == want.len && memcmp(got.data, want.data, got.len) == 0);
        CHECK(owner_is(&got, k ? &st_pq_room_schema : &st_pq_msg_schema, k ? "r1" : "u"));
        st_buf_free(&o);
        st_buf_free(&n);
        st_buf_free(&got);
        st_buf_free(&want);
    }
    tmp_store_close(obj, dir);
    st_buf_free(&old);
    st_buf_free(&user);
    st_buf_free(&room);
}

/* Message files as strata wrote them from SPEC v5 §5.1 until issue 45: the owner column, then
 * v4's seven columns with field ids (from and content REQUIRED: a tombstone's content was ""). */
static st_pq_field_t v5r_fields[8];
static const st_pq_schema_t v5r_schema = {v5r_fields, 8, 1, 2};

static void v5r_init(void)
{
    v5r_fields[0] = st_pq_msg_schema.fields[0];
    for (int i = 0; i < 7; i++) {
        v5r_fields[i + 1] = v4_fields[i];
        v5r_fields[i + 1].id = i + 2;
    }
}

static void v5r_row(void *arg, size_t i, st_pq_rec_t *r)
{
    st_pq_put_str(r, "u", 1);
    v4_row(arg, i, r);
}

/* SPEC v5 §5.1 (issue 45): a tombstone's content and metadata and an erased author's from are
 * null in the files; files written while from and content were REQUIRED read alike (their
 * chunks flagged), and a merge of both layouts writes the new one, nulls kept. */
TEST(nullable_from_and_content_old_required_files_read_and_merge)
{
    st_msgrow_t rows[] = {row(1, "a", "one", NULL), row(2, "a", "two", "{}"),
                          row(3, "b", "three", NULL)};
    st_msgrow_t later[] = {row(4, "a", NULL, NULL), row(5, "b", "five", NULL)};
    later[0].from = NULL; /* an erased author's tombstone */
    later[0].from_len = 0;
    st_buf_t old = {0}, neu = {0};
    v5r_init();
    st_pq_write_t w = {
        .schema = &v5r_schema, .nrows = 3, .row = v5r_row, .arg = rows, .zstd_level = 1};
    CHECK_EQ(st_pq_write(&w, &old), ST_OK);
    CHECK_EQ(st_parquet_encode(later, 2, ST_USER("u", 1), 1, &neu), ST_OK);
    st_pq_meta_t m;
    CHECK_EQ(parse(&old, &m), ST_OK);
    CHECK(m.groups[0].col_required[3] && m.groups[0].col_required[6] &&
          !m.groups[0].col_required[7] && !m.groups[0].col_required[2]);
    st_parquet_meta_free(&m);
    CHECK_EQ(parse(&neu, &m), ST_OK);
    CHECK(!m.groups[0].col_required[3] && !m.groups[0].col_required[6]);
    st_parquet_meta_free(&m);
    st_msgrow_t got[8];
    st_pq_rows_t keep[4] = {0};
    CHECK_EQ(read_rows(&old, got, 8, keep), 3);
    for (int i = 0; i < 3; i++) {
        CHECK(same(got[i].from, got[i].from_len, rows[i].from, rows[i].from_len));
        CHECK(same(got[i].content, got[i].content_len, rows[i].content, rows[i].content_len));
    }
    for (int g = 0; g < 4; g++)
        st_parquet_rows_free(&keep[g]);
    memset(keep, 0, sizeof keep);
    CHECK_EQ(read_rows(&neu, got, 8, keep), 2);
    CHECK(got[0].msg_id == 4 && !got[0].from && !got[0].content && !got[0].metadata);
    CHECK(same(got[1].from, got[1].from_len, "alice", 5) && same(got[1].content, 4, "five", 4));
    for (int g = 0; g < 4; g++)
        st_parquet_rows_free(&keep[g]);
    /* the two layouts merged: the new shape, byte for byte what the writer makes */
    char dir[] = "/tmp/strata-cnull-XXXXXX";
    st_objstore_t *obj = tmp_store(dir);
    CHECK_EQ(st_objstore_put(obj, "o/1.parquet", old.data, old.len), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "o/2.parquet", neu.data, neu.len), ST_OK);
    st_tier_obj_t objs[2] = {{.file = {.size = old.len}, .key = "o/1.parquet"},
                             {.file = {.size = neu.len}, .key = "o/2.parquet"}};
    st_tier_file_t out = {0};
    void *dropped = NULL;
    int64_t nd = 0;
    CHECK_EQ(st_chat_parquet_merge(1, ST_USER("u", 1), obj, objs, 2, 0, "o/m.parquet", &out,
                                   &dropped, &nd, NULL, NULL),
             ST_OK);
    st_chat_dropped_free(NULL, dropped);
    st_msgrow_t all[] = {rows[0], rows[1], later[0], rows[2], later[1]};
    st_buf_t got_f = {0}, want = {0};
    CHECK_EQ(st_parquet_encode(all, 5, ST_USER("u", 1), 1, &want), ST_OK);
    CHECK_EQ(st_objstore_get(obj, "o/m.parquet", 0, out.size, &got_f), ST_OK);
    CHECK(out.rows == 5 && got_f.len == want.len && memcmp(got_f.data, want.data, want.len) == 0);
    tmp_store_close(obj, dir);
    st_buf_free(&got_f);
    st_buf_free(&want);
    st_buf_free(&old);
    st_buf_free(&neu);
}

/* The message files as strata wrote them from issue 45's nullable from and content until edited_at
 * and deleted_at became columns: the new layout's first eight columns. */
static const st_pq_schema_t v5n_schema = {NULL, 8, 1, 2}; /* rows written by v5r_row */

/* The fold's fix: row 2 deleted, row 5 edited (their times as a delta would give them). */
static bool times_fix(void *arg, st_msgrow_t *r)
{
    (void)arg;
    if (r->msg_id == 2) {
        r->content = r->metadata = NULL;
        r->content_len = r->metadata_len = 0;
        r->deleted_at = 1700000000999999;
    }
    if (r->msg_id == 5) {
        r->content = "edited";
        r->content_len = 6;
        r->edited_at = 1700000000888888;
    }
    return true;
}

typedef void (*merged_fn)(int k, const st_msgrow_t *all, const st_msgrow_t *got);

/* An older layout's file old (rows 1-3) and a new one neu (later: 4-6) merged, plainly (k 0), then
 * with a fold's fix (k 1): each result byte for byte what the writer makes of the six rows in id
 * order (fixed for k 1); check is shown them and the rows read back. */
static void merge_old_new(const st_buf_t *old, const st_buf_t *neu, const st_msgrow_t *rows,
                          const st_msgrow_t *later, bool (*fix)(void *arg, st_msgrow_t *r),
                          merged_fn check)
{
    char dir[] = "/tmp/strata-cmerge-XXXXXX";
    st_objstore_t *obj = tmp_store(dir);
    CHECK_EQ(st_objstore_put(obj, "o/1.parquet", old->data, old->len), ST_OK);
    CHECK_EQ(st_objstore_put(obj, "o/2.parquet", neu->data, neu->len), ST_OK);
    st_tier_obj_t objs[2] = {{.file = {.size = old->len}, .key = "o/1.parquet"},
                             {.file = {.size = neu->len}, .key = "o/2.parquet"}};
    for (int k = 0; k < 2; k++) {
        st_tier_file_t out = {0};
        void *dropped = NULL;
        int64_t nd = 0;
        const char *key = k ? "o/f.parquet" : "o/m.parquet";
        CHECK_EQ(st_chat_parquet_merge(1, ST_USER("u", 1), obj, objs, 2, 0, key, &out, &dropped,
                                       &nd, k ? fix : NULL, NULL),
                 ST_OK);
        st_chat_dropped_free(NULL, dropped);
        st_msgrow_t all[] = {rows[0], rows[1], later[0], rows[2], later[1], later[2]}, got[8];
        for (int i = 0; k && i < 6; i++)
            CHECK(fix(NULL, &all[i]));
        st_buf_t got_f = {0}, want = {0};
        CHECK_EQ(st_parquet_encode(all, 6, ST_USER("u", 1), 1, &want), ST_OK);
        CHECK_EQ(st_objstore_get(obj, key, 0, out.size, &got_f), ST_OK);
        CHECK(out.rows == 6 && got_f.len == want.len &&
              memcmp(got_f.data, want.data, want.len) == 0);
        st_pq_rows_t keep[4] = {0};
        CHECK_EQ(read_rows(&got_f, got, 8, keep), 6);
        for (int i = 0; i < 6; i++)
            CHECK_EQ(got[i].msg_id, all[i].msg_id);
        check(k, all, got);
        for (int g = 0; g < 4; g++)
            st_parquet_rows_free(&keep[g]);
        st_buf_free(&got_f);
        st_buf_free(&want);
    }
    tmp_store_close(obj, dir);
}

static void times_merged(int k, const st_msgrow_t *all, const st_msgrow_t *got)
{
    CHECK(!k || (all[1].deleted_at && all[4].edited_at));
    for (int i = 0; i < 6; i++)
        CHECK(got[i].edited_at == all[i].edited_at && got[i].deleted_at == all[i].deleted_at);
}

/* SPEC v5 §5.1 (issue 45): edited_at and deleted_at (field ids 9, 10) are columns of the message
 * files, null unless set; a file written before them reads them as null, and merges with a new
 * one (a fold setting some) into the new layout, byte for byte what the writer makes. */
TEST(edited_and_deleted_at_columns_old_files_read_null_and_merge)
{
    st_pq_field_t fields[8];
    memcpy(fields, st_pq_msg_schema.fields, sizeof fields);
    st_pq_schema_t old_schema = v5n_schema;
    old_schema.fields = fields;
    st_msgrow_t rows[] = {row(1, "a", "one", NULL), row(2, "a", "two", "{}"),
                          row(3, "b", "three", NULL)};
    st_msgrow_t later[] = {row(4, "a", NULL, NULL), row(5, "b", "five", NULL),
                           row(6, "b", "six", NULL)};
    later[0].deleted_at = 1700000000777777; /* a tombstone */
    later[2].edited_at = 1700000000666666;
    st_buf_t old = {0}, neu = {0};
    st_pq_write_t w = {
        .schema = &old_schema, .nrows = 3, .row = v5r_row, .arg = rows, .zstd_level = 1};
    CHECK_EQ(st_pq_write(&w, &old), ST_OK);
    CHECK_EQ(st_parquet_encode(later, 3, ST_USER("u", 1), 1, &neu), ST_OK);
    CHECK(old.len < neu.len);
    st_msgrow_t got[8];
    st_pq_rows_t keep[4] = {0};
    CHECK_EQ(read_rows(&old, got, 8, keep), 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(got[i].msg_id, rows[i].msg_id);
        CHECK(same(got[i].content, got[i].content_len, rows[i].content, rows[i].content_len));
        CHECK(got[i].edited_at == 0 && got[i].deleted_at == 0);
    }
    for (int g = 0; g < 4; g++)
        st_parquet_rows_free(&keep[g]);
    memset(keep, 0, sizeof keep);
    CHECK_EQ(read_rows(&neu, got, 8, keep), 3);
    CHECK(got[0].msg_id == 4 && got[0].deleted_at == 1700000000777777 && got[0].edited_at == 0);
    CHECK(got[1].msg_id == 5 && got[1].deleted_at == 0 && got[1].edited_at == 0);
    CHECK(got[2].msg_id == 6 && got[2].edited_at == 1700000000666666 && got[2].deleted_at == 0);
    for (int g = 0; g < 4; g++)
        st_parquet_rows_free(&keep[g]);
    CHECK(owner_is(&old, &st_pq_msg_schema, "u"));
    merge_old_new(&old, &neu, rows, later, times_fix, times_merged);
    st_buf_free(&old);
    st_buf_free(&neu);
}

/* Rows of the layout before edit_history: the owner column and the nine after it. */
static void v10_row(void *arg, size_t i, st_pq_rec_t *r)
{
    const st_msgrow_t *m = (const st_msgrow_t *)arg + i;
    v5r_row(arg, i, r);
    if (m->edited_at)
        st_pq_put_i64(r, m->edited_at);
    else
        st_pq_put_null(r);
    if (m->deleted_at)
        st_pq_put_i64(r, m->deleted_at);
    else
        st_pq_put_null(r);
}

/* A fold's fix changing edit_history's shape: row 1 deleted (null to an empty list), row 2 given
 * three versions (an older file's null to a list), row 5's cut to one. */
static bool hist_fix(void *arg, st_msgrow_t *r)
{
    (void)arg;
    if (r->msg_id == 1) {
        r->content = r->metadata = NULL;
        r->content_len = r->metadata_len = 0;
        r->deleted_at = 1700000000555555;
        set_hist(r, 0);
    }
    if (r->msg_id == 2) set_hist(r, 3);
    if (r->msg_id == 5) set_hist(r, 1);
    return true;
}

static void hist_merged(int k, const st_msgrow_t *all, const st_msgrow_t *got)
{
    for (int i = 0; i < 6; i++)
        CHECK(same_hist(&got[i], &all[i]));
    CHECK(k ? got[0].has_hist && got[1].nhist == 3 && got[4].nhist == 1
            : !got[0].has_hist && !got[1].has_hist && got[4].nhist == 2);
}

/* SPEC v5 §5.1 (issue 45): edit_history (field ids 11 to 15) is a column of the message files:
 * null for a message never edited, an empty list for a tombstone, its versions otherwise; a file
 * written before it reads it as null, and merges with a new one, plain or with a fold that gives
 * rows histories of other lengths, into the new layout, byte for byte what the writer makes. */
TEST(edit_history_column_old_files_read_null_and_folds_splice_it)
{
    st_pq_field_t fields[10];
    memcpy(fields, st_pq_msg_schema.fields, sizeof fields);
    st_pq_schema_t old_schema = {fields, 10, 1, 2};
    st_msgrow_t rows[] = {row(1, "a", "one", NULL), row(2, "a", "two", "{}"),
                          row(3, "b", "three", NULL)};
    rows[1].edited_at = 1700000000444444;
    st_msgrow_t later[] = {row(4, "a", NULL, NULL), row(5, "b", "five", NULL),
                           row(6, "b", "six", NULL)};
    later[0].deleted_at = 1700000000777777;
    set_hist(&later[0], 0);
    later[1].edited_at = 1700000000666666;
    set_hist(&later[1], 2);
    st_buf_t old = {0}, neu = {0};
    st_pq_write_t w = {
        .schema = &old_schema, .nrows = 3, .row = v10_row, .arg = rows, .zstd_level = 1};
    CHECK_EQ(st_pq_write(&w, &old), ST_OK);
    CHECK_EQ(st_parquet_encode(later, 3, ST_USER("u", 1), 1, &neu), ST_OK);
    st_pq_meta_t m;
    CHECK_EQ(parse(&old, &m), ST_OK);
    CHECK(m.groups[0].col_length[10] == 0 && m.groups[0].col_length[12] == 0);
    st_parquet_meta_free(&m);
    st_msgrow_t got[8];
    st_pq_rows_t keep[4] = {0};
    CHECK_EQ(read_rows(&old, got, 8, keep), 3);
    for (int i = 0; i < 3; i++)
        CHECK(got[i].msg_id == rows[i].msg_id && !got[i].has_hist && got[i].nhist == 0 &&
              got[i].edited_at == rows[i].edited_at);
    for (int g = 0; g < 4; g++)
        st_parquet_rows_free(&keep[g]);
    memset(keep, 0, sizeof keep);
    CHECK_EQ(read_rows(&neu, got, 8, keep), 3);
    for (int i = 0; i < 3; i++)
        CHECK(got[i].msg_id == later[i].msg_id && same_hist(&got[i], &later[i]));
    CHECK(got[0].has_hist && !got[2].has_hist); /* empty and null stay apart */
    for (int g = 0; g < 4; g++)
        st_parquet_rows_free(&keep[g]);
    CHECK(owner_is(&old, &st_pq_msg_schema, "u"));
    merge_old_new(&old, &neu, rows, later, hist_fix, hist_merged);
    st_buf_free(&old);
    st_buf_free(&neu);
}

RUN_TESTS("chat")
