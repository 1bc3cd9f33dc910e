/* SPDX-License-Identifier: MIT */
/* Unit tests for replicated groups: the --cluster list, the store's group mode (batch -> entry
 * -> apply, idempotent replays, notes, failures), the TCP_NODELAY transport, and a one-member
 * group running Raft on the test's loop. */
#include "../test.h"
#include "../fixture.h"
#include "../rangemodel.h"
#include "strata/repl.h"
#include "strata/store.h"
#include "strata/store_tap.h"
#include "../../src/repl/internal.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the member list ---- */

TEST(members_parse)
{
    st_repl_member_t m[ST_REPL_MAX_MEMBERS];
    size_t n;
    const char *why;
    CHECK_EQ(st_repl_parse_members("1=127.0.0.1:7001,2=h2:7002, 3=[::1]:7003", m, 9, &n, &why),
             ST_OK);
    CHECK_EQ(n, 3);
    CHECK_EQ(m[0].id, 1);
    CHECK_STR(m[0].raft, "127.0.0.1:7001");
    CHECK_EQ(m[1].id, 2);
    CHECK_STR(m[1].raft, "h2:7002");
    CHECK_EQ(m[2].id, 3);
    CHECK_STR(m[2].raft, "[::1]:7003");
    const char *bad[] = {"",         "1=a:1,1=b:2", "1=a:1,2=a:1", "0=a:1",
                         "1024=a:1", "1=a",         "1=a:0",       "1=a:70000",
                         "=a:1",     "x=a:1",       "1=:1",        "1=a:1,,2=b:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(st_repl_parse_members(bad[i], m, 9, &n, &why), ST_EINVAL);
        CHECK(why != NULL);
    }
    CHECK_EQ(st_repl_parse_members("1=a:1,2=b:2,3=c:3", m, 2, &n, &why), ST_EINVAL);
}

/* Election timeouts: distinct per member, ordered by id (listed in any order), more than
 * et / 10 (ten of C-Raft's ticks) apart wherever whole milliseconds allow it, within [et, 2 et] as
 * C-Raft requires. */
TEST(election_timeouts_are_ordered_by_id_a_tick_apart_within_et_and_2et)
{
    const unsigned ets[] = {10, 100, 150, 1000, 4000};
    for (size_t e = 0; e < sizeof ets / sizeof ets[0]; e++) {
        unsigned et = ets[e];
        for (size_t n = 1; n <= ST_REPL_MAX_MEMBERS; n++) {
            st_repl_member_t m[ST_REPL_MAX_MEMBERS];
            const uint64_t ids[] = {5, 300, 17, 999, 2, 64, 128, 700, 42}; /* not in order */
            for (size_t i = 0; i < n; i++)
                m[i].id = ids[i];
            unsigned prev = 0;
            for (uint64_t id = 1; id <= 1000; id++) {
                bool listed = false;
                for (size_t i = 0; i < n; i++)
                    listed |= m[i].id == id;
                if (!listed) continue;
                unsigned t = st_repl_election_timeout(m, n, id, et);
                CHECK(t >= et);
                CHECK(t <= 2 * et);
                if (prev) CHECK(t > prev);
                if (prev && et >= 100) CHECK(t > prev + et / 10);
                prev = t;
            }
        }
    }
}

/* ---- the store in group mode, driven by hand ---- */

typedef struct {
    st_store_group_t g;
    int refuse;
    size_t n;
    uint64_t ids[16];
    st_buf_t payloads[16];
} fake_group_t;

static int fake_propose(st_store_group_t *g, uint64_t batch_id, const char *p, size_t len)
{
    fake_group_t *f = (fake_group_t *)g;
    if (f->refuse) return f->refuse;
    CHECK(f->n < 16);
    f->ids[f->n] = batch_id;
    st_buf_reset(&f->payloads[f->n]);
    st_buf_append(&f->payloads[f->n], p, len);
    f->n++;
    return ST_OK;
}

static void fake_free(fake_group_t *f)
{
    for (size_t i = 0; i < 16; i++)
        st_buf_free(&f->payloads[i]);
}

typedef struct {
    st_store_listener_t l;
    uint64_t durable, failed_first;
} watch_t;

static void w_durable(st_store_listener_t *l, uint64_t id)
{
    ((watch_t *)l)->durable = id;
}

static void w_failed(st_store_listener_t *l, uint64_t first, int err)
{
    (void)err;
    ((watch_t *)l)->failed_first = first;
}

