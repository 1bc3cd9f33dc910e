/* SPDX-License-Identifier: MIT */
/*
 * A strict check of JSON text (RFC 8259), run before cJSON parses request bodies, tokens and
 * stream frames. cJSON is lenient where it matters: it takes bytes that are not UTF-8, numbers
 * such as "01" or "+1", raw control characters, and it cuts strings at an escaped U+0000 (so
 * "alice\u0000bob" reads as "alice"). The check refuses the first ones, reports the last, and
 * finds the raw text of one top-level member so that it can be stored exactly as sent.
 */
#include "strata/core.h"

#include <string.h>

#define ST__JSON_MAX_DEPTH 512

typedef struct {
    const char *p, *end;
    int depth;
    st_json_info_t *info;
    bool in_member; /* inside the value of info->member: its U+0000 are allowed */
} st__js_t;

static void st__js_ws(st__js_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n'))
        j->p++;
}

static int st__js_hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* A string; *raw and *rawlen get its text between the quotes. Escapes as cJSON takes them: a high
 * surrogate must be followed by an escaped low one. The text was checked as UTF-8 already. */
static int st__js_string(st__js_t *j, const char **raw, size_t *rawlen)
{
    j->p++; /* opening quote */
    const char *start = j->p;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c < 0x20) return -1;
        if (c != '\\') {
            j->p++;
            continue;
        }
        if (j->end - j->p < 2) return -1;
        char e = j->p[1];
        if (e != 'u') {
            if (!strchr("\"\\/bfnrt", e) || e == '\0') return -1;
            j->p += 2;
            continue;
        }
        unsigned cp;
        if (j->end - j->p < 6 || st__js_hex4(j->p + 2, &cp)) return -1;
        j->p += 6;
        if (cp >= 0xdc00 && cp <= 0xdfff) return -1;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            unsigned lo;
            if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
                st__js_hex4(j->p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                return -1;
            j->p += 6;
        }
        if (cp == 0 && !j->in_member) j->info->nul = true;
    }
    if (j->p >= j->end) return -1;
    *raw = start;
    *rawlen = (size_t)(j->p - start);
    j->p++; /* closing quote */
    return 0;
}

/* Does the raw text of a key decode to `name` (ASCII)? Escaped keys are compared decoded. */
static bool st__js_key_is(const char *k, size_t n, const char *name)
{
    size_t i = 0, o = 0, nl = strlen(name);
    while (i < n) {
        char c = k[i];
        unsigned cp;
        if (c == '\\' && k[i + 1] == 'u') {
            /* The key was validated by the scanner; a failure here means it was not ours. */
            if (st__js_hex4(k + i + 2, &cp)) return false;
            i += 6;
        } else if (c == '\\') {
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            cp = (unsigned char)to[strchr(from, k[i + 1]) - from];
            i += 2;
        } else {
            cp = (unsigned char)c;
            i++;
        }
        if (o >= nl || cp != (unsigned char)name[o++]) return false;
    }
    return o == nl;
}

static int st__js_number(st__js_t *j)
{
    const char *p = j->p, *e = j->end;
    if (p < e && *p == '-') p++;
    if (p < e && *p == '0')
        p++;
    else if (p < e && *p >= '1' && *p <= '9')
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    else
        return -1;
    if (p < e && *p == '.') {
        if (++p >= e || *p < '0' || *p > '9') return -1;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return -1;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    j->p = p;
    return 0;
}

static int st__js_value(st__js_t *j);

static int st__js_container(st__js_t *j, bool object)
{
    if (++j->depth > ST__JSON_MAX_DEPTH) return -1;
    bool top = j->depth == 1;
    j->p++;
    st__js_ws(j);
    if (j->p < j->end && *j->p == (object ? '}' : ']')) {
        j->p++;
        j->depth--;
        return 0;
    }
    for (;;) {
        bool is_member = false;
        if (object) {
            const char *k;
            size_t kn;
            if (j->p >= j->end || *j->p != '"' || st__js_string(j, &k, &kn)) return -1;
            is_member =
                top && j->info->member && !j->info->value && st__js_key_is(k, kn, j->info->member);
            st__js_ws(j);
            if (j->p >= j->end || *j->p != ':') return -1;
            j->p++;
            st__js_ws(j);
        }
        const char *v0 = j->p;
        bool outer = j->in_member;
        j->in_member = outer || is_member;
        if (st__js_value(j)) return -1;
        j->in_member = outer;
        if (is_member) {
            j->info->value = v0;
            j->info->value_len = (size_t)(j->p - v0);
        }
        st__js_ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            st__js_ws(j);
            continue;
        }
        if (j->p < j->end && *j->p == (object ? '}' : ']')) {
            j->p++;
            j->depth--;
            return 0;
        }
        return -1;
    }
}

static int st__js_value(st__js_t *j)
{
    if (j->p >= j->end) return -1;
    const char *raw;
    size_t n, left = (size_t)(j->end - j->p);
    switch (*j->p) {
    case '{':
        return st__js_container(j, true);
    case '[':
        return st__js_container(j, false);
    case '"':
        return st__js_string(j, &raw, &n);
    case 't':
        n = 4;
        raw = "true";
        break;
    case 'f':
        n = 5;
        raw = "false";
        break;
    case 'n':
        n = 4;
        raw = "null";
        break;
    default:
        return st__js_number(j);
    }
    if (left < n || memcmp(j->p, raw, n) != 0) return -1;
    j->p += n;
    return 0;
}

int st_json_check(const char *s, size_t n, st_json_info_t *info)
{
    info->value = NULL;
    info->value_len = 0;
    info->nul = false;
    info->error_at = 0;
    size_t valid = st_utf8_prefix(s, n);
    if (valid != n) {
        info->error_at = valid;
        return ST_EJSON;
    }
    st__js_t j = {s, s + n, 0, info, false};
    st__js_ws(&j);
    int rc = st__js_value(&j);
    if (rc == 0) st__js_ws(&j);
    if (rc != 0 || j.p != j.end) {
        info->error_at = (size_t)(j.p - s);
        info->value = NULL;
        info->value_len = 0;
        return ST_EJSON;
    }
    return ST_OK;
}
