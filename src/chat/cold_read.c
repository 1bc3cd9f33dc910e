/* SPDX-License-Identifier: MIT */
/*
 * Reading cold messages: a user's manifest ('F' records) lists its Parquet objects with their
 * msg_id ranges; footers are fetched once and kept (parsed, least recently used out); a read
 * fetches only the row groups whose statistics (conversation, msg_id range) can match, decodes
 * them and renders each row exactly as the hot store would have. A missing or damaged object
 * fails the reads that need it with ST_ECOLD and a log line; nothing else is affected.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__FOOTERS_MAX 4096

typedef struct st_footer {
    st_map_node_t node;
    struct st_footer *prev, *next;
    char *key;
    st_pq_meta_t meta;
} st_footer_t;

void st__chat_render_row(st_buf_t *b, const st_msgrow_t *r)
{
    st_buf_puts(b, "{\"msg_id\":\"");
    st_buf_append_u64(b, r->msg_id);
    st_buf_puts(b, "\",\"conversation_id\":");
    st_buf_append_json_str(b, r->conv, r->conv_len);
    st_buf_puts(b, ",\"from\":");
    st_buf_append_json_str(b, r->from, r->from_len);
    st_buf_printf(b, ",\"timestamp\":%lld,\"seq\":%lld,\"content\":", (long long)r->timestamp,
                  (long long)r->seq);
    st_buf_append_json_str(b, r->content, r->content_len);
    st_buf_puts(b, ",\"metadata\":");
    if (r->metadata)
        st_buf_append(b, r->metadata, r->metadata_len);
    else
        st_buf_puts(b, "null");
    st_buf_appendc(b, '}');
}

static void st__lru_unlink(st_chatcold_t *cc, st_footer_t *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        cc->lru_head = f->next;
    if (f->next)
        f->next->prev = f->prev;
    else
        cc->lru_tail = f->prev;
    f->prev = f->next = NULL;
}

static void st__lru_push(st_chatcold_t *cc, st_footer_t *f)
{
    f->prev = cc->lru_tail;
    f->next = NULL;
    if (cc->lru_tail)
        cc->lru_tail->next = f;
    else
        cc->lru_head = f;
    cc->lru_tail = f;
}

static void st__footer_free(st_chatcold_t *cc, st_footer_t *f)
{
    st__lru_unlink(cc, f);
    st_map_remove(&cc->footers, &f->node);
    st_parquet_meta_free(&f->meta);
    free(f->key);
    free(f);
    cc->nfooters--;
}

void st__chat_cache_free(st_chatcold_t *cc)
{
    while (cc->lru_head)
        st__footer_free(cc, cc->lru_head);
    st_map_free(&cc->footers);
}

/* The parsed footer of an object of `size` bytes (borrowed from the cache). */
int st__chat_footer(st_chatcold_t *cc, const char *key, uint64_t size, const st_pq_meta_t **out)
{
    size_t kl = strlen(key);
    st_map_node_t *n = st_map_get(&cc->footers, key, kl);
    if (n) {
        st_footer_t *f = (st_footer_t *)n;
        st__lru_unlink(cc, f);
        st__lru_push(cc, f);
        *out = &f->meta;
        return ST_OK;
    }
    st_buf_t b = {0};
    uint32_t flen = 0;
    int rc = size >= 12 ? st_objstore_get(cc->obj, key, size - 8, 8, &b) : ST_EINVAL;
    if (rc == ST_OK) rc = st_parquet_footer_len((const uint8_t *)b.data, size, &flen);
    if (rc == ST_OK) {
        st_buf_reset(&b);
        rc = st_objstore_get(cc->obj, key, size - 8 - flen, flen, &b);
    }
    st_footer_t *f = NULL;
    if (rc == ST_OK) {
        f = st_calloc(1, sizeof *f);
        rc = st_parquet_parse_footer((const uint8_t *)b.data, flen, size, &f->meta);
    }
    st_buf_free(&b);
    if (rc != ST_OK) {
        free(f);
        st_error("cold: object %s cannot be read (%s)", key,
                 rc == ST_ENOTFOUND ? "missing"
                 : rc == ST_EINVAL  ? "not a valid strata Parquet file"
                                    : "storage error");
        return ST_ECOLD;
    }
    f->key = st_strndup(key, kl);
    f->node.key = f->key;
    f->node.klen = kl;
    st_map_insert(&cc->footers, &f->node);
    st__lru_push(cc, f);
    if (++cc->nfooters > ST__FOOTERS_MAX) st__footer_free(cc, cc->lru_head);
    *out = &f->meta;
    return ST_OK;
}

