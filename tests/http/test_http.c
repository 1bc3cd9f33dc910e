/* SPDX-License-Identifier: MIT */
/* Unit tests for the HTTP parser (pipelining, split reads, limits), query decoding and routing. */
#include "../test.h"
#include "../../src/http/internal.h"

#include <stdlib.h>

typedef struct {
    int n;
    char paths[16][64];
    char bodies[16][64];
    char idem[16][32];
    bool keep_alive[16];
    int continues;
} seen_t;

static int on_req(void *arg, const st_http_request_t *r)
{
    seen_t *s = arg;
    if (s->n < 16) {
        snprintf(s->paths[s->n], 64, "%s %.*s?%.*s", r->method_name, (int)r->path_len, r->path,
                 (int)r->query_len, r->query);
        snprintf(s->bodies[s->n], 64, "%.*s", (int)r->body_len, r->body);
        snprintf(s->idem[s->n], 32, "%.*s", (int)r->idem_len, r->idem_key ? r->idem_key : "");
        s->keep_alive[s->n] = r->keep_alive;
    }
    s->n++;
    return 0;
}

static void on_cont(void *arg)
{
    ((seen_t *)arg)->continues++;
}

static const st_http_parser_cb_t cb = {on_req, on_cont};

TEST(pipelined_requests_in_one_buffer_come_out_in_order)
{
    seen_t s = {0};
    st_http_parser_t *p = st_http_parser_new(&cb, &s, 8192, 1 << 20);
    const char *in = "GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n"
                     "POST /b HTTP/1.1\r\nContent-Length: 3\r\nIdempotency-Key: k1\r\n\r\nabc"
                     "GET /c HTTP/1.1\r\nConnection: close\r\n\r\n";
    size_t used;
    CHECK_EQ(st_http_parser_feed(p, in, strlen(in), &used), ST_OK);
    CHECK_EQ(s.n, 3);
    CHECK_STR(s.paths[0], "GET /a?x=1");
    CHECK_STR(s.paths[1], "POST /b?");
    CHECK_STR(s.bodies[1], "abc");
    CHECK_STR(s.idem[1], "k1");
    CHECK(s.keep_alive[0]);
    CHECK(!s.keep_alive[2]);
    st_http_parser_free(p);
}

TEST(a_request_split_at_every_byte_parses_the_same)
{
    const char *in = "POST /v1/counters/x/incr HTTP/1.1\r\nContent-Type: application/json\r\n"
                     "Authorization: Bearer t\r\nContent-Length: 8\r\n\r\n{\"by\":2}";
    size_t len = strlen(in);
    for (size_t cut = 1; cut < len; cut++) {
        seen_t s = {0};
        st_http_parser_t *p = st_http_parser_new(&cb, &s, 8192, 1 << 20);
        size_t used;
        CHECK_EQ(st_http_parser_feed(p, in, cut, &used), ST_OK);
        CHECK(st_http_parser_mid_request(p));
        CHECK_EQ(st_http_parser_feed(p, in + cut, len - cut, &used), ST_OK);
        CHECK_EQ(s.n, 1);
        CHECK_STR(s.bodies[0], "{\"by\":2}");
        CHECK(!st_http_parser_mid_request(p));
        st_http_parser_free(p);
    }
}

TEST(limits_give_431_and_413_and_garbage_gives_400)
{
    seen_t s = {0};
    size_t used;
    st_http_parser_t *p = st_http_parser_new(&cb, &s, 1024, 100);
    char big[4096];
    int n = snprintf(big, sizeof big, "GET / HTTP/1.1\r\nX-Big: %01500d\r\n\r\n", 0);
    CHECK_EQ(st_http_parser_feed(p, big, (size_t)n, &used), ST_EHEADERS);
    st_http_parser_free(p);

    p = st_http_parser_new(&cb, &s, 1024, 100);
    const char *cl = "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n";
    CHECK_EQ(st_http_parser_feed(p, cl, strlen(cl), &used), ST_ETOOLARGE);
    st_http_parser_free(p);

    p = st_http_parser_new(&cb, &s, 1024, 10);
    const char *ch = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n"
                     "8\r\n12345678\r\n0\r\n\r\n";
    CHECK_EQ(st_http_parser_feed(p, ch, strlen(ch), &used), ST_ETOOLARGE);
    st_http_parser_free(p);

    p = st_http_parser_new(&cb, &s, 1024, 100);
    const char *junk = "\x01\x02 garbage\r\n\r\n";
    CHECK_EQ(st_http_parser_feed(p, junk, strlen(junk), &used), ST_EBADREQ);
    /* an errored parser stays errored */
    CHECK_EQ(st_http_parser_feed(p, "GET / HTTP/1.1\r\n\r\n", 18, &used), ST_EBADREQ);
    st_http_parser_free(p);
}

