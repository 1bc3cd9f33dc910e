/* SPDX-License-Identifier: MIT */
/* The configuration turned into the options of the hot store and the object stores (cli.h). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

/* The cold tier's URL. The default follows --data-dir, so a server started with another data
 * directory keeps its cold files next to its hot store. */
/* Object-store options for url with the shared S3 flags (url borrowed). */
st_objstore_opts_t st_cli_obj_opts(const st_config_t *cfg, const char *url)
{
    int path_style = 0;
    st_config_s3_path_style(cfg, &path_style); /* checked when the flags were read */
    return (st_objstore_opts_t){url,
                                cfg->s3_endpoint,
                                cfg->s3_region,
                                cfg->s3_access_key,
                                cfg->s3_secret_key,
                                (unsigned)cfg->cold_timeout_ms,
                                (unsigned)cfg->cold_retries,
                                path_style,
                                cfg->s3_ca_file};
}

void st_cli_cold_url(const st_config_t *cfg, char *url, size_t n)
{
    if (strcmp(cfg->cold_url, "file://./data/cold") == 0 && strcmp(cfg->data_dir, "./data") != 0)
        snprintf(url, n, "file://%s/cold", cfg->data_dir);
    else
        snprintf(url, n, "%s", cfg->cold_url);
}

void st_cli_tables_url(const st_config_t *cfg, char *url, size_t n)
{
    if (*cfg->tables_url) {
        snprintf(url, n, "%s", cfg->tables_url);
        return;
    }
    char cold[ST_CLI_COLD_URL_MAX];
    st_cli_cold_url(cfg, cold, sizeof cold);
    size_t cl = strlen(cold);
    while (cl > 0 && cold[cl - 1] == '/')
        cl--;
    snprintf(url, n, "%.*s/_tables", (int)cl, cold);
}

/* The store keeps writes out while the disk a local cold tier writes to is full. */
st_store_opts_t st_cli_store_opts(const st_config_t *cfg, char *cold_dir, size_t n)
{
    st_cli_cold_url(cfg, cold_dir, n);
    bool local = strncmp(cold_dir, "file://", 7) == 0;
    if (local) memmove(cold_dir, cold_dir + 7, strlen(cold_dir + 7) + 1);
    return (st_store_opts_t){.dir = cfg->data_dir,
                             .map_size = cfg->map_size,
                             .max_write = cfg->max_body,
                             .watch_dir = local ? cold_dir : NULL};
}