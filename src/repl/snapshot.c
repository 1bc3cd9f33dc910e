/* SPDX-License-Identifier: MIT */
/*
 * Snapshot install: the data behind a Raft snapshot marker, copied from member to member.
 *
 * C-Raft ships snapshots as whole in-memory buffers, restored on the loop. strata's state is the
 * LMDB file, so its snapshots are markers (the Raft index they stand for and the URL of the member
 * that took them). A member asked to restore a marker newer than its store fetches a copy:
 *   1. POST {url}/v1/cluster/snapshot (a follower redirects to the leader) answers
 *      {"port","token"}: the leader has opened a one-shot TCP port, served by a thread that
 *      writes a consistent, compacted LMDB copy straight into the socket (mdb_env_copyfd2);
 *   2. a worker thread here reads it into DATA_DIR/snapshot.mdb and loads it into the store;
 *   3. back on the loop, the entries Raft applied meanwhile (kept aside) are applied on top.
 * Nothing of the store is ever held in memory or handled on either loop.
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define ST__SERVE_WAIT_MS 30000
#define ST__MAX_SERVING   2

/* ---- the serving side (the leader) ---- */

static atomic_int st__serving;

typedef struct {
    st_store_t *store;
    int lfd;
    char token[33];
} st_serve_t;

static void *st__serve_thread(void *arg)
{
    st_serve_t *sv = arg;
    struct pollfd p = {sv->lfd, POLLIN, 0};
    int fd = poll(&p, 1, ST__SERVE_WAIT_MS) == 1 ? accept(sv->lfd, NULL, NULL) : -1;
    close(sv->lfd);
    char line[40];
    size_t got = 0;
    while (fd >= 0 && got < sizeof line) {
        struct pollfd q = {fd, POLLIN, 0};
        ssize_t n = poll(&q, 1, 5000) == 1 ? read(fd, line + got, sizeof line - got) : -1;
        if (n <= 0) break;
        got += (size_t)n;
        if (memchr(line, '\n', got)) break;
    }
    if (fd >= 0 && got > 32 && memcmp(line, sv->token, 32) == 0 && line[32] == '\n')
        st_store_copy_fd(sv->store, fd);
    else if (fd >= 0)
        st_warn("repl: a snapshot connection did not present its token; closed");
    if (fd >= 0) close(fd);
    free(sv);
    atomic_fetch_sub(&st__serving, 1);
    return NULL;
}

int st__snapshot_offer(st_store_t *store, const char *host, int *port, char token[33])
{
    if (atomic_fetch_add(&st__serving, 1) >= ST__MAX_SERVING) {
        atomic_fetch_sub(&st__serving, 1);
        return ST_EUNAVAIL;
    }
    unsigned char rnd[16];
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int lfd = -1;
    if (RAND_bytes(rnd, sizeof rnd) == 1 && getaddrinfo(*host ? host : NULL, "0", &hints, &ai) == 0)
        lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage a;
    socklen_t al = sizeof a;
    if (lfd < 0 || bind(lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) != 0) {
        if (lfd >= 0) close(lfd);
        if (ai) freeaddrinfo(ai);
        atomic_fetch_sub(&st__serving, 1);
        return ST_EIO;
    }
    freeaddrinfo(ai);
    *port = ntohs(a.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port
                                          : ((struct sockaddr_in *)&a)->sin_port);
    for (int i = 0; i < 16; i++)
        snprintf(token + 2 * i, 3, "%02x", rnd[i]);
    st_serve_t *sv = st_calloc(1, sizeof *sv);
    sv->store = store;
    sv->lfd = lfd;
    memcpy(sv->token, token, 33);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, st__serve_thread, sv);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        close(lfd);
        free(sv);
        atomic_fetch_sub(&st__serving, 1);
        return ST_EIO;
    }
    return ST_OK;
}

/* ---- the fetching side (a member behind a marker), in a worker thread ---- */

/* Asks url (following a redirect to the leader) for an offer: the leader's address, port and
 * token. */
static int st__ask_offer(const char *url, const char *secret, char *ip, size_t iplen, int *port,
                         char token[33])
{
    st_buf_t body = {0};
    long status = 0;
    int rc = st__member_post(url, "/v1/cluster/snapshot", "{}", secret, 10000, &body, &status, ip,
                             iplen);
    if (rc == ST_OK && status == 200 && *ip) {
        cJSON *j = cJSON_ParseWithLength(body.data, body.len);
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "port");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "token");
        if (cJSON_IsNumber(p) && cJSON_IsString(t) && strlen(t->valuestring) == 32) {
            *port = p->valueint;
            memcpy(token, t->valuestring, 33);
        } else {
            rc = ST_EUNAVAIL;
        }
        cJSON_Delete(j);
    } else {
        rc = ST_EUNAVAIL;
    }
    st_buf_free(&body);
    return rc;
}

/* Reads the copy from the offered port into path. */
static int st__receive(const char *ip, int port, const char *token, const char *path)
{
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
    if (getaddrinfo(ip, ps, &hints, &ai) != 0) return ST_EIO;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? ST_OK : ST_EUNAVAIL;
    freeaddrinfo(ai);
    FILE *out = rc == ST_OK ? fopen(path, "wb") : NULL;
    if (rc == ST_OK && !out) rc = ST_EIO;
    char line[34];
    memcpy(line, token, 32);
    line[32] = '\n';
    if (rc == ST_OK && write(fd, line, 33) != 33) rc = ST_EUNAVAIL;
    char buf[1 << 16];
    ssize_t n;
    size_t total = 0;
    while (rc == ST_OK && (n = read(fd, buf, sizeof buf)) > 0) {
        if (fwrite(buf, 1, (size_t)n, out) != (size_t)n) rc = ST_EIO;
        total += (size_t)n;
    }
    if (rc == ST_OK && (n < 0 || total == 0)) rc = ST_EUNAVAIL;
    if (out && (fflush(out) != 0 || fsync(fileno(out)) != 0)) rc = ST_EIO;
    if (out) fclose(out);
    if (fd >= 0) close(fd);
    return rc;
}

int st__snapshot_fetch(st_store_t *store, const char *url, const char *secret, const char *path,
                       uint64_t *applied)
{
    char ip[64], token[33];
    int port = 0;
    int rc = st__ask_offer(url, secret, ip, sizeof ip, &port, token);
    if (rc == ST_OK) rc = st__receive(ip, port, token, path);
    if (rc == ST_OK) rc = st_store_group_load(store, path, applied);
    unlink(path);
    return rc;
}
