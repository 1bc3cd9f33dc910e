/* SPDX-License-Identifier: MIT */
/*
 * The kinds' list (kinds.h: ST_KINDS, one line each) as an array the config table and the tier's
 * joiners loop over: main.c joins their members to its tier, and `strata rebuild-meta`
 * (offline.c) calls their rebuild hooks in this order — so adding a kind touches the list, never
 * main.c, config.c or offline.c.
 */
#include "cli.h"
#include "strata/kinds.h"

#define ST__KIND_ENTRY(name) &st_##name##_kind,
const st_kind_t *const st_kinds[] = {ST_KINDS(ST__KIND_ENTRY)};
const size_t st_kinds_n = sizeof st_kinds / sizeof st_kinds[0];

size_t st_cli_members(const st_kind_env_t *env, st_tier_member_t *out[ST_CLI_MEMBERS_MAX])
{
    ST_ASSERT(st_kinds_n <= ST_CLI_MEMBERS_MAX);
    for (size_t i = 0; i < st_kinds_n; i++)
        out[i] = st_kinds[i]->member(env, st_config_kind(env->cfg, st_kinds[i]));
    return st_kinds_n;
}
