/* SPDX-License-Identifier: MIT */
/* strata: configuration, start-up, the loop, and a graceful stop on SIGTERM/SIGINT. */
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
#include "strata/cold.h"
#include "strata/coldshare.h"
#include "strata/seats.h"
#include "strata/store.h"
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
    uv_signal_t sigterm, sigint;
    uv_timer_t deadline;
    st_looplag_t *lag;
    bool stopping;
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
    uv_timer_start(&m->deadline, st__on_deadline, 30000, 0);
    st_server_shutdown(m->srv, st__on_stopped, m);
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

#define ST__COLD_URL_MAX                                                                           \
    (sizeof((st_config_t *)0)->cold_url + sizeof((st_config_t *)0)->data_dir + 16)

/* The cold tier's URL. The default follows --data-dir, so a server started with another data
 * directory keeps its cold files next to its hot store. */
/* Object-store options for url with the shared S3 flags (url borrowed). */
static st_objstore_opts_t st__obj_opts(const st_config_t *cfg, const char *url)
{
    int path_style = 0;
    st_config_s3_path_style(cfg, &path_style); /* checked when the flags were read */
    return (st_objstore_opts_t){url,
                                cfg->s3_endpoint,
                                cfg->s3_region,
                                cfg->s3_access_key,
                                cfg->s3_secret_key,
                                (unsigned)cfg->cold_timeout_ms,
                                (unsigned)cfg->cold_retries,
                                path_style,
                                cfg->s3_ca_file};
}

static void st__cold_url(const st_config_t *cfg, char *url, size_t n)
{
    if (strcmp(cfg->cold_url, "file://./data/cold") == 0 && strcmp(cfg->data_dir, "./data") != 0)
        snprintf(url, n, "file://%s/cold", cfg->data_dir);
    else
        snprintf(url, n, "%s", cfg->cold_url);
}

/* A group's members must share one cold store (SPEC §8): flushed rows leave the hot store, and
 * the next leader reads them back from there. A file:// store inside this member's own data dir
 * (the embedded default) can only be this member's: refuse it before anything starts. A shared
 * directory or an s3:// store is checked at run time (coldshare.h). */
