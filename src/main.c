/* SPDX-License-Identifier: MIT */
/* strata: configuration, start-up, the loop, and a graceful stop on SIGTERM/SIGINT. */
#include "cli/cli.h"
#include "strata/alloc.h"
#include "strata/backup.h"
#include "strata/config.h"
#include "strata/counters.h"
#include "strata/core.h"
#include "strata/http.h"
#include "strata/looplag.h"
#include "strata/metrics.h"
#include "strata/reconcile.h"
#include "strata/repl.h"
#include "strata/chat.h"
#include "strata/outbox.h"
#include "strata/rooms.h"
#include "strata/catalog.h"
#include "strata/cold.h"
#include "strata/coldshare.h"
#include "strata/seats.h"
#include "strata/store.h"
#include "strata/tables.h"
#include "strata/tier.h"
#include "strata/ws.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    uv_loop_t *loop;
    st_server_t *srv;
    uv_timer_t erase; /* erasures' slices (SPEC §2.2) */
    st_app_t *app;
    uv_signal_t sigterm, sigint;
    uv_timer_t deadline;
    st_looplag_t *lag;
    uint64_t erase_slice_ns; /* the dearest erasure slice of the last turn that ran some */
    bool stopping;
    bool erase_bg;     /* told to the store last (st_store_apply_background) */
    bool erase_waited; /* the last tick gave its turn up: this one runs a slice, whatever */
} st_main_t;

static void st__on_stopped(void *arg)
{
    st_main_t *m = arg;
    uv_stop(m->loop);
}

static void st__on_deadline(uv_timer_t *t)
{
    st_main_t *m = t->data;
    st_warn("shutdown: in-flight work did not finish in time; stopping anyway");
    uv_stop(m->loop);
}

