/* SPDX-License-Identifier: MIT */
/*
 * Events, sections and their 2-bit seat bitmaps: creation (within the seat limits and the
 * total seats budget), stats, sellout timing, JSON views and persistence of event definitions.
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#define ST__EV_XSTR(x) #x
#define ST__EV_STR(x)  ST__EV_XSTR(x)

st_event_t *st__event_find(st_seats_t *s, const char *id, size_t len, uint64_t *wait)
{
    st_event_t *e = (st_event_t *)st_map_get(&s->events, id, len);
    if (e && wait && *wait < e->last_batch) *wait = e->last_batch;
    return e;
}

st_section_t *st__section_find(st_event_t *e, const char *name, size_t len)
{
    for (size_t i = 0; i < e->nsections; i++)
        if (e->sections[i].name_len == len && memcmp(e->sections[i].name, name, len) == 0)
            return &e->sections[i];
    return NULL;
}

int st__seat_get(const st_section_t *sec, uint32_t i)
{
    return (sec->bits[i >> 2] >> ((i & 3) * 2)) & 3;
}

static int64_t *st__count_of(st_counts_t *c, int state)
{
    return state == ST_SEAT_AVAILABLE  ? &c->available
           : state == ST_SEAT_RESERVED ? &c->reserved
                                       : &c->sold;
}

void st__seat_set(st_event_t *e, st_section_t *sec, uint32_t i, int state)
{
    int old = st__seat_get(sec, i);
    if (old == state) return;
    unsigned shift = (i & 3) * 2;
    sec->bits[i >> 2] =
        (uint8_t)((sec->bits[i >> 2] & ~(3u << shift)) | ((unsigned)state << shift));
    (*st__count_of(&sec->c, old))--;
    (*st__count_of(&sec->c, state))++;
    (*st__count_of(&e->c, old))--;
    (*st__count_of(&e->c, state))++;
    int32_t row = (int32_t)(i / (uint32_t)sec->cols);
    if (old == ST_SEAT_AVAILABLE)
        sec->row_avail[row]--;
    else if (state == ST_SEAT_AVAILABLE)
        sec->row_avail[row]++;
    if (old == ST_SEAT_AVAILABLE || state == ST_SEAT_AVAILABLE) sec->row_run[row] = ST_RUN_STALE;
    if (sec->ga && state == ST_SEAT_AVAILABLE && i < sec->ga_hint) sec->ga_hint = i;
}

int64_t st__row_next_run(const st_section_t *sec, int64_t r, int64_t *c, int64_t *len)
{
    uint32_t base = (uint32_t)(r * sec->cols);
    int64_t col = *c, cols = sec->cols;
    for (;;) {
        /* four taken seats in one byte are skipped at once (a sold-out stretch) */
        uint32_t i = base + (uint32_t)col;
        if (col < cols && (i & 3) == 0 && col + 4 <= cols &&
            ((sec->bits[i >> 2] | sec->bits[i >> 2] >> 1) & 0x55) == 0x55) {
            col += 4;
            continue;
        }
        if (col >= cols || st__seat_get(sec, i) == ST_SEAT_AVAILABLE) break;
        col++;
    }
    int64_t start = col;
    while (col < cols) {
        uint32_t i = base + (uint32_t)col;
        if ((i & 3) == 0 && col + 4 <= cols && sec->bits[i >> 2] == 0) {
            col += 4; /* four free seats in one byte */
            continue;
        }
        if (st__seat_get(sec, i) != ST_SEAT_AVAILABLE) break;
        col++;
    }
    *c = col;
    *len = col - start;
    return start;
}

/* Longest and second-longest distinct run lengths, packed (seated rows have <= 10000 cols). */
static uint32_t st__row_runs(st_section_t *sec, int64_t r)
{
    if (sec->row_run[r] != ST_RUN_STALE) return sec->row_run[r];
    int64_t c = 0, len, best = 0, next = 0;
    if (sec->row_avail[r] == sec->cols)
        best = sec->cols;
    else if (sec->row_avail[r] > 0)
        while (c < sec->cols) {
            st__row_next_run(sec, r, &c, &len);
            if (len > best) {
                next = best;
                best = len;
            } else if (len < best && len > next) {
                next = len;
            }
        }
    return sec->row_run[r] = (uint32_t)best << 16 | (uint32_t)next;
}

int32_t st__row_run(st_section_t *sec, int64_t r)
{
    return (int32_t)(st__row_runs(sec, r) >> 16);
}

int32_t st__row_run2(st_section_t *sec, int64_t r)
{
    return (int32_t)(st__row_runs(sec, r) & 0xffff);
}

