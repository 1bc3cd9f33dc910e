/* SPDX-License-Identifier: MIT */
/*
 * The offline commands (cli.h): `strata restore` builds a data dir from a backup and
 * `strata rebuild-meta` re-seeds one from the cold tier (SPEC §9); both exit without serving.
 */
#define _GNU_SOURCE /* nftw */
#include "cli.h"
#include "strata/backup.h"
#include "strata/chat.h"
#include "strata/counters.h"
#include "strata/tables.h"
#include "strata/tier.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

st_objstore_opts_t st_cli_backup_obj(const st_config_t *cfg)
{
    return st_cli_obj_opts(cfg, cfg->backup_url);
}

/* After the records are in: every sequence resumes after its reservation, and (renew: a
 * restore, a second node beside the one it came from) the cold tier gets a writer incarnation of
 * its own (SPEC §5: the restored node never writes a key of the node it came from, nor deletes
 * that node's objects), through the store (so the change is logged like any write). rebuild-meta
 * keeps the backup's writer: it is the same node, taking its own objects back. */
/* Opens the store of cfg's data dir, runs fn on a chat over it, waits until what fn staged is
 * durable and closes it. */
static int st__with_chat(const st_config_t *cfg, int (*fn)(st_chat_t *c, void *arg, uint64_t *wait),
                         void *arg)
{
    uv_loop_t *loop = uv_default_loop();
    st_store_t *store;
    char cold_dir[ST_CLI_COLD_URL_MAX];
    st_store_opts_t so = st_cli_store_opts(cfg, cold_dir, sizeof cold_dir);
    so.watch_dir = NULL;
    if (st_store_open(&store, loop, &so) != ST_OK) return ST_EIO;
    st_chat_t *chat = NULL;
    uint64_t wait = 0;
    int rc = st_chat_open(&chat, store, 0);
    if (rc == ST_OK) rc = fn(chat, arg, &wait);
    while (!st_store_idle(store))
        uv_run(loop, UV_RUN_ONCE);
    if (rc == ST_OK && st_store_durable_id(store) < wait) rc = ST_EIO;
    if (chat) st_chat_close(chat);
    st_store_close(store);
    uv_run(loop, UV_RUN_NOWAIT);
    return rc;
}

static int st__export(st_chat_t *c, void *arg, uint64_t *wait)
{
    (void)wait;
    return st_chat_erasures_export(c, arg);
}

typedef struct {
    const st_buf_t *in;
    size_t n;
} st__import_t;

static int st__import(st_chat_t *c, void *arg, uint64_t *wait)
{
    st__import_t *x = arg;
    return st_chat_erasures_import(c, x->in, &x->n, wait);
}

