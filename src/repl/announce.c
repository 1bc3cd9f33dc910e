/* SPDX-License-Identifier: MIT */
/*
 * Members' records (SPEC §8): every member's advertised HTTP URL and the nonce of its marker in
 * the cold store (include/strata/coldshare.h) are replicated keys of the store,
 *   "\0repl:http:{id}" -> URL        "\0repl:cold:{id}" -> 32 hex digits,
 * so every member knows, within seconds of start-up, where each member serves (GET /v1/cluster;
 * clients spread their streams over the members) and what each member's marker must say.
 *
 * Only the leader writes. It records its own at once when it starts serving. A follower whose
 * record in its own copy of the store is missing or stale posts it to the leader
 * (POST /v1/cluster/announce, on a worker thread) every second until the group's write reaches
 * it — also after a restart with a new nonce, or an --advertise that changed.
 */
#include "strata/idle.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#define ST__ANNOUNCE_MS 1000

static const char st__http_kind[] = "\0repl:http:";
static const char st__cold_kind[] = "\0repl:cold:";
#define ST__KIND_LEN (sizeof st__http_kind - 1)

static size_t st__announce_key(char key[64], const char *kind, uint64_t id)
{
    memcpy(key, kind, ST__KIND_LEN);
    int n = snprintf(key + ST__KIND_LEN, 64 - ST__KIND_LEN, "%llu", (unsigned long long)id);
    return ST__KIND_LEN + (size_t)n;
}

/* Member id's record of that kind into buf (NUL-terminated); false if there is none. */
static bool st__record(st_repl_t *r, const char *kind, uint64_t id, char *buf, size_t cap)
{
    char key[64];
    size_t kl = st__announce_key(key, kind, id);
    const void *val;
    size_t vlen;
    uint64_t wait = 0;
    if (st_store_get(r->store, key, kl, &val, &vlen, &wait) != ST_OK || vlen >= cap) return false;
    memcpy(buf, val, vlen);
    buf[vlen] = '\0';
    return true;
}

static bool st__record_is(st_repl_t *r, const char *kind, uint64_t id, const char *want)
{
    char have[520];
    return st__record(r, kind, id, have, sizeof have) && strcmp(have, want) == 0;
}

/* Stages the record unless the group already has it; *wait as for st_store_put. */
static int st__announce_put(st_repl_t *r, const char *kind, uint64_t id, const char *v,
                            uint64_t *wait)
{
    if (st__record_is(r, kind, id, v)) return ST_OK;
    char key[64];
    size_t kl = st__announce_key(key, kind, id);
    return st_store_put(r->store, key, kl, v, strlen(v), wait);
}

bool st__member_url(st_repl_t *r, uint64_t id, char *buf, size_t cap)
{
    if (id == r->self) {
        snprintf(buf, cap, "%s", r->advertise);
        return true;
    }
    return st__record(r, st__http_kind, id, buf, cap);
}

void st__record_self(st_repl_t *r)
{
    uint64_t wait = 0;
    st__announce_put(r, st__http_kind, r->self, r->advertise, &wait);
    if (*r->cold_nonce) st__announce_put(r, st__cold_kind, r->self, r->cold_nonce, &wait);
}

static bool st__is_member(const st_repl_t *r, uint64_t id)
{
    for (size_t i = 0; i < r->nmembers; i++)
        if (r->members[i].id == id) return true;
    return false;
}

static bool st__valid_url(const char *u)
{
    size_t n = strlen(u);
    if (n < 8 || n >= sizeof((st_repl_t *)0)->advertise ||
        (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)u[i] <= 0x20 || (unsigned char)u[i] >= 0x7f || u[i] == '"') return false;
    return true;
}

static bool st__valid_nonce(const char *v)
{
    if (strlen(v) != 32) return false;
    for (int i = 0; i < 32; i++)
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f'))) return false;
    return true;
}

int st_repl_announce(st_repl_t *r, uint64_t id, const char *url, const char *nonce, uint64_t *wait)
{
    if (!r->serving) return ST_ENOLEADER;
    if (!st__is_member(r, id) || !st__valid_url(url) || (*nonce && !st__valid_nonce(nonce)))
        return ST_EINVAL;
    int rc = st__announce_put(r, st__http_kind, id, url, wait);
    if (rc == ST_OK && *nonce) rc = st__announce_put(r, st__cold_kind, id, nonce, wait);
    return rc;
}

bool st_repl_member_nonce(st_repl_t *r, uint64_t id, char nonce[33])
{
    if (id == r->self && *r->cold_nonce) { /* ours, as soon as we have one */
        memcpy(nonce, r->cold_nonce, 33);
        return true;
    }
    return st__record(r, st__cold_kind, id, nonce, 33) && st__valid_nonce(nonce);
}

void st_repl_set_cold_nonce(st_repl_t *r, const char *nonce)
{
    snprintf(r->cold_nonce, sizeof r->cold_nonce, "%s", nonce);
    if (r->serving) st__record_self(r);
}

size_t st_repl_member_ids(const st_repl_t *r, uint64_t *ids, size_t max)
{
    size_t n = 0;
    for (; n < r->nmembers && n < max; n++)
        ids[n] = r->members[n].id;
    return n;
}

/* ---- the follower's side ---- */

static void st__ann_work(uv_work_t *w)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_repl_t *r = w->data;
    st_buf_t resp = {0};
    long status = 0;
    int rc = st__member_post(r->ann_leader, "/v1/cluster/announce", r->ann_body, r->secret, 10000,
                             &resp, &status, NULL, 0);
    r->ann_rc = rc == ST_OK && status == 200 ? ST_OK : ST_EUNAVAIL;
    st_buf_free(&resp);
}

static void st__ann_done(uv_work_t *w, int status)
{
    st_repl_t *r = w->data;
    (void)status;
    r->announcing = false;
    if (r->closing) st__closed_step(r);
}

static void st__on_announce(uv_timer_t *t)
{
    st_repl_t *r = t->data;
    if (r->closing || r->announcing || r->serving) return;
    bool have = st__record_is(r, st__http_kind, r->self, r->advertise) &&
                (!*r->cold_nonce || st__record_is(r, st__cold_kind, r->self, r->cold_nonce));
    if (have || st_repl_leader_url(r, r->ann_leader, sizeof r->ann_leader) != ST_OK) return;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "id", (double)r->self);
    cJSON_AddStringToObject(j, "http", r->advertise);
    cJSON_AddStringToObject(j, "cold", r->cold_nonce);
    bool fits = cJSON_PrintPreallocated(j, r->ann_body, sizeof r->ann_body, 0);
    cJSON_Delete(j);
    r->ann_work.data = r;
    if (fits && uv_queue_work(r->loop, &r->ann_work, st__ann_work, st__ann_done) == 0)
        r->announcing = true;
}

void st__announce_start(st_repl_t *r)
{
    uv_timer_init(r->loop, &r->announce);
    r->announce.data = r;
    uv_timer_start(&r->announce, st__on_announce, ST__ANNOUNCE_MS / 4, ST__ANNOUNCE_MS);
    uv_unref((uv_handle_t *)&r->announce);
}
