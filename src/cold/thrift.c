/* SPDX-License-Identifier: MIT */
/*
 * Thrift compact protocol (as Parquet uses it). Integers are zigzag varints; a field header
 * carries the id as a delta from the previous field of the same struct when it fits in four
 * bits; booleans live in the field header's type nibble. The reader treats its input as
 * hostile: bounds are checked on every byte, list sizes are bounded by the bytes left, and
 * nesting is limited, so a corrupt footer is an error, never a crash.
 */
#include "thrift.h"

#include <string.h>

#define ST__TR_MAX_DEPTH 32

/* ---- writer ---- */

static void st__varint(st_buf_t *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    st_buf_append(b, t, n);
}

static uint64_t st__zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

void st_tw_init(st_tw_t *w, st_buf_t *b)
{
    w->b = b;
    w->depth = 0;
    w->last[0] = 0;
}

static void st__thrift_field(st_tw_t *w, int16_t id, int type)
{
    int16_t delta = (int16_t)(id - w->last[w->depth]);
    if (delta > 0 && delta <= 15) {
        st_buf_appendc(w->b, (char)(delta << 4 | type));
    } else {
        st_buf_appendc(w->b, (char)type);
        st__varint(w->b, st__zigzag(id));
    }
    w->last[w->depth] = id;
}

void st_tw_i32(st_tw_t *w, int16_t id, int32_t v)
{
    st__thrift_field(w, id, ST_TC_I32);
    st__varint(w->b, st__zigzag(v));
}

void st_tw_i64(st_tw_t *w, int16_t id, int64_t v)
{
    st__thrift_field(w, id, ST_TC_I64);
    st__varint(w->b, st__zigzag(v));
}

void st_tw_bool(st_tw_t *w, int16_t id, bool v)
{
    st__thrift_field(w, id, v ? ST_TC_TRUE : ST_TC_FALSE);
}

void st_tw_bin(st_tw_t *w, int16_t id, const void *p, size_t n)
{
    st__thrift_field(w, id, ST_TC_BINARY);
    st_tw_elem_bin(w, p, n);
}

static void st__push(st_tw_t *w)
{
    ST_ASSERT(w->depth + 1 < ST_TW_DEPTH);
    w->last[++w->depth] = 0;
}

void st_tw_struct_begin(st_tw_t *w, int16_t id)
{
    st__thrift_field(w, id, ST_TC_STRUCT);
    st__push(w);
}

void st_tw_struct_end(st_tw_t *w)
{
    st_buf_appendc(w->b, ST_TC_STOP);
    if (w->depth > 0) w->depth--;
}

void st_tw_list(st_tw_t *w, int16_t id, int elem, size_t n)
{
    st__thrift_field(w, id, ST_TC_LIST);
    if (n < 15) {
        st_buf_appendc(w->b, (char)(n << 4 | (size_t)elem));
    } else {
        st_buf_appendc(w->b, (char)(0xf0 | elem));
        st__varint(w->b, n);
    }
}

void st_tw_elem_begin(st_tw_t *w)
{
    st__push(w);
}

void st_tw_elem_i32(st_tw_t *w, int32_t v)
{
    st__varint(w->b, st__zigzag(v));
}

void st_tw_elem_bin(st_tw_t *w, const void *p, size_t n)
{
    st__varint(w->b, n);
    st_buf_append(w->b, p, n);
}

/* ---- reader ---- */

void st_tr_init(st_tr_t *r, const void *p, size_t n)
{
    r->p = p;
    r->end = r->p + n;
    r->ok = true;
    r->depth = 0;
}

static uint64_t st__rvarint(st_tr_t *r)
{
    uint64_t v = 0;
    for (int shift = 0; r->ok && shift < 64; shift += 7) {
        if (r->p >= r->end) break;
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return v;
    }
    r->ok = false;
    return 0;
}

static int64_t st__unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static uint8_t st__byte(st_tr_t *r)
{
    if (!r->ok || r->p >= r->end) {
        r->ok = false;
        return 0;
    }
    return *r->p++;
}