TEST(expect_continue_is_reported)
{
    seen_t s = {0};
    size_t used;
    st_http_parser_t *p = st_http_parser_new(&cb, &s, 1024, 100);
    const char *in = "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    CHECK_EQ(st_http_parser_feed(p, in, strlen(in), &used), ST_OK);
    CHECK_EQ(s.continues, 1);
    CHECK_EQ(st_http_parser_feed(p, "{}", 2, &used), ST_OK);
    CHECK_EQ(s.n, 1);
    st_http_parser_free(p);
}

TEST(query_values_are_found_and_percent_decoded)
{
    st_arena_t a = {0};
    size_t n;
    const char *q = "limit=50&order=desc&cursor=a%3Ab&empty=&flag";
    CHECK_STR(st_query_get(&a, q, strlen(q), "order", &n), "desc");
    CHECK_STR(st_query_get(&a, q, strlen(q), "cursor", &n), "a:b");
    CHECK_STR(st_query_get(&a, q, strlen(q), "empty", &n), "");
    CHECK_STR(st_query_get(&a, q, strlen(q), "flag", &n), "");
    CHECK(st_query_get(&a, q, strlen(q), "lim", &n) == NULL);
    CHECK_STR(st_query_get(&a, "li%6Dit=7", 9, "limit", &n), "7");
    CHECK(st_url_decode(&a, "%4", 2, &n) == NULL);
    CHECK(st_url_decode(&a, "%zz", 3, &n) == NULL);
    CHECK_STR(st_url_decode(&a, "a%2Fb", 5, &n), "a/b");
    st_arena_free(&a);
}

TEST(query_check_refuses_unknown_repeated_and_malformed_parameters)
{
    static const char *const known[] = {"limit", "cursor", NULL};
    st_query_fault_t f;
    char name[80];
#define QC(q, k) st_query_check((q), strlen(q), (k), &f)
    CHECK_EQ(QC("", known), ST_OK);
    CHECK_EQ(QC("limit=1&cursor=a%3Ab", known), ST_OK);
    CHECK_EQ(QC("&limit=1&&cursor&", known), ST_OK); /* empty pieces name nothing */
    CHECK_EQ(QC("li%6Dit=1", known), ST_OK);         /* names compare decoded */
    CHECK_EQ(QC("limit=1&by=100", known), ST_EINVAL);
    CHECK_EQ(f.fault, ST_QUERY_UNKNOWN);
    CHECK_EQ(f.name_len, 2);
    CHECK(memcmp(f.name, "by", 2) == 0);
    CHECK_EQ(QC("limit=1", NULL), ST_EINVAL); /* a route that takes none */
    CHECK_EQ(f.fault, ST_QUERY_UNKNOWN);
    CHECK_EQ(QC("limit=1&li%6dit=2", known), ST_EINVAL);
    CHECK_EQ(f.fault, ST_QUERY_TWICE);
    CHECK_EQ(QC("limit=%zz", known), ST_EINVAL);
    CHECK_EQ(f.fault, ST_QUERY_BAD_VALUE);
    CHECK_EQ(QC("limit=1%", known), ST_EINVAL);
    CHECK_EQ(f.fault, ST_QUERY_BAD_VALUE);
    CHECK_EQ(QC("cursor=a%00b", known), ST_EINVAL);
    CHECK_EQ(f.fault, ST_QUERY_BAD_VALUE);
    CHECK_EQ(QC("li%zzmit=1", known), ST_EINVAL);
    CHECK_EQ(f.fault, ST_QUERY_BAD_NAME);
    st_query_fault_name(&f, name, sizeof name);
    CHECK_STR(name, "li%zzmit");
    CHECK_EQ(QC("%C3%A9%01+x=1", known), ST_EINVAL);
    st_query_fault_name(&f, name, sizeof name);
    CHECK_STR(name, "%C3%A9%01 x");
    char big[300];
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_EQ(QC(big, known), ST_EINVAL);
    CHECK(st_query_fault_name(&f, name, 20) < 20);
    CHECK(strstr(name, "..."));
#undef QC
}

