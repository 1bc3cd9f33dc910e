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
static int st__footer(st_chatcold_t *cc, const char *key, uint64_t size, const st_pq_meta_t **out)
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

typedef struct {
    uint64_t id;
    size_t off, len;
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

/* Rows of one object with lo < id < hi (and the conversation), rendered into out. */
static int st__file_rows(st_chatcold_t *cc, const char *key, const st_coldfile_t *f,
                         const char *conv, size_t cl, uint64_t lo, uint64_t hi, st_buf_t *json,
                         st_buf_t *rows)
{
    const st_pq_meta_t *m;
    int rc = st__footer(cc, key, f->size, &m);
    for (size_t g = 0; g < (rc ? 0 : m->ngroups); g++) {
        const st_pq_group_t *G = &m->groups[g];
        if (conv && (G->conv_len != cl || memcmp(G->conv, conv, cl) != 0)) continue;
        if ((lo && G->max_id <= lo) || (hi && G->min_id >= hi)) continue;
        st_buf_t bytes = {0};
        st_pq_rows_t r;
        rc = st_objstore_get(cc->obj, key, G->offset, G->length, &bytes);
        if (rc == ST_OK) rc = st_parquet_read_group(G, (const uint8_t *)bytes.data, bytes.len, &r);
        st_buf_free(&bytes);
        if (rc != ST_OK) {
            st_error("cold: row group %zu of %s cannot be read", g, key);
            return ST_ECOLD;
        }
        st_metric_add(cc->m_cold_reads, 1);
        for (size_t i = 0; i < r.n; i++) {
            const st_msgrow_t *x = &r.rows[i];
            if ((lo && x->msg_id <= lo) || (hi && x->msg_id >= hi)) continue;
            st_crow_t cr = {x->msg_id, json->len, 0};
            st__chat_render_row(json, x);
            cr.len = json->len - cr.off;
            st_buf_append(rows, &cr, sizeof cr);
        }
        st_parquet_rows_free(&r);
    }
    return rc;
}

typedef struct {
    st_coldfile_t *files;
    char **keys;
    size_t n, cap;
} st_manifest_t;

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

int st__chat_cold_each(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                       uint64_t lo, uint64_t hi, bool desc, size_t limit, st_chat_msg_fn fn,
                       void *arg, size_t *given, bool *more, uint64_t *last, uint64_t *wait)
{
    *given = 0;
    *more = false;
    if (!c->cold || limit == 0) return ST_OK;
    uint8_t pre[ST__KEY_CAP];
    size_t pl = st__chat_ukey(pre, 'F', u, ul);
    st_manifest_t man = {0};
    int rc = st_store_range(c->store, pre, pl, NULL, 0, NULL, 0, desc, st__collect, &man, wait);
    st_buf_t json = {0}, rows = {0};
    for (size_t i = 0; i < man.n && rc == ST_OK && !*more; i++) {
        const st_coldfile_t *f = &man.files[i];
        if ((lo && f->max_id <= lo) || (hi && f->min_id >= hi)) continue;
        st_buf_reset(&json);
        st_buf_reset(&rows);
        rc = st__file_rows(c->cold, man.keys[i], f, conv, cl, lo, hi, &json, &rows);
        size_t n = rows.len / sizeof(st_crow_t);
        st_crow_t *r = (st_crow_t *)rows.data;
        if (n > 1) qsort(r, n, sizeof *r, desc ? st__cmp_desc : st__cmp_asc);
        for (size_t k = 0; k < n && rc == ST_OK; k++) {
            if (*given == limit) {
                *more = true;
                break;
            }
            fn(arg, r[k].id, json.data + r[k].off, r[k].len);
            *last = r[k].id;
            ++*given;
        }
    }
    for (size_t i = 0; i < man.n; i++)
        free(man.keys[i]);
    free(man.keys);
    free(man.files);
    st_buf_free(&json);
    st_buf_free(&rows);
    return rc;
}
