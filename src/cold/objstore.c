/* SPDX-License-Identifier: MIT */
/*
 * Object storage: a local directory or an S3-compatible service behind put/get/delete. Puts are
 * atomic (a local object appears by link(2) after its bytes are synced, its directory entry then
 * synced; an S3 object exists only once its PUT completed) and create only: a put never replaces
 * an object (SPEC §5), it fails with ST_EEXIST. S3 requests go through s3wire.c (signed by
 * libcurl's SigV4 over URLs in SigV4's canonical form; here query parameters are written in
 * sorted order). Calls block: the cold tier makes them from worker threads only (the cold cache
 * for reads and deletes). Idempotent requests (GET, PUT, DELETE, HEAD, and starting a multipart
 * upload) are retried with backoff and jitter on transport errors and 5xx (503 SlowDown
 * included); completing an upload is not. Listings go on past 1,000 keys with the service's
 * continuation token. Addressing is path style (endpoint/bucket/key) or virtual-hosted style
 * (bucket.host/key).
 */
#include "strata/cold.h"
#include "s3wire.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct st_objstore {
    bool s3;
    char *dir;    /* file: the directory */
    char *base;   /* s3: the bucket's URL [/prefix], no trailing slash */
    char *bucket; /* s3: the bucket's URL: endpoint/bucket or scheme://bucket.host */
    bool vhost;   /* s3: virtual-hosted style (the bucket's root is "/") */
    char *prefix; /* s3: "prefix" (no trailing '/') or "" */
    char *uri;    /* the root as an absolute URI: file:///real/path or s3://bucket[/prefix] */
    char *describe;
    st_s3conn_t conn; /* s3: credentials, TLS trust, limits and the handle pool */
};

static char *st__strdup(const char *s)
{
    return st_strndup(s, strlen(s));
}

int st_objstore_open(st_objstore_t **out, const st_objstore_opts_t *o)
{
    st_objstore_t *s = st_calloc(1, sizeof *s);
    st_buf_t b = {0};
    st__s3conn_init(&s->conn, o->timeout_ms, o->retries);
    if (strncmp(o->url, "file://", 7) == 0) {
        const char *dir = o->url + 7;
        if (!*dir) goto bad;
        s->dir = st__strdup(dir);
        if (st_mkdirs(s->dir) != ST_OK) {
            st_error("cold: cannot create %s: %s", s->dir, strerror(errno));
            goto fail;
        }
        s->describe = st__strdup(o->url);
        char *real = realpath(s->dir, NULL);
        if (!real) {
            st_error("cold: cannot resolve %s: %s", s->dir, strerror(errno));
            goto fail;
        }
        st_buf_printf(&b, "file://%s", real);
        st_buf_appendc(&b, 0);
        s->uri = st_buf_steal(&b, NULL);
        free(real);
    } else if (strncmp(o->url, "s3://", 5) == 0) {
        const char *bucket = o->url + 5;
        size_t bl = strcspn(bucket, "/");
        if (bl == 0) goto bad;
        const char *prefix = bucket[bl] ? bucket + bl + 1 : "";
        size_t pl = strlen(prefix);
        while (pl && prefix[pl - 1] == '/')
            pl--;
        const char *region = o->region && *o->region ? o->region : "us-east-1";
        bool custom = o->endpoint && *o->endpoint;
        s->s3 = true;
        s->vhost = o->path_style < 0 || (o->path_style == 0 && !custom);
        if (st__s3_bucket_url(&b, custom ? o->endpoint : NULL, region, bucket, bl, s->vhost) !=
            ST_OK)
            goto bad_endpoint;
        s->bucket = st_strndup(b.data, b.len);
        s->prefix = st_strndup(prefix, pl);
        if (pl) {
            st_buf_appendc(&b, '/');
            st__s3_url_key(&b, s->prefix); /* in the URL as the service signs it */
        }
        st_buf_appendc(&b, 0);
        s->base = st_buf_steal(&b, NULL);
        st_buf_printf(&b, "aws:amz:%s:s3", region);
        st_buf_appendc(&b, 0);
        s->conn.sigv4 = st_buf_steal(&b, NULL);
        st_buf_printf(&b, "%s:%s", o->access_key ? o->access_key : "",
                      o->secret_key ? o->secret_key : "");
        st_buf_appendc(&b, 0);
        s->conn.userpwd = st_buf_steal(&b, NULL);
        if (o->ca_file && *o->ca_file) s->conn.ca_file = st__strdup(o->ca_file);
        s->describe = st__strdup(o->url);
        st_buf_printf(&b, "s3://%.*s%s%.*s", (int)bl, bucket, pl ? "/" : "", (int)pl, prefix);
        st_buf_appendc(&b, 0);
        s->uri = st_buf_steal(&b, NULL);
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) goto fail;
    } else {
        goto bad;
    }
    *out = s;
    return ST_OK;