static void st__on_signal(uv_signal_t *h, int signum)
{
    st_main_t *m = h->data;
    if (m->stopping) {
        st_warn("second signal: exiting now");
        exit(1);
    }
    m->stopping = true;
    st_info("received %s: finishing in-flight requests", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    /* the drain waits for the store to be idle: LMDB takes what is left at the normal policy */
    if (m->erase_bg) st_store_apply_background(m->app->store, m->erase_bg = false);
    uv_timer_start(&m->deadline, st__on_deadline, 30000, 0);
    st_server_shutdown(m->srv, st__on_stopped, m);
}

/* Pending erasures go on in slices of ST__ERASE_SLICE keys (rows, objects, room messages) each,
 * as many slices a turn as fit in ST__ERASE_BUDGET_US (a slice starts only if the turn's longest
 * slice so far still fits: a slice of room messages, parsed and turned into tombstones, is the
 * dearest, about 1 ms, and one started just before the budget ended made a 7 ms turn), and
 * the next turn ST__ERASE_AGAIN_MS later while slices get work done (every 100 ms otherwise: a
 * slice that staged nothing only waits, for the reaper, a compaction or a cold read), so a
 * user with a million messages is erased in seconds while the loop's longest turn stays a few
 * ms (SPEC §7; bench/loopstall.sh erase). Four slices of 256 a 100 ms tick made 18 ms turns
 * there and took 22 s. Only the member that serves writes stages them. While they do, the apply
 * thread writes them into LMDB at SCHED_IDLE (store/yield.c; Session 20). */
#define ST__ERASE_SLICE     64
#define ST__ERASE_BUDGET_US 1500
#define ST__ERASE_AGAIN_MS  5
/* Author index entries a sweep's slice visits (rooms/sweep.c): deletes of ~30-byte keys, far
 * cheaper than an erasure's room message (bench/RESULTS.md, Session 25). */
#define ST__SWEEP_SLICE 512
static void st__on_erase(uv_timer_t *t)
{
    st_main_t *m = t->data;
    st_app_t *app = m->app;
    bool more = false;
    if ((!app->repl || st_repl_serving(app->repl)) && st_store_writable(app->store) == ST_OK) {
        /* the budget is what the turn has left of its shared one (looplag.h): the store taking
         * applied batches back or a compaction's fold may have spent it already, and their
         * pieces beside a full budget of slices made 3-5.5 ms turns (Session 22); when the turn
         * is well spent and has no room for the last turn's dearest slice, the slices wait a
         * turn (the timer in 1 ms), once: the next tick runs one slice at least, however spent
         * its turn (a timer runs after the turn's I/O, so a busy loop has no fresh turns to
         * wait for, and one dear slice must not put the erasure off for good) */
        uint64_t left = st_looplag_turn_left(0, ST__ERASE_BUDGET_US * 1000ull);
        if (!m->erase_waited && left <= m->erase_slice_ns &&
            st_looplag_turn_ns() > ST__ERASE_BUDGET_US * 1000ull / 3) {
            m->erase_waited = true;
            uv_timer_start(t, st__on_erase, 1, 100);
            return;
        }
        m->erase_waited = false;
        uint64_t t0 = st_mono_ns(), w, at = t0, longest = 0;
        do {
            w = st_store_writes(app->store);
            /* then the rooms' sweeps of their author index (rooms/sweep.c): a slice each when
             * the erasures have none that stages work */
            bool e = st_chat_erase_step(app->chat, ST__ERASE_SLICE);
            if (!e || st_store_writes(app->store) == w)
                e = st_rooms_sweep_step(app->rooms, ST__SWEEP_SLICE) || e;
            more = e && st_store_writes(app->store) != w;
            uint64_t now = st_mono_ns();
            if (now - at > longest) longest = now - at;
            at = now;
        } while (more && at - t0 + longest < left);
        m->erase_slice_ns = longest;
    }
    /* while slices stage deletes, LMDB takes them at SCHED_IDLE: the loop keeps its core */
    bool bg = more && !m->stopping; /* not while shutting down (st__on_signal) */
    if (bg != m->erase_bg) st_store_apply_background(app->store, m->erase_bg = bg);
    uv_timer_start(t, st__on_erase, more ? ST__ERASE_AGAIN_MS : 100, 100);
}

static void st__close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Each connection is a descriptor (a stream briefly two, during its handoff), so the soft
 * limit is raised to fit --max-connections with room for files and the loop. A soft limit far
 * above that is lowered to it (with ST__FD_SPARE more for the cold tier's, the group's and
 * the backup's files and sockets): libwebsockets sizes its descriptor table by the limit and
 * walks the whole table for a descriptor it no longer knows, which it does while a mass
 * disconnect closes its streams. At a soft limit of 20,000 the iteration that closed 10,000
 * streams used 47–343 ms of CPU, at 11,256 38–41 ms (bench/RESULTS.md, session 7); Docker's
 * default of 1,048,576 would make each walk 8 MB. */
#define ST__FD_SPARE 1024
static void st__fit_fd_limit(const st_config_t *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t want = (rlim_t)cfg->max_connections + 256, most = want + ST__FD_SPARE;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > most) {
        rl.rlim_cur = most;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) st_warn("could not lower the open files limit");
        return;
    }
    if (rl.rlim_cur >= want) return;
    rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
        st_warn("open files limit is %llu, below --max-connections + 256: raise ulimit -n",
                (unsigned long long)rl.rlim_cur);
}

/* A group's members must share one cold store (SPEC §8): flushed rows leave the hot store, and
 * the next leader reads them back from there. A file:// store inside this member's own data dir
 * (the embedded default) can only be this member's: refuse it before anything starts. A shared
 * directory or an s3:// store is checked at run time (coldshare.h). */
static int st__cluster_cold_check(const st_config_t *cfg)
{
    char url[ST_CLI_COLD_URL_MAX], dir[PATH_MAX], cold[PATH_MAX];
    st_cli_cold_url(cfg, url, sizeof url);
    /* both exist by now: the store and the cold tier have been opened */
    if (strncmp(url, "file://", 7) != 0 || !realpath(cfg->data_dir, dir) ||
        !realpath(url + 7, cold))
        return ST_OK;
    size_t dl = strlen(dir);
    if (strncmp(cold, dir, dl) != 0 || (cold[dl] != '/' && cold[dl] != '\0')) return ST_OK;
    st_error(
        "a replicated group needs one cold store that every member reads, and %s is inside "
        "this member's data dir (%s): after a failover no other member could read what "
        "this one flushed. Set the same --cold-url (STRATA_COLD_URL) on every member: "
        "s3://bucket/prefix (with --s3-endpoint etc.) or file:///a/directory/all/members/share",
        url, cfg->data_dir);
    return ST_EINVAL;
}

static bool st__expect_nonce(void *arg, uint64_t id, char nonce[33])
{
    return st_repl_member_nonce(arg, id, nonce);
}

