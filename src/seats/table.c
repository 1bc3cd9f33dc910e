/* SPDX-License-Identifier: MIT */
/*
 * Seats' Iceberg table, `bookings` (SPEC v5 §5.1): an event's finished bookings (owner tag 'b'),
 * partitioned by event_id; st_seats_kind's table (kinds.h). Field ids fixed: the Parquet writer
 * (tier.c) stamps the same ids.
 */
#include "internal.h"

static const char st__seats_table_schema[] =
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

/* schema.name-mapping.default: every field by its name (Parquet files written before field ids) */
static const char st__seats_table_map[] =
    "[{\"field-id\":1,\"names\":[\"booking_id\"]},{\"field-id\":2,\"names\":[\"event_id\"]},"
    "{\"field-id\":3,\"names\":[\"owner\"]},{\"field-id\":4,\"names\":[\"status\"]},"
    "{\"field-id\":5,\"names\":[\"items\"],\"fields\":[{\"field-id\":6,\"names\":[\"element\"],"
    "\"fields\":[{\"field-id\":7,\"names\":[\"section\"]},{\"field-id\":8,\"names\":[\"seats\"],"
    "\"fields\":[{\"field-id\":9,\"names\":[\"element\"]}]},"
    "{\"field-id\":10,\"names\":[\"quantity\"]}]}]},"
    "{\"field-id\":11,\"names\":[\"total_price\"]},{\"field-id\":12,\"names\":[\"created_at\"]},"
    "{\"field-id\":13,\"names\":[\"expires_at\"]},{\"field-id\":14,\"names\":[\"finished_at\"]}]";

/* no metrics for owner: a user id (its bounds would name the user, SPEC v5 §5.1) */
static const char *const st__seats_table_none[] = {"owner", NULL};

const st_table_def_t st_seats_table = {{"bookings", st__seats_table_schema, 0, "event_id", 2, 1000},
                                       'b',
                                       14,
                                       st__seats_table_map,
                                       st__seats_table_none};
