/* SPDX-License-Identifier: MIT */
/*
 * owner: whose messages chat keeps (SPEC §2, §2.1). A user owns its conversations; a room owns
 * its one shared conversation (whose id is the room id). The kind decides, wherever chat shows an
 * owner's messages, the name of the id member in answers and frames (conversation_id or
 * room_id), the object folder ({user}/ or shared/conversations/{room}/) and the table (messages
 * or room_messages, SPEC v5 §5.1). The id is a name (SPEC §0) of either kind: no name is kept
 * apart for the other kind, two owners are the same only when kind and id are.
 *
 * An owner borrows its id (never NUL-terminated by contract); a function that takes a const
 * st_owner_t * reads it only for the call. ST_USER/ST_ROOM make one in place for a call.
 */
#ifndef STRATA_OWNER_H
#define STRATA_OWNER_H

#include <stddef.h>

typedef enum { ST_OWNER_USER, ST_OWNER_ROOM } st_owner_kind_t;

typedef struct {
    st_owner_kind_t kind;
    const char *id; /* borrowed */
    size_t len;
} st_owner_t;

/* A pointer to an owner made in place (valid to the end of the enclosing block). */
#define ST_USER(id, len) (&(const st_owner_t){ST_OWNER_USER, (id), (len)})
#define ST_ROOM(id, len) (&(const st_owner_t){ST_OWNER_ROOM, (id), (len)})

/* The member an owner's messages name their conversation by: "conversation_id" or "room_id". */
static inline const char *st_owner_id_field(st_owner_kind_t kind)
{
    return kind == ST_OWNER_ROOM ? "room_id" : "conversation_id";
}

#endif
