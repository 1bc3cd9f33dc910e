/* SPDX-License-Identifier: MIT */
/*
 * The read side of RFC 6455 that libwebsockets 4.1 leaves open. lws parses client frames itself
 * and does not check, nor tell its user, whether a client frame was masked (§5.1: a server
 * MUST fail the connection on an unmasked frame; lws checks it only from 5.0), it lets a
 * control frame with a payload over 125 bytes through (§5.5), it echoes a close code past 4999
 * and answers a 1-byte close body with an empty close frame (§5.5.1, §7.4: both protocol
 * errors), and it closes the socket bare on a close reason that is not UTF-8 (§8.1, 1007).
 * Nothing in its API sees the frame headers, so strata watches the bytes on their way in: lws
 * reads a stream's socket with recv(), and this file defines recv() for the process (the
 * executable's definition takes precedence over libc's for the shared libraries). For a socket
 * adopted as a stream, and only on the thread running the loop, it follows the frame headers in
 * what the kernel returned (payloads are skipped, not read, except a close frame's), and at the
 * first frame that breaks a rule it hands lws only the bytes before that frame, drops everything
 * after, and fails the stream: a close frame with 1002 (1007 for a close reason that is not
 * UTF-8) and the socket closed (st__ws_fail). So lws never parses a bad frame and nothing it
 * carried is acted on. Every other recv() (libcurl, other threads) passes straight through.
 * Every read of a stream's socket also stamps the stream's last-heard time, the keep-alive's
 * clock (ws.c st__on_tick): the loop's cached time, no syscall.
 */
#define _GNU_SOURCE /* memmem */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Where the header scan of one stream's client bytes is. */
typedef enum {
    ST__RX_HDR0,   /* FIN, RSV, opcode */
    ST__RX_HDR1,   /* MASK, length */
    ST__RX_EXTLEN, /* 2 or 8 length bytes */
    ST__RX_KEY,    /* 4 mask-key bytes */
    ST__RX_BODY,   /* payload bytes to skip (a close frame's are read) */
} st__rxstate_t;

typedef struct {
    bool on;            /* the fd is a stream's socket */
    uint8_t state;      /* st__rxstate_t */
    uint8_t op;         /* opcode of the frame being read */
    uint8_t need;       /* EXTLEN/KEY bytes still to come */
    bool fin;           /* of the frame being read */
    uint8_t key[4];     /* its mask key */
    uint8_t got;        /* close frame: payload bytes read so far (at most 125) */
    uint16_t code;      /* close frame: its code, as far as read */
    uint8_t u8need;     /* close frame: UTF-8 continuation bytes its reason still owes */
    uint8_t u8lo, u8hi; /* the range of the next one */
    uint64_t left;      /* EXTLEN: the length so far; BODY: bytes still to skip */
    const char *bad;    /* why the stream failed (a literal), NULL while it has not */
    st_wsconn_t *conn;  /* the stream once established (NULL before, and after it closed) */
} st__rx_t;

static ST_VEC(st__rx_t) st__rx; /* indexed by fd: n slots, each zeroed when it came */
static pthread_t st__rx_thread; /* the loop's */
static st_ws_t *st__rx_ws;

void st__ws_rx_init(st_ws_t *ws)
{
    st__rx_thread = pthread_self();
    st__rx_ws = ws;
}

void st__ws_rx_free(void)
{
    st__rx_ws = NULL;
    st_vec_free(&st__rx);
}

static st__rx_t *st__rx_slot(int fd)
{
    if (!st__rx_ws || fd < 0 || (size_t)fd >= st__rx.n) return NULL;
    if (!pthread_equal(pthread_self(), st__rx_thread)) return NULL;
    return st__rx.v[fd].on ? &st__rx.v[fd] : NULL;
}

/* A close code a client may send (RFC 6455 §7.4.1, and 1012-1014 registered since): 1004-1006
 * and 1015 are never sent, 1016-2999 are reserved, and there is nothing past 4999. */