static int st__cluster_cold_check(const st_config_t *cfg)
{
    char url[ST__COLD_URL_MAX], dir[PATH_MAX], cold[PATH_MAX];
    st__cold_url(cfg, url, sizeof url);
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

/* The store keeps writes out while the disk a local cold tier writes to is full. */
static st_store_opts_t st__store_opts(const st_config_t *cfg, char *cold_dir, size_t n)
{
    st__cold_url(cfg, cold_dir, n);
    bool local = strncmp(cold_dir, "file://", 7) == 0;
    if (local) memmove(cold_dir, cold_dir + 7, strlen(cold_dir + 7) + 1);
    return (st_store_opts_t){.dir = cfg->data_dir,
                             .map_size = cfg->map_size,
                             .max_write = cfg->max_body,
                             .watch_dir = local ? cold_dir : NULL};
}

static int st__cold_open(const st_config_t *cfg, st_objstore_t **out)
{
    char url[ST__COLD_URL_MAX];
    st__cold_url(cfg, url, sizeof url);
    st_objstore_opts_t o = st__obj_opts(cfg, url);
    int rc = st_objstore_open(out, &o);
    if (rc == ST_OK) st_info("cold tier: %s", st_objstore_describe(*out));
    return rc;
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

static st_objstore_opts_t st__backup_obj(const st_config_t *cfg)
{
    return st__obj_opts(cfg, cfg->backup_url);
}

/* After the records are in: every sequence resumes after its reservation, and the cold tier
 * gets a writer incarnation of its own (SPEC §5: the restored node never writes a key of the node
 * it came from, nor deletes that node's objects), through the store (so the change is logged
 * like any write). */
static int st__restore_resume(const st_config_t *cfg, size_t *moved)
{
    uv_loop_t *loop = uv_default_loop();
    st_store_t *store;
    char cold_dir[ST__COLD_URL_MAX];
    st_store_opts_t so = st__store_opts(cfg, cold_dir, sizeof cold_dir);
    so.watch_dir = NULL;
    if (st_store_open(&store, loop, &so) != ST_OK) return ST_EIO;
    uint64_t wait = 0;
    size_t resv = 0;
    int rc = st_sequences_resume(store, moved, &wait);
    if (rc == ST_OK) rc = st_store_resv_resume(store, &resv, &wait); /* conversation seqs */
    uint64_t inc = 0;
    if (rc == ST_OK) rc = st_tier_writer_renew(store, &inc, &wait);
    if (rc == ST_OK)
        st_info("restore: cold objects from here on are named w%016llx", (unsigned long long)inc);
    while (!st_store_idle(store))
        uv_run(loop, UV_RUN_ONCE);
    if (rc == ST_OK && st_store_durable_id(store) < wait) rc = ST_EIO;
    st_store_close(store);
    uv_run(loop, UV_RUN_NOWAIT);
    return rc;
}

/* --backup-url names a store (checked before anything opens it: the object store's own
 * message would speak of --cold-url). */
static bool st__backup_url_ok(const char *cmd, const char *url)
{
    if ((strncmp(url, "file://", 7) == 0 && url[7]) ||
        (strncmp(url, "s3://", 5) == 0 && url[5] && url[5] != '/'))
        return true;
    st_error("%s: --backup-url must be file://DIR or s3://BUCKET[/PREFIX], not '%s'", cmd, url);
    return false;
}

/* `strata restore --backup-url URL --data-dir DIR [--to-time TIME]`: builds DIR from the
 * backup (SPEC §9), prints what it restored, exits; with --list, prints the restore points.
 * Cold objects stay where they are. */
static int st__restore(const st_config_t *cfg)
{
    if (!*cfg->backup_url) {
        st_error("restore: --backup-url (or STRATA_BACKUP_URL) is required");
        return 2;
    }
    if (cfg->restore_list) {
        st_objstore_opts_t lo = st__backup_obj(cfg);
        return st_backup_list_points(&lo, stdout) == ST_OK ? 0 : 1;
    }
    st_restore_opts_t o = {.obj = st__backup_obj(cfg),
                           .data_dir = cfg->data_dir,
                           .to_time = (int64_t)cfg->to_time,
                           .map_size = cfg->map_size + cfg->map_size / 4 + (64ULL << 20)};
    st_restore_result_t r;
    int rc = st_backup_restore(&o, &r);
    size_t moved = 0;
    if (rc == ST_OK) rc = st__restore_resume(cfg, &moved);
    if (rc != ST_OK) {
        st_error("restore failed: %s", st_strerror(rc));
        return 1;
    }
    char t[40];
    st_format_time_us(r.last_time, t, sizeof t);
    printf("restored %s from snapshot %s (seq %llu) + %llu record(s): up to seq %llu, "
           "committed at %s (%lld us); %zu sequence(s) resume after their reservation\n",
           cfg->data_dir, r.snapshot, (unsigned long long)r.snapshot_seq,
           (unsigned long long)r.records, (unsigned long long)r.last_seq, t, (long long)r.last_time,
           moved);
    return 0;
}

/* What the cold tier cannot give back (SPEC §9): a store rebuilt from it alone lacks these. */
static const char st__cold_lacks[] =
    "sequences (numbers already issued would be issued again), counters and distinct members, "
    "events and their bookings still hot, idempotency answers and messages not yet flushed";

/* Re-seeds the chat metadata of the store in cfg->data_dir from the cold tier at url, merged
 * with what that store holds, and waits until it is durable. */
static int st__rebuild_into(const st_config_t *cfg, const char *url)
{
    uv_loop_t *loop = uv_default_loop();
    st_store_t *store;
    st_chat_t *chat;
    st_objstore_t *obj;
    char cold_dir[ST__COLD_URL_MAX];
    st_store_opts_t so = st__store_opts(cfg, cold_dir, sizeof cold_dir);
    so.watch_dir = NULL;
    st_objstore_opts_t oo = st__obj_opts(cfg, url);
    if (st_store_open(&store, loop, &so) != ST_OK) return ST_EIO;
    if (st_chat_open(&chat, store, cfg->node_id) != ST_OK) {
        st_store_close(store);
        return ST_EIO;
    }
    int rc = st_objstore_open(&obj, &oo);
    size_t users = 0, convs = 0;
    int64_t rows = 0;
    uint64_t wait = 0;
    if (rc == ST_OK) {
        rc = st_chat_rebuild(chat, obj, &users, &convs, &rows, &wait);
        st_objstore_close(obj);
    }
    while (!st_store_idle(store)) /* commit and wait until it is durable */
        uv_run(loop, UV_RUN_ONCE);
    if (rc == ST_OK && st_store_durable_id(store) < wait) rc = ST_EIO;
    st_chat_close(chat);
    st_store_close(store);
    uv_run(loop, UV_RUN_NOWAIT);
    if (rc == ST_OK)
        st_info("rebuild-meta: %zu users, %zu conversations, %lld cold messages", users, convs,
                (long long)rows);
    return rc;
}

/* Whether dir/name exists. */
static bool st__has(const char *dir, const char *name)
{
    char p[ST__COLD_URL_MAX + 32];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* Removes the files of a scratch dir this command made, then the dir. */
static void st__scratch_remove(const char *dir)
{
    static const char *const files[] = {"data.mdb", "lock.mdb", "strata.wal"};
    char p[ST__COLD_URL_MAX + 32];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* The new store becomes the data dir's in one rename: its LMDB file, whole and synced (a clean
 * close checkpoints the redo log into it, as a restore's is). Until then a start would find
 * no store, never half of one. */
static int st__rebuild_commit(const char *tmp, const char *dir)
{
    char from[ST__COLD_URL_MAX + 16], to[ST__COLD_URL_MAX + 16];
    snprintf(from, sizeof from, "%s/data.mdb", tmp);
    snprintf(to, sizeof to, "%s/data.mdb", dir);
    int fd = open(from, O_RDONLY | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0 ? ST_OK : ST_EIO;
    if (fd >= 0) close(fd);
    if (rc == ST_OK && rename(from, to) != 0) rc = ST_EIO;
    if (rc != ST_OK) {
        st_error("rebuild-meta: moving %s to %s failed: %s", from, to, strerror(errno));
        return rc;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    st__scratch_remove(tmp);
    return ST_OK;
}

/* Counts what the cold tier holds without creating anything (a file:// dir that is missing
 * holds nothing). */
static int st__cold_census(const st_config_t *cfg, const char *url, size_t *users, size_t *objects)
{
    *users = *objects = 0;
    if (strncmp(url, "file://", 7) == 0 && access(url + 7, F_OK) != 0) return ST_OK;
    st_objstore_opts_t oo = st__obj_opts(cfg, url);
    st_objstore_t *obj;
    int rc = st_objstore_open(&obj, &oo);
    if (rc != ST_OK) return rc;
    rc = st_chat_cold_census(obj, users, objects);
    if (rc != ST_OK)
        st_error("rebuild-meta: listing %s failed: %s", st_objstore_describe(obj), st_strerror(rc));
    st_objstore_close(obj);
    return rc;
}

/* A new store in a scratch dir: the backup's state (when given), the cold tier's on top, then
 * one rename makes it the data dir's. */
static int st__rebuild_build(const st_config_t *cfg, const char *url, const char *tmp)
{
    st_config_t sc = *cfg; /* the same server, building in tmp, its cold tier where it was */
    size_t tl = strlen(tmp), ul = strlen(url);
    if (tl >= sizeof sc.data_dir || ul >= sizeof sc.cold_url) return ST_EINVAL;
    memcpy(sc.data_dir, tmp, tl + 1);
    memcpy(sc.cold_url, url, ul + 1);
    int rc = ST_OK;
    if (*cfg->backup_url) {
        st_restore_opts_t o = {.obj = st__backup_obj(cfg),
                               .data_dir = tmp,
                               .to_time = 0,
                               .map_size = cfg->map_size + cfg->map_size / 4 + (64ULL << 20)};
        st_restore_result_t r;
        size_t moved = 0;
        rc = st_backup_restore(&o, &r);
        if (rc == ST_OK) rc = st__restore_resume(&sc, &moved);
        if (rc == ST_OK) {
            char t[40];
            st_format_time_us(r.last_time, t, sizeof t);
            st_info("rebuild-meta: from the backup: snapshot %s + %llu record(s), up to %s; %zu "
                    "sequence(s) resume after their reservation",
                    r.snapshot, (unsigned long long)r.records, t, moved);
        }
    } else {
        st_warn("rebuild-meta: --accept-loss: not rebuilt, lost: %s", st__cold_lacks);
        rc = st_mkdirs(tmp);
    }
    if (rc == ST_OK) rc = st__rebuild_into(&sc, url);
    if (rc == ST_OK) rc = st__rebuild_commit(tmp, cfg->data_dir);
    return rc;
}

/* `strata rebuild-meta [--backup-url URL | --accept-loss]`: a data dir that lost its store gets
 * one from the cold tier (and the backup); a data dir that has one has its cold metadata
 * re-seeded in place (SPEC §9). It never leaves a store that could reissue a number. */
static int st__rebuild_meta(const st_config_t *cfg)
{
    char url[ST__COLD_URL_MAX];
    st__cold_url(cfg, url, sizeof url);
    if (st__has(cfg->data_dir, "data.mdb")) { /* its sequences and the rest are still there */
        if (*cfg->backup_url) {
            st_error("rebuild-meta: --backup-url builds a new store, but %s holds one "
                     "(data.mdb): give a new --data-dir (and --cold-url)",
                     cfg->data_dir);
            return 2;
        }
        int rc = st__rebuild_into(cfg, url);
        if (rc != ST_OK) st_error("rebuild-meta failed: %s", st_strerror(rc));
        return rc == ST_OK ? 0 : 1;
    }
    if (st__has(cfg->data_dir, "strata.wal")) {
        st_error("rebuild-meta: %s holds strata.wal but no data.mdb (what is left of a lost "
                 "store): move it away first",
                 cfg->data_dir);
        return 1;
    }
    size_t users, objects;
    if (st__cold_census(cfg, url, &users, &objects) != ST_OK) return 1;
    if (objects == 0) {
        st_error("rebuild-meta: no cold objects found at %s: nothing to rebuild from (is "
                 "--cold-url right?)%s",
                 url, cfg->accept_loss ? "" : "; nothing was written");
        if (!cfg->accept_loss) return 1;
    } else {
        st_info("rebuild-meta: %s holds %zu object(s) of %zu user(s)", url, objects, users);
    }
    if (!*cfg->backup_url && !cfg->accept_loss) {
        st_error("rebuild-meta: %s holds no store, and the cold tier does not hold: %s",
                 cfg->data_dir, st__cold_lacks);
        st_error("rebuild-meta: nothing was written; give --backup-url URL to take them from "
                 "the newest backup point, or --accept-loss to rebuild without them");
        return 1;
    }
    char tmp[sizeof cfg->data_dir + 32];
    snprintf(tmp, sizeof tmp, "%s/rebuild-meta.tmp", cfg->data_dir);
    st__scratch_remove(tmp); /* what a killed run left */
    int rc = st__rebuild_build(cfg, url, tmp);
    if (rc != ST_OK) {
        st__scratch_remove(tmp);
        st_error("rebuild-meta failed (%s): %s holds no store", st_strerror(rc), cfg->data_dir);
        return 1;
    }
    return 0;
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
    if (*cfg.backup_url && !st__backup_url_ok(cmd, cfg.backup_url)) return 2;
    if (strcmp(cfg.log_level, "debug") == 0)
        st_log_set_level(ST_LOG_DEBUG);
    else if (strcmp(cfg.log_level, "warn") == 0)
        st_log_set_level(ST_LOG_WARN);
    else if (strcmp(cfg.log_level, "error") == 0)
        st_log_set_level(ST_LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    if (rebuild) return st__rebuild_meta(&cfg);
    if (restore) return st__restore(&cfg);
    if (st_config_check(&cfg) != ST_OK) return 2;
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
    char cold_dir[ST__COLD_URL_MAX];
    st_store_opts_t so = st__store_opts(&cfg, cold_dir, sizeof cold_dir);
    if (st_store_open(&store, m.loop, &so) != ST_OK) return 1;
    st_seats_t *seats;
    st_seats_opts_t seo = {cfg.max_seats, cfg.node_id, cfg.max_total_seats,
                           (int64_t)cfg.max_hold_seconds};
    if (st_seats_open(&seats, m.loop, store, &seo) != ST_OK) goto fail_seats;
    st_chat_t *chat;
    if (st_chat_open(&chat, store, cfg.node_id) != ST_OK) goto fail_chat;
    st_objstore_t *cold = NULL;
    if (st__cold_open(&cfg, &cold) != ST_OK) goto fail_cold;
    if (*cfg.cluster && st__cluster_cold_check(&cfg) != ST_OK) {
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
    st_tier_open(&tier, m.loop, store, &to);
    st_chat_cold_opts_t co = {.zstd_level = 3,
                              .hot_ttl_s = cfg.hot_ttl,
                              .flush_min_rows = cfg.flush_min_rows,
                              .flush_max_age_s = cfg.flush_max_age};
    st_tier_join(tier, st_chat_tier_member(chat, tier, &co));
    st_tier_join(tier, st_counters_tier_member(store));
    st_app_t app = {.cfg = &cfg, .store = store, .seats = seats, .chat = chat, .tier = tier};
    if (*cfg.backup_url) {
        st_backup_opts_t bo = {.obj = st__backup_obj(&cfg),
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
    st_reconcile_open(&app.reconcile, m.loop, store, chat, tier, cfg.reconcile_interval);
    if (st_ws_open(&app.ws, m.loop, &app) != ST_OK) goto fail_ws;
    if (!st_config_auth_on(&cfg))
        st_warn("auth is OFF: no --jwt-secret, --jwt-jwks-file or --jwt-jwks-url set, every route "
                "is open");
    if (st_auth_open(&app.auth, m.loop, &cfg) != ST_OK) goto fail_auth;
    if (st_server_start(&m.srv, m.loop, &app) != ST_OK) goto fail_server;
    st_coldshare_t *share = NULL;
    if (*cfg.cluster && st__repl_open(&cfg, &m, &app) != ST_OK) goto fail_repl;
    if (app.repl && st__coldshare_open(&m, &app, cold, &share) != ST_OK) goto fail_share;
    st_info("strata ready: data in %s, node id %llu", cfg.data_dir,
            (unsigned long long)cfg.node_id);
    uv_signal_init(m.loop, &m.sigterm);
    uv_signal_init(m.loop, &m.sigint);
    m.sigterm.data = m.sigint.data = &m;
    uv_signal_start(&m.sigterm, st__on_signal, SIGTERM);
    uv_signal_start(&m.sigint, st__on_signal, SIGINT);
    uv_timer_init(m.loop, &m.deadline);
    m.deadline.data = &m;
    st_looplag_open(&m.lag, m.loop);

    uv_run(m.loop, UV_RUN_DEFAULT);

    /* Tear down in dependency order. Our own handles go first, so that the loop then runs only
     * while libwebsockets is closing its handles: its close callbacks free its context. */
    uv_close((uv_handle_t *)&m.sigterm, NULL);
    uv_close((uv_handle_t *)&m.sigint, NULL);
    uv_close((uv_handle_t *)&m.deadline, NULL);
    st_looplag_close(m.lag);
    st_coldshare_close(share);
    if (app.repl) st_repl_close(app.repl, NULL, NULL); /* pending proposals fail: 503 */
    st_server_close(m.srv);
    st_auth_close(app.auth); /* freed during the run below, once a key fetch is back */
    st_ws_close(app.ws);     /* stops observing chat, seats and counters */
    st_reconcile_close(app.reconcile);
    st_seats_close(seats);
    st_tier_close(tier); /* flushes in flight come back during the run below */
    uv_run(m.loop, UV_RUN_DEFAULT);
    st_tier_free(tier);
    st_ws_free(app.ws);
    st_backup_close(app.backup); /* ships what is left (one try) before the store goes */
    st_objstore_close(cold);
    st_chat_close(chat);
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
    st_auth_close(app.auth);
fail_auth:
    st_ws_close(app.ws);
fail_ws:
    st_reconcile_close(app.reconcile);
    st_backup_close(app.backup);
fail_backup:
    st_tier_close(tier);
    uv_run(m.loop, UV_RUN_DEFAULT); /* lws and the cold tier close their handles */
    st_tier_free(tier);
    if (app.ws) st_ws_free(app.ws);
    if (m.srv) st_server_free(m.srv);
    st_objstore_close(cold);
fail_cold:
    st_chat_close(chat);
fail_chat:
    st_seats_close(seats);
fail_seats:
    st_store_close(store);
    uv_run(m.loop, UV_RUN_NOWAIT);
    return 1;
}