bad:
    st_error("cold: --cold-url must be file://DIR or s3://BUCKET[/PREFIX], not '%s'", o->url);
    goto fail;
bad_endpoint:
    st_error("cold: --s3-endpoint must be http(s)://HOST[:PORT], not '%s'", o->endpoint);
fail:
    st_buf_free(&b);
    st_objstore_close(s);
    return ST_EINVAL;
}

void st_objstore_close(st_objstore_t *s)
{
    if (!s) return;
    st__s3conn_free(&s->conn);
    if (s->s3) curl_global_cleanup();
    free(s->dir);
    free(s->base);
    free(s->bucket);
    free(s->prefix);
    free(s->uri);
    free(s->describe);
    free(s);
}

const char *st_objstore_describe(const st_objstore_t *s)
{
    return s->describe;
}

void st_objstore_uri(const st_objstore_t *s, const char *key, st_buf_t *out)
{
    st_buf_printf(out, "%s/%s", s->uri, key);
    st_buf_appendc(out, 0); /* a C string too: the NUL is not counted */
    out->len--;
}

/* ---- local directory ---- */

static char *st__path(const st_objstore_t *s, const char *key)
{
    st_buf_t b = {0};
    st_buf_printf(&b, "%s/%s", s->dir, key);
    st_buf_appendc(&b, 0);
    return st_buf_steal(&b, NULL);
}

static int st__fsync_dir(const char *path)
{
    char *dir = st__strdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY);
    int rc = fd >= 0 && fsync(fd) == 0 ? ST_OK : ST_EIO;
    if (fd >= 0) close(fd);
    free(dir);
    return rc;
}

/* Puts the synced temporary file tmp at path, never over an object that is there (SPEC §5: no
 * key is written twice): link(2) fails with EEXIST where rename(2) would replace. The caller
 * unlinks tmp. ST_EEXIST when path exists. */
static int st__file_place(const char *tmp, const char *path)
{
    if (link(tmp, path) != 0) {
        if (errno != EEXIST) return ST_EIO;
        st_warn("cold: %s exists already: not overwritten", path);
        return ST_EEXIST;
    }
    return st__fsync_dir(path);
}

/* Opens the temporary file tmp beside path, making path's folders first. A delete may take an
 * emptied folder away between the two (st__rmdirs): then the folders are made again. -1 and
 * errno on failure. */
static int st__open_tmp(char *path, const char *tmp)
{
    char *slash = strrchr(path, '/');
    for (int tries = 0;; tries++) {
        *slash = 0;
        int rc = st_mkdirs(path);
        *slash = '/';
        if (rc != ST_OK) return -1;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != ENOENT || tries == 3) return fd;
    }
}

/* After a delete: the key's folders that are empty now go, deepest first, never the store's root
 * (an erased user's folder goes with its objects, SPEC v5 §5.1). The first that is not empty
 * (or cannot go) stops it. */