/* Starts checking that the group's members share the cold store (coldshare.h). */
static int st__coldshare_open(st_main_t *m, st_app_t *app, st_objstore_t *cold,
                              st_coldshare_t **out)
{
    uint64_t ids[ST_REPL_MAX_MEMBERS];
    size_t n = st_repl_member_ids(app->repl, ids, ST_REPL_MAX_MEMBERS);
    int rc = st_coldshare_open(out, m->loop, cold, app->cfg->cluster_self, ids, n, st__expect_nonce,
                               app->repl);
    if (rc == ST_OK) st_repl_set_cold_nonce(app->repl, st_coldshare_nonce(*out));
    return rc;
}

static int st__cold_open(const st_config_t *cfg, st_objstore_t **out)
{
    char url[ST_CLI_COLD_URL_MAX];
    st_cli_cold_url(cfg, url, sizeof url);
    st_objstore_opts_t o = st_cli_obj_opts(cfg, url);
    int rc = st_objstore_open(out, &o);
    if (rc == ST_OK) st_info("cold tier: %s", st_objstore_describe(*out));
    return rc;
}

/* The Iceberg tables' metadata store (SPEC v5 §5.1): the cold tier's _tables folder, or
 * --tables-url with the cold tier's endpoint and credentials. */
static int st__tables_open(const st_config_t *cfg, st_objstore_t **out)
{
    char url[ST_CLI_COLD_URL_MAX + 16];
    st_cli_tables_url(cfg, url, sizeof url);
    st_objstore_opts_t o = st_cli_obj_opts(cfg, url);
    int rc = st_objstore_open(out, &o);
    if (rc == ST_OK) st_info("tables: %s", st_objstore_describe(*out));
    return rc;
}

/* The tables committed here: the catalog serves it at once (st_catalog_nudge). */
static void st__catalog_nudge(void *arg)
{
    st_catalog_nudge(arg);
}

/* This member leads now: in-memory state the store's listeners do not rebuild follows the store
 * (seat maps and hold timers are rebuilt by the store's resync). */
static void st__on_lead(void *arg)
{
    st_app_t *app = arg;
    st_chat_resync(app->chat);
    /* The keys the last leader marked for recounting died with it: recount everything, in the
     * background and in slices (SPEC §6 holds across a failover). */
    if (app->reconcile) st_reconcile_all(app->reconcile);
    st_backup_lead(app->backup, true); /* only the leader ships: a new timeline from here */
}

static bool st__streams_open(void *arg)
{
    st_app_t *app = arg;
    return app->ws && st_ws_subscriptions(app->ws) > 0;
}

static void st__on_follow(void *arg)
{
    st_app_t *app = arg;
    st_backup_lead(app->backup, false);
}

/* Joins the replicated group named by --cluster (SPEC §8) once the HTTP port is known: the
 * advertised URL defaults to http:// + the address actually listened on. */
static int st__repl_open(const st_config_t *cfg, st_main_t *m, st_app_t *app)
{
    char adv[sizeof cfg->advertise + 32];
    if (*cfg->advertise) {
        snprintf(adv, sizeof adv, "%s", cfg->advertise);
        size_t n = strlen(adv);
        if (n && adv[n - 1] == '/') adv[n - 1] = '\0';
    } else {
        const char *c = strrchr(cfg->listen, ':');
        int hl = c ? (int)(c - cfg->listen) : (int)strlen(cfg->listen);
        snprintf(adv, sizeof adv, "http://%.*s:%d", hl, cfg->listen, st_server_port(m->srv));
    }
    char host[256];
    const char *colon = strrchr(cfg->listen, ':');
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - cfg->listen) : 0, cfg->listen);
    if (host[0] == '[') { /* [v6]: without the brackets */
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    st_repl_opts_t ro = {.cluster = cfg->cluster,
                         .self = cfg->cluster_self,
                         .advertise = adv,
                         .listen_host = host,
                         .data_dir = cfg->data_dir,
                         .election_timeout = (unsigned)cfg->election_timeout,
                         .snapshot_threshold = (unsigned)cfg->raft_snapshot_entries,
                         .cluster_secret = cfg->cluster_secret};
    int rc = st_repl_open(&app->repl, m->loop, app->store, &ro);
    if (rc == ST_OK) {
        st_repl_on_lead(app->repl, st__on_lead, app);
        st_repl_on_follow(app->repl, st__on_follow, app);
        st_repl_on_streams(app->repl, st__streams_open, app);
    }
    return rc;
}

