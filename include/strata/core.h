/* SPDX-License-Identifier: MIT */
/*
 * core: the pieces every module shares — error codes (one X-macro list with their HTTP status and
 * wire code), logging, growable buffers, a per-request arena, an intrusive hash map, name, UTF-8
 * and strict JSON text validation, clocks and a few assertions. Nothing here knows about sockets
 * or storage.
 */
#ifndef STRATA_CORE_H
#define STRATA_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* X(name, http status, wire code, default message). Codes are negative: ST_E<name>. */
#define ST_ERRNO_MAP(X)                                                                            \
    X(INVAL, 400, "invalid_argument", "invalid argument")                                          \
    X(JSON, 400, "invalid_json", "request body is not valid JSON")                                 \
    X(BADREQ, 400, "invalid_argument", "malformed HTTP request")                                   \
    X(UNAUTH, 401, "unauthenticated", "missing or invalid credentials")                            \
    X(FORBIDDEN, 403, "forbidden", "not allowed for this principal")                               \
    X(NOTFOUND, 404, "not_found", "not found")                                                     \
    X(METHOD, 405, "method_not_allowed", "method not allowed on this path")                        \
    X(TIMEOUT, 408, "request_timeout", "request not received in time")                             \
    X(CONFLICT, 409, "conflict", "conflict with the current state")                                \
    X(EXIST, 409, "conflict", "the object exists already")                                         \
    X(SEATS, 409, "seats_unavailable", "some seats are not available")                             \
    X(LASTOWNER, 409, "last_owner",                                                                \
      "the room's last owner cannot leave or be demoted: make another member owner first")         \
    X(TOOLARGE, 413, "payload_too_large", "request body too large")                                \
    X(MEDIA, 415, "unsupported_media_type", "a request body must be application/json")             \
    X(IDEMREUSED, 422, "idempotency_key_reused",                                                   \
      "the Idempotency-Key was first used with another request")                                   \
    X(UPGRADE, 426, "upgrade_required", "this route needs a WebSocket upgrade")                    \
    X(RATE, 429, "too_many_requests", "too many requests")                                         \
    X(HEADERS, 431, "headers_too_large", "request headers too large")                              \
    X(INTERNAL, 500, "internal", "internal error")                                                 \
    X(NOTIMPL, 501, "not_implemented", "method not implemented")                                   \
    X(NOMEM, 503, "unavailable", "out of memory")                                                  \
    X(UNAVAIL, 503, "unavailable", "temporarily unavailable")                                      \
    X(IO, 503, "unavailable", "storage I/O error")                                                 \
    X(NOLEADER, 503, "no_leader", "no leader is known in the group; retry")                        \
    X(COLD, 503, "cold_unavailable", "a cold-tier object is missing or damaged")                   \
    X(FULL, 507, "storage_full", "storage is full")                                                \
    X(REVOKED, 401, "token_revoked", "the token was issued before its user's erasure")             \
    /* never answered: a read waits for cold data (the cold cache's want list says which) */       \
    X(PARKED, 503, "unavailable", "waiting for cold data")

enum {
    ST_OK = 0,
    ST__ERR_BASE = -1000,
#define ST__ERR_ENUM(name, status, code, msg) ST_E##name,
    ST_ERRNO_MAP(ST__ERR_ENUM)
#undef ST__ERR_ENUM
        ST__ERR_END
};

/* Static strings; never NULL (unknown codes map to "internal"). */
const char *st_strerror(int err);
const char *st_err_code(int err);
int st_err_status(int err);

/* ---- logging ---- */
enum { ST_LOG_DEBUG, ST_LOG_INFO, ST_LOG_WARN, ST_LOG_ERROR };
void st_log_set_level(int level);
void st_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define st_debug(...) st_log(ST_LOG_DEBUG, __VA_ARGS__)
#define st_info(...)  st_log(ST_LOG_INFO, __VA_ARGS__)
#define st_warn(...)  st_log(ST_LOG_WARN, __VA_ARGS__)
#define st_error(...) st_log(ST_LOG_ERROR, __VA_ARGS__)

/* Broken invariants and out-of-memory end the process with file:line; clients never reach these. */
_Noreturn void st__fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define st_fatal(...) st__fatal(__FILE__, __LINE__, __VA_ARGS__)
#define ST_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) st__fatal(__FILE__, __LINE__, "assertion failed: %s", #cond);                 \
    } while (0)

