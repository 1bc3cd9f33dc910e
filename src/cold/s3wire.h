/* SPDX-License-Identifier: MIT */
/* The S3 wire, shared by objstore.c: URLs in SigV4's canonical form, one signed request with
 * its retries, pooled curl handles, and the bits of S3's XML and headers the store reads. */
#ifndef STRATA_COLD_S3WIRE_H
#define STRATA_COLD_S3WIRE_H

#include "strata/core.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>

/* What every request to one service shares. Strings owned (freed by st__s3conn_free). */
typedef struct {
    char *sigv4;        /* "aws:amz:REGION:s3" */
    char *userpwd;      /* "ACCESS:SECRET" */
    char *ca_file;      /* a private CA bundle, or NULL for the system's */
    long timeout_ms;    /* a whole request */
    unsigned retries;   /* of a request that is safe to repeat */
    pthread_mutex_t mu; /* guards the idle handles */
    CURL *idle[32];     /* easy handles with their connections, ready for the next request */
    size_t nidle;
} st_s3conn_t;

void st__s3conn_init(st_s3conn_t *c, unsigned timeout_ms, unsigned retries);
void st__s3conn_free(st_s3conn_t *c);

/* The bucket's URL into b: endpoint/bucket in path style, scheme://bucket.host[:port] in
 * virtual-hosted style (vhost); AWS's regional endpoint when endpoint is NULL. ST_EINVAL for an
 * endpoint that is not scheme://host[:port][/path] (no path when vhost). */
int st__s3_bucket_url(st_buf_t *b, const char *endpoint, const char *region, const char *bucket,
                      size_t bl, bool vhost);
/* Appends key as a URL path (every byte but A-Z a-z 0-9 - _ . ~ / percent-encoded), or value
 * as a query value ('/' encoded too): SigV4's canonical forms. */
void st__s3_url_key(st_buf_t *b, const char *key);
void st__s3_url_query(st_buf_t *b, const char *value);

/* One signed request to a full URL, with one more request header line when xhdr is set ("Range:
 * bytes=0-9", "If-None-Match: *"); at most limit bytes of the answer's body are appended to out
 * (NULL: dropped), its headers to hdrs when set. With retry, a transport error or a 5xx is
 * retried c->retries times with jittered backoff. ST_OK with *status once an answer came. */
int st__s3_call(st_s3conn_t *c, const char *method, const char *url, const void *body, size_t blen,
                const char *xhdr, st_buf_t *out, size_t limit, long *status, st_buf_t *hdrs);
int st__s3_try(st_s3conn_t *c, const char *method, const char *url, const void *body, size_t blen,
               const char *xhdr, st_buf_t *out, size_t limit, long *status, st_buf_t *hdrs,
               bool retry);
/* GET, PUT, DELETE and HEAD: repeating one changes nothing more. */
bool st__s3_idempotent(const char *method);

/* The text of <tag>…</tag> after from in an S3 XML answer, unescaped (owned); NULL when there
 * is none. *next (when set) goes past it. */
char *st__s3_xml(const char *from, const char *tag, const char **next);
/* The value of header name (lower case, with its ':') in hdrs, without quotes (owned). */
char *st__s3_header(st_buf_t *hdrs, const char *name);

#endif