typedef struct {
    int n;
    uint8_t kind;
    char data[64];
    size_t len;
} notes_t;

static void on_note(void *arg, uint8_t kind, const char *data, size_t len)
{
    notes_t *n = arg;
    n->n++;
    n->kind = kind;
    n->len = len < sizeof n->data ? len : sizeof n->data;
    memcpy(n->data, data, n->len);
}

static bool get_is(st_store_t *s, const char *k, const char *want)
{
    const void *v;
    size_t vl;
    uint64_t w = 0;
    if (st_store_get(s, k, strlen(k), &v, &vl, &w) != ST_OK) return want == NULL;
    return want && vl == strlen(want) && memcmp(v, want, vl) == 0;
}

/* Runs the loop until the store has sealed what is staged (the check handle). */
static void seal(fx_t *fx)
{
    uv_run(&fx->loop, UV_RUN_NOWAIT);
}

static st_store_t *group_store(fx_t *fx, fake_group_t *f, watch_t *w)
{
    st_store_t *s = fx_store(fx, 16 << 20, 0);
    memset(f, 0, sizeof *f);
    f->g.propose = fake_propose;
    st_store_group_join(s, &f->g);
    *w = (watch_t){{.on_durable = w_durable, .on_failed = w_failed}, 0, 0};
    st_store_listen(s, &w->l);
    return s;
}

TEST(batch_becomes_entry_durable_once_applied_then_replays_change_nothing)
{
    fx_t fx, fy;
    fx_begin(&fx);
    fx_begin(&fy);
    fake_group_t f, g;
    watch_t w, wy;
    st_store_t *a = group_store(&fx, &f, &w);
    uint64_t wait = 0;
    CHECK_EQ(st_store_put(a, "k", 1, "v", 1, &wait), ST_ENOLEADER); /* standby: a follower */
    CHECK_EQ(st_store_writable(a), ST_ENOLEADER);
    st_store_set_standby(a, false);
    CHECK_EQ(st_store_put(a, "k", 1, "v1", 2, &wait), ST_OK);
    CHECK_EQ(st_store_put(a, "gone", 4, "x", 1, &wait), ST_OK);
    CHECK_EQ(st_store_del(a, "gone", 4, &wait), ST_OK);
    CHECK_EQ(st_store_note(a, 'c', "hello", 5, &wait), ST_OK);
    seal(&fx);
    CHECK_EQ(f.n, 1);
    CHECK_EQ(f.ids[0], wait);
    CHECK(st_store_durable_id(a) < wait); /* proposed, not committed */
    CHECK(get_is(a, "k", "v1"));          /* but visible to reads (they wait for it) */
    /* the committed entry comes back through the FSM: durable, then in LMDB */
    CHECK_EQ(st_store_group_apply(a, 5, f.payloads[0].data, f.payloads[0].len), ST_OK);
    CHECK_EQ(st_store_durable_id(a), wait);
    CHECK_EQ(w.durable, wait);
    fx_settle(&fx, a);
    CHECK_EQ(st_store_group_queued(a), 5);
    CHECK(get_is(a, "k", "v1"));
    CHECK(get_is(a, "gone", NULL));

    /* another member applies the same entry (padded, as C-Raft hands it back): a foreign batch,
     * its note goes to the note handler once LMDB has the data */
    st_store_t *b = group_store(&fy, &g, &wy);
    notes_t notes = {0};
    st_store_on_note(b, on_note, &notes);
    st_buf_t padded = {0};
    st_buf_append(&padded, f.payloads[0].data, f.payloads[0].len);
    st_buf_append(&padded, "\0\0\0\0\0\0\0", 7);
    CHECK_EQ(st_store_group_apply(b, 5, padded.data, padded.len), ST_OK);
    fx_settle(&fy, b);
    CHECK(get_is(b, "k", "v1"));
    CHECK(get_is(b, "gone", NULL));
    CHECK_EQ(notes.n, 1);
    CHECK_EQ(notes.kind, 'c');
    CHECK(notes.len == 5 && memcmp(notes.data, "hello", 5) == 0);
    CHECK_EQ(st_store_durable_id(b), 0); /* a follower's own ids never move */

    /* a later entry, then the earlier one replayed (a restart): the replay changes nothing */
    st_store_set_standby(a, false);
    CHECK_EQ(st_store_put(a, "k", 1, "v2", 2, &wait), ST_OK);
    seal(&fx);
    CHECK_EQ(f.n, 2);
    CHECK_EQ(st_store_group_apply(b, 6, f.payloads[1].data, f.payloads[1].len), ST_OK);
    CHECK_EQ(st_store_group_apply(b, 5, f.payloads[0].data, f.payloads[0].len), ST_OK);
    CHECK_EQ(st_store_group_apply(b, 6, f.payloads[1].data, f.payloads[1].len), ST_OK);
    fx_settle(&fy, b);
    CHECK(get_is(b, "k", "v2"));
    CHECK_EQ(notes.n, 1);
    /* the applied index survives a reopen */
    fx_close_store(&fy, b);
    b = group_store(&fy, &g, &wy);
    CHECK_EQ(st_store_group_queued(b), 6);
    CHECK_EQ(st_store_group_apply(b, 5, f.payloads[0].data, f.payloads[0].len), ST_OK);
    fx_settle(&fy, b);
    CHECK(get_is(b, "k", "v2"));
    /* damage is refused, never half-applied */
    CHECK_EQ(st_store_group_apply(b, 7, "junk", 4), ST_EIO);
    st_buf_t bad = {0};
    st_buf_append(&bad, f.payloads[1].data, f.payloads[1].len - 1);
    CHECK_EQ(st_store_group_apply(b, 7, bad.data, bad.len), ST_EIO);
    CHECK(get_is(b, "k", "v2"));
    st_buf_free(&bad);
    st_buf_free(&padded);

    /* entry 7 of a's own arrives later than it was failed (a deposed leader): applied like
     * anyone's */
    CHECK_EQ(st_store_group_apply(a, 6, f.payloads[1].data, f.payloads[1].len), ST_OK);
    fx_settle(&fx, a);
    fx_close_store(&fx, a);
    fx_close_store(&fy, b);
    fake_free(&f);
    fake_free(&g);
    fx_end(&fx);
    fx_end(&fy);
}

