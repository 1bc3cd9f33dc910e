/* SPDX-License-Identifier: MIT */
/*
 * Load generator for strata's streams (bench/streams.sh drives it). One libuv loop opens many
 * WebSocket connections to /v1/stream and one keep-alive HTTP connection that writes. Modes:
 *
 *   fanout  N conns, one counter subscription each; increments are posted keeping WINDOW
 *           (default 16) changes not yet seen by every subscriber; reports frames received/s.
 *   latency N conns on one conversation; messages are posted at a steady rate, each carrying
 *           its send time; reports insert -> notification latency p50/p99/max over all frames
 *           (and typing_frames: the room's typing frames received meanwhile, bench/typing.sh).
 *   idle    N conns with one subscription each, then holds them for --seconds and exits.
 *   last    N conns on one conversation (or room); POSTS (default 20) single posts spaced evenly
 *           over SECONDS, each carrying its send time; per post, the time its frame reached the
 *           LAST of the N subscribers (max over them of receive - send); reports the median,
 *           min and max of those over the posts (bench/bigroom.sh). A post waits until the
 *           previous one reached every subscriber (at most 10 s more), so no two overlap.
 *
 * With a "redis-" prefix (redis-fanout, redis-latency, redis-last, redis-idle) the same work runs
 * against Redis pub/sub on PORT: SUBSCRIBE per connection, PUBLISH from the writer, as the
 * side-by-side peer.
 *
 * usage: strata-wsload [redis-]MODE PORT[:POSTPORT] CONNS SECONDS [RATE|WINDOW|POSTS]
 * WSLOAD_ROOM=ID (latency, last, idle): the conns subscribe to room ID (topic room) and the posts
 * go to POST /v1/rooms/ID/messages as "bench" (the room must exist with bench among its members).
 * WSLOAD_USERS=PREFIX (with WSLOAD_ROOM): conn i subscribes as member PREFIXi ("user" in the
 * subscribe frame: checked to be a member, and online in the room's presence).
 * WSLOAD_WARMUP_MS=MS (latency): posting starts when every stream is ready, as always, but the
 * frames of posts sent in the first MS ms are not samples (nor are typing frames then): what the
 * streams' opening left queued (presence and replay frames, a backlog the server is still
 * writing) drains before the measure; the run is MS ms longer. Default 0.
 * WSLOAD_QUIET_MS=MS (latency, last): measuring (and the warm-up) starts only once every stream is
 * ready AND no byte has reached any of them for MS ms: the streams' opening is over. A room whose
 * members come online together owes each stream a presence frame for each of the others (SPEC
 * §2.1 v5: 10,000 members, 50 million frames), and a fixed warm-up measured posts queued behind
 * that backlog. latency and last then report drain_ms, the time from every stream ready to the
 * start of the quiet (what the opening's backlog took). Default 0: no wait.
 * WSLOAD_CPU_PID=PID (latency, last): also reports server_cpu_s, the CPU (user + system, all its
 * threads, /proc/PID/stat) process PID used from the first post that gives samples to the report:
 * the server's cost of the measured posts alone, without the streams' opening.
 * WSLOAD_KTIME=1 (latency, last): a frame's receive time is the kernel's (SO_TIMESTAMPNS on each
 * subscriber's socket, read by recvmsg): for TCP the stamp of the newest segment a read returned,
 * so every frame of one read gets the latest arrival of them (an upper bound: a tool that falls
 * behind reads more at once and overstates the earlier frames a little), not when this
 * one-threaded tool got to parse it, so the tool's own wait for a CPU (it shares the machine's
 * cores with the server) is not counted as the server's latency. latency reports the tool-side
 * figures too (user_p50_ms, user_p99_ms).
 * With POSTPORT, the streams are opened on PORT and the writes go to POSTPORT (a follower of a
 * replicated group and its leader: the frames a follower sends for what it applied).
 * The client writes masked frames with a zero mask key (valid per RFC 6455, and cheap).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

typedef enum { MODE_FANOUT, MODE_LATENCY, MODE_IDLE, MODE_LAST } mode_t_;

typedef struct {
    uv_tcp_t tcp;
    char *buf;
    size_t len, cap;
    bool upgraded, ready;
    int64_t last_value; /* fanout: last counter value seen; latency: last post stamp seen */
    int idx;            /* its place in g.ws (WSLOAD_USERS names it) */
    uv_poll_t poll;     /* WSLOAD_KTIME: its socket rfd, polled and read by recvmsg */
    int rfd;
} wsconn_t;

typedef struct {
    uv_tcp_t tcp;
    char *buf;
    size_t len, cap;
    uint64_t sent, answered;
    int state; /* 0: not opened, 1: connecting, 2: open */
} poster_t;

