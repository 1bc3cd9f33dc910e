/* SPDX-License-Identifier: MIT */
/*
 * Rooms' Iceberg table, `room_messages` (SPEC v5 §5.1): a room's messages (owner tag 'r'),
 * partitioned by room_id; st_rooms_kind's table (kinds.h). Chat's rows (strata/chatrows.h) after
 * the room and msg_id.
 */
#include "internal.h"
#include "strata/chatrows.h"

static const char st__rooms_table_schema[] =
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["
    "{\"id\":1,\"name\":\"room_id\",\"required\":true,\"type\":\"string\"},"
    "{\"id\":2,\"name\":\"msg_id\",\"required\":true,\"type\":\"long\"}," ST_CHAT_SCHEMA_TAIL;

/* schema.name-mapping.default: every field by its name (Parquet files written before field ids);
 * field 1 was conversation_id in those files. */
static const char st__rooms_table_map[] =
    "[{\"field-id\":1,\"names\":[\"room_id\",\"conversation_id\"]},"
    "{\"field-id\":2,\"names\":[\"msg_id\"]}," ST_CHAT_MAP_TAIL;

/* free text and the sender's user id keep no metrics (SPEC v5 §5.1) */
static const char *const st__rooms_table_none[] = {"from", "content", "metadata", "edit_history",
                                                   NULL};

const st_table_def_t st_rooms_table = {
    {"room_messages", st__rooms_table_schema, 0, "room_id", 1, 1000},
    'r',
    15,
    st__rooms_table_map,
    st__rooms_table_none};
