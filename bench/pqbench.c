/* SPDX-License-Identifier: MIT */
/*
 * Parquet encoder benchmark (bench/cold.sh drives it): generates N chat messages (deterministic:
 * words from a fixed list, C conversations, metadata on every third row, one user), then times
 * strata's single-threaded encode of them into one Parquet file with ZSTD, as one flush does
 * after its rows are decoded. Writes the file so DuckDB can re-encode the same rows side by side.
 *
 * usage: strata-pqbench ROWS CONVERSATIONS OUT.parquet [ZSTD_LEVEL]
 */
#include "strata/chatrows.h"
#include "strata/cold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const words[] = {
    "the",     "ticket", "seat",   "counter", "hello",  "thanks", "order",   "refund", "agent",
    "please",  "when",   "does",   "my",      "flight", "leave",  "can",     "you",    "help",
    "booking", "event",  "row",    "section", "price",  "sold",   "out",     "again",  "today",
    "message", "reply",  "status", "queue",   "wait",   "five",   "minutes", "sure",   "okay"};
#define NWORDS (sizeof words / sizeof words[0])

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s ROWS CONVERSATIONS OUT.parquet [ZSTD_LEVEL]\n", argv[0]);
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 10), nc = strtoul(argv[2], NULL, 10);
    int level = argc > 4 ? atoi(argv[4]) : 3;
    if (!n || !nc) return 2;
    st_msgrow_t *rows = calloc(n, sizeof *rows);
    char(*convs)[32] = calloc(nc, sizeof *convs);
    for (size_t c = 0; c < nc; c++)
        snprintf(convs[c], sizeof convs[c], "conv-%zu", c);
    st_buf_t text = {0};
    size_t *off = calloc(n * 2, sizeof *off);
    for (size_t i = 0; i < n; i++) { /* content: 8-40 words; metadata on every third row */
        off[2 * i] = text.len;
        size_t nw = 8 + next() % 33;
        for (size_t w = 0; w < nw; w++) {
            if (w) st_buf_appendc(&text, ' ');
            st_buf_puts(&text, words[next() % NWORDS]);
        }
        off[2 * i + 1] = text.len;
        if (i % 3 == 0)
            st_buf_printf(&text, "{\"model\":\"m%d\",\"tokens\":%d}", (int)(next() % 4),
                          (int)(next() % 900));
    }
    uint64_t id = 900000000000000000ull;
    int64_t ts = 1795650000000000;
    for (size_t i = 0; i < n; i++) {
        st_msgrow_t *r = &rows[i];
        id += 1 + next() % 4096;
        ts += (int64_t)(next() % 5000);
        size_t c = next() % nc;
        r->msg_id = id;
        r->timestamp = ts;
        r->seq = (int64_t)i / (int64_t)nc + 1;
        r->conv = convs[c];
        r->conv_len = (uint32_t)strlen(convs[c]);
        r->from = i % 2 ? "user" : "assistant";
        r->from_len = (uint32_t)strlen(r->from);
        size_t end = i + 1 < n ? off[2 * (i + 1)] : text.len;
        r->content = text.data + off[2 * i];
        r->content_len = (uint32_t)(off[2 * i + 1] - off[2 * i]);
        if (end > off[2 * i + 1]) {
            r->metadata = text.data + off[2 * i + 1];
            r->metadata_len = (uint32_t)(end - off[2 * i + 1]);
        }
    }
    /* a flush groups rows by conversation, msg_id order inside: do it outside the timing */
    st_msgrow_t *sorted = malloc(n * sizeof *sorted);
    size_t *count = calloc(nc + 1, sizeof *count);
    for (size_t i = 0; i < n; i++)
        count[strtoul(rows[i].conv + 5, NULL, 10) + 1]++;
    for (size_t c = 1; c <= nc; c++)
        count[c] += count[c - 1];
    for (size_t i = 0; i < n; i++)
        sorted[count[strtoul(rows[i].conv + 5, NULL, 10)]++] = rows[i];
    st_buf_t out = {0};
    double t0 = now_s();
    int rc = st_parquet_encode(sorted, n, ST_USER("bench", 5), level, &out);
    double secs = now_s() - t0;
    if (rc) {
        fprintf(stderr, "encode failed: %d\n", rc);
        return 1;
    }
    FILE *f = fopen(argv[3], "wb");
    if (!f || fwrite(out.data, 1, out.len, f) != out.len || fclose(f)) return 1;
    printf("strata_encode rows=%zu conversations=%zu zstd=%d seconds=%.3f rows_per_sec=%.0f "
           "bytes=%zu\n",
           n, nc, level, secs, (double)n / secs, out.len);
    return 0;
}
