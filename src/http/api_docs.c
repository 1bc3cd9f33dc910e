/* SPDX-License-Identifier: MIT */
/*
 * GET /v1/openapi.json: the OpenAPI 3.1 document of this build's HTTP API. docs/openapi.yaml is
 * the source; docs/openapi.json is generated from it (redocly bundle), checked in, and embedded
 * by CMake (tools/embed.cmake), so building needs no YAML tooling.
 */
#include "internal.h"

extern const unsigned char st_openapi_json[];
extern const size_t st_openapi_json_len;

int st_api_openapi(st_ctx_t *c)
{
    st_buf_append(c->body, (const char *)st_openapi_json, st_openapi_json_len);
    return ST_OK;
}