/* ---- decoded row groups, kept (least recently used out) within a memory budget ---- */

typedef struct st_rg {
    st_map_node_t node; /* key: the object key, '#', the group's index */
    struct st_rg *prev, *next;
    char *key;
    st_pq_rows_t rows; /* sorted by msg_id (a flush writes them so) */
    size_t bytes;
    unsigned pins; /* in use by the read under way: not evicted */
} st_rg_t;

static void st__rg_unlink(st_chatcold_t *cc, st_rg_t *g)
{
    if (g->prev)
        g->prev->next = g->next;
    else
        cc->rg_head = g->next;
    if (g->next)
        g->next->prev = g->prev;
    else
        cc->rg_tail = g->prev;
    g->prev = g->next = NULL;
}

static void st__rg_push(st_chatcold_t *cc, st_rg_t *g)
{
    g->prev = cc->rg_tail;
    if (cc->rg_tail)
        cc->rg_tail->next = g;
    else
        cc->rg_head = g;
    cc->rg_tail = g;
}

static void st__rg_free(st_chatcold_t *cc, st_rg_t *g)
{
    st__rg_unlink(cc, g);
    st_map_remove(&cc->groups, &g->node);
    cc->rg_bytes -= g->bytes;
    st_parquet_rows_free(&g->rows);
    free(g->key);
    free(g);
}

static void st__rg_trim(st_chatcold_t *cc)
{
    for (st_rg_t *g = cc->rg_head, *next; g && cc->rg_bytes > cc->rg_budget; g = next) {
        next = g->next;
        if (!g->pins) st__rg_free(cc, g);
    }
}

/* Row group gi of an object, decoded (from the cache or fetched now); pinned for the caller. */
static int st__rg_get(st_chatcold_t *cc, const char *key, const st_pq_group_t *G, size_t gi,
                      st_rg_t **out)
{
    st_buf_t k = {0};
    st_buf_printf(&k, "%s#%zu", key, gi);
    st_map_node_t *n = st_map_get(&cc->groups, k.data, k.len);
    if (n) {
        st_rg_t *g = (st_rg_t *)n;
        st__rg_unlink(cc, g);
        st__rg_push(cc, g);
        g->pins++;
        *out = g;
        st_buf_free(&k);
        return ST_OK;
    }
    st_buf_t bytes = {0};
    st_pq_rows_t r;
    int rc = st_objstore_get(cc->obj, key, G->offset, G->length, &bytes);
    if (rc == ST_OK) rc = st_parquet_read_group(G, (const uint8_t *)bytes.data, bytes.len, &r);
    st_buf_free(&bytes);
    for (size_t i = 1; rc == ST_OK && i < r.n; i++)
        if (r.rows[i].msg_id <= r.rows[i - 1].msg_id) {
            st_parquet_rows_free(&r);
            rc = ST_EINVAL;
        }
    if (rc != ST_OK) {
        st_error("cold: row group %zu of %s cannot be read", gi, key);
        st_buf_free(&k);
        return ST_ECOLD;
    }
    st_metric_add(cc->m_cold_reads, 1);
    st_rg_t *g = st_calloc(1, sizeof *g);
    g->rows = r;
    g->bytes = sizeof *g + k.len + r.n * (sizeof *r.rows + 64);
    for (size_t i = 0; i < r.n; i++)
        g->bytes += r.rows[i].conv_len + r.rows[i].from_len + r.rows[i].content_len +
                    r.rows[i].metadata_len;
    g->key = st_buf_steal(&k, &g->node.klen);
    g->node.key = g->key;
    st_map_insert(&cc->groups, &g->node);
    st__rg_push(cc, g);
    cc->rg_bytes += g->bytes;
    g->pins = 1;
    *out = g;
    return ST_OK;
}

void st__chat_rows_cache_free(st_chatcold_t *cc)
{
    while (cc->rg_head)
        st__rg_free(cc, cc->rg_head);
    st_map_free(&cc->groups);
}