static int route_of(const char *method, int m, const char *path, st_ctx_t *c, st_arena_t *a)
{
    static st_http_request_t r;
    r = (st_http_request_t){
        .method = m, .method_name = method, .path = path, .path_len = strlen(path)};
    static st_buf_t body;
    *c = (st_ctx_t){.req = &r, .arena = a, .body = &body};
    const st_route_t *route = NULL;
    int rc = st_router_match(c, &route);
    return rc ? rc : (int)(route - st_routes);
}

TEST(router_matches_params_and_tells_405_from_404)
{
    st_arena_t a = {0};
    st_ctx_t c;
    int idx = route_of("POST", ST_HTTP_POST, "/v1/counters/abc/incr", &c, &a);
    CHECK(idx >= 0);
    CHECK_STR(st_routes[idx].pattern, "/v1/counters/{name}/incr");
    CHECK_STR(c.params[0], "abc");
    idx = route_of("GET", ST_HTTP_GET, "/v1/counters/a%3Ab", &c, &a);
    CHECK(idx >= 0);
    CHECK_STR(c.params[0], "a:b");
    CHECK_EQ(route_of("DELETE", ST_HTTP_DELETE, "/v1/counters/abc", &c, &a), ST_EMETHOD);
    CHECK(strstr(c.extra_headers, "Allow: GET"));
    CHECK_EQ(route_of("GET", ST_HTTP_GET, "/v1/nothing", &c, &a), ST_ENOTFOUND);
    CHECK_EQ(route_of("GET", ST_HTTP_GET, "/v1/counters/a/b/c", &c, &a), ST_ENOTFOUND);
    CHECK_EQ(route_of("GET", ST_HTTP_GET, "/v1/counters/%zz", &c, &a), ST_EINVAL);
    st_arena_free(&a);
}