static void st__rmdirs(const st_objstore_t *s, const char *key)
{
    char *path = st__path(s, key);
    size_t root = strlen(s->dir);
    for (char *slash = strrchr(path, '/'); slash && (size_t)(slash - path) > root;
         slash = strrchr(path, '/')) {
        *slash = 0;
        if (rmdir(path) != 0) break;
    }
    free(path);
}

static int st__file_put(st_objstore_t *s, const char *key, const void *data, size_t len,
                        bool replace)
{
    char *path = st__path(s, key);
    st_buf_t tmp = {0};
    st_buf_printf(&tmp, "%s.tmp-%d", path, (int)getpid());
    st_buf_appendc(&tmp, 0);
    int rc = ST_EIO, fd = st__open_tmp(path, tmp.data);
    if (fd < 0) goto done;
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, (const char *)data + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) goto done;
        off += (size_t)n;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        goto done;
    }
    fd = -1;
    if (!replace)
        rc = st__file_place(tmp.data, path);
    else
        rc = rename(tmp.data, path) == 0 ? st__fsync_dir(path) : ST_EIO;
done:
    if (rc == ST_EIO && errno == ENAMETOOLONG) rc = ST_EINVAL; /* retrying will not help */
    if (rc == ST_EIO) st_warn("cold: writing %s failed: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    unlink(tmp.data);
    st_buf_free(&tmp);
    free(path);
    return rc;
}

static int st__file_get(st_objstore_t *s, const char *key, uint64_t off, size_t len, st_buf_t *out)
{
    char *path = st__path(s, key);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0) return errno == ENOENT ? ST_ENOTFOUND : ST_EIO;
    st_buf_reserve(out, len);
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, out->data + out->len + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (got < len) return ST_EIO;
    out->len += len;
    return ST_OK;
}

/* ---- S3 ---- */

static int st__s3_req(st_objstore_t *s, const char *method, const char *url, const void *body,
                      size_t blen, const char *xhdr, st_buf_t *out, size_t limit, long *status)
{
    return st__s3_try(&s->conn, method, url, body, blen, xhdr, out, limit, status, NULL,
                      st__s3_idempotent(method));
}

static int st__s3(st_objstore_t *s, const char *method, const char *key, const void *body,
                  size_t blen, const char *xhdr, st_buf_t *out, size_t limit, long *status)
{
    st_buf_t url = {0};
    st_buf_printf(&url, "%s/", s->base);
    st__s3_url_key(&url, key);
    st_buf_appendc(&url, 0);
    int rc = st__s3_req(s, method, url.data, body, blen, xhdr, out, limit, status);
    st_buf_free(&url);
    return rc;
}

#define ST__S3_KEY_MAX 1024 /* bytes of UTF-8, prefix included */

/* Whether key is free to create: a HEAD first, since not every S3-protocol server honours
 * If-None-Match on a PUT (AWS, MinIO and Ceph do; s3rver does not), and the request itself then
 * carries If-None-Match: * so that a server that does refuses a race atomically. */
static int st__s3_vacant(st_objstore_t *s, const char *key)
{
    long status;
    int rc = st__s3(s, "HEAD", key, NULL, 0, NULL, NULL, 0, &status);
    if (rc != ST_OK) return rc;
    /* 403: AWS answers so for a missing key without s3:ListBucket; the conditional PUT decides */
    if (status == 404 || status == 403) return ST_OK;
    if (status == 200) {
        st_warn("cold: %s exists already: not overwritten", key);
        return ST_EEXIST;
    }
    st_warn("cold: HEAD %s answered %ld", key, status);
    return ST_EIO;
}

#define ST__S3_IF_NONE "If-None-Match: *"

/* A refused conditional create: 412 (AWS), or 409 (a concurrent conditional write). */
static int st__s3_created(const char *what, const char *key, long status)
{
    if (status == 200) return ST_OK;
    if (status == 412 || status == 409) {
        st_warn("cold: %s exists already: not overwritten", key);
        return ST_EEXIST;
    }
    st_warn("cold: %s %s answered %ld", what, key, status);
    return ST_EIO;
}

