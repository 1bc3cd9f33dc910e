/* SPDX-License-Identifier: MIT */
/*
 * The three tables of SPEC v5 §5.1: their Iceberg schemas (field ids fixed: the Parquet writer
 * stamps the same ids), partition specs and table properties.
 */
#include "internal.h"

#define ST__MSG_TAIL                                                                               \
    "{\"id\":4,\"name\":\"from\",\"required\":false,\"type\":\"string\"},"                         \
    "{\"id\":5,\"name\":\"timestamp\",\"required\":true,\"type\":\"timestamptz\"},"                \
    "{\"id\":6,\"name\":\"seq\",\"required\":true,\"type\":\"long\"},"                             \
    "{\"id\":7,\"name\":\"content\",\"required\":false,\"type\":\"string\"},"                      \
    "{\"id\":8,\"name\":\"metadata\",\"required\":false,\"type\":\"string\"},"                     \
    "{\"id\":9,\"name\":\"edited_at\",\"required\":false,\"type\":\"timestamptz\"},"               \
    "{\"id\":10,\"name\":\"deleted_at\",\"required\":false,\"type\":\"timestamptz\"},"             \
    "{\"id\":11,\"name\":\"edit_history\",\"required\":false,\"type\":{\"type\":\"list\","         \
    "\"element-id\":12,\"element-required\":true,\"element\":{\"type\":\"struct\",\"fields\":["    \
    "{\"id\":13,\"name\":\"content\",\"required\":false,\"type\":\"string\"},"                     \
    "{\"id\":14,\"name\":\"metadata\",\"required\":false,\"type\":\"string\"},"                    \
    "{\"id\":15,\"name\":\"edited_at\",\"required\":true,\"type\":\"timestamptz\"}]}}}]}"

static const char st__messages_schema[] =
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["
    "{\"id\":1,\"name\":\"user\",\"required\":true,\"type\":\"string\"},"
    "{\"id\":2,\"name\":\"msg_id\",\"required\":true,\"type\":\"long\"},"
    "{\"id\":3,\"name\":\"conversation_id\",\"required\":true,\"type\":\"string\"}," ST__MSG_TAIL;

static const char st__rooms_schema[] =
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["
    "{\"id\":1,\"name\":\"room_id\",\"required\":true,\"type\":\"string\"},"
    "{\"id\":2,\"name\":\"msg_id\",\"required\":true,\"type\":\"long\"}," ST__MSG_TAIL;

static const char st__bookings_schema[] =
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["
    "{\"id\":1,\"name\":\"booking_id\",\"required\":true,\"type\":\"long\"},"
    "{\"id\":2,\"name\":\"event_id\",\"required\":true,\"type\":\"string\"},"
    "{\"id\":3,\"name\":\"owner\",\"required\":true,\"type\":\"string\"},"
    "{\"id\":4,\"name\":\"status\",\"required\":true,\"type\":\"string\"},"
    "{\"id\":5,\"name\":\"items\",\"required\":true,\"type\":{\"type\":\"list\",\"element-id\":6,"
    "\"element-required\":true,\"element\":{\"type\":\"struct\",\"fields\":["
    "{\"id\":7,\"name\":\"section\",\"required\":true,\"type\":\"string\"},"
    "{\"id\":8,\"name\":\"seats\",\"required\":true,\"type\":{\"type\":\"list\",\"element-id\":9,"
    "\"element-required\":true,\"element\":\"string\"}},"
    "{\"id\":10,\"name\":\"quantity\",\"required\":true,\"type\":\"long\"}]}}},"
    "{\"id\":11,\"name\":\"total_price\",\"required\":true,\"type\":\"long\"},"
    "{\"id\":12,\"name\":\"created_at\",\"required\":true,\"type\":\"timestamptz\"},"
    "{\"id\":13,\"name\":\"expires_at\",\"required\":true,\"type\":\"timestamptz\"},"
    "{\"id\":14,\"name\":\"finished_at\",\"required\":true,\"type\":\"timestamptz\"}]}";

/* schema.name-mapping.default: every field by its name (Parquet files written before field ids,
 * SPEC v5 §5.1); room_messages' field 1 was conversation_id in those files. */
#define ST__MAP_TAIL                                                                               \
    "{\"field-id\":4,\"names\":[\"from\"]},{\"field-id\":5,\"names\":[\"timestamp\"]},"            \
    "{\"field-id\":6,\"names\":[\"seq\"]},{\"field-id\":7,\"names\":[\"content\"]},"               \
    "{\"field-id\":8,\"names\":[\"metadata\"]},{\"field-id\":9,\"names\":[\"edited_at\"]},"        \
    "{\"field-id\":10,\"names\":[\"deleted_at\"]},{\"field-id\":11,\"names\":[\"edit_history\"],"  \
    "\"fields\":[{\"field-id\":12,\"names\":[\"element\"],\"fields\":["                            \
    "{\"field-id\":13,\"names\":[\"content\"]},{\"field-id\":14,\"names\":[\"metadata\"]},"        \
    "{\"field-id\":15,\"names\":[\"edited_at\"]}]}]}]"

static const char st__messages_map[] =
    "[{\"field-id\":1,\"names\":[\"user\"]},{\"field-id\":2,\"names\":[\"msg_id\"]},"
    "{\"field-id\":3,\"names\":[\"conversation_id\"]}," ST__MAP_TAIL;
static const char st__rooms_map[] = "[{\"field-id\":1,\"names\":[\"room_id\",\"conversation_id\"]},"
                                    "{\"field-id\":2,\"names\":[\"msg_id\"]}," ST__MAP_TAIL;
static const char st__bookings_map[] =
    "[{\"field-id\":1,\"names\":[\"booking_id\"]},{\"field-id\":2,\"names\":[\"event_id\"]},"
    "{\"field-id\":3,\"names\":[\"owner\"]},{\"field-id\":4,\"names\":[\"status\"]},"
    "{\"field-id\":5,\"names\":[\"items\"],\"fields\":[{\"field-id\":6,\"names\":[\"element\"],"
    "\"fields\":[{\"field-id\":7,\"names\":[\"section\"]},{\"field-id\":8,\"names\":[\"seats\"],"
    "\"fields\":[{\"field-id\":9,\"names\":[\"element\"]}]},"
    "{\"field-id\":10,\"names\":[\"quantity\"]}]}]},"
    "{\"field-id\":11,\"names\":[\"total_price\"]},{\"field-id\":12,\"names\":[\"created_at\"]},"
    "{\"field-id\":13,\"names\":[\"expires_at\"]},{\"field-id\":14,\"names\":[\"finished_at\"]}]";

const st_table_def_t st_table_defs[ST_TABLES_N] = {
    {{"messages", st__messages_schema, 0, "user", 1, 1000}, 0, 15, st__messages_map, true},
    {{"room_messages", st__rooms_schema, 0, "room_id", 1, 1000}, 'r', 15, st__rooms_map, true},
    {{"bookings", st__bookings_schema, 0, "event_id", 2, 1000}, 'b', 14, st__bookings_map, false},
};

int st_table_of_tag(char tag)
{
    for (int i = 0; i < ST_TABLES_N; i++)
        if (st_table_defs[i].tag == tag) return i;
    return -1;
}
