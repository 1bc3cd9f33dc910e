/* SPDX-License-Identifier: MIT */
/* Error codes: one table, generated from ST_ERRNO_MAP, maps a code to its status and wire text. */
#include "strata/core.h"

typedef struct {
    int status;
    const char *code;
    const char *msg;
} st_err_info_t;

static const st_err_info_t st__errs[] = {
#define ST__ERR_ROW(name, status, code, msg) {status, code, msg},
    ST_ERRNO_MAP(ST__ERR_ROW)
#undef ST__ERR_ROW
};

static const st_err_info_t *st__err_info(int err)
{
    static const st_err_info_t internal = {500, "internal", "internal error"};
    if (err <= ST__ERR_BASE || err >= ST__ERR_END) return &internal;
    return &st__errs[err - ST__ERR_BASE - 1];
}

const char *st_strerror(int err)
{
    return err == ST_OK ? "ok" : st__err_info(err)->msg;
}

const char *st_err_code(int err)
{
    return st__err_info(err)->code;
}

int st_err_status(int err)
{
    return err == ST_OK ? 200 : st__err_info(err)->status;
}