static int st__s3_put(st_objstore_t *s, const char *key, const void *data, size_t len, bool replace)
{
    long status;
    if (strlen(s->prefix) + 1 + strlen(key) > ST__S3_KEY_MAX) {
        st_warn("cold: %s%s%s is longer than S3 allows (%d bytes)", s->prefix,
                *s->prefix ? "/" : "", key, ST__S3_KEY_MAX);
        return ST_EINVAL;
    }
    int rc = replace ? ST_OK : st__s3_vacant(s, key);
    if (rc == ST_OK)
        rc = st__s3(s, "PUT", key, data ? data : "", len, replace ? NULL : ST__S3_IF_NONE, NULL, 0,
                    &status);
    if (rc == ST_OK) rc = st__s3_created("PUT", key, status);
    return rc;
}

static int st__s3_get(st_objstore_t *s, const char *key, uint64_t off, size_t len, st_buf_t *out)
{
    char range[64];
    snprintf(range, sizeof range, "Range: bytes=%llu-%llu", (unsigned long long)off,
             (unsigned long long)(off + len - 1));
    long status;
    size_t before = out->len;
    int rc = st__s3(s, "GET", key, NULL, 0, range, out, len, &status);
    if (rc != ST_OK) {
        out->len = before;
        return rc;
    }
    if (status == 404)
        rc = ST_ENOTFOUND;
    else if ((status != 206 && status != 200) || out->len - before != len)
        rc = ST_EIO;
    if (rc != ST_OK) out->len = before;
    return rc;
}

/* ---- the interface ---- */

/* Requests by verb (GET, PUT, DELETE, LIST), from whichever thread made them. */
static _Atomic uint64_t st__requests[4];

uint64_t st_objstore_requests(int verb)
{
    return verb >= 0 && verb < 4 ? st__requests[verb] : 0;
}

/* Whether key holds exactly data: one GET of a byte more than len (a longer object shows it).
 * 1: the same bytes; 0: other bytes (another writer's object); -1: it could not be read, so
 * nobody knows (the caller then treats its write as failed, not as a collision: its intent is
 * swept and the key, which names this store's incarnation, doomed like any failed write's). */
static int st__same(st_objstore_t *s, const char *key, const void *data, size_t len)
{
    if (len == 0) return 0; /* strata writes no empty object */
    st_buf_t b = {0};
    int same = -1;
    if (!s->s3) {
        char *path = st__path(s, key);
        struct stat st;
        if (stat(path, &st) == 0 && (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != len))
            same = 0;
        else if (st__file_get(s, key, 0, len, &b) == ST_OK)
            same = 1;
        free(path);
    } else {
        char range[64];
        snprintf(range, sizeof range, "Range: bytes=0-%llu", (unsigned long long)len);
        long status;
        if (st__s3(s, "GET", key, NULL, 0, range, &b, len + 1, &status) == ST_OK &&
            (status == 200 || status == 206))
            same = 1;
        st__requests[0]++;
    }
    if (same == 1 && (b.len != len || memcmp(b.data, data, len) != 0)) same = 0;
    st_buf_free(&b);
    return same;
}

int st_objstore_put(st_objstore_t *s, const char *key, const void *data, size_t len)
{
    st__requests[1]++;
    int rc = s->s3 ? st__s3_put(s, key, data, len, false) : st__file_put(s, key, data, len, false);
    /* A create is idempotent: the very bytes there already are an earlier attempt of this one
     * whose answer was lost (an S3 PUT retried into 412). Other bytes are another writer's
     * object, never overwritten nor taken for ours: ST_EEXIST, and the caller writes elsewhere.
     * Unreadable: a failed write (ST_EIO), never an unrecorded object of ours left behind. */
    if (rc == ST_EEXIST) {
        int same = st__same(s, key, data, len);
        if (same == 1) {
            st_info("cold: %s holds these very bytes already (an earlier attempt): created", key);
            rc = ST_OK;
        } else if (same < 0) {
            st_warn("cold: %s exists and could not be read back: the write counts as failed", key);
            rc = ST_EIO;
        }
    }
    return rc;
}