void st__seat_name(st_buf_t *out, const st_section_t *sec, uint32_t i)
{
    st_buf_appendc(out, '"');
    st_buf_append_u64(out, i / (uint64_t)sec->cols + 1);
    st_buf_appendc(out, '-');
    st_buf_append_u64(out, i % (uint64_t)sec->cols + 1);
    st_buf_appendc(out, '"');
}

/* ---- building and freeing ---- */

/* Index of the first event whose id is >= id (or > id with `after`), in listing order. */
static size_t st__position(const st_seats_t *s, const char *id, size_t len, bool after)
{
    size_t lo = 0, hi = s->sorted.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const st_event_t *m = s->sorted.v[mid];
        size_t n = m->id_len < len ? m->id_len : len;
        int c = memcmp(m->id, id, n);
        if (c < 0 || (c == 0 && (after ? m->id_len <= len : m->id_len < len)))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

st_event_t *st__event_new(st_seats_t *s, const char *id, size_t len)
{
    st_event_t *e = st_calloc(1, sizeof *e);
    e->id = st_strndup(id, len);
    e->id_len = len;
    e->node.key = e->id;
    e->node.klen = len;
    st_map_insert(&s->events, &e->node);
    /* keep the listing order */
    st_vec_reserve(&s->sorted, s->sorted.n + 1);
    size_t lo = st__position(s, id, len, false);
    memmove(&s->sorted.v[lo + 1], &s->sorted.v[lo], (s->sorted.n - lo) * sizeof *s->sorted.v);
    s->sorted.v[lo] = e;
    s->sorted.n++;
    return e;
}

void st__section_init(st_event_t *e, st_section_t *sec, const char *name, size_t nlen, int64_t rows,
                      int64_t cols, int64_t price)
{
    sec->name = st_strndup(name, nlen);
    sec->name_len = nlen;
    sec->rows = rows;
    sec->cols = cols;
    sec->price = price;
    uint64_t n = (uint64_t)(rows * cols);
    sec->bits = st_calloc((n + 3) / 4, 1);
    sec->row_avail = st_malloc((size_t)rows * sizeof *sec->row_avail);
    sec->row_run = st_malloc((size_t)rows * sizeof *sec->row_run);
    for (int64_t r = 0; r < rows; r++) {
        sec->row_avail[r] = (int32_t)cols;
        sec->row_run[r] = cols < 65536 ? (uint32_t)cols << 16 : ST_RUN_STALE;
    }
    sec->c.available = (int64_t)n;
    e->c.available += (int64_t)n;
    e->total += (int64_t)n;
}

/* What a section costs against --max-total-seats: its seats, but a row of fewer than 16 seats
 * counts as 16 (its per-row counter weighs as much as 16 seats of bitmap), and the section itself
 * (struct, name, index: ~200 bytes) as 512 more, so the budget bounds memory whatever the shape,
 * 1x1 sections included: about half a byte per unit. */
#define ST__SECTION_UNITS 512
static uint64_t st__section_cost(int64_t rows, int64_t cols)
{
    return (uint64_t)rows * (uint64_t)(cols < 16 ? 16 : cols) + ST__SECTION_UNITS;
}

void st__section_recount(st_event_t *e, st_section_t *sec)
{
    st_counts_t c = {0, 0, 0};
    for (int64_t r = 0; r < sec->rows; r++) {
        int32_t avail = 0;
        for (int64_t col = 0; col < sec->cols; col++) {
            int st = st__seat_get(sec, (uint32_t)(r * sec->cols + col));
            if (st == 3) st = ST_SEAT_SOLD; /* never written; a damaged chunk keeps the seat */
            (*st__count_of(&c, st))++;
            avail += st == ST_SEAT_AVAILABLE;
        }
        sec->row_avail[r] = avail;
        sec->row_run[r] = ST_RUN_STALE;
        if (!sec->ga) st__row_run(sec, r);
    }
    e->c.available += c.available - sec->c.available;
    e->c.reserved += c.reserved - sec->c.reserved;
    e->c.sold += c.sold - sec->c.sold;
    sec->c = c;
    sec->ga_hint = 0;
}

static void st__event_free(st_event_t *e)
{
    for (size_t i = 0; i < e->nsections; i++) {
        free(e->sections[i].name);
        free(e->sections[i].bits);
        free(e->sections[i].row_avail);
        free(e->sections[i].row_run);
    }
    free(e->sections);
    free(e->name);
    free(e->id);
    free(e);
}

void st__free_events(st_seats_t *s)
{
    for (size_t i = 0; i < s->sorted.n; i++) {
        st_map_remove(&s->events, &s->sorted.v[i]->node);
        st__event_free(s->sorted.v[i]);
    }
    s->sorted.n = 0;
    s->total_seats = 0;
}

/* ---- persistence: the definition and sellout times, as JSON under 'E' id ---- */

int st__event_persist(st_seats_t *s, st_event_t *e, uint64_t *wait)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", e->name ? e->name : "");
    cJSON_AddBoolToObject(j, "has_name", e->name != NULL);
    cJSON_AddNumberToObject(j, "hold_seconds", (double)e->hold_seconds);
    cJSON_AddNumberToObject(j, "created_at", (double)e->created_at);
    cJSON_AddNumberToObject(j, "first_ticket_reserved_at", (double)e->first_reserved_at);
    cJSON_AddNumberToObject(j, "fully_reserved_at", (double)e->fully_reserved_at);
    cJSON *secs = cJSON_AddArrayToObject(j, "sections");
    for (size_t i = 0; i < e->nsections; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", e->sections[i].name);
        cJSON_AddNumberToObject(o, "rows", (double)e->sections[i].rows);
        cJSON_AddNumberToObject(o, "cols", (double)e->sections[i].cols);
        if (e->sections[i].ga) cJSON_AddBoolToObject(o, "general_admission", true);
        cJSON_AddNumberToObject(o, "price", (double)e->sections[i].price);
        cJSON_AddItemToArray(secs, o);
    }
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    uint8_t key[1 + ST_NAME_MAX];
    key[0] = ST_KS_EVENT;
    memcpy(key + 1, e->id, e->id_len);
    uint64_t w = 0;
    int rc = st_store_put(s->store, key, e->id_len + 1, txt, strlen(txt), &w);
    free(txt);
    if (e->last_batch < w) e->last_batch = w;
    if (*wait < w) *wait = w;
    return rc;
}

