/* SPDX-License-Identifier: MIT */
/*
 * A member's request to another member of its group (the snapshot offer, the announcement of
 * its record, the read index) or, through the proxy, to another group (the rooms outbox): one
 * blocking libcurl POST, for worker threads only. The group
 * shares its --cluster-secret (never a client's secret), so a member signs a short-lived token
 * of its own with it; internal routes accept nothing else.
 */
#include "internal.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>

static size_t st__post_collect(char *p, size_t size, size_t n, void *arg)
{
    st_buf_append(arg, p, size * n);
    return size * n;
}

static void st__b64url(st_buf_t *out, const void *p, size_t n)
{
    char tmp[512];
    int len = EVP_EncodeBlock((unsigned char *)tmp, p, (int)n);
    for (int i = 0; i < len; i++) {
        if (tmp[i] == '=') break;
        st_buf_appendc(out, tmp[i] == '+' ? '-' : tmp[i] == '/' ? '_' : tmp[i]);
    }
}

/* "Authorization: Bearer <HS256 token, role admin, 60 s>" into out, NUL-terminated. */
static void st__admin_token(st_buf_t *out, const char *secret)
{
    char payload[128];
    snprintf(payload, sizeof payload, "{\"sub\":\"strata-member\",\"role\":\"admin\",\"exp\":%lld}",
             (long long)(st_now_us() / 1000000 + 60));
    const char *hdr = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    st_buf_puts(out, "Authorization: Bearer ");
    size_t start = out->len;
    st__b64url(out, hdr, strlen(hdr));
    st_buf_appendc(out, '.');
    st__b64url(out, payload, strlen(payload));
    unsigned char mac[32];
    unsigned int ml = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)out->data + start,
         out->len - start, mac, &ml);
    st_buf_appendc(out, '.');
    st__b64url(out, mac, ml);
    st_buf_appendc(out, '\0');
}

int st__member_post(const char *base, const char *path, const char *body, const char *secret,
                    long timeout_ms, st_buf_t *resp, long *status, char *ip, size_t iplen)
{
    return st_repl_post(base, path, body, secret, NULL, timeout_ms, resp, status, ip, iplen);
}

int st_repl_post(const char *base, const char *path, const char *body, const char *secret,
                 const char *header, long timeout_ms, st_buf_t *resp, long *status, char *ip,
                 size_t iplen)
{
    char full[1800];
    snprintf(full, sizeof full, "%s%s", base, path);
    CURL *h = curl_easy_init();
    if (!h) return ST_ENOMEM;
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, st__post_collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    st_buf_t auth = {0};
    if (secret && *secret) {
        st__admin_token(&auth, secret);
        hdrs = curl_slist_append(hdrs, auth.data);
        curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 1L); /* the redirect goes to a member */
    }
    if (header && *header) hdrs = curl_slist_append(hdrs, header);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    *status = 0;
    char *primary = NULL;
    int rc = curl_easy_perform(h) == CURLE_OK ? ST_OK : ST_EUNAVAIL;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_easy_getinfo(h, CURLINFO_PRIMARY_IP, &primary);
    if (ip && iplen) snprintf(ip, iplen, "%s", rc == ST_OK && primary ? primary : "");
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    st_buf_free(&auth);
    return rc;
}
