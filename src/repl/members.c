/* SPDX-License-Identifier: MIT */
/* The --cluster list: "ID=HOST:PORT,..." — the same on every member of a group. */
#define _GNU_SOURCE /* memrchr */
#include "strata/repl.h"

#include <string.h>

static int st__members_member(const char *p, size_t n, st_repl_member_t *m, const char **why)
{
    const char *eq = memchr(p, '=', n);
    if (!eq || eq == p) {
        *why = "each member must be ID=HOST:PORT";
        return ST_EINVAL;
    }
    int64_t id;
    if (st_parse_i64(p, (size_t)(eq - p), &id) != ST_OK || id < 1 || id > 1023) {
        *why = "member ids must be 1..1023";
        return ST_EINVAL;
    }
    const char *a = eq + 1;
    size_t alen = n - (size_t)(a - p);
    const char *colon = alen ? memrchr(a, ':', alen) : NULL;
    int64_t port;
    if (!colon || colon == a || alen >= sizeof m->raft ||
        st_parse_i64(colon + 1, alen - (size_t)(colon + 1 - a), &port) != ST_OK || port < 1 ||
        port > 65535) {
        *why = "member addresses must be HOST:PORT";
        return ST_EINVAL;
    }
    m->id = (uint64_t)id;
    memcpy(m->raft, a, alen);
    m->raft[alen] = '\0';
    return ST_OK;
}

int st_repl_parse_members(const char *spec, st_repl_member_t *out, size_t max, size_t *n,
                          const char **why)
{
    *n = 0;
    *why = NULL;
    const char *p = spec, *end = spec + strlen(spec);
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        while (p < stop && *p == ' ')
            p++;
        if (*n == max) {
            *why = "too many members";
            return ST_EINVAL;
        }
        if (st__members_member(p, (size_t)(stop - p), &out[*n], why) != ST_OK) return ST_EINVAL;
        for (size_t i = 0; i < *n; i++)
            if (out[i].id == out[*n].id || strcmp(out[i].raft, out[*n].raft) == 0) {
                *why = "member ids and addresses must be unique";
                return ST_EINVAL;
            }
        ++*n;
        p = comma ? comma + 1 : end;
    }
    if (*n == 0) {
        *why = "the list is empty";
        return ST_EINVAL;
    }
    return ST_OK;
}