int st_seats_create(st_seats_t *s, const st_event_spec_t *spec, st_buf_t *out, const char **why,
                    uint64_t *wait)
{
    /* The 409 reports the event: it waits for the batch that created it (via *wait). */
    if (st__event_find(s, spec->event_id, spec->id_len, wait)) return ST_ECONFLICT;
    uint64_t total = 0, cost = 0;
    for (size_t i = 0; i < spec->nsections; i++) {
        const st_section_spec_t *a = &spec->sections[i];
        for (size_t k = 0; k < i; k++)
            if (spec->sections[k].name_len == a->name_len &&
                memcmp(spec->sections[k].name, a->name, a->name_len) == 0) {
                *why = st__whyf("section names must be unique (\"%.*s%s\" is given twice)",
                                ST__WV(a->name, a->name_len));
                return ST_EINVAL;
            }
        if (a->capacity > 0 && (a->rows || a->cols)) {
            *why = st__whyf("section \"%.*s%s\" has a capacity (general admission), so no rows or "
                            "cols",
                            ST__WV(a->name, a->name_len));
            return ST_EINVAL;
        }
        if (a->capacity > 0) {
            total += (uint64_t)a->capacity;
            cost += st__section_cost(1, a->capacity);
            if (total > s->opts.max_seats) {
                *why = "too many seats for one event (see --max-seats)";
                return ST_EINVAL;
            }
            continue;
        }
        if (a->rows < 1 || a->rows > ST_SEATS_MAX_ROWS || a->cols < 1 ||
            a->cols > ST_SEATS_MAX_COLS) {
            *why = "a section has 1.." ST__EV_STR(ST_SEATS_MAX_ROWS) " rows and 1.." ST__EV_STR(
                ST_SEATS_MAX_COLS) " cols";
            return ST_EINVAL;
        }
        total += (uint64_t)(a->rows * a->cols);
        cost += st__section_cost(a->rows, a->cols);
        if (total > s->opts.max_seats) {
            *why = "too many seats for one event (see --max-seats)";
            return ST_EINVAL;
        }
    }
    /* Seat maps live in memory: the budget bounds what all events together may take. */
    if (s->opts.max_total_seats && s->total_seats + cost > s->opts.max_total_seats) {
        *why = "the seats budget of this server is used up (see --max-total-seats)";
        return ST_EFULL;
    }
    st_event_t *e = st__event_new(s, spec->event_id, spec->id_len);
    if (spec->name) e->name = st_strndup(spec->name, spec->name_len);
    e->hold_seconds = spec->hold_seconds;
    e->created_at = e->updated_at = st_now_us();
    e->sections = st_calloc(spec->nsections, sizeof *e->sections);
    e->nsections = spec->nsections;
    for (size_t i = 0; i < spec->nsections; i++) {
        const st_section_spec_t *a = &spec->sections[i];
        bool ga = a->capacity > 0;
        st__section_init(e, &e->sections[i], a->name, a->name_len, ga ? 1 : a->rows,
                         ga ? a->capacity : a->cols, a->price);
        e->sections[i].ga = ga;
    }
    s->total_seats += cost;
    int rc = st__event_persist(s, e, wait);
    if (rc) return rc;
    return st_seats_event_json(s, e->id, e->id_len, out, wait);
}