/* Group commit at the Raft level: while an entry of ours is in flight, the writes of later loop
 * iterations gather in one batch, proposed as one entry once the entry in flight applies. */
TEST(writes_wait_while_an_entry_is_in_flight_then_go_as_one_entry)
{
    fx_t fx;
    fx_begin(&fx);
    fake_group_t f;
    watch_t w;
    st_store_t *s = group_store(&fx, &f, &w);
    st_store_set_standby(s, false);
    uint64_t w1 = 0, w2 = 0, w3 = 0;
    CHECK_EQ(st_store_put(s, "a", 1, "1", 1, &w1), ST_OK);
    seal(&fx);
    CHECK_EQ(f.n, 1);
    CHECK_EQ(st_store_put(s, "b", 1, "2", 1, &w2), ST_OK);
    seal(&fx);
    CHECK_EQ(st_store_put(s, "c", 1, "3", 1, &w3), ST_OK);
    seal(&fx);
    CHECK_EQ(f.n, 1); /* b and c wait, visible to reads */
    CHECK(w2 == w3 && w2 > w1);
    CHECK(get_is(s, "b", "2") && get_is(s, "c", "3"));
    CHECK_EQ(st_store_group_apply(s, 1, f.payloads[0].data, f.payloads[0].len), ST_OK);
    CHECK_EQ(w.durable, w1);
    seal(&fx); /* the applied entry let the held batch go, in the same iteration */
    CHECK_EQ(f.n, 2);
    CHECK_EQ(st_store_group_apply(s, 2, f.payloads[1].data, f.payloads[1].len), ST_OK);
    CHECK_EQ(w.durable, w3);
    fx_settle(&fx, s);
    CHECK(get_is(s, "a", "1") && get_is(s, "b", "2") && get_is(s, "c", "3"));
    CHECK_EQ(st_store_group_queued(s), 2);
    fx_close_store(&fx, s);
    fake_free(&f);
    fx_end(&fx);
}

