/* SPDX-License-Identifier: MIT */
/*
 * Thrift compact protocol, the encoding of Parquet's metadata (file footer, page headers): a
 * writer that appends to a buffer and a bounds-checked reader for untrusted bytes. Only the
 * parts Parquet uses: structs, lists, i32/i64 (zigzag varints), binary, bool.
 */
#ifndef STRATA_COLD_THRIFT_H
#define STRATA_COLD_THRIFT_H

#include "strata/core.h"

enum {
    ST_TC_STOP = 0,
    ST_TC_TRUE = 1,
    ST_TC_FALSE = 2,
    ST_TC_BYTE = 3,
    ST_TC_I16 = 4,
    ST_TC_I32 = 5,
    ST_TC_I64 = 6,
    ST_TC_DOUBLE = 7,
    ST_TC_BINARY = 8,
    ST_TC_LIST = 9,
    ST_TC_SET = 10,
    ST_TC_MAP = 11,
    ST_TC_STRUCT = 12,
};

/* ---- writer: fields are written in increasing id order inside each struct ---- */
#define ST_TW_DEPTH 16
typedef struct {
    st_buf_t *b;
    int depth;
    int16_t last[ST_TW_DEPTH]; /* last field id per open struct */
} st_tw_t;

void st_tw_init(st_tw_t *w, st_buf_t *b);
void st_tw_i32(st_tw_t *w, int16_t id, int32_t v);
void st_tw_i64(st_tw_t *w, int16_t id, int64_t v);
void st_tw_bool(st_tw_t *w, int16_t id, bool v);
void st_tw_bin(st_tw_t *w, int16_t id, const void *p, size_t n);
void st_tw_struct_begin(st_tw_t *w, int16_t id); /* a struct-typed field */
void st_tw_struct_end(st_tw_t *w);
/* A list field of n elements of type elem; structs in it are opened with st_tw_elem_begin. */
void st_tw_list(st_tw_t *w, int16_t id, int elem, size_t n);
void st_tw_elem_begin(st_tw_t *w);
void st_tw_elem_i32(st_tw_t *w, int32_t v);
void st_tw_elem_bin(st_tw_t *w, const void *p, size_t n);

/* ---- reader: every read checks bounds; errors stick (ok turns false) ---- */
typedef struct {
    const uint8_t *p, *end;
    bool ok;
    int depth;
} st_tr_t;

void st_tr_init(st_tr_t *r, const void *p, size_t n);
/* Next field of the current struct: false at its end (or on error). *bool_val for bools. */
bool st_tr_field(st_tr_t *r, int16_t *last, int16_t *id, int *type, bool *bool_val);
int64_t st_tr_int(st_tr_t *r);                     /* i16/i32/i64 (zigzag) */
uint64_t st_tr_uvarint(st_tr_t *r);                /* a plain ULEB128 varint */
const uint8_t *st_tr_bin(st_tr_t *r, size_t *n);   /* borrowed from the input */
bool st_tr_list(st_tr_t *r, int *elem, size_t *n); /* list or set header */
void st_tr_skip(st_tr_t *r, int type);             /* a value of this type */
/* Enters a struct value: call st_tr_field with a fresh last=0 until it returns false. */
bool st_tr_enter(st_tr_t *r);
void st_tr_leave(st_tr_t *r);

#endif