/* The tier's hold on replaced objects (SPEC v5 §5.1, §9): while the oldest snapshot the tables
 * keep (or --table-keep) or the oldest backup point may still name them. */
static int64_t st__hold_cutoff(void *arg)
{
    const st_app_t *app = arg;
    st_tier_hold_t h = {.now_us = st_now_us(),
                        .keep_us = (int64_t)app->cfg->table_keep * 1000000,
                        .tables_oldest_us = st_tables_oldest_us(app->iceberg),
                        .backup = app->backup != NULL,
                        .backup_oldest_us = st_backup_oldest_us(app->backup)};
    return st_tier_hold_cutoff(&h);
}

int main(int argc, char **argv)
{
    st_config_t cfg;
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) == (ssize_t)sizeof seed) st_hash_seed(seed);
    bool rebuild = argc > 1 && strcmp(argv[1], "rebuild-meta") == 0;
    bool restore = argc > 1 && strcmp(argv[1], "restore") == 0;
    if (rebuild || restore) {
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    int rc = st_config_load(&cfg, argc, argv);
    if (rc == 1) return 0;
    if (rc != ST_OK) return 2;
    const char *cmd = rebuild ? "rebuild-meta" : restore ? "restore" : "strata";
    if (*cfg.backup_url && !st_cli_backup_url_ok(cmd, cfg.backup_url)) return 2;
    if (strcmp(cfg.log_level, "debug") == 0)
        st_log_set_level(ST_LOG_DEBUG);
    else if (strcmp(cfg.log_level, "warn") == 0)
        st_log_set_level(ST_LOG_WARN);
    else if (strcmp(cfg.log_level, "error") == 0)
        st_log_set_level(ST_LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    if (rebuild) return st_cli_rebuild_meta(&cfg);
    if (restore) return st_cli_restore(&cfg);
    if (st_config_check(&cfg) != ST_OK) return 2;
    char marker[sizeof cfg.data_dir + sizeof ST_RESTORE_MARKER + 2];
    snprintf(marker, sizeof marker, "%s/%s", cfg.data_dir, ST_RESTORE_MARKER);
    if (access(marker, F_OK) == 0) { /* a restore that failed or was killed (backup.h) */
        st_error("%s holds a restore that never finished (%s): restore again into an empty "
                 "directory",
                 cfg.data_dir, marker);
        return 2;
    }
    /* Cold reads wait for object storage on the worker pool (never on the loop): size it before
     * its first use. An explicit UV_THREADPOOL_SIZE wins. */
    char workers[24];
    snprintf(workers, sizeof workers, "%llu", (unsigned long long)cfg.cold_workers);
    setenv("UV_THREADPOOL_SIZE", workers, 0);
    st__fit_fd_limit(&cfg);

    if (*cfg.cluster && cfg.node_id == 0) cfg.node_id = cfg.cluster_self; /* SPEC §8 */
    st_main_t m = {0};
    m.loop = uv_default_loop();
    st_store_t *store;
    char cold_dir[ST_CLI_COLD_URL_MAX];
    st_store_opts_t so = st_cli_store_opts(&cfg, cold_dir, sizeof cold_dir);
    if (st_store_open(&store, m.loop, &so) != ST_OK) return 1;
    if (st_counters_open(store) != ST_OK) goto fail_seats;
    st_seats_t *seats;
    st_seats_opts_t seo = {cfg.max_seats, cfg.node_id, cfg.max_total_seats,
                           (int64_t)cfg.max_hold_seconds};
    if (st_seats_open(&seats, m.loop, store, &seo) != ST_OK) goto fail_seats;
    st_chat_t *chat;
    if (st_chat_open(&chat, store, cfg.node_id) != ST_OK) goto fail_chat;
    st_objstore_t *cold = NULL;
    if (st__cold_open(&cfg, &cold) != ST_OK) goto fail_cold;
    st_objstore_t *tables = NULL;
    if (st__tables_open(&cfg, &tables) != ST_OK) {
        st_objstore_close(cold);
        goto fail_cold;
    }
    if (*cfg.cluster && st__cluster_cold_check(&cfg) != ST_OK) {
        st_objstore_close(tables);
        st_objstore_close(cold);
        goto fail_cold;
    }
    /* the cold tier, and its data kinds: one line each */
    st_tier_opts_t to = {.obj = cold,
                         .flush_interval_s = cfg.flush_interval,
                         .flush_rows = cfg.flush_rows,
                         .cache_bytes = cfg.cold_cache,
                         .retention_s = cfg.retention_seconds,
                         .compact_objects = cfg.compact_objects,
                         .compact_max_bytes = cfg.compact_max_mb << 20};
    st_tier_t *tier;
    if (st_tier_open(&tier, m.loop, store, &to) != ST_OK) {
        st_objstore_close(tables);
        st_objstore_close(cold);
        goto fail_cold;
    }
    st_chat_set_erase_within(chat, cfg.erase_within);
    st_kind_env_t kinds = {.cfg = &cfg, .store = store, .tier = tier, .chat = chat, .seats = seats};
    st_tier_member_t *members[ST_CLI_MEMBERS_MAX];
    for (size_t i = 0, n = st_cli_members(&kinds, members); i < n; i++)
        st_tier_join(tier, members[i]); /* the kinds, with their options: kinds.h's list */
    st_app_t app = {
        .cfg = &cfg, .store = store, .seats = seats, .chat = chat, .tier = tier, .tables = tables};
    /* the read-only Iceberg REST catalog's view of the tables (SPEC v5 §5.1) */
    st_catalog_open(&app.catalog, m.loop, tables, 0);
    /* an erasure's other parts (SPEC §2.2): its rooms, then its Idempotency-Key answers (last:
     * the rooms' work may record answers about the user until it is done) */
    st_outbox_t *outbox = NULL;
    if (st_rooms_open(&app.rooms, store, chat, cfg.max_room_members) != ST_OK) goto fail_backup;
    st_chat_on_erase(chat, st_http_idem_erase, store);
    /* many groups behind a proxy (SPEC §10): rooms tell their members' groups */
    st_outbox_opts_t oo = {.route_url = cfg.route_url, .secret = cfg.cluster_secret};
    if (st_outbox_open(&outbox, m.loop, store, &oo) != ST_OK) goto fail_backup;
    st_rooms_set_outbox(app.rooms, outbox);
    app.outbox = outbox;
    if (*cfg.backup_url) {
        st_backup_opts_t bo = {.obj = st_cli_backup_obj(&cfg),
                               .data_dir = cfg.data_dir,
                               .interval_ms = cfg.backup_interval,
                               .snapshot_s = cfg.snapshot_interval,
                               .keep = cfg.backup_keep,
                               .max_backlog = cfg.backup_backlog_mb << 20,
                               .barrier_ms = cfg.backup_barrier_timeout,
                               .part_size = cfg.backup_part_mb << 20,
                               .standby = *cfg.cluster != '\0'}; /* a group: the leader ships */
        if (st_backup_open(&app.backup, m.loop, store, &bo) != ST_OK) goto fail_backup;
    }
    st_reconcile_open(&app.reconcile, m.loop, store, chat, tier, cfg.reconcile_interval,
                      cfg.reconcile_queue);
    if (st_tables_open(&app.iceberg, m.loop, store, cold, tables, &cfg) != ST_OK) goto fail_ws;
    st_tables_on_commit(app.iceberg, st__catalog_nudge, app.catalog);
    st_tier_set_hold(tier, st__hold_cutoff, &app);
    if (app.iceberg) st_tier_on_rows_changed(tier, st_tables_rows_changed, app.iceberg);
    if (app.iceberg) st_tier_on_erased(tier, st_tables_erased, app.iceberg);
    if (app.iceberg) st_tier_on_file(st_tables_file_changed); /* the store's: until it closes */
    if (st_ws_open(&app.ws, m.loop, &app) != ST_OK) goto fail_ws;
    if (!st_config_auth_on(&cfg))
        st_warn("auth is OFF: no --jwt-secret, --jwt-jwks-file or --jwt-jwks-url set, every route "
                "is open");
    if (st_auth_open(&app.auth, m.loop, &cfg) != ST_OK) goto fail_auth;
    /* before the server says it listens: a SIGTERM sent as soon as it does is a graceful stop
     * (it runs once the loop does), never the default kill */
    uv_signal_init(m.loop, &m.sigterm);
    uv_signal_init(m.loop, &m.sigint);
    m.sigterm.data = m.sigint.data = &m;
    uv_signal_start(&m.sigterm, st__on_signal, SIGTERM);
    uv_signal_start(&m.sigint, st__on_signal, SIGINT);
    if (st_server_start(&m.srv, m.loop, &app) != ST_OK) goto fail_server;
    st_coldshare_t *share = NULL;
    if (*cfg.cluster && st__repl_open(&cfg, &m, &app) != ST_OK) goto fail_repl;
    if (app.repl && st__coldshare_open(&m, &app, cold, &share) != ST_OK) goto fail_share;
    /* every module is open: from now on a debug build refuses a write no module claimed */
    st_store_claims_seal(store);
    st_info("strata ready: data in %s, node id %llu", cfg.data_dir,
            (unsigned long long)cfg.node_id);
    uv_timer_init(m.loop, &m.deadline);
    m.deadline.data = &m;
    st_looplag_open(&m.lag, m.loop);
    st_alloc_metrics_open();
    m.app = &app;
    uv_timer_init(m.loop, &m.erase);
    m.erase.data = &m;
    uv_timer_start(&m.erase, st__on_erase, 100, 100);

    uv_run(m.loop, UV_RUN_DEFAULT);

    /* Tear down in dependency order. Our own handles go first, so that the loop then runs only
     * while libwebsockets is closing its handles: its close callbacks free its context. */
    uv_close((uv_handle_t *)&m.sigterm, NULL);
    uv_close((uv_handle_t *)&m.sigint, NULL);
    uv_close((uv_handle_t *)&m.deadline, NULL);
    uv_close((uv_handle_t *)&m.erase, NULL);
    st_looplag_close(m.lag);
    st_coldshare_close(share);
    if (app.repl) st_repl_close(app.repl, NULL, NULL); /* pending proposals fail: 503 */
    st_server_close(m.srv);
    st_auth_close(app.auth);       /* freed during the run below, once a key fetch is back */
    st_catalog_close(app.catalog); /* likewise, once a refresh is back (before tables closes) */
    st_ws_close(app.ws);           /* stops observing chat, seats and counters */
    st_reconcile_close(app.reconcile);
    st_tier_on_rows_changed(tier, NULL, NULL); /* the tables go first */
    st_tier_on_erased(tier, NULL, NULL);
    st_tables_close(app.iceberg); /* a commit in flight comes back during the run below */
    st_outbox_close(outbox);      /* a POST in flight comes back during the run below */
    st_seats_close(seats);
    st_tier_close(tier); /* flushes in flight come back during the run below */
    uv_run(m.loop, UV_RUN_DEFAULT);
    st_tier_free(tier);
    st_ws_free(app.ws);
    st_backup_close(app.backup); /* ships what is left (one try) before the store goes */
    st_objstore_close(tables);
    st_objstore_close(cold);
    st_rooms_close(app.rooms);
    st_chat_close(chat);
    st_tier_on_file(NULL);
    st_store_close(store);
    uv_walk(m.loop, st__close_walk, NULL);
    uv_run(m.loop, UV_RUN_DEFAULT);
    st_server_free(m.srv);
    st_metrics_shutdown();
    int lc = uv_loop_close(m.loop);
    st_info("stopped%s", lc ? " (some handles were still open)" : " cleanly");
    return 0;

    /* start-up failed: undo what was opened, in reverse */
fail_share:
    st_repl_close(app.repl, NULL, NULL);
fail_repl:
    st_server_close(m.srv); /* freed once the loop has closed its handles, below */
fail_server:
    uv_close((uv_handle_t *)&m.sigterm, NULL);
    uv_close((uv_handle_t *)&m.sigint, NULL);
    st_auth_close(app.auth);
fail_auth:
    st_ws_close(app.ws);
fail_ws:
    st_tier_on_rows_changed(tier, NULL, NULL); /* the tables go first */
    st_tier_on_erased(tier, NULL, NULL);
    st_tables_close(app.iceberg);
    st_reconcile_close(app.reconcile);
    st_backup_close(app.backup);
fail_backup:
    st_outbox_close(outbox);
    st_tier_close(tier);
    st_catalog_close(app.catalog);
    uv_run(m.loop, UV_RUN_DEFAULT); /* lws and the cold tier close their handles */
    st_tier_free(tier);
    if (app.ws) st_ws_free(app.ws);
    if (m.srv) st_server_free(m.srv);
    st_objstore_close(tables);
    st_objstore_close(cold);
    st_rooms_close(app.rooms);
fail_cold:
    st_chat_close(chat);
fail_chat:
    st_seats_close(seats);
fail_seats:
    st_tier_on_file(NULL);
    st_store_close(store);
    uv_run(m.loop, UV_RUN_NOWAIT);
    return 1;
}