TEST(a_refused_or_abandoned_proposal_rolls_back)
{
    fx_t fx;
    fx_begin(&fx);
    fake_group_t f;
    watch_t w;
    st_store_t *s = group_store(&fx, &f, &w);
    st_store_set_standby(s, false);
    uint64_t wait = 0;
    f.refuse = ST_ENOLEADER; /* not the leader any more */
    CHECK_EQ(st_store_put(s, "a", 1, "1", 1, &wait), ST_OK);
    seal(&fx);
    CHECK_EQ(w.failed_first, wait);
    CHECK(get_is(s, "a", NULL));
    f.refuse = 0;
    CHECK_EQ(st_store_put(s, "b", 1, "1", 1, &wait), ST_OK);
    seal(&fx);
    uint64_t w1 = wait;
    CHECK_EQ(st_store_put(s, "c", 1, "1", 1, &wait), ST_OK);
    seal(&fx);
    /* group commit at the Raft level: "c" waits in the open batch while b's entry is in flight */
    CHECK_EQ(f.n, 1);
    CHECK(get_is(s, "c", "1"));
    /* the member stops leading: the pending proposal and the batch held behind it fail, the
     * first one first */
    st_store_group_abandon(s, ST_ENOLEADER);
    CHECK_EQ(w.failed_first, w1);
    CHECK(get_is(s, "b", NULL));
    CHECK(get_is(s, "c", NULL));
    CHECK(st_store_idle(s));
    /* Raft reporting them failed afterwards changes nothing */
    st_store_group_failed(s, w1, ST_ENOLEADER);
    /* the first one turns out committed after all: it arrives like a foreign entry */
    CHECK_EQ(st_store_group_apply(s, 1, f.payloads[0].data, f.payloads[0].len), ST_OK);
    fx_settle(&fx, s);
    CHECK(get_is(s, "b", "1"));
    fx_close_store(&fx, s);
    fake_free(&f);
    fx_end(&fx);
}

/* The overlay's ordered index (src/store/ovidx.c) through a group's failures: random writes in
 * proposed batches that are applied, fail or are abandoned (their entries dropped and restored
 * through the index), then ranges with random prefixes and bounds, both ways, against a model
 * of what a read must see (committed, then the proposals still pending, in order). */
#define OM_N    RM_N
#define OM_MAXB 64

typedef struct {
    st_store_group_t g;
    size_t n; /* proposals pending: ids[0..n) */
    uint64_t ids[OM_MAXB];
    st_buf_t payloads[OM_MAXB];
    char writes[OM_MAXB][OM_N]; /* per pending proposal: 0 untouched, '-' deleted, else value */
    char staging[OM_N];
} om_group_t;

static int om_propose(st_store_group_t *g, uint64_t batch_id, const char *p, size_t len)
{
    om_group_t *f = (om_group_t *)g;
    CHECK(f->n < OM_MAXB);
    f->ids[f->n] = batch_id;
    st_buf_reset(&f->payloads[f->n]);
    st_buf_append(&f->payloads[f->n], p, len);
    memcpy(f->writes[f->n], f->staging, OM_N);
    memset(f->staging, 0, OM_N);
    f->n++;
    return ST_OK;
}

static void om_pop(om_group_t *f, char *committed, bool applied)
{
    if (applied)
        for (int i = 0; i < OM_N; i++)
            if (f->writes[0][i]) committed[i] = f->writes[0][i] == '-' ? 0 : f->writes[0][i];
    st_buf_t first = f->payloads[0];
    memmove(f->ids, f->ids + 1, (f->n - 1) * sizeof f->ids[0]);
    memmove(f->payloads, f->payloads + 1, (f->n - 1) * sizeof f->payloads[0]);
    memmove(f->writes, f->writes + 1, (f->n - 1) * sizeof f->writes[0]);
    f->payloads[--f->n] = first;
}