/* last: one single post and when its frame reached the subscribers */
typedef struct {
    uint64_t sent_ns, last_ns; /* send time, the latest receive time so far */
    int got;                   /* subscribers that received it */
} lastpost_t;

static struct {
    uv_loop_t *loop;
    mode_t_ mode;
    bool redis; /* the peer: Redis pub/sub (SUBSCRIBE / PUBLISH) instead of strata */
    int port, post_port, conns, seconds;
    double rate; /* latency: posts per second; fanout: changes in flight (the window) */
    wsconn_t *ws;
    int connecting, next_conn, ready;
    poster_t post;
    uv_timer_t tick, stop;
    bool measuring;
    uint64_t t0, frames;
    double cpu0;        /* the tool's own CPU seconds at t0 */
    uint64_t warmup_ns; /* latency: posts sent before t0 + warmup_ns give no sample */
    uint64_t quiet_ns;  /* WSLOAD_QUIET_MS: no byte for this long before measuring */
    uint64_t rx_last;   /* when the last bytes from the server arrived (monotonic ns) */
    uint64_t ready_ns;  /* when every stream was ready (0: not yet) */
    uint64_t drain_ns;  /* from ready_ns to the quiet's start */
    uint64_t typing;    /* latency: typing frames received while measuring (bench/typing.sh) */
    uint64_t dups;      /* latency: frames of a post a subscriber had seen, or out of order */
    int64_t base;       /* fanout: counter value when measuring began */
    uint64_t *seen;     /* fanout: subscribers that saw base + i, a ring of window * 4 */
    size_t ring;
    int64_t complete; /* fanout: values seen by every subscriber */
    uint64_t *lat;    /* latency samples, ns */
    uint64_t *ulat;   /* WSLOAD_KTIME: the same samples timed when the tool parsed the frame */
    size_t nlat, caplat;
    bool ktime;         /* WSLOAD_KTIME: a frame's time is when the kernel received it */
    uint64_t rx_ns;     /* the kernel's receive time of the bytes being parsed (monotonic), or 0 */
    uint64_t unstamped; /* WSLOAD_KTIME: reads while measuring that came without a stamp */
    int64_t real_off;   /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns: SO_TIMESTAMPNS is realtime */
    char name[64];
    const char *room;         /* latency on a room (WSLOAD_ROOM): topic room, posts to the room */
    const char *users;        /* WSLOAD_USERS: conn i subscribes as PREFIXi */
    lastpost_t *posts;        /* last: the single posts, g.nposts planned */
    int nposts, done;         /* done: posts every subscriber received */
    uint64_t gap_ns, next_ns; /* last: spacing of the posts, when the next is due */
    int cpu_pid;              /* WSLOAD_CPU_PID: the server whose CPU is reported */
    double srv_cpu0;          /* its CPU seconds when the measured posts began (< 0: not yet) */
} g;

static void die(const char *what, int rc)
{
    fprintf(stderr, "wsload: %s: %s\n", what, rc ? uv_strerror(rc) : "failed");
    exit(1);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)h;
    (void)hint;
    static char slab[256 * 1024];
    *b = uv_buf_init(slab, sizeof slab);
}

static void on_written(uv_write_t *w, int status)
{
    if (status < 0 && status != UV_ECANCELED) die("write", status);
    free(w);
}

static void send_bytes(uv_stream_t *s, const char *p, size_t n)
{
    uv_write_t *w = malloc(sizeof *w + n);
    memcpy(w + 1, p, n);
    uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)n);
    int rc = uv_write(w, s, &b, 1, on_written);
    if (rc) die("uv_write", rc);
}

static void append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n > *cap) {
        *cap = (*len + n) * 2;
        *buf = realloc(*buf, *cap);
    }
    memcpy(*buf + *len, p, n);
    *len += n;
}

/* Bytes to the server on subscriber c: through libuv, or (WSLOAD_KTIME) straight on its socket —
 * the upgrade request, the subscription and pongs, each a few hundred bytes on a socket that
 * has room for them. */
static void conn_send(wsconn_t *c, const char *p, size_t n)
{
    if (!g.ktime) {
        send_bytes((uv_stream_t *)&c->tcp, p, n);
        return;
    }
    ssize_t w = send(c->rfd, p, n, MSG_NOSIGNAL);
    if (w != (ssize_t)n) die("WSLOAD_KTIME: send", w < 0 ? uv_translate_sys_error(errno) : 0);
}

/* A client frame: FIN + opcode, masked with key 0. */
static void ws_send(wsconn_t *c, int op, const char *p, size_t n)
{
    char f[16 + 512];
    size_t h = 0;
    f[h++] = (char)(0x80 | op);
    if (n < 126) {
        f[h++] = (char)(0x80 | n);
    } else {
        f[h++] = (char)(0x80 | 126);
        f[h++] = (char)(n >> 8);
        f[h++] = (char)n;
    }
    memset(f + h, 0, 4);
    h += 4;
    if (n > sizeof f - h) die("frame too large", 0);
    memcpy(f + h, p, n);
    conn_send(c, f, h + n);
}