int st_objstore_replace(st_objstore_t *s, const char *key, const void *data, size_t len)
{
    st__requests[1]++;
    return s->s3 ? st__s3_put(s, key, data, len, true) : st__file_put(s, key, data, len, true);
}

int st_objstore_get(st_objstore_t *s, const char *key, uint64_t off, size_t len, st_buf_t *out)
{
    if (len == 0) return ST_OK;
    st__requests[0]++;
    return s->s3 ? st__s3_get(s, key, off, len, out) : st__file_get(s, key, off, len, out);
}

int st_objstore_read(st_objstore_t *s, const char *key, size_t max, st_buf_t *out)
{
    st__requests[0]++;
    if (!s->s3) {
        char *path = st__path(s, key);
        struct stat st = {0};
        int rc = stat(path, &st) != 0
                     ? (errno == ENOENT || errno == ENOTDIR ? ST_ENOTFOUND : ST_EIO)
                 : !S_ISREG(st.st_mode)       ? ST_ENOTFOUND
                 : (uint64_t)st.st_size > max ? ST_ETOOLARGE
                                              : ST_OK;
        free(path);
        if (rc != ST_OK || st.st_size == 0) return rc;
        return st__file_get(s, key, 0, (size_t)st.st_size, out);
    }
    /* one byte more than max shows a longer object */
    char range[64];
    snprintf(range, sizeof range, "Range: bytes=0-%llu", (unsigned long long)max);
    long status;
    size_t before = out->len;
    int rc = st__s3(s, "GET", key, NULL, 0, range, out, max + 1, &status);
    if (rc == ST_OK && status == 404)
        rc = ST_ENOTFOUND;
    else if (rc == ST_OK && status == 416)
        rc = ST_OK; /* an empty object: no byte 0 to range over */
    else if (rc == ST_OK && status != 200 && status != 206)
        rc = ST_EIO;
    else if (rc == ST_OK && out->len - before > max)
        rc = ST_ETOOLARGE;
    if (rc != ST_OK) out->len = before;
    return rc;
}

int st_objstore_delete(st_objstore_t *s, const char *key)
{
    st__requests[2]++;
    if (!s->s3) {
        char *path = st__path(s, key);
        /* a path too long to exist was never stored: deleting it is done */
        int rc = unlink(path) == 0 || errno == ENOENT || errno == ENAMETOOLONG ? ST_OK : ST_EIO;
        free(path);
        if (rc == ST_OK) st__rmdirs(s, key);
        return rc;
    }
    if (strlen(s->prefix) + 1 + strlen(key) > ST__S3_KEY_MAX) return ST_OK; /* likewise */
    long status;
    int rc = st__s3(s, "DELETE", key, NULL, 0, NULL, NULL, 0, &status);
    return rc == ST_OK && (status == 204 || status == 200 || status == 404) ? ST_OK : ST_EIO;
}

/* ---- listing ---- */

static int st__walk(const char *root, st_buf_t *rel, const char *prefix, st_objstore_list_fn fn,
                    void *arg)
{
    st_buf_t dir = {0};
    st_buf_printf(&dir, "%s/%.*s", root, (int)rel->len, rel->data);
    st_buf_appendc(&dir, 0);
    DIR *d = opendir(dir.data);
    st_buf_free(&dir);
    if (!d) return errno == ENOENT ? ST_OK : ST_EIO;
    int rc = ST_OK;
    struct dirent *e;
    while (rc == ST_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        if (strstr(e->d_name, ".tmp-")) continue; /* a put that never finished */
        size_t at = rel->len;
        if (at) st_buf_appendc(rel, '/');
        st_buf_puts(rel, e->d_name);
        st_buf_appendc(rel, 0);
        rel->len--;
        struct stat st;
        st_buf_t path = {0};
        st_buf_printf(&path, "%s/%s", root, rel->data);
        st_buf_appendc(&path, 0);
        if (stat(path.data, &st) == 0) {
            if (S_ISDIR(st.st_mode))
                rc = st__walk(root, rel, prefix, fn, arg);
            else if (S_ISREG(st.st_mode) && strncmp(rel->data, prefix, strlen(prefix)) == 0)
                rc = fn(arg, rel->data, (uint64_t)st.st_size);
        }
        st_buf_free(&path);
        rel->len = at;
    }
    closedir(d);
    return rc;
}