static bool st__rx_close_code_ok(uint16_t code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

static const char st__rx_bad_utf8[] = "invalid UTF-8 in a close reason";

/* Takes byte x of a close reason; false if the reason is not UTF-8 (RFC 3629: no overlong form,
 * no surrogate, nothing past U+10FFFF). */
static bool st__rx_utf8(st__rx_t *r, uint8_t x)
{
    if (r->u8need) {
        if (x < r->u8lo || x > r->u8hi) return false;
        r->u8need--;
        r->u8lo = 0x80;
        r->u8hi = 0xbf;
        return true;
    }
    r->u8lo = x == 0xe0 ? 0xa0 : x == 0xf0 ? 0x90 : 0x80;
    r->u8hi = x == 0xed ? 0x9f : x == 0xf4 ? 0x8f : 0xbf;
    r->u8need = x < 0x80 ? 0 : x < 0xc2 ? 4 : x < 0xe0 ? 1 : x < 0xf0 ? 2 : x < 0xf5 ? 3 : 4;
    return r->u8need < 4;
}

/* Follows the frame headers in p[0..n); returns how many bytes precede the first frame that
 * breaks a rule (n if none does), with r->bad set then. */
static size_t st__rx_scan(st__rx_t *r, const unsigned char *p, size_t n)
{
    size_t i = 0, start = 0; /* start: the first byte of the frame being read */
    while (i < n) {
        unsigned char b = p[i];
        switch (r->state) {
        case ST__RX_HDR0:
            start = i;
            r->fin = b & 0x80;
            r->op = b & 0x0f;
            if (b & 0x70)
                r->bad = "reserved bits set";
            else if ((r->op > 2 && r->op < 8) || r->op > 10)
                r->bad = "reserved opcode";
            else if (r->op >= 8 && !r->fin)
                r->bad = "fragmented control frame";
            r->state = ST__RX_HDR1;
            break;
        case ST__RX_HDR1:
            if (!(b & 0x80))
                r->bad = "unmasked frame";
            else if (r->op >= 8 && (b & 0x7f) > 125)
                r->bad = "control frame too long";
            else if (r->op == 8 && (b & 0x7f) == 1)
                r->bad = "close frame with a 1-byte body";
            r->left = b & 0x7f;
            r->need = r->left == 126 ? 2 : r->left == 127 ? 8 : 0;
            if (r->need) r->left = 0;
            r->state = r->need ? ST__RX_EXTLEN : ST__RX_KEY;
            if (!r->need) r->need = 4;
            break;
        case ST__RX_EXTLEN:
            r->left = r->left << 8 | b;
            if (--r->need == 0) {
                if (r->left >> 63) r->bad = "frame length out of range";
                r->state = ST__RX_KEY;
                r->need = 4;
            }
            break;
        case ST__RX_KEY:
            r->key[4 - r->need] = b;
            if (--r->need == 0) { /* a close frame's body is read from its start */
                r->state = r->left ? ST__RX_BODY : ST__RX_HDR0;
                r->got = r->u8need = 0;
                r->code = 0;
            }
            break;
        case ST__RX_BODY: {
            if (r->op == 8) { /* a close frame, unmasked: its code, then its reason */
                uint8_t x = b ^ r->key[r->got & 3];
                if (r->got < 2) {
                    r->code = (uint16_t)(r->code << 8 | x);
                    if (r->got == 1 && !st__rx_close_code_ok(r->code))
                        r->bad = "invalid close code";
                } else if (!st__rx_utf8(r, x)) {
                    r->bad = st__rx_bad_utf8;
                }
                r->got++;
                if (--r->left == 0) {
                    if (!r->bad && r->u8need) r->bad = st__rx_bad_utf8;
                    r->state = ST__RX_HDR0;
                }
                break;
            }
            size_t take = n - i < r->left ? n - i : (size_t)r->left;
            r->left -= take;
            i += take;
            if (!r->left) r->state = ST__RX_HDR0;
            continue;
        }
        }
        if (r->bad) return start;
        i++;
    }
    return n;
}

/* A frame broke a rule: its stream fails if it is one already, else when it becomes one. */
static void st__rx_failed(st__rx_t *r)
{
    if (r->conn) st__ws_fail(st__rx_ws, r->conn, st__ws_rx_code(r->bad), r->bad);
}

int st__ws_rx_adopt(int fd, const char *buf, size_t *len)
{
    if (fd < 0) return ST_EINVAL;
    if ((size_t)fd >= st__rx.n) { /* every slot up to the capacity, zeroed */
        st_vec_reserve(&st__rx, (size_t)fd + 1);
        memset(st__rx.v + st__rx.n, 0, (st__rx.cap - st__rx.n) * sizeof *st__rx.v);
        st__rx.n = st__rx.cap;
    }
    st__rx_t *r = &st__rx.v[fd];
    memset(r, 0, sizeof *r);
    r->on = true;
    /* what the client sent behind its upgrade request is read by lws from buf, not recv() */
    const char *end = memmem(buf, *len, "\r\n\r\n", 4);
    if (end) {
        size_t head = (size_t)(end + 4 - buf);
        *len = head + st__rx_scan(r, (const unsigned char *)buf + head, *len - head);
    }
    return ST_OK;
}

uint16_t st__ws_rx_code(const char *bad)
{
    return bad == st__rx_bad_utf8 ? ST__WS_CLOSE_INVALID : ST__WS_CLOSE_PROTOCOL;
}

const char *st__ws_rx_attach(int fd, st_wsconn_t *c)
{
    st__rx_t *r = st__rx_slot(fd);
    if (!r) return NULL;
    r->conn = c;
    return r->bad;
}

void st__ws_rx_detach(int fd)
{
    st__rx_t *r = st__rx_slot(fd);
    if (r) memset(r, 0, sizeof *r);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    ssize_t n = recvfrom(fd, buf, len, flags, NULL, NULL);
    st__rx_t *r = n > 0 && !(flags & MSG_PEEK) ? st__rx_slot(fd) : NULL;
    if (!r) return n;
    if (r->conn) r->conn->rx_ms = uv_now(st__rx_ws->loop); /* heard from (keep-alive, ws.c) */
    if (r->bad) { /* failed: nothing more reaches lws; the close is under way */
        errno = EAGAIN;
        return -1;
    }
    size_t ok = st__rx_scan(r, buf, (size_t)n);
    if (!r->bad) return n;
    st__rx_failed(r);
    if (ok) return (ssize_t)ok;
    errno = EAGAIN;
    return -1;
}