static uint64_t now_ns(void)
{
    return uv_hrtime();
}

/* When the frame being parsed arrived: the kernel's receive time of the segment that completed
 * it (WSLOAD_KTIME), or now. The kernel's time leaves out the tool's own delay in reading it:
 * on a 2-core machine the subscribers' reader waits for the CPU like the server does, and its
 * wait is not the server's latency. */
static uint64_t rx_now(void)
{
    return g.rx_ns ? g.rx_ns : now_ns();
}

/* CPU seconds (user + system, every thread) process g.cpu_pid used so far. */
static double srv_cpu(void)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", g.cpu_pid);
    FILE *f = fopen(path, "r");
    if (!f) die("WSLOAD_CPU_PID: no such process", 0);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        die("WSLOAD_CPU_PID: unreadable stat", 0);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The measured posts begin: the server's CPU from here on is theirs. */
static void srv_cpu_mark(void)
{
    if (g.cpu_pid && g.srv_cpu0 < 0) g.srv_cpu0 = srv_cpu();
}

/* ---- the writer: one keep-alive HTTP connection ---- */

static void post_one(void)
{
    char req[512], body[256];
    int bl;
    uint64_t stamp = 0; /* the send time the post carries */
    if (g.redis) {
        if (g.mode == MODE_FANOUT)
            snprintf(req, sizeof req, "PUBLISH %s %" PRIu64 "\r\n", g.name, g.post.sent + 1);
        else
            snprintf(req, sizeof req, "PUBLISH %s t%" PRIu64 "\r\n", g.name, stamp = now_ns());
    } else if (g.mode == MODE_FANOUT) {
        bl = snprintf(body, sizeof body, "{}");
        snprintf(req, sizeof req,
                 "POST /v1/counters/%s/incr HTTP/1.1\r\nHost: b\r\nContent-Type: "
                 "application/json\r\nContent-Length: %d\r\n\r\n%s",
                 g.name, bl, body);
    } else if (g.room) {
        bl = snprintf(body, sizeof body, "{\"from\":\"bench\",\"content\":\"t%" PRIu64 "\"}",
                      stamp = now_ns());
        snprintf(req, sizeof req,
                 "POST /v1/rooms/%s/messages HTTP/1.1\r\nHost: b\r\nContent-Type: "
                 "application/json\r\nContent-Length: %d\r\n\r\n%s",
                 g.room, bl, body);
    } else {
        bl = snprintf(body, sizeof body,
                      "{\"conversation_id\":\"room\",\"from\":\"bench\",\"content\":\"t%" PRIu64
                      "\"}",
                      stamp = now_ns());
        snprintf(req, sizeof req,
                 "POST /v1/users/%s/messages HTTP/1.1\r\nHost: b\r\nContent-Type: "
                 "application/json\r\nContent-Length: %d\r\n\r\n%s",
                 g.name, bl, body);
    }
    if (g.mode == MODE_LAST && g.post.sent < (uint64_t)g.nposts)
        g.posts[g.post.sent].sent_ns = stamp;
    if (g.mode == MODE_LAST || (g.mode == MODE_LATENCY && stamp >= g.t0 + g.warmup_ns))
        srv_cpu_mark();
    g.post.sent++;
    send_bytes((uv_stream_t *)&g.post.tcp, req, strlen(req));
}

static void fanout_pump(void)
{
    if (!g.measuring) return;
    while ((double)((int64_t)g.post.sent - g.complete) < g.rate)
        post_one();
}

static void on_post_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)s;
    if (n < 0) die("writer connection closed", (int)n);
    append(&g.post.buf, &g.post.len, &g.post.cap, b->base, (size_t)n);
    while (g.redis) { /* one ":<receivers>" line per PUBLISH */
        char *eol = memmem(g.post.buf, g.post.len, "\r\n", 2);
        if (!eol) return;
        if (g.post.buf[0] != ':') die("PUBLISH failed", 0);
        size_t used = (size_t)(eol - g.post.buf) + 2;
        memmove(g.post.buf, g.post.buf + used, g.post.len - used);
        g.post.len -= used;
        g.post.answered++;
    }
    for (;;) {
        char *end = memmem(g.post.buf, g.post.len, "\r\n\r\n", 4);
        if (!end) break;
        if (strncmp(g.post.buf, "HTTP/1.1 2", 10) != 0) {
            fprintf(stderr, "wsload: write failed: %.*s\n", (int)(end - g.post.buf), g.post.buf);
            exit(1);
        }
        size_t head = (size_t)(end - g.post.buf) + 4, clen = 0;
        char *cl = strcasestr(g.post.buf, "content-length:");
        if (cl && cl < end) clen = strtoul(cl + 15, NULL, 10);
        if (g.post.len < head + clen) break;
        memmove(g.post.buf, g.post.buf + head + clen, g.post.len - head - clen);
        g.post.len -= head + clen;
        g.post.answered++;
    }
}