static int st__rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Removes a scratch tree this command made (missing is fine). */
static int st__tree_remove(const char *dir)
{
    if (access(dir, F_OK) != 0) return ST_OK;
    return nftw(dir, st__rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? ST_OK : ST_EIO;
}

/* Removes the files of a scratch dir this command made, then the dir. */
static void st__scratch_remove(const char *dir)
{
    static const char *const files[] = {"data.mdb", "lock.mdb", "strata.wal", ST_RESTORE_MARKER};
    char p[ST_CLI_COLD_URL_MAX + 32];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* SPEC §9: a restore to any time applies every erasure up to the newest backup point. The
 * newest point is restored beside DIR (DIR.erasures, removed after), its erasure records read,
 * and those DIR lacks added as pending: the server erases those users' restored data again.
 * DIR.erasures must be missing or empty, or hold what a killed run of this left there (a
 * restore's marker and the files it names: st_backup_restore removes them); anything else there
 * is refused, never removed. */
static int st__restore_erasures(const st_config_t *cfg, const st_restore_opts_t *o)
{
    st_config_t tc = *cfg;
    if (snprintf(tc.data_dir, sizeof tc.data_dir, "%s.erasures", cfg->data_dir) >=
        (int)sizeof tc.data_dir)
        return ST_EINVAL;
    st_restore_opts_t newest = *o;
    newest.data_dir = tc.data_dir;
    newest.to_time = 0;
    st_restore_result_t r;
    st_buf_t recs = {0};
    st_info("restore: now the newest point, beside it, for erasures made after --to-time");
    int rc = st_backup_restore(&newest, &r);
    if (rc == ST_EINVAL) {
        st_error("restore: %s is in the way of the erasures pass (it holds what no restore "
                 "wrote): move it away and restore again",
                 tc.data_dir);
        return rc;
    }
    if (rc == ST_OK) rc = st__with_chat(&tc, st__export, &recs);
    /* the dir was empty (or cleared of a killed run's files) when the restore began: all ours;
     * its marker goes last, so a kill meanwhile leaves a dir the next run clears */
    st__scratch_remove(tc.data_dir);
    if (st__tree_remove(tc.data_dir) != ST_OK && rc == ST_OK) rc = ST_EIO;
    st__import_t x = {&recs, 0};
    if (rc == ST_OK && recs.len) rc = st__with_chat(cfg, st__import, &x);
    if (rc == ST_OK && x.n)
        st_info("restore: %zu erasure(s) after the restored point apply again", x.n);
    st_buf_free(&recs);
    return rc;
}

static int st__restore_resume(const st_config_t *cfg, size_t *moved, bool renew)
{
    uv_loop_t *loop = uv_default_loop();
    st_store_t *store;
    char cold_dir[ST_CLI_COLD_URL_MAX];
    st_store_opts_t so = st_cli_store_opts(cfg, cold_dir, sizeof cold_dir);
    so.watch_dir = NULL;
    if (st_store_open(&store, loop, &so) != ST_OK) return ST_EIO;
    uint64_t wait = 0;
    size_t resv = 0;
    int rc = st_sequences_resume(store, moved, &wait);
    if (rc == ST_OK) rc = st_store_resv_resume(store, &resv, &wait); /* conversation seqs */
    uint64_t inc = 0;
    if (rc == ST_OK && renew) rc = st_tier_writer_renew(store, &inc, &wait);
    if (rc == ST_OK && renew)
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
bool st_cli_backup_url_ok(const char *cmd, const char *url)
{
    if ((strncmp(url, "file://", 7) == 0 && url[7]) ||
        (strncmp(url, "s3://", 5) == 0 && url[5] && url[5] != '/'))
        return true;
    st_error("%s: --backup-url must be file://DIR or s3://BUCKET[/PREFIX], not '%s'", cmd, url);
    return false;
}

/* The restore finished: DIR is a store to start on. */
static int st__unmark(const char *dir)
{
    char p[ST_CLI_COLD_URL_MAX + sizeof ST_RESTORE_MARKER + 2];
    snprintf(p, sizeof p, "%s/%s", dir, ST_RESTORE_MARKER);
    return unlink(p) == 0 || errno == ENOENT ? ST_OK : ST_EIO;
}

/* `strata restore --backup-url URL --data-dir DIR [--to-time TIME]`: builds DIR from the
 * backup (SPEC §9), prints what it restored, exits; with --list, prints the restore points.
 * Cold objects stay where they are. */
int st_cli_restore(const st_config_t *cfg)
{
    if (!*cfg->backup_url) {
        st_error("restore: --backup-url (or STRATA_BACKUP_URL) is required");
        return 2;
    }
    if (cfg->restore_list) {
        st_objstore_opts_t lo = st_cli_backup_obj(cfg);
        return st_backup_list_points(&lo, stdout) == ST_OK ? 0 : 1;
    }
    st_restore_opts_t o = {.obj = st_cli_backup_obj(cfg),
                           .data_dir = cfg->data_dir,
                           .to_time = (int64_t)cfg->to_time,
                           .map_size = cfg->map_size + cfg->map_size / 4 + (64ULL << 20)};
    st_restore_result_t r;
    int rc = st_backup_restore(&o, &r);
    size_t moved = 0;
    if (rc == ST_OK) rc = st__restore_resume(cfg, &moved, true);
    if (rc == ST_OK && o.to_time) rc = st__restore_erasures(cfg, &o);
    if (rc == ST_OK) rc = st__unmark(cfg->data_dir);
    if (rc != ST_OK) {
        st_error("restore failed: %s (%s is not a store to start on: run the restore again, "
                 "which removes what this one wrote there, or restore into an empty directory)",
                 st_strerror(rc), cfg->data_dir);
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
    "events and their bookings still hot, rooms and their members, idempotency answers and "
    "messages not yet flushed";

/* The tables' truth for rebuild-meta's members (st_tier_rebuild_t.named): each table's current
 * snapshot, read once, the first time a member asks for its tag. */
typedef struct {
    st_objstore_t *meta, *cold;
    char tags[8];
    st_tier_named_t named[8];
    size_t n;
    int rc; /* the first failure to read a table (the rebuild then fails) */
} st__truth_t;

static const st_tier_named_t *st__truth_named(void *arg, char tag)
{
    st__truth_t *t = arg;
    for (size_t i = 0; i < t->n; i++)
        if (t->tags[i] == tag) return &t->named[i];
    if (t->n == sizeof t->tags) return NULL;
    st_tier_named_t nm;
    int rc = st_tables_named(t->meta, t->cold, tag, &nm);
    if (rc == ST_ENOTFOUND) return NULL; /* no table's tag: its objects are listed */
    if (rc != ST_OK && t->rc == ST_OK) t->rc = rc;
    t->tags[t->n] = tag;
    t->named[t->n] = nm;
    return &t->named[t->n++];
}

/* Runs every kind's rebuild hook (kinds.h's order: no kind is named here) over obj; lines gets
 * their summaries. The tables at --tables-url are the truth: each hook takes the objects the
 * current snapshot of its table names, and those flushed after that snapshot was committed (an
 * owner's number above every named one: written, acknowledged, in no snapshot yet), never one a
 * fold or compaction replaced or a delete took out (src/cold/rebuild.c says why no row is lost
 * or doubled); a table never committed: every listed object, as the log says. */
static int st__rebuild_members(const st_config_t *cfg, st_store_t *store, st_chat_t *chat,
                               st_objstore_t *obj, bool adopt, st_buf_t *lines, uint64_t *wait)
{
    char turl[ST_CLI_COLD_URL_MAX + 16];
    st_cli_tables_url(cfg, turl, sizeof turl);
    st_objstore_opts_t to = st_cli_obj_opts(cfg, turl);
    st__truth_t truth = {.cold = obj};
    int rc = st_objstore_open(&truth.meta, &to);
    st_kind_env_t kinds = {.cfg = cfg, .store = store, .chat = chat};
    st_tier_member_t *m[ST_CLI_MEMBERS_MAX];
    size_t n = st_cli_members(&kinds, m);
    st_tier_rebuild_t rb = {
        .store = store, .obj = obj, .adopt = adopt, .named = st__truth_named, .arg = &truth};
    /* every table first: one that cannot be read fails the rebuild before anything is staged */
    for (size_t i = 0; i < n && rc == ST_OK; i++)
        if (m[i] && m[i]->flush) st__truth_named(&truth, m[i]->tag);
    if (rc == ST_OK) rc = truth.rc;
    for (size_t i = 0; i < n && rc == ST_OK; i++) {
        if (!m[i] || !m[i]->rebuild) continue;
        rb.line[0] = 0;
        rc = m[i]->rebuild(m[i]->arg, &rb, wait);
        if (rc == ST_OK) rc = truth.rc;
        if (rc == ST_OK && rb.line[0]) st_buf_printf(lines, "%s\n", rb.line);
    }
    for (size_t i = 0; i < n; i++) { /* never joined: stopped and closed here */
        if (m[i] && m[i]->stop) m[i]->stop(m[i]->arg);
        if (m[i] && m[i]->closed) m[i]->closed(m[i]->arg);
    }
    for (size_t i = 0; i < truth.n; i++)
        st_tier_named_free(&truth.named[i]);
    st_objstore_close(truth.meta);
    return rc;
}

/* Re-seeds the cold metadata of the store in cfg->data_dir from the cold tier at url (each
 * kind's, through its member's rebuild hook), merged with what that store holds, and waits until
 * it is durable. */
static int st__rebuild_into(const st_config_t *cfg, const char *url, bool moved_after)
{
    uv_loop_t *loop = uv_default_loop();
    st_store_t *store;
    st_chat_t *chat;
    st_objstore_t *obj;
    char cold_dir[ST_CLI_COLD_URL_MAX];
    st_store_opts_t so = st_cli_store_opts(cfg, cold_dir, sizeof cold_dir);
    so.watch_dir = NULL;
    st_objstore_opts_t oo = st_cli_obj_opts(cfg, url);
    if (st_store_open(&store, loop, &so) != ST_OK) return ST_EIO;
    if (st_chat_open(&chat, store, cfg->node_id) != ST_OK) {
        st_store_close(store);
        return ST_EIO;
    }
    int rc = st_objstore_open(&obj, &oo);
    uint64_t wait = 0;
    st_buf_t lines = {0};
    st_tier_writer_t wr;
    bool adopt = st_tier_writer_get(store, &wr, &wait) == ST_ENOTFOUND; /* before chat mints */
    if (rc == ST_OK) {
        rc = st__rebuild_members(cfg, store, chat, obj, adopt, &lines, &wait);
        st_objstore_close(obj);
        /* the file records went in without the tables' observer: their pending counts anew */
        if (rc == ST_OK) rc = st_tables_pending_recount(store, &wait);
    }
    while (!st_store_idle(store)) /* commit and wait until it is durable */
        uv_run(loop, UV_RUN_ONCE);
    if (rc == ST_OK && st_store_durable_id(store) < wait) rc = ST_EIO;
    st_chat_close(chat);
    bool clean = st_store_close_clean(store);
    uv_run(loop, UV_RUN_NOWAIT);
    if (rc == ST_OK && moved_after && !clean) { /* data.mdb alone would lack what the log holds */
        st_error("rebuild-meta: the new store did not close cleanly (its last writes are only in "
                 "its redo log): nothing moved");
        rc = ST_EIO;
    }
    for (char *p = lines.data, *nl; rc == ST_OK && p && p < lines.data + lines.len; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(lines.data + lines.len - p));
        st_info("rebuild-meta: %.*s", (int)(nl - p), p);
    }
    st_buf_free(&lines);
    return rc;
}

/* Whether dir/name exists. */
static bool st__has(const char *dir, const char *name)
{
    char p[ST_CLI_COLD_URL_MAX + 32];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* The new store becomes the data dir's in one rename: its LMDB file, whole and synced (a clean
 * close checkpoints the redo log into it, as a restore's is). Until then a start would find
 * no store, never half of one. */
static int st__rebuild_commit(const char *tmp, const char *dir)
{
    char from[ST_CLI_COLD_URL_MAX + 16], to[ST_CLI_COLD_URL_MAX + 16];
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

static int st__count_booking_object(void *arg, const char *key, uint64_t size)
{
    (void)size;
    size_t kl = strlen(key);
    if (strstr(key, "/bookings-") && kl > 8 && strcmp(key + kl - 8, ".parquet") == 0)
        ++*(size_t *)arg;
    return 0;
}

/* Counts what the cold tier holds without creating anything (a file:// dir that is missing
 * holds nothing). */
static int st__cold_census(const st_config_t *cfg, const char *url, size_t *users, size_t *objects)
{
    *users = *objects = 0;
    if (strncmp(url, "file://", 7) == 0 && access(url + 7, F_OK) != 0) return ST_OK;
    st_objstore_opts_t oo = st_cli_obj_opts(cfg, url);
    st_objstore_t *obj;
    int rc = st_objstore_open(&obj, &oo);
    if (rc != ST_OK) return rc;
    rc = st_chat_cold_census(obj, users, objects);
    if (rc == ST_OK) rc = st_objstore_list(obj, "events/", st__count_booking_object, objects);
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
        st_restore_opts_t o = {.obj = st_cli_backup_obj(cfg),
                               .data_dir = tmp,
                               .to_time = 0,
                               .map_size = cfg->map_size + cfg->map_size / 4 + (64ULL << 20)};
        st_restore_result_t r;
        size_t moved = 0;
        rc = st_backup_restore(&o, &r);
        if (rc == ST_OK) rc = st__restore_resume(&sc, &moved, false);
        if (rc == ST_OK) rc = st__unmark(tmp);
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
    if (rc == ST_OK) rc = st__rebuild_into(&sc, url, true);
    if (rc == ST_OK) rc = st__rebuild_commit(tmp, cfg->data_dir);
    return rc;
}

/* `strata rebuild-meta [--backup-url URL | --accept-loss]`: a data dir that lost its store gets
 * one from the cold tier (and the backup); a data dir that has one has its cold metadata
 * re-seeded in place (SPEC §9). It never leaves a store that could reissue a number. */
int st_cli_rebuild_meta(const st_config_t *cfg)
{
    char url[ST_CLI_COLD_URL_MAX];
    st_cli_cold_url(cfg, url, sizeof url);
    if (st__has(cfg->data_dir, "data.mdb")) { /* its sequences and the rest are still there */
        if (*cfg->backup_url) {
            st_error("rebuild-meta: --backup-url builds a new store, but %s holds one "
                     "(data.mdb): give a new --data-dir (and --cold-url)",
                     cfg->data_dir);
            return 2;
        }
        int rc = st__rebuild_into(cfg, url, false);
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