/* ---- JSON views ---- */

static void st__counts_json(st_buf_t *out, const st_counts_t *c, int64_t total)
{
    st_buf_printf(out, "{\"available\":%lld,\"reserved\":%lld,\"sold\":%lld,\"total\":%lld",
                  (long long)c->available, (long long)c->reserved, (long long)c->sold,
                  (long long)total);
}

static void st__time_or_null(st_buf_t *out, int64_t t)
{
    if (t)
        st_buf_append_i64(out, t);
    else
        st_buf_puts(out, "null");
}

static void st__event_head(st_buf_t *out, const st_event_t *e)
{
    st_buf_puts(out, "{\"event_id\":");
    st_buf_append_json_str(out, e->id, e->id_len);
    st_buf_puts(out, ",\"name\":");
    if (e->name)
        st_buf_append_json_str(out, e->name, strlen(e->name));
    else
        st_buf_puts(out, "null");
    st_buf_puts(out, ",\"event_stats\":");
    st__counts_json(out, &e->c, e->total);
    st_buf_puts(out, ",\"updated_at\":");
    st_buf_append_i64(out, e->updated_at);
    st_buf_puts(out, "}}");
}

int st_seats_event_json(st_seats_t *s, const char *id, size_t len, st_buf_t *out, uint64_t *wait)
{
    st_event_t *e = st__event_find(s, id, len, wait);
    if (!e) return ST_ENOTFOUND;
    st__event_head(out, e);
    out->len--; /* reopen the object */
    st_buf_printf(out, ",\"hold_seconds\":%lld,\"created_at\":%lld,\"sections\":{",
                  (long long)e->hold_seconds, (long long)e->created_at);
    for (size_t i = 0; i < e->nsections; i++) {
        const st_section_t *sec = &e->sections[i];
        if (i) st_buf_appendc(out, ',');
        st_buf_append_json_str(out, sec->name, sec->name_len);
        if (sec->ga)
            st_buf_printf(out,
                          ":{\"capacity\":%lld,\"price\":%lld,\"stats\":", (long long)sec->cols,
                          (long long)sec->price);
        else
            st_buf_printf(out, ":{\"rows\":%lld,\"cols\":%lld,\"price\":%lld,\"stats\":",
                          (long long)sec->rows, (long long)sec->cols, (long long)sec->price);
        st__counts_json(out, &sec->c, sec->rows * sec->cols);
        st_buf_puts(out, "}}");
    }
    st_buf_puts(out, "},\"sellout\":{\"first_ticket_reserved_at\":");
    st__time_or_null(out, e->first_reserved_at);
    st_buf_puts(out, ",\"fully_reserved_at\":");
    st__time_or_null(out, e->fully_reserved_at);
    st_buf_puts(out, ",\"duration_seconds\":");
    if (e->fully_reserved_at && e->first_reserved_at)
        st_buf_printf(out, "%.6f", (double)(e->fully_reserved_at - e->first_reserved_at) / 1e6);
    else
        st_buf_puts(out, "null");
    st_buf_puts(out, "}}");
    return ST_OK;
}

int st_seats_list_json(st_seats_t *s, const char *cursor, size_t clen, size_t limit, st_buf_t *out,
                       uint64_t *wait)
{
    size_t start = 0;
    if (cursor) {
        start = st__position(s, cursor, clen, true);
    }
    st_buf_puts(out, "{\"events\":[");
    size_t i = start;
    for (; i < s->sorted.n && i - start < limit; i++) {
        if (i > start) st_buf_appendc(out, ',');
        st__event_head(out, s->sorted.v[i]);
        if (*wait < s->sorted.v[i]->last_batch) *wait = s->sorted.v[i]->last_batch;
    }
    st_buf_puts(out, "],\"next\":");
    if (i < s->sorted.n && i > start)
        st_buf_append_json_str(out, s->sorted.v[i - 1]->id, s->sorted.v[i - 1]->id_len);
    else
        st_buf_puts(out, "null");
    st_buf_appendc(out, '}');
    return ST_OK;
}