static void on_post_connect(uv_connect_t *r, int status)
{
    if (status) die("writer connect", status);
    g.post.state = 2;
    uv_read_start(r->handle, on_alloc, on_post_read);
    free(r);
}

/* ---- streams ---- */

/* fanout: every subscriber must see every value once, in order */
static void on_value(wsconn_t *c, int64_t val)
{
    g.frames++;
    if (val != c->last_value + 1) {
        fprintf(stderr, "wsload: gap or repeat: %" PRId64 " after %" PRId64 "\n", val,
                c->last_value);
        exit(1);
    }
    c->last_value = val;
    if (val <= g.base) return;
    uint64_t *slot = &g.seen[(size_t)(val - g.base) % g.ring];
    if (++*slot == (uint64_t)g.conns) {
        *slot = 0;
        g.complete = val - g.base;
        fanout_pump();
    }
}

/* latency: the frame carries the time its write was sent */
static void on_sample(wsconn_t *c, uint64_t sent)
{
    /* each subscriber sees each post once, in order: a repeat (or one out of order) is counted */
    if ((int64_t)sent <= c->last_value)
        g.dups++;
    else
        c->last_value = (int64_t)sent;
    if (sent < g.t0 + g.warmup_ns) return;
    g.frames++;
    if (g.nlat == g.caplat) {
        g.caplat = g.caplat ? g.caplat * 2 : 1 << 16;
        g.lat = realloc(g.lat, g.caplat * sizeof *g.lat);
        if (g.ktime) g.ulat = realloc(g.ulat, g.caplat * sizeof *g.ulat);
    }
    if (g.ktime) g.ulat[g.nlat] = now_ns() - sent;
    g.lat[g.nlat++] = rx_now() - sent;
}

static void last_next(void);

/* last: a frame of single post `sent` reached one more subscriber */
static void on_last(uint64_t sent)
{
    uint64_t now = rx_now();
    for (int i = (int)g.post.sent - 1; i >= 0; i--) {
        lastpost_t *lp = &g.posts[i];
        if (lp->sent_ns != sent) continue;
        g.frames++;
        lp->last_ns = now;
        if (++lp->got == g.conns) {
            g.done++;
            last_next();
        }
        return;
    }
}

static void on_frame(wsconn_t *c, int op, const char *p, size_t n)
{
    if (op == 9) { /* ping -> pong */
        ws_send(c, 10, p, n);
        return;
    }
    if (op != 1) return;
    if (!c->ready) {
        /* ready once the subscription's first state frame (value or replay_done) arrived */
        if (memmem(p, n, "\"type\":\"counter\"", 16) || memmem(p, n, "replay_done", 11)) {
            c->ready = true;
            const char *v = memmem(p, n, "\"value\":", 8);
            if (v) c->last_value = strtoll(v + 8, NULL, 10);
            g.ready++;
        }
        return;
    }
    if (!g.measuring) return;
    if (g.mode == MODE_FANOUT) {
        const char *v = memmem(p, n, "\"value\":", 8);
        if (v) on_value(c, strtoll(v + 8, NULL, 10));
    } else if (g.mode == MODE_LAST) {
        const char *t = memmem(p, n, "\"content\":\"t", 12);
        if (t) on_last(strtoull(t + 12, NULL, 10));
    } else if (g.mode == MODE_LATENCY) {
        const char *t = memmem(p, n, "\"content\":\"t", 12);
        if (t)
            on_sample(c, strtoull(t + 12, NULL, 10));
        else if (memmem(p, n, "\"type\":\"typing\"", 15) && now_ns() >= g.t0 + g.warmup_ns)
            g.typing++;
    }
}

/* Redis: replies are arrays of bulk strings and integers; returns the end of one item, or NULL
 * if it has not fully arrived. */
static const char *resp_item(const char *p, const char *end, const char **s, size_t *n)
{
    const char *eol = p < end ? memmem(p, (size_t)(end - p), "\r\n", 2) : NULL;
    if (!eol) return NULL;
    if (*p == ':') {
        *s = p + 1;
        *n = (size_t)(eol - p - 1);
        return eol + 2;
    }
    if (*p != '$') die("unexpected reply from Redis", 0);
    size_t len = strtoul(p + 1, NULL, 10);
    if ((size_t)(end - eol - 2) < len + 2) return NULL;
    *s = eol + 2;
    *n = len;
    return eol + 2 + len + 2;
}