TEST(ranges_over_an_overlay_rolled_back_by_failed_proposals_match_a_model)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = fx_store(&fx, 16 << 20, 0);
    om_group_t f;
    memset(&f, 0, sizeof f);
    f.g.propose = om_propose;
    st_store_group_join(s, &f.g);
    st_store_set_standby(s, false);
    int order[OM_N];
    rm_order(order);
    char committed[OM_N] = {0}, visible[OM_N];
    uint64_t index = 0, wait = 0;
    srand(11);
    int checks = 0, fails = 0, applies = 0;
    for (int round = 0; round < 400; round++) {
        for (int op = 0; op < 1 + rand() % 12; op++) {
            int i = rand() % OM_N;
            char k[3];
            size_t kn = rm_key(i, k);
            if (rand() % 3 == 0) {
                CHECK_EQ(st_store_del(s, k, kn, &wait), ST_OK);
                f.staging[i] = '-';
            } else {
                char v = (char)('A' + rand() % 26);
                CHECK_EQ(st_store_put(s, k, kn, &v, 1, &wait), ST_OK);
                f.staging[i] = v;
            }
        }
        seal(&fx); /* proposed, unless an entry of ours is in flight: then it stays open */
        int act = rand() % 8;
        if (act < 3 && f.n) { /* the oldest commits */
            CHECK_EQ(st_store_group_apply(s, ++index, f.payloads[0].data, f.payloads[0].len),
                     ST_OK);
            om_pop(&f, committed, true);
            applies++;
        } else if (act == 3 && f.n) { /* the oldest fails, and every later one with it */
            st_store_group_failed(s, f.ids[0], ST_ENOLEADER);
            while (f.n)
                om_pop(&f, committed, false);
            memset(f.staging, 0, OM_N); /* the open batch held behind them goes too */
            fails++;
        } else if (act == 4 && f.n) {
            st_store_group_abandon(s, ST_ENOLEADER);
            while (f.n)
                om_pop(&f, committed, false);
            memset(f.staging, 0, OM_N);
            fails++;
        }
        for (int t = 0; t < 3; t++) /* applied batches come back: their entries go */
            uv_run(&fx.loop, UV_RUN_NOWAIT);
        memcpy(visible, committed, OM_N);
        for (size_t b = 0; b < f.n; b++)
            for (int i = 0; i < OM_N; i++)
                if (f.writes[b][i]) visible[i] = f.writes[b][i] == '-' ? 0 : f.writes[b][i];
        for (int i = 0; i < OM_N; i++) /* the open batch, held behind an entry in flight */
            if (f.staging[i]) visible[i] = f.staging[i] == '-' ? 0 : f.staging[i];
        checks += rm_check(s, visible, order, 6);
    }
    CHECK_EQ(checks, 2400);
    CHECK(fails > 20 && applies > 50);
    for (seal(&fx); f.n; seal(&fx)) { /* a held batch is proposed once the one before applies */
        CHECK_EQ(st_store_group_apply(s, ++index, f.payloads[0].data, f.payloads[0].len), ST_OK);
        om_pop(&f, committed, true);
    }
    fx_close_store(&fx, s);
    for (size_t i = 0; i < OM_MAXB; i++)
        st_buf_free(&f.payloads[i]);
    fx_end(&fx);
}

/* ---- the backup tap on a leader ---- */

typedef struct {
    uv_mutex_t mu;
    uint64_t seqs[32];
    size_t lens[32], n;
    int barriers;
    bool fail;   /* a barrier is not shipped within the backup's bound */
    uv_sem_t go; /* a barrier's call waits for it (the shipper uploading it) */
} ltap_t;

static int on_ltap(void *arg, uint64_t seq, const void *rec, size_t len, bool barrier)
{
    ltap_t *t = arg;
    (void)rec;
    uv_mutex_lock(&t->mu);
    if (t->n < 32) {
        t->seqs[t->n] = seq;
        t->lens[t->n++] = len;
    }
    t->barriers += barrier;
    bool fail = t->fail;
    uv_mutex_unlock(&t->mu);
    if (barrier && !fail) uv_sem_wait(&t->go);
    return barrier && fail ? ST_EUNAVAIL : ST_OK;
}

static size_t ltap_count(ltap_t *t)
{
    uv_mutex_lock(&t->mu);
    size_t n = t->n;
    uv_mutex_unlock(&t->mu);
    return n;
}

/* Seals what is staged and applies it as the committed entry at index. */
static uint64_t commit_at(fx_t *fx, st_store_t *s, fake_group_t *f, uint64_t index)
{
    seal(fx);
    CHECK_EQ(st_store_group_apply(s, index, f->payloads[f->n - 1].data, f->payloads[f->n - 1].len),
             ST_OK);
    return f->ids[f->n - 1];
}