int st_seats_map_json(st_seats_t *s, const char *id, size_t len, const char *section, size_t slen,
                      bool as_json, st_buf_t *out, uint64_t *wait)
{
    st_event_t *e = st__event_find(s, id, len, wait);
    st_section_t *sec = e ? st__section_find(e, section, slen) : NULL;
    if (!sec) return ST_ENOTFOUND;
    if (sec->ga) return ST_EINVAL; /* general admission: places, no seat map */
    st_buf_printf(out, "{\"rows\":%lld,\"cols\":%lld,", (long long)sec->rows, (long long)sec->cols);
    if (as_json) {
        st_buf_puts(out, "\"seats\":[");
        for (int64_t r = 0; r < sec->rows; r++) {
            st_buf_puts(out, r ? ",[" : "[");
            for (int64_t c = 0; c < sec->cols; c++) {
                if (c) st_buf_appendc(out, ',');
                st_buf_appendc(out, (char)('0' + st__seat_get(sec, (uint32_t)(r * sec->cols + c))));
            }
            st_buf_appendc(out, ']');
        }
        st_buf_puts(out, "]}");
        return ST_OK;
    }
    size_t nbytes = (size_t)((sec->rows * sec->cols + 3) / 4);
    st_buf_puts(out, "\"encoding\":\"2bit-base64\",\"seats\":\"");
    st_buf_reserve(out, 4 * ((nbytes + 2) / 3) + 4);
    int n = EVP_EncodeBlock((unsigned char *)out->data + out->len, sec->bits, (int)nbytes);
    out->len += (size_t)n;
    st_buf_puts(out, "\"}");
    return ST_OK;
}

bool st_seats_check(st_seats_t *s)
{
    for (size_t k = 0; k < s->sorted.n; k++) {
        st_event_t *e = s->sorted.v[k];
        st_counts_t ec = {0, 0, 0};
        for (size_t i = 0; i < e->nsections; i++) {
            st_section_t *sec = &e->sections[i];
            st_counts_t c = {0, 0, 0};
            for (int64_t r = 0; r < sec->rows; r++) {
                int32_t avail = 0;
                for (int64_t col = 0; col < sec->cols; col++) {
                    int st = st__seat_get(sec, (uint32_t)(r * sec->cols + col));
                    if (st == 3) return false;
                    (*st__count_of(&c, st))++;
                    avail += st == ST_SEAT_AVAILABLE;
                }
                if (avail != sec->row_avail[r]) return false;
            }
            if (memcmp(&c, &sec->c, sizeof c) != 0) return false;
            ec.available += c.available;
            ec.reserved += c.reserved;
            ec.sold += c.sold;
        }
        if (memcmp(&ec, &e->c, sizeof ec) != 0) return false;
    }
    return true;
}

/* ---- rebuild from the store ---- */

static double st__num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

int st__load_event(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_seats_t *s = arg;
    cJSON *j = cJSON_ParseWithLength(val, vlen);
    const cJSON *secs = j ? cJSON_GetObjectItemCaseSensitive(j, "sections") : NULL;
    if (!cJSON_IsArray(secs)) {
        st_error("seats: event record '%.*s' is corrupt; skipped", (int)klen - 1,
                 (const char *)key + 1);
        cJSON_Delete(j);
        return 0;
    }
    st_event_t *e = st__event_new(s, (const char *)key + 1, klen - 1);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "has_name")) && cJSON_IsString(nm))
        e->name = st_strndup(nm->valuestring, strlen(nm->valuestring));
    e->hold_seconds = (int64_t)st__num(j, "hold_seconds");
    e->created_at = e->updated_at = (int64_t)st__num(j, "created_at");
    e->first_reserved_at = (int64_t)st__num(j, "first_ticket_reserved_at");
    e->fully_reserved_at = (int64_t)st__num(j, "fully_reserved_at");
    e->nsections = (size_t)cJSON_GetArraySize(secs);
    e->sections = st_calloc(e->nsections ? e->nsections : 1, sizeof *e->sections);
    size_t i = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, secs)
    {
        const cJSON *sn = cJSON_GetObjectItemCaseSensitive(o, "name");
        const char *name = cJSON_IsString(sn) ? sn->valuestring : "?";
        int64_t rows = (int64_t)st__num(o, "rows"), cols = (int64_t)st__num(o, "cols");
        bool ga = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "general_admission"));
        if (rows < 1 || cols < 1 || rows * cols > UINT32_MAX || (ga && rows != 1))
            rows = cols = 1; /* corrupt */
        st__section_init(e, &e->sections[i], name, strlen(name), rows, cols,
                         (int64_t)st__num(o, "price"));
        e->sections[i++].ga = ga;
        s->total_seats += st__section_cost(rows, cols);
    }
    cJSON_Delete(j);
    return 0;
}
