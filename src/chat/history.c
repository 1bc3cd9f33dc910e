/* SPDX-License-Identifier: MIT */
/*
 * A message's edit_history (SPEC §2.2) as its row's (SPEC v5 §5.1): the JSON array every answer
 * shows, [{"content","metadata","edited_at"}] oldest first, turned into st_msgedit_t entries for
 * the message files' edit_history column. A flush takes it from a hot message's record, a fold
 * from a cold one's delta ('Z'), so a table reader sees what the API shows: a LIST of the same
 * versions (bounded by --max-edit-history when each edit was made, as the answers are), an empty
 * one for a tombstone, null for a message never edited (its answers have no edit_history).
 * metadata stays the raw JSON text the client wrote, as in the answers.
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <string.h>

/* A JSON string value unescaped into a (NULL: null or not a string). */
static const char *st__hist_str(const char *v, size_t vl, st_arena_t *a, uint32_t *len)
{
    *len = 0;
    if (vl < 2 || v[0] != '"') return NULL;
    cJSON *s = cJSON_ParseWithLength(v, vl);
    const char *out = NULL;
    if (cJSON_IsString(s)) {
        *len = (uint32_t)strlen(s->valuestring);
        out = st_arena_strndup(a, s->valuestring, *len);
    }
    cJSON_Delete(s);
    return out;
}

/* One entry of the array (an object rendered by edit.c). */
static void st__hist_entry(const char *j, size_t n, st_arena_t *a, st_msgedit_t *e)
{
    const char *v;
    size_t vl;
    memset(e, 0, sizeof *e);
    if (st__chat_jmember(j, n, "content", &v, &vl))
        e->content = st__hist_str(v, vl, a, &e->content_len);
    if (st__chat_jmember(j, n, "metadata", &v, &vl) && !(vl == 4 && memcmp(v, "null", 4) == 0)) {
        e->metadata = st_arena_strndup(a, v, vl);
        e->metadata_len = (uint32_t)vl;
    }
    e->edited_at = st__chat_json_time(j, n, "edited_at");
}

bool st__chat_hist_of(const char *j, size_t n, st_arena_t *a, const st_msgedit_t **hist,
                      uint32_t *nhist)
{
    const char *arr, *p, *v;
    size_t al, vl, count = 0;
    *hist = NULL;
    *nhist = 0;
    if (!st__chat_jmember(j, n, "edit_history", &arr, &al) || !al || *arr != '[') return false;
    for (p = arr; st__chat_jnext(&p, arr + al, &v, &vl);)
        count++;
    st_msgedit_t *e = count ? st_arena_alloc(a, count * sizeof *e) : NULL;
    uint32_t k = 0;
    for (p = arr; k < count && st__chat_jnext(&p, arr + al, &v, &vl);)
        st__hist_entry(v, vl, a, &e[k++]);
    *hist = e;
    *nhist = k;
    return true;
}