TEST(expect_must_be_exactly_100_continue)
{
    const char *cases[][2] = {{"100-continuefoo", "0"},
                              {"100-Continue", "1"},
                              {" 100-continue\t", "1"},
                              {"100-continue, x", "0"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        seen_t s = {0};
        size_t used;
        st_http_parser_t *p = st_http_parser_new(&cb, &s, 1024, 100);
        char in[256];
        int n =
            snprintf(in, sizeof in, "POST / HTTP/1.1\r\nExpect: %s\r\nContent-Length: 2\r\n\r\n{}",
                     cases[i][0]);
        CHECK_EQ(st_http_parser_feed(p, in, (size_t)n, &used), ST_OK);
        CHECK_EQ(s.continues, cases[i][1][0] - '0');
        st_http_parser_free(p);
    }
}

TEST(obs_fold_is_refused_even_split_at_the_fold)
{
    const char *in = "POST / HTTP/1.1\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n";
    size_t len = strlen(in);
    for (size_t cut = 0; cut <= len; cut++) {
        seen_t s = {0};
        size_t used;
        st_http_parser_t *p = st_http_parser_new(&cb, &s, 1024, 100);
        int rc = st_http_parser_feed(p, in, cut, &used);
        if (rc == ST_OK) rc = st_http_parser_feed(p, in + cut, len - cut, &used);
        CHECK_EQ(rc, ST_EBADREQ);
        CHECK_EQ(s.n, 0);
        st_http_parser_free(p);
    }
    /* a value split across reads is not a fold */
    const char *ok = "POST / HTTP/1.1\r\nX-A: abc def\r\nContent-Length: 0\r\n\r\n";
    for (size_t cut = 0; cut <= strlen(ok); cut++) {
        seen_t s = {0};
        size_t used;
        st_http_parser_t *p = st_http_parser_new(&cb, &s, 1024, 100);
        CHECK_EQ(st_http_parser_feed(p, ok, cut, &used), ST_OK);
        CHECK_EQ(st_http_parser_feed(p, ok + cut, strlen(ok) - cut, &used), ST_OK);
        CHECK_EQ(s.n, 1);
        st_http_parser_free(p);
    }
}

TEST(unknown_methods_are_501_and_garbage_400)
{
    const char *cases[][2] = {{"BREW /x HTTP/1.1\r\n\r\n", "501"},
                              {"GARBAGE\r\n\r\n", "400"},
                              {"\x01\x02 / HTTP/1.1\r\n\r\n", "400"},
                              {"GET /a HTTP/1.1\r\n\r\nFROB /b HTTP/1.1\r\n\r\n", "501"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        seen_t s = {0};
        size_t used;
        st_http_parser_t *p = st_http_parser_new(&cb, &s, 1024, 100);
        int rc = st_http_parser_feed(p, cases[i][0], strlen(cases[i][0]), &used);
        CHECK_EQ(st_err_status(rc), atoi(cases[i][1]));
        st_http_parser_free(p);
    }
}

static int on_req_pause(void *arg, const st_http_request_t *r)
{
    on_req(arg, r);
    return 1; /* as the server does under backpressure */
}

TEST(a_paused_parser_resumes_where_it_stopped)
{
    static const st_http_parser_cb_t pcb = {on_req_pause, NULL};
    seen_t s = {0};
    st_http_parser_t *p = st_http_parser_new(&pcb, &s, 8192, 1 << 20);
    const char *in = "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
                     "GET /c HTTP/1.1\r\n\r\nGET /d";
    size_t len = strlen(in), off = 0, used;
    while (off < len) {
        CHECK_EQ(st_http_parser_feed(p, in + off, len - off, &used), ST_OK);
        CHECK(used > 0);
        off += used;
    }
    CHECK_EQ(s.n, 3);
    CHECK_STR(s.paths[2], "GET /c?");
    CHECK_STR(s.bodies[1], "abc");
    CHECK(st_http_parser_mid_request(p));
    st_http_parser_free(p);
}

TEST(websocket_handshakes_are_checked_and_handed_over_small)
{
    st_http_request_t r = {.method = ST_HTTP_GET, .upgrade = true};
    st_buf_t out = {0};
    const char *msg;
    CHECK_EQ(st_http_ws_handshake(&r, &out, &msg), ST_EBADREQ);
    r.upgrade_to = "WebSocket";
    r.upgrade_to_len = 9;
    r.ws_version = "13";
    r.ws_version_len = 2;
    CHECK_EQ(st_http_ws_handshake(&r, &out, &msg), ST_EBADREQ);
    CHECK(strstr(msg, "Key"));
    r.ws_key = "dGhlIHNhbXBsZSBub25jZQ==";
    r.ws_key_len = 24;
    CHECK_EQ(st_http_ws_handshake(&r, &out, &msg), ST_OK);
    CHECK(out.len < 256);
    st_buf_appendc(&out, '\0');
    CHECK(strstr(out.data, "\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"));
    r.ws_key = "dGhlIHNhbXBsZSBub25jZQ=";
    r.ws_key_len = 23;
    CHECK_EQ(st_http_ws_handshake(&r, &out, &msg), ST_EBADREQ);
    r.ws_key = "dGhlIHNhbXBsZSBub25jZQ==";
    r.ws_key_len = 24;
    r.ws_version = "8";
    r.ws_version_len = 1;
    CHECK_EQ(st_http_ws_handshake(&r, &out, &msg), ST_EBADREQ);
    st_buf_free(&out);
}

TEST(json_check_is_strict_finds_metadata_raw_and_flags_nul)
{
    const char *bad[] = {"",     "{",       "{\"a\":01}", "{\"a\":+1}",  "{\"a\":.5}",
                         "[1,]", "{\"a\"}", "\"\t\"",     "\"\\ud800\"", "\"\\udc00\"",
                         "nul",  "1 2",     "\"\xff\"",   "{\"a\":1}\0", "\"\\x\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st_json_info_t info = {0};
        size_t n = strlen(bad[i]) + (strcmp(bad[i], "{\"a\":1}") == 0);
        CHECK_EQ(st_json_check(bad[i], n, &info), ST_EJSON);
    }
    const char *doc =
        " {\"x\":\"a\\u0000\",\"metadata\": {\"n\":12345678901234567,\"s\":\"\\u0000\"} } ";
    st_json_info_t info = {.member = "metadata"};
    CHECK_EQ(st_json_check(doc, strlen(doc), &info), ST_OK);
    CHECK(info.nul); /* the one in "x" */
    CHECK_EQ(info.value_len, strlen("{\"n\":12345678901234567,\"s\":\"\\u0000\"}"));
    CHECK(strncmp(info.value, "{\"n\":12345678901234567,", 23) == 0);
    const char *esc = "{\"m\\u0065tadata\":[\"\\u0000\"],\"metadata\":2}";
    info = (st_json_info_t){.member = "metadata"};
    CHECK_EQ(st_json_check(esc, strlen(esc), &info), ST_OK);
    CHECK(!info.nul);
    CHECK_EQ(info.value_len, 10); /* the first, escaped key wins, as in cJSON */
    /* nesting: 512 levels are fine, 513 are not */
    static char buf[2048];
    for (int depth = 512; depth <= 513; depth++) {
        memset(buf, '[', (size_t)depth);
        memset(buf + depth, ']', (size_t)depth);
        info = (st_json_info_t){0};
        CHECK_EQ(st_json_check(buf, 2 * (size_t)depth, &info), depth == 512 ? ST_OK : ST_EJSON);
    }
}

/* A failed batch replaces a held response: the replacement keeps its CORS lines (a browser
 * would otherwise see a network error instead of the 503/507). */
TEST(cors_lines_of_a_written_response_are_kept)
{
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                       "Vary: Origin\r\nAccess-Control-Allow-Origin: http://a.test\r\n"
                       "Access-Control-Expose-Headers: Location\r\nConnection: close\r\n\r\n{}";
    char *h = st_cors_headers_of(resp, strlen(resp));
    CHECK_STR(h, "Vary: Origin\r\nAccess-Control-Allow-Origin: http://a.test\r\n"
                 "Access-Control-Expose-Headers: Location\r\n");
    free(h);
    const char *plain = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    h = st_cors_headers_of(plain, strlen(plain));
    CHECK_STR(h, "");
    free(h);
    h = st_cors_headers_of("HTTP/1.1 200", 12); /* no head end: nothing, no overread */
    CHECK_STR(h, "");
    free(h);
}

/* The one clock rule (SPEC §7): valid while t < exp + leeway and from nbf - leeway on, exactly
 * at the microsecond; iat does not limit validity; exp far out does not overflow. */
TEST(token_times_hold_with_the_leeway_to_the_microsecond)
{
    const int64_t s = 1000000, exp = 1800000000 * s, lee = 30 * s;
    const char *why = NULL;
    st_http_token_times_t t = {.exp_us = exp};
    CHECK_EQ(st_http_token_check(&t, exp - 1, 0, &why), ST_OK);
    CHECK_EQ(st_http_token_check(&t, exp, 0, &why), ST_EUNAUTH);
    CHECK_STR(why, "token expired");
    CHECK_EQ(st_http_token_check(&t, exp + lee - 1, lee, &why), ST_OK);
    CHECK_EQ(st_http_token_check(&t, exp + lee, lee, &why), ST_EUNAUTH);
    t = (st_http_token_times_t){.nbf_us = exp, .iat_us = exp + 3600 * s};
    CHECK_EQ(st_http_token_check(&t, exp - lee, lee, &why), ST_OK);
    CHECK_EQ(st_http_token_check(&t, exp - lee - 1, lee, &why), ST_EUNAUTH);
    CHECK_STR(why, "token not yet valid");
    t = (st_http_token_times_t){.exp_us = INT64_MAX};
    CHECK_EQ(st_http_token_check(&t, exp, lee, &why), ST_OK);
    t = (st_http_token_times_t){0}; /* no claims: always */
    CHECK_EQ(st_http_token_check(&t, exp, lee, &why), ST_OK);
}

RUN_TESTS("http")