/* Consumes whole pub/sub replies from the start of c's buffer; returns bytes used. */
static size_t on_redis(wsconn_t *c)
{
    const char *p = c->buf, *end = c->buf + c->len;
    for (;;) {
        const char *q = memmem(p, (size_t)(end - p), "\r\n", 2), *kind, *chan, *msg;
        size_t kn, cn, mn;
        if (!q || *p != '*' || !(q = resp_item(q + 2, end, &kind, &kn)) ||
            !(q = resp_item(q, end, &chan, &cn)) || !(q = resp_item(q, end, &msg, &mn)))
            return (size_t)(p - c->buf);
        p = q;
        if (kn == 9 && memcmp(kind, "subscribe", 9) == 0) {
            c->ready = true;
            g.ready++;
        } else if (g.measuring && kn == 7 && memcmp(kind, "message", 7) == 0) {
            if (g.mode == MODE_FANOUT)
                on_value(c, strtoll(msg, NULL, 10));
            else if (g.mode == MODE_LATENCY)
                on_sample(c, strtoull(msg + 1, NULL, 10));
            else if (g.mode == MODE_LAST)
                on_last(strtoull(msg + 1, NULL, 10));
        }
    }
}

/* n bytes the server sent on c */
static void ws_bytes(wsconn_t *c, const char *p, size_t n)
{
    if (!g.measuring && g.quiet_ns) g.rx_last = now_ns();
    append(&c->buf, &c->len, &c->cap, p, n);
    size_t off = 0;
    if (g.redis) {
        off = on_redis(c);
        memmove(c->buf, c->buf + off, c->len - off);
        c->len -= off;
        return;
    }
    if (!c->upgraded) {
        char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
        if (!end) return;
        if (strncmp(c->buf, "HTTP/1.1 101", 12) != 0) die("upgrade refused", 0);
        c->upgraded = true;
        off = (size_t)(end - c->buf) + 4;
        char sub[256], who[96] = "";
        if (g.users) snprintf(who, sizeof who, ",\"user\":\"%s%d\"", g.users, c->idx);
        int sl = g.room ? snprintf(sub, sizeof sub,
                                   "{\"type\":\"subscribe\",\"id\":\"s\",\"topic\":\"room\","
                                   "\"room_id\":\"%s\"%s}",
                                   g.room, who)
                 : g.mode == MODE_FANOUT || g.mode == MODE_IDLE
                     ? snprintf(sub, sizeof sub,
                                "{\"type\":\"subscribe\",\"id\":\"s\",\"topic\":\"counter\","
                                "\"name\":\"%s\"}",
                                g.name)
                     : snprintf(sub, sizeof sub,
                                "{\"type\":\"subscribe\",\"id\":\"s\",\"topic\":\"messages\","
                                "\"user\":\"%s\",\"conversation_id\":\"room\"}",
                                g.name);
        ws_send(c, 1, sub, (size_t)sl);
    }
    for (;;) {
        size_t avail = c->len - off;
        if (avail < 2) break;
        const unsigned char *h = (const unsigned char *)c->buf + off;
        size_t plen = h[1] & 127, hl = 2;
        if (plen == 126) {
            if (avail < 4) break;
            plen = (size_t)h[2] << 8 | h[3];
            hl = 4;
        } else if (plen == 127) {
            if (avail < 10) break;
            plen = 0;
            for (int i = 2; i < 10; i++)
                plen = plen << 8 | h[i];
            hl = 10;
        }
        if (avail < hl + plen) break;
        on_frame(c, h[0] & 15, (const char *)h + hl, plen);
        off += hl + plen;
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
}

static void on_ws_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    if (n < 0) die("stream closed by server", (int)n);
    ws_bytes((wsconn_t *)s, b->base, (size_t)n);
}

/* WSLOAD_KTIME: the socket readable; each recvmsg's bytes are parsed with the kernel's receive
 * time of the last segment it returned (SO_TIMESTAMPNS, per TCP read). */
static void on_ws_poll(uv_poll_t *h, int status, int events)
{
    wsconn_t *c = h->data;
    (void)events;
    if (status < 0) die("poll", status);
    static char slab[256 * 1024];
    for (;;) {
        char ctl[CMSG_SPACE(sizeof(struct timespec))];
        struct iovec iov = {slab, sizeof slab};
        struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
        ssize_t n = recvmsg(c->rfd, &m, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0) die("recvmsg", uv_translate_sys_error(errno));
        if (n == 0) die("stream closed by server", UV_EOF);
        g.rx_ns = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(cm), sizeof ts);
                g.rx_ns = (uint64_t)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - g.real_off);
            }
        /* the kernel stamps packets once the first socket asked (a switch it flips a moment
         * later): a read without a stamp is timed now, and counted while measuring */
        if (!g.rx_ns && g.measuring) g.unstamped++;
        ws_bytes(c, slab, (size_t)n);
        g.rx_ns = 0;
        if ((size_t)n < sizeof slab) return; /* drained: no second call to hear EAGAIN */
    }
}