TEST(a_leader_taps_committed_entries_by_raft_index_and_acks_a_barrier_only_once_tapped)
{
    fx_t fx;
    fx_begin(&fx);
    fake_group_t f;
    watch_t w;
    ltap_t t = {.n = 0};
    uv_mutex_init(&t.mu);
    uv_sem_init(&t.go, 0);
    st_store_t *s = group_store(&fx, &f, &w);
    st_store_tap(s, on_ltap, &t);
    st_store_tap_lead(s, true); /* idle: every committed entry is in LMDB */
    st_store_tap_ready(s, true);
    st_store_set_standby(s, false);
    uint64_t wait = 0;
    /* index 3: 1 and 2 were C-Raft's own (configuration, barrier) and go as empty records */
    CHECK_EQ(st_store_put(s, "a", 1, "1", 1, &wait), ST_OK);
    CHECK_EQ(commit_at(&fx, s, &f, 3), wait);
    CHECK_EQ(st_store_durable_id(s), wait); /* no barrier: acknowledged when committed */
    fx_settle(&fx, s);
    CHECK_EQ(ltap_count(&t), 3);
    /* a barrier at 5 (a reservation), then 6: neither is acknowledged before the tap took 5 */
    CHECK_EQ(st_store_barrier(s, &wait), ST_OK);
    CHECK_EQ(st_store_put(s, "resv", 4, "100", 3, &wait), ST_OK);
    uint64_t b5 = commit_at(&fx, s, &f, 5);
    CHECK_EQ(st_store_put(s, "b", 1, "2", 1, &wait), ST_OK);
    uint64_t b6 = commit_at(&fx, s, &f, 6);
    for (int i = 0; i < 50; i++)
        uv_run(&fx.loop, UV_RUN_NOWAIT);
    CHECK(st_store_durable_id(s) < b5);
    CHECK(w.durable < b5);
    uv_sem_post(&t.go);
    fx_settle(&fx, s);
    CHECK_EQ(st_store_durable_id(s), b6);
    CHECK_EQ(t.barriers, 1);
    CHECK_EQ(t.n, 6);
    for (size_t i = 0; i < t.n; i++)
        CHECK_EQ(t.seqs[i], i + 1); /* contiguous positions */
    CHECK(t.lens[0] == 0 && t.lens[1] == 0 && t.lens[3] == 0);
    CHECK(t.lens[2] > 0 && t.lens[4] > 0 && t.lens[5] > 0);
    /* deposed while a barrier waits for the shipper: its answer (and those behind it) fail */
    w.failed_first = 0;
    CHECK_EQ(st_store_barrier(s, &wait), ST_OK);
    CHECK_EQ(st_store_put(s, "resv", 4, "200", 3, &wait), ST_OK);
    uint64_t b7 = commit_at(&fx, s, &f, 7);
    /* the tap waits in the call; the entry reaches the apply thread at the end of a loop
     * iteration (the hand-over only tries the commit threads' lock) */
    for (int i = 0; i < 10000 && ltap_count(&t) < 7; i++) {
        uv_run(&fx.loop, UV_RUN_NOWAIT);
        uv_sleep(1);
    }
    CHECK_EQ(ltap_count(&t), 7);
    st_store_set_standby(s, true);
    st_store_group_abandon(s, ST_ENOLEADER);
    st_store_tap_lead(s, false);
    CHECK_EQ(w.failed_first, b7);
    uv_sem_post(&t.go);
    fx_settle(&fx, s);
    CHECK(get_is(s, "resv", "200")); /* committed all the same */
    /* a follower taps nothing */
    CHECK_EQ(st_store_group_apply(s, 8, f.payloads[0].data, f.payloads[0].len), ST_OK);
    fx_settle(&fx, s);
    CHECK_EQ(t.n, 7);
    st_store_tap(s, NULL, NULL);
    fx_close_store(&fx, s);
    fake_free(&f);
    uv_sem_destroy(&t.go);
    uv_mutex_destroy(&t.mu);
    fx_end(&fx);
}

/* The backup target stops answering while a reservation's entry waits for it: past the bound
 * the tap gives up, the answers held for it (and behind it) fail instead of waiting for the
 * target, and numbers from a reservation already in the store are refused until the backup
 * answers again. */
