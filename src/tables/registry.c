/* SPDX-License-Identifier: MIT */
/*
 * The tables of SPEC v5 §5.1 are the kinds' (kinds.h): each kind whose objects make an Iceberg
 * table defines it in its own folder (st_kind_t.table: schema, name mapping, partition field,
 * owner tag) and the tables are those, in ST_KINDS order — messages (chat) 0, room_messages
 * (rooms) 1, bookings (seats) 2. A table's index is stored (the "\0tables" provenance keys,
 * tables.c), so the order only grows at its end. Nothing is kept: each question walks the kinds'
 * const list (a handful of entries), so any thread may ask, before or after st_tables_open.
 */
#include "internal.h"
#include "strata/kinds.h"

size_t st_tables_n(void)
{
    size_t n = 0;
    for (size_t k = 0; k < st_kinds_n; k++)
        if (st_kinds[k]->table) n++;
    ST_ASSERT(n <= ST_TABLES_MAX);
    return n;
}

const st_table_def_t *st_table_def(size_t i)
{
    for (size_t k = 0; k < st_kinds_n; k++)
        if (st_kinds[k]->table && i-- == 0) return st_kinds[k]->table;
    return NULL;
}

int st_table_of_tag(char tag)
{
    int i = 0;
    for (size_t k = 0; k < st_kinds_n; k++) {
        const st_table_def_t *d = st_kinds[k]->table;
        if (!d) continue;
        if (d->tag == tag) return i;
        i++;
    }
    return -1;
}