static void ws_read_start(wsconn_t *c)
{
    if (!g.ktime) uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_ws_read);
    /* WSLOAD_KTIME: its poll handle reads (ktime_connect) */
}

static void connect_more(void);

/* c's connection is open: the upgrade (or Redis's SUBSCRIBE) goes out, reads start. */
static void ws_connected(wsconn_t *c)
{
    g.connecting--;
    if (g.redis) {
        char sub[128];
        int sl = snprintf(sub, sizeof sub, "SUBSCRIBE %s\r\n", g.name);
        conn_send(c, sub, (size_t)sl);
        ws_read_start(c);
        connect_more();
        return;
    }
    static const char up[] =
        "GET /v1/stream HTTP/1.1\r\nHost: b\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n";
    conn_send(c, up, sizeof up - 1);
    ws_read_start(c);
    connect_more();
}

static void on_ws_connect(uv_connect_t *r, int status)
{
    wsconn_t *c = (wsconn_t *)r->handle;
    free(r);
    if (status) die("connect", status);
    ws_connected(c);
}

/* WSLOAD_KTIME: one socket a subscriber, no libuv stream (a second descriptor for recvmsg would
 * take 20,000 for 10,000 subscribers, the machine's limit): connected in the background, then
 * polled for reading. */
static void on_ktime_poll(uv_poll_t *h, int status, int events)
{
    wsconn_t *c = h->data;
    (void)events;
    if (status < 0) die("poll", status);
    int err = 0;
    socklen_t l = sizeof err;
    if (getsockopt(c->rfd, SOL_SOCKET, SO_ERROR, &err, &l) || err)
        die("connect", uv_translate_sys_error(err ? err : errno));
    int rc = uv_poll_start(&c->poll, UV_READABLE, on_ws_poll);
    if (rc) die("uv_poll_start", rc);
    ws_connected(c);
}

static void ktime_connect(wsconn_t *c, int port)
{
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", port, &a);
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
        die("WSLOAD_KTIME: socket", uv_translate_sys_error(errno));
    if (connect(fd, (struct sockaddr *)&a, sizeof a) && errno != EINPROGRESS)
        die("connect", uv_translate_sys_error(errno));
    c->rfd = fd;
    c->poll.data = c;
    int rc = uv_poll_init_socket(g.loop, &c->poll, fd);
    if (rc || (rc = uv_poll_start(&c->poll, UV_WRITABLE, on_ktime_poll))) die("uv_poll", rc);
}

static void tcp_connect(uv_tcp_t *t, int port, uv_connect_cb cb)
{
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", port, &a);
    uv_tcp_init(g.loop, t);
    uv_tcp_nodelay(t, 1);
    uv_connect_t *r = malloc(sizeof *r);
    int rc = uv_tcp_connect(r, t, (struct sockaddr *)&a, cb);
    if (rc) die("uv_tcp_connect", rc);
}

/* Keeps at most 128 connects in flight, so the listen backlog never overflows. */
static void connect_more(void)
{
    while (g.connecting < 128 && g.next_conn < g.conns) {
        g.connecting++;
        wsconn_t *c = &g.ws[g.next_conn];
        c->idx = g.next_conn++;
        if (g.ktime)
            ktime_connect(c, g.port);
        else
            tcp_connect(&c->tcp, g.port, on_ws_connect);
    }
}

/* ---- phases ---- */