TEST(a_barrier_the_backup_cannot_take_in_time_fails_its_held_answers_and_numbers_wait)
{
    fx_t fx;
    fx_begin(&fx);
    fake_group_t f;
    watch_t w;
    ltap_t t = {.n = 0, .fail = true};
    uv_mutex_init(&t.mu);
    uv_sem_init(&t.go, 0);
    st_store_t *s = group_store(&fx, &f, &w);
    st_store_tap(s, on_ltap, &t);
    st_store_tap_lead(s, true);
    st_store_tap_ready(s, true);
    st_store_set_standby(s, false);
    CHECK_EQ(st_store_resv_check(s), ST_OK);
    uint64_t wait = 0;
    CHECK_EQ(st_store_barrier(s, &wait), ST_OK);
    CHECK_EQ(st_store_put(s, "resv", 4, "100", 3, &wait), ST_OK);
    uint64_t b1 = commit_at(&fx, s, &f, 1);
    CHECK_EQ(st_store_put(s, "x", 1, "1", 1, &wait), ST_OK);
    uint64_t b2 = commit_at(&fx, s, &f, 2);
    w.failed_first = 0;
    fx_settle(&fx, s);
    CHECK_EQ(t.barriers, 1);
    CHECK_EQ(w.failed_first, b1);    /* the barrier's answer and the one held behind it: 503 */
    CHECK(get_is(s, "resv", "100")); /* committed all the same (an unknown outcome) */
    CHECK_EQ(st_store_resv_check(s), ST_EUNAVAIL); /* not shipped: no number from it yet */
    st_store_tap_ready(s, true);                   /* the target answers again */
    CHECK_EQ(st_store_resv_check(s), ST_OK);
    /* writes go on, acknowledged as committed */
    CHECK_EQ(st_store_put(s, "y", 1, "2", 1, &wait), ST_OK);
    uint64_t b3 = commit_at(&fx, s, &f, 3);
    fx_settle(&fx, s);
    CHECK(b3 > b2);
    CHECK_EQ(st_store_durable_id(s), b3);
    st_store_tap(s, NULL, NULL);
    fx_close_store(&fx, s);
    fake_free(&f);
    uv_sem_destroy(&t.go);
    uv_mutex_destroy(&t.mu);
    fx_end(&fx);
}

/* ---- the transport ---- */

typedef struct {
    int accepted, connected;
    struct uv_stream_s *in, *out;
} tp_state_t;

static tp_state_t tp;

static void tp_on_accept(struct raft_uv_transport *t, raft_id id, const char *address,
                         struct uv_stream_s *stream)
{
    (void)t;
    (void)address;
    CHECK_EQ(id, 2);
    tp.accepted++;
    tp.in = stream;
}

static void tp_on_connect(struct raft_uv_connect *req, struct uv_stream_s *stream, int status)
{
    (void)req;
    CHECK_EQ(status, 0);
    tp.connected++;
    tp.out = stream;
}

static int nodelay_of(struct uv_stream_s *s)
{
    uv_os_fd_t fd;
    int v = 0;
    socklen_t l = sizeof v;
    if (uv_fileno((uv_handle_t *)s, &fd) != 0) return -1;
    getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &l);
    return v != 0;
}

static void tp_free_stream(uv_handle_t *h)
{
    free(h);
}