bool st_tr_field(st_tr_t *r, int16_t *last, int16_t *id, int *type, bool *bool_val)
{
    uint8_t b = st__byte(r);
    if (!r->ok || b == ST_TC_STOP) return false;
    int t = b & 0x0f, delta = b >> 4;
    int64_t fid = delta ? *last + delta : st__unzigzag(st__rvarint(r));
    if (fid < INT16_MIN || fid > INT16_MAX || t > ST_TC_STRUCT) r->ok = false;
    *id = *last = (int16_t)fid;
    *bool_val = t == ST_TC_TRUE;
    *type = (t == ST_TC_TRUE || t == ST_TC_FALSE) ? ST_TC_TRUE : t;
    return r->ok;
}

uint64_t st_tr_uvarint(st_tr_t *r)
{
    return st__rvarint(r);
}

int64_t st_tr_int(st_tr_t *r)
{
    return st__unzigzag(st__rvarint(r));
}

const uint8_t *st_tr_bin(st_tr_t *r, size_t *n)
{
    uint64_t len = st__rvarint(r);
    if (!r->ok || len > (uint64_t)(r->end - r->p)) {
        r->ok = false;
        *n = 0;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += len;
    *n = (size_t)len;
    return p;
}

bool st_tr_list(st_tr_t *r, int *elem, size_t *n)
{
    uint8_t b = st__byte(r);
    uint64_t size = b >> 4;
    if (size == 15) size = st__rvarint(r);
    *elem = b & 0x0f;
    /* every element takes at least one byte */
    if (!r->ok || size > (uint64_t)(r->end - r->p) || *elem > ST_TC_STRUCT) {
        r->ok = false;
        *n = 0;
        return false;
    }
    *n = (size_t)size;
    return true;
}

bool st_tr_enter(st_tr_t *r)
{
    if (++r->depth > ST__TR_MAX_DEPTH) r->ok = false;
    return r->ok;
}

void st_tr_leave(st_tr_t *r)
{
    r->depth--;
}

static void st__thrift_skip(st_tr_t *r, int type, bool in_list)
{
    if (!r->ok) return;
    size_t n;
    int elem;
    switch (type) {
    case ST_TC_TRUE:
    case ST_TC_FALSE:
        if (in_list) st__byte(r);
        break;
    case ST_TC_BYTE:
        st__byte(r);
        break;
    case ST_TC_I16:
    case ST_TC_I32:
    case ST_TC_I64:
        st__rvarint(r);
        break;
    case ST_TC_DOUBLE:
        if (r->end - r->p < 8)
            r->ok = false;
        else
            r->p += 8;
        break;
    case ST_TC_BINARY:
        st_tr_bin(r, &n);
        break;
    case ST_TC_LIST:
    case ST_TC_SET:
        if (!st_tr_enter(r)) break;
        if (st_tr_list(r, &elem, &n))
            for (size_t i = 0; i < n && r->ok; i++)
                st__thrift_skip(r, elem, true);
        st_tr_leave(r);
        break;
    case ST_TC_MAP: {
        uint64_t size = st__rvarint(r);
        if (!size) break;
        uint8_t kv = st__byte(r);
        if (size > (uint64_t)(r->end - r->p) || !st_tr_enter(r)) {
            r->ok = false;
            break;
        }
        for (uint64_t i = 0; i < size && r->ok; i++) {
            st__thrift_skip(r, kv >> 4, true);
            st__thrift_skip(r, kv & 0x0f, true);
        }
        st_tr_leave(r);
        break;
    }
    case ST_TC_STRUCT: {
        if (!st_tr_enter(r)) break;
        int16_t last = 0, id;
        int t;
        bool bv;
        while (st_tr_field(r, &last, &id, &t, &bv))
            st__thrift_skip(r, t, false);
        st_tr_leave(r);
        break;
    }
    default:
        r->ok = false;
    }
}

void st_tr_skip(st_tr_t *r, int type)
{
    st__thrift_skip(r, type, false);
}