/* This process's CPU seconds (user and system) so far. */
static double cpu_secs(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(void)
{
    double secs = (double)(now_ns() - g.t0) / 1e9;
    char scpu[96] = "";
    int sl = 0;
    if (g.cpu_pid && g.srv_cpu0 >= 0)
        sl = snprintf(scpu, sizeof scpu, " server_cpu_s=%.2f", srv_cpu() - g.srv_cpu0);
    if (g.quiet_ns) /* the opening's backlog: every stream ready → no byte for WSLOAD_QUIET_MS */
        snprintf(scpu + sl, sizeof scpu - (size_t)sl, " drain_ms=%.0f", (double)g.drain_ns / 1e6);
    if (g.mode == MODE_FANOUT) {
        printf("%sfanout conns=%d window=%.0f seconds=%.2f changes=%" PRId64 " frames=%" PRIu64
               " frames_per_sec=%.0f\n",
               g.redis ? "redis-" : "", g.conns, g.rate, secs, g.complete, g.frames,
               (double)g.frames / secs);
    } else if (g.mode == MODE_LATENCY) {
        if (!g.nlat) die("no latency samples", 0);
        qsort(g.lat, g.nlat, sizeof *g.lat, cmp_u64);
        char user[128] = ""; /* WSLOAD_KTIME: the same samples as the tool saw them */
        if (g.ktime) {
            qsort(g.ulat, g.nlat, sizeof *g.ulat, cmp_u64);
            snprintf(user, sizeof user,
                     " ktime=1 user_p50_ms=%.3f user_p99_ms=%.3f unstamped_reads=%" PRIu64,
                     (double)g.ulat[g.nlat / 2] / 1e6, (double)g.ulat[g.nlat * 99 / 100] / 1e6,
                     g.unstamped);
        }
        /* the tool's own CPU share over the run: near 1.0, its reads (not the server) set the
         * latency it measures */
        double cpu = cpu_secs() - g.cpu0;
        printf("%slatency conns=%d rate=%.0f posts=%" PRIu64 " samples=%zu p50_ms=%.3f "
               "p99_ms=%.3f max_ms=%.3f typing_frames=%" PRIu64 " dups=%" PRIu64
               " client_cpu=%.2f%s%s\n",
               g.redis ? "redis-" : "", g.conns, g.rate, g.post.sent, g.nlat,
               (double)g.lat[g.nlat / 2] / 1e6, (double)g.lat[g.nlat * 99 / 100] / 1e6,
               (double)g.lat[g.nlat - 1] / 1e6, g.typing, g.dups, secs > 0 ? cpu / secs : 0, scpu,
               user);
    } else if (g.mode == MODE_LAST) {
        if (!g.done) die("no post reached every subscriber", 0);
        uint64_t *v = malloc((size_t)g.done * sizeof *v);
        for (int i = 0; i < g.done; i++)
            v[i] = g.posts[i].last_ns - g.posts[i].sent_ns;
        qsort(v, (size_t)g.done, sizeof *v, cmp_u64);
        double cpu = cpu_secs() - g.cpu0;
        /* the median of an even count: the mean of the middle two */
        double med = g.done % 2 ? (double)v[g.done / 2]
                                : ((double)v[g.done / 2 - 1] + (double)v[g.done / 2]) / 2;
        printf("%slast conns=%d posts=%d complete=%d frames=%" PRIu64
               " last_p50_ms=%.3f last_min_ms=%.3f last_max_ms=%.3f client_cpu=%.2f%s\n",
               g.redis ? "redis-" : "", g.conns, g.nposts, g.done, g.frames, med / 1e6,
               (double)v[0] / 1e6, (double)v[g.done - 1] / 1e6, secs > 0 ? cpu / secs : 0, scpu);
        free(v);
        if (g.done < g.nposts) {
            fprintf(stderr, "wsload: %d of %d posts never reached every subscriber\n",
                    g.nposts - g.done, g.nposts);
            exit(1);
        }
    } else {
        printf("%sidle conns=%d ready=%d\n", g.redis ? "redis-" : "", g.conns, g.ready);
    }
    fflush(stdout);
    exit(0);
}

static void on_stop(uv_timer_t *t)
{
    (void)t;
    report();
}

/* last: the next single post once the previous reached everyone and its time came; after the
 * last one, the report */
static void on_last_due(uv_timer_t *t)
{
    (void)t;
    last_next();
}

static void last_next(void)
{
    if ((int)g.post.sent > g.done) return; /* one still on its way */
    if (g.done == g.nposts) {
        report();
        return;
    }
    uint64_t now = now_ns();
    if (now < g.next_ns) {
        uv_timer_start(&g.tick, on_last_due, (g.next_ns - now) / 1000000 + 1, 0);
        return;
    }
    g.next_ns = now + g.gap_ns;
    uv_timer_start(&g.stop, on_stop, 10000,
                   0); /* 10 s for it to reach everyone, or report() fails */
    post_one();
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
    if (!g.measuring) {
        if (g.ready < g.conns) return;
        /* the writer opens once the streams are: an opening that takes long (a room's presence)
         * must not leave it idle past the server's idle timeout */
        if (g.post.state == 0) {
            g.post.state = 1;
            tcp_connect(&g.post.tcp, g.post_port, on_post_connect);
        }
        if (g.post.state < 2) return;
        if (!g.ready_ns) g.ready_ns = g.rx_last = now_ns();
        if (g.quiet_ns && g.mode != MODE_IDLE && g.mode != MODE_FANOUT) {
            uint64_t now = now_ns();
            if (now - g.ready_ns > 600 * 1000000000ull) die("the streams never went quiet", 0);
            if (now - g.rx_last < g.quiet_ns) return;
            g.drain_ns = g.rx_last - g.ready_ns;
        }
        if (g.mode == MODE_IDLE) {
            printf("ready %d\n", g.ready);
            fflush(stdout);
        }
        g.measuring = true;
        g.t0 = now_ns();
        fprintf(stderr, "wsload: %d streams ready\n", g.ready); /* a profiler may start now */
        g.cpu0 = cpu_secs();
        g.base = g.ws[0].last_value;
        uint64_t ms = (uint64_t)g.seconds * 1000 + g.warmup_ns / 1000000;
        if (g.mode == MODE_LAST) { /* the first post after one gap (and the warm-up) */
            g.next_ns = g.t0 + g.warmup_ns + g.gap_ns;
            ms = (g.warmup_ns + g.gap_ns) / 1000000 + 10000; /* each post restarts it */
            uv_timer_start(&g.tick, on_last_due, (g.warmup_ns + g.gap_ns) / 1000000, 0);
        }
        uv_timer_start(&g.stop, on_stop, ms, 0);
        if (g.mode == MODE_FANOUT) fanout_pump();
        if (g.mode == MODE_LATENCY)
            uv_timer_start(&g.tick, on_tick, 0, 1); /* 1 ms ticks pace the posts */
        else if (g.mode != MODE_LAST)
            uv_timer_stop(&g.tick);
        return;
    }
    /* latency: post so that the total follows rate * elapsed */
    double due = g.rate * (double)(now_ns() - g.t0) / 1e9;
    while ((double)g.post.sent < due)
        post_one();
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr,
                "usage: %s [redis-]fanout|latency|last|idle PORT[:POSTPORT] CONNS SECONDS "
                "[RATE|WINDOW|POSTS]\n",
                argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    g.redis = strncmp(mode, "redis-", 6) == 0;
    if (g.redis) mode += 6;
    g.mode = strcmp(mode, "fanout") == 0    ? MODE_FANOUT
             : strcmp(mode, "latency") == 0 ? MODE_LATENCY
             : strcmp(mode, "last") == 0    ? MODE_LAST
                                            : MODE_IDLE;
    g.port = atoi(argv[2]);
    const char *pp = strchr(argv[2], ':');
    g.post_port = pp ? atoi(pp + 1) : g.port;
    g.conns = atoi(argv[3]);
    g.seconds = atoi(argv[4]);
    g.rate = argc > 5 ? atof(argv[5]) : g.mode == MODE_FANOUT ? 16 : 200;
    if (g.conns <= 0 || g.seconds <= 0) return 2;
    snprintf(g.name, sizeof g.name, "wsload-%s-%u", argv[1], (unsigned)(now_ns() % 1000000));
    g.room = g.mode != MODE_FANOUT && !g.redis ? getenv("WSLOAD_ROOM") : NULL;
    g.users = g.room ? getenv("WSLOAD_USERS") : NULL;
    if (g.users && !*g.users) g.users = NULL; /* set but empty: anonymous readers */
    const char *cpid = getenv("WSLOAD_CPU_PID");
    g.cpu_pid = cpid ? atoi(cpid) : 0;
    g.srv_cpu0 = -1;
    const char *warm = getenv("WSLOAD_WARMUP_MS");
    g.warmup_ns = (g.mode == MODE_LATENCY || g.mode == MODE_LAST) && warm
                      ? strtoull(warm, NULL, 10) * 1000000
                      : 0;
    const char *quiet = getenv("WSLOAD_QUIET_MS");
    g.quiet_ns = quiet ? strtoull(quiet, NULL, 10) * 1000000 : 0;
    const char *kt = getenv("WSLOAD_KTIME");
    g.ktime = kt && *kt && strcmp(kt, "0") != 0;
    if (g.ktime) {
        struct timespec rt, mt;
        clock_gettime(CLOCK_REALTIME, &rt);
        clock_gettime(CLOCK_MONOTONIC, &mt); /* uv_hrtime's clock */
        g.real_off = ((int64_t)rt.tv_sec - mt.tv_sec) * 1000000000 + (rt.tv_nsec - mt.tv_nsec);
    }
    if (g.mode == MODE_LAST) {
        g.nposts = argc > 5 ? atoi(argv[5]) : 20;
        if (g.nposts <= 0) return 2;
        g.posts = calloc((size_t)g.nposts, sizeof *g.posts);
        g.gap_ns = (uint64_t)g.seconds * 1000000000 / (uint64_t)g.nposts;
    }
    g.loop = uv_default_loop();
    g.ws = calloc((size_t)g.conns, sizeof *g.ws);
    g.ring = (size_t)g.rate * 4 + 4;
    g.seen = calloc(g.ring, sizeof *g.seen);
    connect_more();
    uv_timer_init(g.loop, &g.tick);
    uv_timer_init(g.loop, &g.stop);
    uv_timer_start(&g.tick, on_tick, 50, 50);
    uv_run(g.loop, UV_RUN_DEFAULT);
    return 1;
}