static int st__s3_list(st_objstore_t *s, const char *prefix, st_objstore_list_fn fn, void *arg)
{
    char *token = NULL;
    int rc = ST_OK;
    do {
        /* parameters in SigV4's order (sorted by name), values canonical-encoded */
        st_buf_t url = {0}, body = {0};
        st_buf_printf(&url, "%s%s?", s->bucket, s->vhost ? "/" : "");
        if (token) {
            st_buf_puts(&url, "continuation-token=");
            st__s3_url_query(&url, token);
            st_buf_appendc(&url, '&');
        }
        st_buf_puts(&url, "list-type=2&prefix=");
        st_buf_t full = {0};
        st_buf_printf(&full, "%s%s%s", s->prefix, *s->prefix ? "/" : "", prefix);
        st_buf_appendc(&full, 0);
        st__s3_url_query(&url, full.data);
        st_buf_appendc(&url, 0);
        long status;
        rc = st__s3_req(s, "GET", url.data, NULL, 0, NULL, &body, SIZE_MAX, &status);
        st_buf_appendc(&body, 0);
        free(token);
        token = NULL;
        if (rc == ST_OK && status != 200) rc = ST_EIO;
        const char *p = body.data;
        char *key;
        while (rc == ST_OK && (key = st__s3_xml(p, "Key", &p)) != NULL) {
            char *size = st__s3_xml(p, "Size", NULL);
            size_t pl = strlen(s->prefix);
            /* keys relative to the root, as they were put: without the prefix and its '/' */
            if (strncmp(key, s->prefix, pl) == 0 && (!pl || key[pl] == '/'))
                rc = fn(arg, key + pl + (pl ? 1 : 0), size ? strtoull(size, NULL, 10) : 0);
            free(size);
            free(key);
        }
        char *trunc = rc == ST_OK ? st__s3_xml(body.data, "IsTruncated", NULL) : NULL;
        if (trunc && strcmp(trunc, "true") == 0)
            token = st__s3_xml(body.data, "NextContinuationToken", NULL);
        free(trunc);
        st_buf_free(&url);
        st_buf_free(&full);
        st_buf_free(&body);
    } while (rc == ST_OK && token);
    free(token);
    return rc;
}

int st_objstore_list(st_objstore_t *s, const char *prefix, st_objstore_list_fn fn, void *arg)
{
    st__requests[3]++;
    if (s->s3) return st__s3_list(s, prefix, fn, arg);
    st_buf_t rel = {0};
    int rc = st__walk(s->dir, &rel, prefix, fn, arg);
    st_buf_free(&rel);
    return rc;
}

/* ---- objects written in parts (large backups) ----
 * S3: CreateMultipartUpload, one UploadPart per part, CompleteMultipartUpload (the object
 * appears whole, or not at all), AbortMultipartUpload on any failure so no parts linger.
 * A directory: the parts go to a temporary file, which is synced and renamed into place. */

struct st_objstore_upload {
    st_objstore_t *s;
    char *key;
    char *url;      /* s3: the object's URL */
    char *id;       /* s3: the upload id */
    st_buf_t parts; /* s3: <Part>…</Part> of every part so far */
    st_buf_t pend;  /* s3: bytes held back until they make a part of ST__S3_PART_MIN */
    unsigned n;     /* parts so far */
    char *path;     /* file: the final path */
    char *tmp;      /* file: where the parts go */
    int fd;
};

