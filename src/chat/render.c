/* SPDX-License-Identifier: MIT */
/*
 * Messages as JSON: the one shape every answer, frame and record has, its id member named for
 * the owner's kind (strata/owner.h): {"msg_id","conversation_id"|"room_id","from","timestamp",
 * "seq","content","metadata"} and, once edited or deleted, "edited_at","deleted_at",
 * "edit_history". A post renders it once (chat.c), a cold row here, an edit from the members of
 * the message as it was (edit.c). Records of rooms written before owners had kinds name their id
 * member "conversation_id": they are rendered again from their members when read.
 */
#include "internal.h"

#include <string.h>

const char *st__chat_id_field(const char *u, size_t ul)
{
    return st_owner_id_field(st_chat_owner_from(u, ul).kind);
}

void st__chat_put_member(st_buf_t *b, const char *name)
{
    st_buf_puts(b, "\",\"");
    st_buf_puts(b, name);
    st_buf_puts(b, "\":");
}

/* A nullable string as JSON (NULL: null, SPEC §2.2's tombstone). */
static void st__render_str(st_buf_t *b, const char *p, size_t n)
{
    if (p)
        st_buf_append_json_str(b, p, n);
    else
        st_buf_puts(b, "null");
}

void st__chat_render_row(st_buf_t *b, const char *u, size_t ul, const st_msgrow_t *r)
{
    st_buf_puts(b, "{\"msg_id\":\"");
    st_buf_append_u64(b, r->msg_id);
    st__chat_put_member(b, st__chat_id_field(u, ul));
    st_buf_append_json_str(b, r->conv, r->conv_len);
    st_buf_puts(b, ",\"from\":");
    st__render_str(b, r->from, r->from_len);
    st_buf_printf(b, ",\"timestamp\":%lld,\"seq\":%lld,\"content\":", (long long)r->timestamp,
                  (long long)r->seq);
    st__render_str(b, r->content, r->content_len);
    st_buf_puts(b, ",\"metadata\":");
    if (r->metadata)
        st_buf_append(b, r->metadata, r->metadata_len);
    else
        st_buf_puts(b, "null");
    st_buf_appendc(b, '}');
}

bool st__chat_json_conv(const char *j, size_t n, const char **v, size_t *vl)
{
    return st__chat_jmember(j, n, "conversation_id", v, vl) ||
           st__chat_jmember(j, n, "room_id", v, vl);
}

bool st__chat_json_legacy(const char *u, size_t ul, const char *j, size_t n)
{
    const char *v;
    size_t vl;
    const char *field = st__chat_id_field(u, ul);
    /* a user's records always named it conversation_id: never rendered again */
    return strcmp(field, "conversation_id") != 0 && !st__chat_jmember(j, n, field, &v, &vl);
}

void st__chat_put_json(st_buf_t *b, const char *u, size_t ul, const char *j, size_t n)
{
    if (!st__chat_json_legacy(u, ul, j, n)) {
        st_buf_append(b, j, n);
        return;
    }
    /* the members in the shape's order, each as the record holds it, the id member renamed */
    static const char *const members[] = {"msg_id",     "conversation_id", "from",     "timestamp",
                                          "seq",        "content",         "metadata", "edited_at",
                                          "deleted_at", "edit_history"};
    const char *v;
    size_t vl;
    st_buf_appendc(b, '{');
    for (size_t i = 0, k = 0; i < sizeof members / sizeof *members; i++) {
        if (!st__chat_jmember(j, n, members[i], &v, &vl)) continue;
        const char *name = i == 1 ? st__chat_id_field(u, ul) : members[i];
        st_buf_printf(b, "%s\"%s\":", k++ ? "," : "", name);
        st_buf_append(b, v, vl);
    }
    st_buf_appendc(b, '}');
}
