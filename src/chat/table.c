/* SPDX-License-Identifier: MIT */
/*
 * Chat's Iceberg table, `messages` (SPEC v5 §5.1): a user's messages (owner tag 0), partitioned by
 * user; st_chat_kind's table (kinds.h). Its schema's field ids are fixed: the Parquet writer
 * stamps the same ids.
 */
#include "internal.h"
#include "strata/chatrows.h"

static const char st__chat_table_schema[] =
    "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["
    "{\"id\":1,\"name\":\"user\",\"required\":true,\"type\":\"string\"},"
    "{\"id\":2,\"name\":\"msg_id\",\"required\":true,\"type\":\"long\"},"
    "{\"id\":3,\"name\":\"conversation_id\",\"required\":true,\"type\":\"string\"}"
    "," ST_CHAT_SCHEMA_TAIL;

/* schema.name-mapping.default: every field by its name (Parquet files written before field ids) */
static const char st__chat_table_map[] =
    "[{\"field-id\":1,\"names\":[\"user\"]},{\"field-id\":2,\"names\":[\"msg_id\"]},"
    "{\"field-id\":3,\"names\":[\"conversation_id\"]}," ST_CHAT_MAP_TAIL;

/* the user's id keeps no metrics either: its bounds would name the user (SPEC v5 §5.1) */
static const char *const st__chat_table_none[] = {"user",     "from",         "content",
                                                  "metadata", "edit_history", NULL};

const st_table_def_t st_chat_table = {{"messages", st__chat_table_schema, 0, "user", 1, 1000},
                                      0,
                                      15,
                                      st__chat_table_map,
                                      st__chat_table_none};