static int tp_closed;
static void tp_on_closed(struct raft_uv_transport *t)
{
    (void)t;
    tp_closed++;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

TEST(transport_sets_nodelay_both_ways)
{
    fx_t fx;
    fx_begin(&fx);
    st_transport_t a, b;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", free_port());
    CHECK_EQ(st__transport_init(&a, &fx.loop), 0);
    CHECK_EQ(st__transport_init(&b, &fx.loop), 0);
    CHECK_EQ(a.outer.init(&a.outer, 1, addr), 0);
    CHECK_EQ(b.outer.init(&b.outer, 2, "127.0.0.1:1"), 0);
    CHECK_EQ(a.outer.listen(&a.outer, tp_on_accept), 0);
    struct raft_uv_connect req = {0};
    CHECK_EQ(b.outer.connect(&b.outer, &req, 1, addr, tp_on_connect), 0);
    for (int i = 0; i < 1000 && (!tp.accepted || !tp.connected); i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK_EQ(tp.accepted, 1);
    CHECK_EQ(tp.connected, 1);
    CHECK_EQ(nodelay_of(tp.in), 1);
    CHECK_EQ(nodelay_of(tp.out), 1);
    uv_close((uv_handle_t *)tp.in, tp_free_stream);
    uv_close((uv_handle_t *)tp.out, tp_free_stream);
    a.outer.close(&a.outer, tp_on_closed);
    b.outer.close(&b.outer, tp_on_closed);
    uv_run(&fx.loop, UV_RUN_DEFAULT);
    CHECK_EQ(tp_closed, 2);
    st__transport_free(&a);
    st__transport_free(&b);
    fx_end(&fx);
}

/* ---- a one-member group: Raft on the test's loop ---- */

static int lead_calls;
static void on_lead(void *arg)
{
    (void)arg;
    lead_calls++;
}

static int repl_closed;
static void on_repl_closed(void *arg)
{
    (void)arg;
    repl_closed++;
}

TEST(one_member_group_elects_itself_serves_and_reports_status)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = fx_store(&fx, 16 << 20, 0);
    char cluster[64];
    snprintf(cluster, sizeof cluster, "7=127.0.0.1:%d", free_port());
    st_repl_opts_t o = {.cluster = cluster,
                        .self = 7,
                        .advertise = "http://127.0.0.1:1234",
                        .data_dir = fx.dir,
                        .election_timeout = 100};
    st_repl_t *r;
    CHECK_EQ(st_repl_open(&r, &fx.loop, s, &o), ST_OK);
    st_repl_on_lead(r, on_lead, NULL);
    uint64_t wait = 0;
    CHECK_EQ(st_store_put(s, "x", 1, "1", 1, &wait), ST_ENOLEADER);
    for (int i = 0; i < 100000 && !st_repl_serving(r); i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK(st_repl_serving(r));
    CHECK_EQ(lead_calls, 1);
    char url[128];
    CHECK_EQ(st_repl_leader_url(r, url, sizeof url), ST_OK);
    CHECK_STR(url, "http://127.0.0.1:1234");
    CHECK_EQ(st_store_put(s, "x", 1, "1", 1, &wait), ST_OK);
    for (int i = 0; i < 100000 && st_store_durable_id(s) < wait; i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK(st_store_durable_id(s) >= wait);
    st_buf_t j = {0};
    st_repl_status_json(r, &j);
    st_buf_appendc(&j, '\0');
    CHECK(strstr(j.data, "\"self\":7,\"leader\":7,") != NULL);
    CHECK(strstr(j.data, "\"role\":\"leader\"") != NULL);
    CHECK(strstr(j.data, "\"http\":\"http://127.0.0.1:1234\"") != NULL);
    st_buf_free(&j);
    st_repl_close(r, on_repl_closed, NULL);
    for (int i = 0; i < 100000 && !repl_closed; i++)
        uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK_EQ(repl_closed, 1);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

static void on_watchdog(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* Review 26 #2: an applied entry waits on the loop for its hand-over to the apply thread (the
 * store's check handle, once per iteration), the idle handle keeping the loop out of poll until
 * then. A rollback before that check (an own entry failed: a leader deposed) stops the idle
 * handle: the loop then slept in poll with the entry held, until some other event woke it. */
TEST(an_entry_held_for_its_handover_goes_on_when_a_rollback_comes_before_the_check)
{
    fx_t fx, fy;
    fx_begin(&fx);
    fx_begin(&fy);
    fake_group_t f, g;
    watch_t w, wy;
    st_store_t *a = group_store(&fx, &f, &w);
    st_store_t *b = group_store(&fy, &g, &wy);
    uint64_t wait = 0, wait_b = 0;
    st_store_set_standby(a, false);
    st_store_set_standby(b, false);
    CHECK_EQ(st_store_put(a, "mine", 4, "1", 1, &wait), ST_OK);
    seal(&fx); /* proposed, in flight */
    CHECK_EQ(f.n, 1);
    CHECK_EQ(st_store_put(b, "theirs", 6, "2", 1, &wait_b), ST_OK);
    seal(&fy);
    CHECK_EQ(g.n, 1);
    /* another member's entry applies (held for the hand-over), then a's own proposal fails */
    CHECK_EQ(st_store_group_apply(a, 3, g.payloads[0].data, g.payloads[0].len), ST_OK);
    st_store_group_failed(a, f.ids[0], ST_ENOLEADER);
    CHECK_EQ(w.failed_first, f.ids[0]);
    /* one iteration: nothing else would wake the loop (the watchdog only ends a hung run) */
    bool fired = false;
    uv_timer_t dog;
    uv_timer_init(&fx.loop, &dog);
    dog.data = &fired;
    uv_timer_start(&dog, on_watchdog, 10000, 0);
    uv_run(&fx.loop, UV_RUN_ONCE);
    CHECK(!fired); /* the loop did not sleep with the entry held */
    uv_close((uv_handle_t *)&dog, NULL);
    fx_settle(&fx, a);
    CHECK_EQ(st_store_group_queued(a), 3);
    CHECK(get_is(a, "theirs", "2"));
    CHECK(get_is(a, "mine", NULL)); /* failed, rolled back */
    fx_close_store(&fx, a);
    /* b's own entry commits too (else its store waits for it at close) */
    CHECK_EQ(st_store_group_apply(b, 3, g.payloads[0].data, g.payloads[0].len), ST_OK);
    fx_close_store(&fy, b);
    fake_free(&f);
    fake_free(&g);
    fx_end(&fx);
    fx_end(&fy);
}

int main(void)
{
    return st_run_tests("repl");
}