/* Allocation that never returns NULL (aborts via st_fatal on exhaustion). */
void *st_malloc(size_t n);
void *st_calloc(size_t n, size_t size);
void *st_realloc(void *p, size_t n);
char *st_strndup(const char *s, size_t n);

/* ---- growable byte buffer; owns data, freed by st_buf_free ---- */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} st_buf_t;

void st_buf_reserve(st_buf_t *b, size_t extra);
void st_buf_append(st_buf_t *b, const void *p, size_t n);
void st_buf_appendc(st_buf_t *b, char c);
void st_buf_puts(st_buf_t *b, const char *s);
void st_buf_printf(st_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void st_buf_append_i64(st_buf_t *b, int64_t v);
void st_buf_append_u64(st_buf_t *b, uint64_t v);
/* Appends s as a JSON string literal (quotes and escapes included). */
void st_buf_append_json_str(st_buf_t *b, const char *s, size_t n);
void st_buf_reset(st_buf_t *b);
void st_buf_free(st_buf_t *b);
/* Gives up ownership of the data to the caller (free() releases it); b becomes empty. */
char *st_buf_steal(st_buf_t *b, size_t *len);

/* ---- arena: request-lifetime memory, released at once by st_arena_reset/free ---- */
typedef struct st_arena_chunk st_arena_chunk_t;
typedef struct {
    st_arena_chunk_t *head;
} st_arena_t;

void *st_arena_alloc(st_arena_t *a, size_t n);
char *st_arena_strndup(st_arena_t *a, const char *s, size_t n);
void st_arena_reset(st_arena_t *a);
void st_arena_free(st_arena_t *a);

/* ---- growable array: one for every module ----
 * ST_VEC(T) is { T *v; size_t n, cap; } (zero-initialised: empty). st_vec_push appends a copy of
 * x, st_vec_reserve makes room for `need` items (capacity doubles; out of memory is fatal);
 * st_vec_free frees the items' array (not what they point to) and empties the vector. */
#define ST_VEC(T)                                                                                  \
    struct {                                                                                       \
        T *v;                                                                                      \
        size_t n, cap;                                                                             \
    }
void *st__vec_grow(void *v, size_t *cap, size_t need, size_t elem);
/* `need` is evaluated twice; the check is inline so a push that fits costs no call. */
#define st_vec_reserve(vec, need)                                                                  \
    ((need) <= (vec)->cap                                                                          \
         ? (void)0                                                                                 \
         : (void)((vec)->v = st__vec_grow((vec)->v, &(vec)->cap, (need), sizeof *(vec)->v)))
#define st_vec_push(vec, x) (st_vec_reserve((vec), (vec)->n + 1), (vec)->v[(vec)->n++] = (x))
#define st_vec_free(vec)    (free((vec)->v), (vec)->v = NULL, (vec)->n = (vec)->cap = 0)

/* ---- intrusive doubly-linked list: one for every module (as h2o's linklist) ----
 * A list is a sentinel st_list_t (st_list_init); an item embeds an st_list_t (zeroed: not
 * linked). ST_LIST_ITEM gives the item from its link. Iterating while unlinking: take the next
 * link first. */
typedef struct st_list {
    struct st_list *prev, *next;
} st_list_t;
#define ST_LIST_ITEM(link, type, field) ((type *)((char *)(link)-offsetof(type, field)))
static inline void st_list_init(st_list_t *l)
{
    l->prev = l->next = l;
}
static inline bool st_list_empty(const st_list_t *l)
{
    return l->next == l;
}
static inline bool st_list_linked(const st_list_t *n)
{
    return n->next != NULL;
}
/* Inserts n before pos (before the sentinel: at the end). */
static inline void st_list_insert(st_list_t *pos, st_list_t *n)
{
    n->prev = pos->prev;
    n->next = pos;
    n->prev->next = n;
    pos->prev = n;
}
/* Inserts n first. */
static inline void st_list_push_front(st_list_t *l, st_list_t *n)
{
    st_list_insert(l->next, n);
}
/* for (ST_LIST_EACH(l, n, list)) { item = ST_LIST_ITEM(l, …); … }: the body may unlink l (its
 * next, n, is taken first), not n. */
#define ST_LIST_EACH(l, n, list)                                                                   \
    st_list_t *l = (list)->next, *n = l->next;                                                     \
    l != (list);                                                                                   \
    l = n, n = l->next
static inline void st_list_unlink(st_list_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

/* ---- big-endian u64: keys that sort by number (ids, times, sequence numbers) ---- */
static inline void st_be64_put(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static inline uint64_t st_be64_get(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* the same for u32 and u16 key parts (seat-map chunk numbers, section indexes) */
static inline void st_be32_put(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static inline uint32_t st_be32_get(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void st_be16_put(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline uint16_t st_be16_get(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* ---- intrusive chained hash map keyed by bytes; the caller owns nodes and key memory ---- */
typedef struct st_map_node {
    struct st_map_node *next;
    uint64_t hash;
    const void *key; /* borrowed: must stay valid while the node is in the map */
    size_t klen;
} st_map_node_t;

typedef struct {
    st_map_node_t **buckets;
    size_t nbuckets; /* power of two */
    size_t count;
    size_t low; /* every bucket of `buckets` below it is empty: st_map_first starts there and
                   moves it up to the bucket it found, so taking the first node and removing it,
                   over and over (a queue drained in place: the flush and compaction queues),
                   costs O(nbuckets) in all, not O(nbuckets) a node (the buckets never shrink); a
                   remove leaves it alone (O(1): the store's overlay comes and goes) */
    /* Growing moves the nodes a few buckets an insert, not all at once: a map of a million
     * nodes (the flush queue of a million owners, the store's overlay under an erasure) took
     * tens of ms of one loop turn to rehash. While `old` is set, a node whose bucket in `old`
     * is at or above `moved` is still there; every other node is in `buckets`. */
    st_map_node_t **old;
    size_t nold, moved;
} st_map_t;

uint64_t st_hash(const void *p, size_t n);
/* Sets the hash's secret; call once at start-up before any map is used and before threads. */
void st_hash_seed(uint64_t seed);
void st_map_init(st_map_t *m);
void st_map_free(st_map_t *m); /* frees the bucket array only */
st_map_node_t *st_map_get(const st_map_t *m, const void *key, size_t klen);
/* The node's key/klen must be set; a node with an equal key must not already be present. */
void st_map_insert(st_map_t *m, st_map_node_t *node);
void st_map_remove(st_map_t *m, st_map_node_t *node);
/* Iteration: for (n = st_map_first(m, &i); n; n = st_map_next(m, &i, n)) — no insert or removal
 * during (an insert moves nodes while the map grows); taking the first and removing it, over and
 * over, is fine. */
st_map_node_t *st_map_first(st_map_t *m, size_t *iter);
st_map_node_t *st_map_next(const st_map_t *m, size_t *iter, st_map_node_t *cur);

/* ---- observers: whom a module tells about its changes (the one publish path) ----
 * A module that changes state keeps a list of observers and calls each, in registration order,
 * with the change and the batch that makes it durable; streams and reconciliation subscribe,
 * handlers publish nothing themselves. Callbacks are kept untyped (a void (*)(void) converts to
 * and from any function pointer type) and cast back to the module's own observer type before
 * they are called. Loop thread only. */
#define ST_OBSERVERS_MAX 4
typedef void (*st_observer_any_fn)(void);
typedef struct {
    st_observer_any_fn fn[ST_OBSERVERS_MAX];
    /* An observer's optional interest test (the module's own type; NULL: it takes every change):
     * a module may skip building a change no observer wants. */
    st_observer_any_fn wants[ST_OBSERVERS_MAX];
    void *arg[ST_OBSERVERS_MAX];
    size_t n;
} st_observers_t;

/* arg is borrowed until st_observers_remove. More than ST_OBSERVERS_MAX is a programming error. */
static inline void st_observers_add_wants(st_observers_t *o, st_observer_any_fn fn,
                                          st_observer_any_fn wants, void *arg)
{
    ST_ASSERT(o->n < ST_OBSERVERS_MAX);
    o->fn[o->n] = fn;
    o->wants[o->n] = wants;
    o->arg[o->n++] = arg;
}

static inline void st_observers_add(st_observers_t *o, st_observer_any_fn fn, void *arg)
{
    st_observers_add_wants(o, fn, NULL, arg);
}

/* Removes every observer registered with arg (its owner is going away). */
static inline void st_observers_remove(st_observers_t *o, const void *arg)
{
    size_t k = 0;
    for (size_t i = 0; i < o->n; i++)
        if (o->arg[i] != arg) {
            o->fn[k] = o->fn[i];
            o->wants[k] = o->wants[i];
            o->arg[k++] = o->arg[i];
        }
    o->n = k;
}

/* ---- names: 1..255 bytes of [A-Za-z0-9_.:-] (SPEC §0) ---- */
#define ST_NAME_MAX 255
bool st_name_valid(const char *s, size_t n);
/* Well-formed UTF-8: no overlongs, no surrogates, nothing above U+10FFFF. */
bool st_utf8_valid(const char *s, size_t n);
/* Length of the longest well-formed UTF-8 prefix of s (n when all of it is). */
size_t st_utf8_prefix(const char *s, size_t n);
/* A value quoted in an error message: at most ST_CLIP_MAX bytes, cut on a character boundary.
 * Use as "%.*s%s", (int)st_clip(v, n), v, n > ST_CLIP_MAX ? "..." : "" (JSON-escape the whole
 * message when it is written, as st_ctx_error does). */
#define ST_CLIP_MAX 64
static inline size_t st_clip(const char *s, size_t n)
{
    return st_utf8_prefix(s, n > ST_CLIP_MAX ? ST_CLIP_MAX : n);
}

/* ---- strict JSON text check (RFC 8259: grammar, UTF-8, nesting up to 512) ---- */
typedef struct {
    const char *member; /* in: a top-level object member to find, or NULL */
    const char *value;  /* out: the raw text of its first value (borrowed from the input) */
    size_t value_len;
    bool nul;        /* out: a string outside that value holds U+0000 (which C strings cut) */
    size_t error_at; /* out: byte offset of the first error */
} st_json_info_t;

/* ST_OK if s[0..n) is one JSON value with blanks around it, else ST_EJSON. Everything cJSON
 * would read differently (raw control characters, lone surrogates, "01", "+1", ".5") fails. */
int st_json_check(const char *s, size_t n, st_json_info_t *info);

/* ---- clocks ---- */
int64_t st_now_us(void);   /* wall clock, Unix microseconds */
uint64_t st_mono_ns(void); /* monotonic */

/* ---- small helpers ---- */
/* Parses a decimal int64 that must span the whole string; ST_EINVAL otherwise. */
int st_parse_i64(const char *s, size_t n, int64_t *out);
/* Parses sizes like 4096, 64k, 16M, 1G, 2GiB; ST_EINVAL on junk or overflow. */
int st_parse_size(const char *s, uint64_t *out);
/* A point in time as Unix µs: decimal µs, or RFC 3339 (2026-11-27T21:55:00Z, a fraction of a
 * second and an offset such as +02:00 allowed; finer than µs is cut). ST_EINVAL otherwise. */
int st_parse_time_us(const char *s, int64_t *out);
/* us as RFC 3339 in UTC with µs: "2026-11-27T21:55:00.123456Z" (n >= 32 holds any). */
void st_format_time_us(int64_t us, char *buf, size_t n);
/* mkdir -p: creates every missing directory of path (0755); ST_EIO with errno set on failure. */
int st_mkdirs(const char *path);

/* ---- snowflake ids: 41-bit ms since 2020-01-01 | 10-bit node | 12-bit sequence ---- */
#define ST_SNOWFLAKE_EPOCH_MS 1577836800000LL
typedef struct {
    uint64_t node;   /* 0..1023 */
    int64_t last_ms; /* never goes backwards, even if the wall clock does */
    uint64_t seq;
} st_snowflake_t;

void st_snowflake_init(st_snowflake_t *sf, uint64_t node);
/* Strictly increasing for one generator. floor: ids must be greater than this (e.g. the
 * largest id already stored, so a clock that went back across a restart cannot reissue). */
uint64_t st_snowflake_next(st_snowflake_t *sf);
void st_snowflake_floor(st_snowflake_t *sf, uint64_t id);
/* The Unix-µs time encoded in an id. */
int64_t st_snowflake_time_us(uint64_t id);

#endif