static void st__upload_free(st_objstore_upload_t *u)
{
    if (u->fd >= 0) close(u->fd);
    free(u->key);
    free(u->url);
    free(u->id);
    st_buf_free(&u->parts);
    st_buf_free(&u->pend);
    free(u->path);
    free(u->tmp);
    free(u);
}

static int st__s3_upload_begin(st_objstore_upload_t *u)
{
    st_objstore_t *s = u->s;
    st_buf_t url = {0}, body = {0};
    st_buf_printf(&url, "%s?uploads=", u->url);
    st_buf_appendc(&url, 0);
    long status = 0;
    /* safe to repeat: a repeat only starts another upload, with no parts, that is never used */
    int rc =
        st__s3_try(&s->conn, "POST", url.data, "", 0, NULL, &body, 1u << 20, &status, NULL, true);
    st_buf_appendc(&body, 0);
    if (rc == ST_OK && (status != 200 || !(u->id = st__s3_xml(body.data, "UploadId", NULL)))) {
        st_warn("cold: starting an upload of %s answered %ld", u->key, status);
        rc = ST_EIO;
    }
    st_buf_free(&url);
    st_buf_free(&body);
    return rc;
}

int st_objstore_upload_begin(st_objstore_t *s, const char *key, st_objstore_upload_t **out)
{
    st_objstore_upload_t *u = st_calloc(1, sizeof *u);
    u->s = s;
    u->fd = -1;
    u->key = st__strdup(key);
    st__requests[1]++;
    int rc;
    if (s->s3) {
        if (strlen(s->prefix) + 1 + strlen(key) > ST__S3_KEY_MAX) {
            st__upload_free(u);
            return ST_EINVAL;
        }
        st_buf_t url = {0};
        st_buf_printf(&url, "%s/", s->base);
        st__s3_url_key(&url, key);
        st_buf_appendc(&url, 0);
        u->url = st_buf_steal(&url, NULL);
        rc = st__s3_vacant(s, key);
        if (rc == ST_OK) rc = st__s3_upload_begin(u);
    } else {
        u->path = st__path(s, key);
        st_buf_t tmp = {0};
        st_buf_printf(&tmp, "%s.tmp-%d", u->path, (int)getpid());
        st_buf_appendc(&tmp, 0);
        u->tmp = st_buf_steal(&tmp, NULL);
        u->fd = st__open_tmp(u->path, u->tmp);
        rc = u->fd < 0 ? ST_EIO : ST_OK;
        if (rc != ST_OK) st_warn("cold: writing %s failed: %s", u->tmp, strerror(errno));
    }
    if (rc != ST_OK) {
        st__upload_free(u);
        return rc;
    }
    *out = u;
    return ST_OK;
}

#define ST__S3_PART_MIN ((size_t)5 << 20) /* S3's least size of a part that is not the last */

static int st__s3_part(st_objstore_upload_t *u, const void *data, size_t len)
{
    st_buf_t url = {0}, hdrs = {0};
    st_buf_printf(&url, "%s?partNumber=%u&uploadId=", u->url, u->n + 1);
    st__s3_url_query(&url, u->id);
    st_buf_appendc(&url, 0);
    long status = 0;
    st__requests[1]++;
    int rc = st__s3_try(&u->s->conn, "PUT", url.data, data ? data : "", len, NULL, NULL, 0, &status,
                        &hdrs, true);
    char *etag = rc == ST_OK && status == 200 ? st__s3_header(&hdrs, "etag:") : NULL;
    if (rc == ST_OK && !etag) {
        st_warn("cold: part %u of %s answered %ld", u->n + 1, u->key, status);
        rc = ST_EIO;
    }
    if (etag) {
        u->n++;
        st_buf_printf(&u->parts, "<Part><PartNumber>%u</PartNumber><ETag>\"%s\"</ETag></Part>",
                      u->n, etag);
    }
    free(etag);
    st_buf_free(&url);
    st_buf_free(&hdrs);
    return rc;
}

