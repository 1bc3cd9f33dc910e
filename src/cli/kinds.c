/* SPDX-License-Identifier: MIT */
/*
 * The data kinds as members of the cold tier, one line each (ARCHITECTURE.md "Modules register,
 * the core enforces"): main.c joins them to its tier, and `strata rebuild-meta` (offline.c) calls
 * their rebuild hooks in this order — so adding a kind touches this list, never offline.c.
 */
#include "cli.h"
#include "strata/chat.h"
#include "strata/counters.h"
#include "strata/seats.h"

size_t st_cli_members(const st_cli_kinds_t *k, st_tier_member_t *out[ST_CLI_MEMBERS_MAX])
{
    size_t n = 0;
    out[n++] = st_chat_tier_member(k->chat, k->tier, k->chat_opts); /* first: settles the writer */
    out[n++] = st_chat_delta_tier_member(k->chat);
    out[n++] = st_counters_tier_member(k->store);
    out[n++] = st_chat_kind_tier_member(k->chat, ST_OWNER_ROOM); /* rooms own chat messages */
    out[n++] = st_seats_tier_member(k->seats, k->tier, k->booking_hot_seconds);
    return n;
}