/* First index in rows with msg_id > id. */
static size_t st__upper(const st_pq_rows_t *r, uint64_t id)
{
    size_t a = 0, b = r->n;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (r->rows[m].msg_id <= id)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

typedef struct {
    uint64_t id;
    const st_msgrow_t *row;
} st_crow_t;

static int st__cmp_asc(const void *a, const void *b)
{
    uint64_t x = ((const st_crow_t *)a)->id, y = ((const st_crow_t *)b)->id;
    return x < y ? -1 : x > y;
}

static int st__cmp_desc(const void *a, const void *b)
{
    return st__cmp_asc(b, a);
}

/* Up to `need` rows of one object with lo < id < hi (and the conversation), nearest the start
 * of the order first, as pointers into pinned row groups (listed in pinned). */
static int st__file_rows(st_chatcold_t *cc, const char *key, const st_coldfile_t *f,
                         const char *conv, size_t cl, uint64_t lo, uint64_t hi, bool desc,
                         size_t need, st_buf_t *rows, st_buf_t *pinned)
{
    const st_pq_meta_t *m;
    int rc = st__chat_footer(cc, key, f->size, &m);
    for (size_t gi = 0; gi < (rc ? 0 : m->ngroups); gi++) {
        const st_pq_group_t *G = &m->groups[gi];
        if (conv && (G->conv_len != cl || memcmp(G->conv, conv, cl) != 0)) continue;
        if ((lo && G->max_id <= lo) || (hi && G->min_id >= hi)) continue;
        st_rg_t *g;
        if ((rc = st__rg_get(cc, key, G, gi, &g)) != ST_OK) break;
        st_buf_append(pinned, &g, sizeof g);
        size_t a = lo ? st__upper(&g->rows, lo) : 0;
        size_t b = hi ? st__upper(&g->rows, hi - 1) : g->rows.n;
        size_t take = b > a ? b - a : 0;
        if (take > need) take = need;
        size_t from = desc ? b - take : a;
        for (size_t i = from; i < from + take; i++) {
            st_crow_t cr = {g->rows.rows[i].msg_id, &g->rows.rows[i]};
            st_buf_append(rows, &cr, sizeof cr);
        }
    }
    return rc;
}

static int st__collect(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_manifest_t *m = arg;
    (void)key;
    (void)klen;
    if (vlen <= sizeof(st_coldfile_t)) return 0;
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 16;
        m->files = st_realloc(m->files, m->cap * sizeof *m->files);
        m->keys = st_realloc(m->keys, m->cap * sizeof *m->keys);
    }
    memcpy(&m->files[m->n], val, sizeof(st_coldfile_t));
    m->keys[m->n++] =
        st_strndup((const char *)val + sizeof(st_coldfile_t), vlen - sizeof(st_coldfile_t));
    return 0;
}

int st__chat_manifest(st_chat_t *c, const char *u, size_t ul, bool desc, st_manifest_t *out,
                      uint64_t *wait)
{
    uint8_t pre[ST__KEY_CAP];
    size_t pl = st__chat_ukey(pre, 'F', u, ul);
    memset(out, 0, sizeof *out);
    return st_store_range(c->store, pre, pl, NULL, 0, NULL, 0, desc, st__collect, out, wait);
}

void st__chat_manifest_free(st_manifest_t *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->files);
    memset(m, 0, sizeof *m);
}

int st__chat_cold_each(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                       uint64_t lo, uint64_t hi, bool desc, size_t limit, st_chat_msg_fn fn,
                       void *arg, size_t *given, bool *more, uint64_t *last, uint64_t *wait)
{
    *given = 0;
    *more = false;
    if (!c->cold || limit == 0) return ST_OK;
    st_chatcold_t *cc = c->cold;
    st_manifest_t man;
    int rc = st__chat_manifest(c, u, ul, desc, &man, wait);
    st_buf_t json = {0}, rows = {0}, pinned = {0};
    for (size_t i = 0; i < man.n && rc == ST_OK && !*more; i++) {
        const st_coldfile_t *f = &man.files[i];
        if ((lo && f->max_id <= lo) || (hi && f->min_id >= hi)) continue;
        st_buf_reset(&rows);
        /* one row past the page tells whether there is more */
        rc = st__file_rows(cc, man.keys[i], f, conv, cl, lo, hi, desc, limit - *given + 1, &rows,
                           &pinned);
        size_t n = rows.len / sizeof(st_crow_t);
        st_crow_t *r = (st_crow_t *)rows.data;
        if (n > 1) qsort(r, n, sizeof *r, desc ? st__cmp_desc : st__cmp_asc);
        for (size_t k = 0; k < n && rc == ST_OK; k++) {
            if (*given == limit) {
                *more = true;
                break;
            }
            st_buf_reset(&json);
            st__chat_render_row(&json, r[k].row);
            fn(arg, r[k].id, json.data, json.len);
            *last = r[k].id;
            ++*given;
        }
    }
    st_rg_t **pins = (st_rg_t **)pinned.data;
    for (size_t i = 0; i < pinned.len / sizeof *pins; i++)
        pins[i]->pins--;
    st__rg_trim(cc);
    st__chat_manifest_free(&man);
    st_buf_free(&json);
    st_buf_free(&rows);
    st_buf_free(&pinned);
    return rc;
}