int st_objstore_upload_part(st_objstore_upload_t *u, const void *data, size_t len)
{
    st_objstore_t *s = u->s;
    if (!s->s3) {
        for (size_t off = 0; off < len;) {
            ssize_t n = write(u->fd, (const char *)data + off, len - off);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                st_warn("cold: writing %s failed: %s", u->tmp, strerror(errno));
                return ST_EIO;
            }
            off += (size_t)n;
        }
        u->n++;
        return ST_OK;
    }
    if (u->pend.len || len < ST__S3_PART_MIN) { /* too small to be any part but the last */
        st_buf_append(&u->pend, data, len);
        if (u->pend.len < ST__S3_PART_MIN) return ST_OK;
        int rc = st__s3_part(u, u->pend.data, u->pend.len);
        if (rc == ST_OK) u->pend.len = 0;
        return rc;
    }
    return st__s3_part(u, data, len);
}

static int st__s3_upload_finish(st_objstore_upload_t *u)
{
    st_buf_t url = {0}, body = {0}, answer = {0};
    st_buf_printf(&url, "%s?uploadId=", u->url);
    st__s3_url_query(&url, u->id);
    st_buf_appendc(&url, 0);
    st_buf_printf(&body, "<CompleteMultipartUpload>%.*s</CompleteMultipartUpload>",
                  (int)u->parts.len, u->parts.data);
    long status = 0;
    int rc = st__s3_call(&u->s->conn, "POST", url.data, body.data, body.len, ST__S3_IF_NONE,
                         &answer, 1u << 20, &status, NULL);
    st_buf_appendc(&answer, 0);
    if (rc == ST_OK) rc = st__s3_created("completing the upload of", u->key, status);
    /* S3 may answer 200 and still report an error in the body */
    if (rc == ST_OK && strstr(answer.data, "<Error>")) {
        st_warn("cold: completing the upload of %s answered an error", u->key);
        rc = strstr(answer.data, "PreconditionFailed") ? ST_EEXIST : ST_EIO;
    }
    st_buf_free(&url);
    st_buf_free(&body);
    st_buf_free(&answer);
    return rc;
}

int st_objstore_upload_finish(st_objstore_upload_t *u)
{
    int rc;
    if (u->s->s3) {
        rc = u->pend.len ? st__s3_part(u, u->pend.data, u->pend.len) : ST_OK; /* the last */
        if (rc == ST_OK) rc = u->n ? st__s3_upload_finish(u) : ST_EINVAL;     /* S3 needs one */
    } else {
        rc = fsync(u->fd) == 0 ? ST_OK : ST_EIO;
        if (close(u->fd) != 0) rc = ST_EIO;
        u->fd = -1;
        if (rc == ST_OK) rc = st__file_place(u->tmp, u->path);
        if (rc == ST_OK) unlink(u->tmp); /* the object has its own name now */
        if (rc == ST_EIO) st_warn("cold: writing %s failed: %s", u->path, strerror(errno));
    }
    if (rc != ST_OK) {
        st_objstore_upload_abort(u);
        return rc;
    }
    st__upload_free(u);
    return ST_OK;
}

void st_objstore_upload_abort(st_objstore_upload_t *u)
{
    if (!u) return;
    if (u->s->s3) {
        st_buf_t url = {0};
        st_buf_printf(&url, "%s?uploadId=", u->url);
        st__s3_url_query(&url, u->id);
        st_buf_appendc(&url, 0);
        long status = 0;
        st__requests[2]++;
        if (st__s3_req(u->s, "DELETE", url.data, NULL, 0, NULL, NULL, 0, &status) != ST_OK ||
            (status != 204 && status != 200 && status != 404))
            st_warn("cold: aborting the upload of %s failed (%ld): its parts may stay until the "
                    "bucket's lifecycle rule removes them",
                    u->key, status);
        st_buf_free(&url);
    } else if (u->tmp) {
        unlink(u->tmp);
    }
    st__upload_free(u);
}
