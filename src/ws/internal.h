/* SPDX-License-Identifier: MIT */
/*
 * ws internals shared by the files of the module (and the fuzz driver): connections, their
 * subscriptions and outbound queues, and the channels that index subscriptions by what they
 * follow so a change reaches its subscribers without walking every connection.
 *
 * A frame is a short per-subscription prefix ({"type":…,"id":…,) followed by a body that is
 * serialized once per change and shared, reference-counted, by every subscriber's queue; the
 * prefix is shared the same way by a run of subscribers with the same id. A queue is a ring of
 * (prefix, body, batch) entries per connection, so a fan-out allocates nothing per frame.
 */
#ifndef STRATA_WS_INTERNAL_H
#define STRATA_WS_INTERNAL_H

#include "strata/ws.h"
#include "strata/metrics.h"
#include "strata/owner.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct lws;
struct lws_context;
struct lws_vhost;

#define ST__WS_MAX_SUBS     64
#define ST__WS_MAX_IN       (64 * 1024)
#define ST__WS_MAX_QUEUED   (1u << 20)
#define ST__WS_WRITE_BUDGET (64u * 1024) /* bytes a write takes, then at least one frame */
#define ST__WS_CLOSE_GRACE  10           /* seconds a cut-off stream has to take its close frame */
#define ST__WS_RING_KEEP    8            /* queue entries an empty queue keeps room for */
#define ST__WS_FAN_MIN      64           /* streams ready at once for a parallel send (fan.c) */
#define ST__WS_BATCH_MIN    4            /* ... for the loop's io_uring batch without the thread */
#define ST__WS_FAN_ARENA    (4u << 20)   /* bytes framed per round of a parallel send */
#define ST__WS_TURN_STREAMS 256          /* streams written per loop turn (queue.c st__on_turn) */
#define ST__WS_LAZY_MS      100          /* how long a lazy frame waits for a write (queue.c) */
#define ST__WS_RING_MAP     (256u << 10) /* ring bytes from which a ring is its own mapping */
#define ST__WS_TRIM_MIN     (16u << 20)  /* rings' bytes a burst reached for a heap trim after */

/* close codes (RFC 6455 §7.4.1) */
#define ST__WS_CLOSE_GOING_AWAY 1001
#define ST__WS_CLOSE_PROTOCOL   1002
#define ST__WS_CLOSE_INVALID    1007
#define ST__WS_CLOSE_POLICY     1008
#define ST__WS_CLOSE_TOO_BIG    1009

/* Shared bytes of one change; freed when the last queue holding it lets go. */
typedef struct st_wsbody {
    uint32_t refs;
    size_t len;
    char data[];
} st_wsbody_t;

/* Returns an owned body with one reference holding a copy of data. */
st_wsbody_t *st__ws_body_new(const void *data, size_t len);
void st__ws_body_unref(st_wsbody_t *b);

/* One queued frame: a prefix (type and subscription id, shared by a run of subscribers with
 * the same id) and a body (shared by every subscriber of the change). */
typedef struct {
    st_wsbody_t *prefix; /* one reference owned by the entry, or NULL */
    st_wsbody_t *body;   /* one reference owned by the entry */
    uint64_t wait;       /* the batch this frame shows; it leaves once that batch is durable */
    bool replay;         /* a replayed message: paced by the replay, not counted as live backlog */
    /* the body is the one of the entry ahead of it (one change to several subscriptions of the
     * stream), held once: its bytes are counted there, not again here */
    bool shared;
} st_wsent_t;

typedef enum { ST_TOPIC_COUNTER, ST_TOPIC_SEATS, ST_TOPIC_MESSAGES } st_topic_t;

typedef struct st_wsconn st_wsconn_t;
typedef struct st_wschan st_wschan_t;

typedef struct st_wssub {
    st_list_t link;  /* in its connection's subs */
    st_list_t clink; /* in its channel's subs (not linked while pending) */
    st_wsconn_t *conn;
    st_wschan_t *chan;
    st_topic_t topic;
    char *id;
    char *name; /* counter name, event id, or user */
    char *conv; /* messages: one conversation or NULL */
    /* a room's (topic "room", SPEC §3): name is the room's channel (its owner's bytes,
     * st_chat_owner_bytes), conv the room; member is the user it streams for (the token's sub; with
     * auth off the optional "user"), whose removal from the room ends it, or NULL */
    bool room;
    char *member;
    bool present;    /* a room's: counted by presence.c while in its channel */
    uint64_t cursor; /* messages: the last msg_id replayed or sent */
    /* messages: a cursor no rolled-back batch moved (after a rollback, the cursor goes back to
     * it: in a group, the next leader's ids may be below a deposed leader's failed ones), and
     * the batch the newest live frame waits for */
    uint64_t safe_cursor, last_wait;
    bool replaying; /* messages: replay not finished; live ones come through the replay */
    /* SPEC §8: a snapshot shows only state this member knows is current. On the serving leader
     * it waits for `fence` (a batch proving the lease, 0 when the lease covered it); on another
     * member the subscription is `pending` — in no channel, nothing sent — until read index
     * round `ticket` completes (repl/readindex.c). */
    uint64_t fence, ticket;
    bool pending;
    struct st_ws *ws;
    struct st_coldwait *cold_wait; /* a replay page parked for cold data (NULL otherwise) */
    /* a room's: its typing frames' prefix (one reference, made at the first one; topics.c) */
    st_wsbody_t *typing_prefix;
    /* a room's: its slot in the presence frames' job it waits in (presout.c), or NULL */
    struct st_wssub **pres_ref;
    /* a room's: the first presence change it is told of (the changes before it joined are not
     * its: a frame held back for a while must not reach the subscriptions that came since) */
    uint64_t pres_since;
} st_wssub_t;

/* Every subscription to one counter, event or user. Owned by the ws map, freed when empty. */
struct st_wschan {
    st_map_node_t node;
    st_list_t subs; /* st_wssub_t, by clink */
    size_t klen;
    char key[]; /* topic byte, then the name */
};

struct st_wsconn {
    st_list_t link;   /* in ws->conns while established */
    st_list_t wlink;  /* in ws->waiting while a frame of it waits for its batch (not counted) */
    st_list_t slink;  /* in ws->soon: frames that may leave wait for the end of the loop turn */
    st_list_t llink;  /* in ws->lazy: frames that may leave wait for the next write (queue.c) */
    uint64_t lazy_ms; /* loop time it joined ws->lazy (its frames leave ST__WS_LAZY_MS later) */
    struct lws *wsi;  /* NULL in the fuzz driver: frames are queued, never written */
    st_list_t subs;   /* st_wssub_t, by link, newest first */
    size_t nsubs;
    /* The queue: a ring of qlen entries from qhead in an array of qcap (a power of two); one
     * array per stream rather than a node per frame, so a fan-out allocates nothing per frame. */
    st_wsent_t *q;
    uint32_t qcap, qhead, qlen;
    bool qmapped; /* q is a mapping of its own (ring.c), not from the heap */
    /* The first `counted` frames of the queue may leave (their batches and those of every frame
     * ahead are durable): they count toward the backlog; the others wait for their batch. */
    uint32_t counted;
    size_t queued;   /* bytes of every queued frame */
    size_t replayed; /* bytes of the queued replayed messages */
    size_t live;     /* bytes of the counted frames that are not replayed: the backlog cap's part */
    size_t biggest;  /* the largest release counted since live was last 0 (see queue.c) */
    /* The release being counted (queue.c st__queue_count): its bytes, and the loop turn it began
     * in. */
    size_t rel_bytes;
    uint64_t rel_turn;
    /* Why the stream is being ended with 1008 ("slow consumer", "token expired"), NULL while it
     * is not: its queue is dropped and nothing more is queued; the close starts from the
     * writable callback (see st__ws_cut). */
    const char *cut;
    uint16_t cut_code; /* the close code of a cut-off: 1008, or 1002/1007/1009 for a failure */
    int fd;            /* the socket (its read-side check in rx.c is keyed by it) */
    bool closing;      /* the close was handed to lws: nothing more is done here */
    bool broken;       /* a direct write failed: close from the writable callback */
    bool established;  /* counted in ws->nconns (a failed handshake never is) */
    /* keep-alive (ws.c st__on_tick): loop times (uv_now, ms) of the last bytes received from the
     * client (rx.c stamps it on every read) and of the last ping asked for; ping_due while a
     * ping waits for the writable callback */
    uint64_t rx_ms, ping_ms;
    bool ping_due;
    /* The token's subject was erased after the token was issued (SPEC §2.2): the stream is cut
     * 1008 "token revoked" once the frames that erasure ended its subscriptions with are out
     * (ws.c st__ws_on_tick), as a request with the token is refused 401 token_revoked. */
    bool revoked;
    uint64_t revoke_wait;        /* the erasure's batch: the cut waits for it to be durable */
    uint64_t revoke_ms;          /* loop time of the revocation: the cut waits at most 2 s more */
    char *subject;               /* authenticated principal ("" when auth is off) */
    bool admin;                  /* its token has role admin (auth on): it streams any room */
    st_http_token_times_t token; /* the token's times (all 0 with auth off) */
    st_buf_t in;                 /* a message arriving in fragments */
};

typedef struct st_wsfan st_wsfan_t;

/* One stream's part of a parallel send (fan.c): its framed bytes in the round's arena. */
typedef struct {
    st_wsconn_t *conn; /* loop only */
    size_t frames;     /* loop only: frames in the bytes, for the metric */
    int fd;            /* the stream's socket */
    size_t off, len;   /* the bytes, in the arena */
    ssize_t sent;      /* set by the thread that sent them: bytes the socket took, or -errno */
    bool by_sender;    /* set with sent: the sender thread sent them, not the loop */
    uint8_t calls;     /* set with sent: system calls charged to this item (a chunk's, once) */
} st_wsfan_item_t;

/* typing.c */
#define ST__TYPING_SLOTS 4096 /* recent (room, user) typing signals remembered for coalescing */
typedef struct st_wstyping st_wstyping_t;
void st__ws_typing_open(st_ws_t *ws);
void st__ws_typing_close(st_ws_t *ws);
/* topics.c: the frame {"type":"typing","id","room_id","user","until"} to the room's subscribers */
void st__ws_typing_deliver(st_ws_t *ws, const char *room, size_t rl, const char *user, size_t ul,
                           int64_t until);
/* typing.c: a POST of path with body (borrowed, copied) to every other member of the group whose
 * URL is known, from a worker thread, in order; dropped when the bounded queue is full. Returns
 * how many were queued (0 outside a group). */
size_t st__ws_peers_post(st_ws_t *ws, const char *path, const char *body, size_t len);

/* presence.c (SPEC §2.1 v5) */
typedef struct st_wspres st_wspres_t;
void st__ws_presence_open(st_ws_t *ws); /* after st__ws_typing_open: it posts through typing.c */
void st__ws_presence_close(st_ws_t *ws);
/* A room subscription of user (room and user borrowed) joined its channel: true if it was
 * counted (the table had room), and then st__ws_presence_drop must follow when it leaves. */
bool st__ws_presence_add(st_ws_t *ws, const char *room, const char *user);
/* Whether a room subscription of user would be counted (the table and the user's share of it
 * have room, or it is counted already); the subscribe is refused otherwise. */
bool st__ws_presence_room_for(st_ws_t *ws, const char *room, const char *user);
void st__ws_presence_drop(st_ws_t *ws, const char *room, const char *user);
/* A deleted room: its entries go at once (no frame: its streams have ended). */
void st__ws_presence_forget(st_ws_t *ws, const char *room, size_t rl);
/* presence.c: presout.c queued the room's job to its last subscriber (room borrowed): its users'
 * next frames are a second from now on, and what presence.c held back for the room may go */
void st__ws_presence_sent(st_ws_t *ws, const char *room, size_t rl);
/* presence.c: the number the next change will have (a subscription joining now is told of the
 * changes from it on) */
uint64_t st__ws_presence_since(const st_ws_t *ws);

/* presout.c: presence frames to a room's subscribers, --ws-presence-budget a loop turn */
typedef struct st_wspresout st_wspresout_t;
void st__ws_presout_open(st_ws_t *ws);
void st__ws_presout_close(st_ws_t *ws); /* frames not queued yet are dropped */
/* The frame {"type":"presence","id","room_id","user","online"} for the room's subscribers here,
 * in order after the room's frames given before it; queued from the next idle phase on, to the
 * room's subscriptions then that joined before change (its number, st__ws_presence_since). Only
 * while st__ws_presout_busy is false for the room. True: it is in the room's job, and
 * st__ws_presence_sent(room) follows once the job is out; false: nobody here to tell. */
bool st__ws_presence_deliver(st_ws_t *ws, const char *room, size_t rl, const char *user, size_t ul,
                             bool online, uint64_t change);
/* The room's job has begun: a new frame of the room would overtake it (it waits for
 * st__ws_presence_sent). */
bool st__ws_presout_busy(const st_ws_t *ws, const char *room, size_t rl);
/* s ends: it is struck from the job it waits in. */
void st__ws_presout_gone(st_wssub_t *s);

struct st_ws {
    uv_loop_t *loop;
    st_app_t *app;
    struct lws_context *ctx;
    struct lws_vhost *vh;
    st_list_t conns; /* st_wsconn_t, by link, newest first */
    size_t nconns;
    size_t nsubs;      /* subscriptions over every stream (the gauge strata_ws_subscribers) */
    st_list_t waiting; /* st_wsconn_t, by wlink: a frame of theirs waits for a durable batch */
    /* st_wsconn_t, by slink: streams with frames that may leave and no write under way (released
     * by a durable batch, queued durable already — what a member applied, a snapshot, an answer —
     * or more than one write's budget); `turn` writes 256 of them after each poll, one send
     * each for all their frames (queue.c) */
    st_list_t soon;
    /* st_wsconn_t, by llink: streams whose frames that may leave are all lazy ones (typing) and
     * no write is coming, oldest first; they ride in the stream's next write, or `lazy_timer`
     * writes those that waited ST__WS_LAZY_MS */
    st_list_t lazy;
    uv_timer_t lazy_timer;
    uv_check_t turn;
    uv_idle_t spin;     /* keeps the poll from blocking while ws->soon is not empty */
    uv_prepare_t turns; /* counts loop turns into turn_no (a release is what one turn brings) */
    uint64_t turn_no;
    st_map_t chans;
    st_buf_t out; /* LWS_PRE headroom + the frames being written */
    /* a parallel send (write.c, fan.c), loop only: the streams a turn made ready, the
     * round's items and the arena their bytes are framed into, kept between batches */
    ST_VEC(st_wsconn_t *) ready;
    ST_VEC(st_wsfan_item_t) items;
    st_buf_t arena;
    st_wsfan_t *fan; /* the sender thread; NULL if it could not start */
    st_store_listener_t listener;
    const void *adopting; /* token of the connection being adopted, during st_ws_adopt */
    /* Once a tick: pings streams silent for ping_ms, closes those that would be silent for
     * 3 x ping_ms before the next tick (so none is kept past it), and ends
     * streams whose token expired (ws.c st__on_tick, by st_http_token_check). */
    uv_timer_t tick;
    uint64_t ping_ms; /* --ws-ping-seconds, in ms */
    uint64_t tick_ms; /* the tick's period: a quarter of ping_ms, at most 1 s */
    st_metric_t *m_subs, *m_conns, *m_slow, *m_sent;
    st_metric_t *m_fan_loop, *m_fan_sender; /* writes of parallel sends, by thread */
    st_metric_t *m_fan_short;               /* parallel sends the socket took only part of */
    st_metric_t *m_fan_calls;               /* system calls that carried parallel sends */
    /* ring.c: bytes of every stream's ring now, and the most since the last heap trim; the
     * gauge of the first, and the trims' count and time (the fuzz driver leaves them NULL) */
    size_t ring_bytes, ring_peak;
    bool ring_drained; /* the rings were back from a burst at the last tick */
    st_metric_t *m_ring, *m_trims, *m_trim;
    st_wstyping_t *typing;   /* typing.c */
    st_wspres_t *presence;   /* presence.c; NULL once closing */
    st_wspresout_t *presout; /* presout.c; NULL once closing */
};

/* ---- queue.c ---- */
/* Queues prefix (may be NULL) + body for c (a new reference to each is taken), to leave once
 * batch `wait` is durable. A live frame that takes c's live backlog past its cap cuts c off as a
 * slow consumer. */
void st__ws_queue(st_ws_t *ws, st_wsconn_t *c, st_wsbody_t *prefix, st_wsbody_t *body,
                  uint64_t wait);
/* The same for a lazy frame (typing): it asks for no write of its own but rides in the stream's
 * next one (a post's), or leaves within ST__WS_LAZY_MS of being able to when none comes. */
void st__ws_queue_lazy(st_ws_t *ws, st_wsconn_t *c, st_wsbody_t *prefix, st_wsbody_t *body,
                       uint64_t wait);
/* The same for a replayed message: never cuts c off (the replay bounds its own pages). */
void st__ws_queue_replay(st_ws_t *ws, st_wsconn_t *c, st_wsbody_t *prefix, st_wsbody_t *body,
                         uint64_t wait);
/* Whether c's output is backed up: lws holds part of a write the socket refused, or half the
 * backlog cap of frames that may leave is queued (one flush of typing frames to a stream of many
 * subscriptions stops there), or c is being ended. An ephemeral frame (typing) is not queued on
 * such a stream. */
bool st__ws_backed_up(const st_wsconn_t *c);
/* Queues a one-off frame built in b (copied). */
void st__ws_queue_buf(st_ws_t *ws, st_wsconn_t *c, const st_buf_t *b, uint64_t wait);
void st__ws_send_error(st_ws_t *ws, st_wsconn_t *c, const char *id, const char *code,
                       const char *msg);
/* Frames every frame of c that may leave (its batch is durable), up to ST__WS_WRITE_BUDGET,
 * onto the end of out (RFC 6455 header, prefix, body), taking them off c's queue; returns how
 * many. Loop only. */
size_t st__ws_frame(st_ws_t *ws, st_wsconn_t *c, st_buf_t *out);
/* Counts what of c may leave now and has it written at the end of the loop turn (or from the
 * writable callback while lws holds part of a write); parks c while a frame waits for its
 * batch. */
void st__ws_wake(st_ws_t *ws, st_wsconn_t *c);
/* Frees c's queued frames and takes it off the waiting and soon lists. */
void st__ws_queue_clear(st_ws_t *ws, st_wsconn_t *c);
void st__ws_listen(st_ws_t *ws);
/* Closes the handles that write ws->soon at the end of a loop turn (st__ws_listen starts them),
 * then writes what waits there once. */
void st__ws_turn_close(st_ws_t *ws);
/* Writes {"type":"<type>","id":"<sid>", into b (reset first): the prefix of a frame. */
void st__ws_prefix(st_buf_t *b, const char *type, const char *sid);
/* The shared prefix of a fan-out frame for sid, kept in *pre (the caller's reference, NULL at
 * first, released by the caller at the end): it is rebuilt only when sid differs from *last, the
 * id it was built for, so a run of subscribers sharing an id shares one prefix. */
st_wsbody_t *st__ws_prefix_of(st_wsbody_t **pre, const char **last, const char *type,
                              const char *sid);

/* ---- ring.c: where the rings' arrays live ---- */
/* Moves c's qlen entries, in order from index 0, into a ring of cap entries (a power of two, at
 * least qlen; 0 frees the ring, which must then be empty). Loop only. */
void st__ws_ring_resize(st_ws_t *ws, st_wsconn_t *c, uint32_t cap);
/* Once a second (ws.c's tick): gives the heap's free pages back to the system once the rings
 * went back from a burst (see ring.c). */
void st__ws_ring_tick(st_ws_t *ws);

/* ---- write.c: how frames that may leave are written ---- */
/* Ends c's stream with 1008 and `reason` (a literal): its queue is dropped, the close frame
 * leaves once lws has written what it holds, and the socket is closed anyway after
 * ST__WS_CLOSE_GRACE seconds. */
void st__ws_cut(st_ws_t *ws, st_wsconn_t *c, const char *reason);
/* Fails c's stream (RFC 6455 §7.1.7) for what its client sent (or for its silence, ws.c):
 * `code` and `reason` (a literal), its queue dropped, nothing more served; from the writable
 * callback, a close frame is written and the socket closed at once (no wait for the client's
 * close frame). A socket that never becomes writable is closed after ST__WS_CLOSE_GRACE s. */
void st__ws_fail(st_ws_t *ws, st_wsconn_t *c, uint16_t code, const char *reason);
/* Writes a ping that is due, or else the next frames that may leave; returns -1 when the
 * connection must close. */
int st__ws_on_writable(st_ws_t *ws, st_wsconn_t *c);
/* Writes the streams in ws->ready (a loop turn's, queue.c), one by one or, from ST__WS_FAN_MIN
 * of them, sharing the sends with the sender thread (fan.c); empties ws->ready. */
void st__ws_send_ready(st_ws_t *ws);

/* ---- fan.c: a large fan-out's sends, on the loop and one sender thread ---- */
/* Starts the sender thread; returns an owned handle (st__ws_fan_stop frees it), or NULL if the
 * thread could not start (fan-outs are then sent from the loop alone). */
st_wsfan_t *st__ws_fan_start(void);
/* Whether the loop sends its part of a fan-out in io_uring batches (false: one send() each). */
bool st__ws_fan_batched(const st_wsfan_t *f);
/* Stops and joins the thread, frees f (NULL is a no-op). Loop only, with no send running. */
void st__ws_fan_stop(st_wsfan_t *f);
/* Sends each item's bytes (arena + off, len) once with a non-blocking send on its fd (in
 * io_uring batches where the kernel allows, else send()), from the loop and, if `share`, the
 * sender thread together, and returns when every item has been sent: each
 * item's `sent` is then set. Loop only. items and arena are borrowed for the call. */
void st__ws_fan_send(st_wsfan_t *f, st_wsfan_item_t *items, size_t n, const char *arena,
                     bool share);

/* ---- topics.c: channels, subscriptions' end, fan-out ---- */
void st__ws_topics_init(st_ws_t *ws);
void st__ws_topics_free(st_ws_t *ws);
/* The channel of a room's subscribers here, or NULL: none. */
st_wschan_t *st__ws_room_chan(st_ws_t *ws, const char *room, size_t rl);
/* Puts s (started: subscribe.c) in the channel of its topic and name, made if it is the first. */
void st__ws_chan_add(st_ws_t *ws, st_wssub_t *s);
/* Takes s out of its connection and its channel and frees it. */
void st__ws_sub_remove(st_ws_t *ws, st_wssub_t *s);
/* Returns an owned body (one reference) of a message frame: "message":<json>} */
st_wsbody_t *st__ws_message_body(const char *json, size_t len);
/* fan-out of seat changes and new messages (the chat and seats observers) */
void st__ws_seats_changed(void *arg, const char *event_id, size_t elen, const char *tail,
                          size_t tlen, uint64_t wait);
/* Would a seat change of this event reach any stream (here, or in a group another member's)? */
bool st__ws_seats_wanted(void *arg, const char *event_id, size_t elen);
/* Would a message posted now reach any stream on this member? */
bool st__ws_message_wanted(st_ws_t *ws, const char *user, size_t ulen, const char *conv,
                           size_t clen, uint64_t msg_id);
/* A posted message (st_chat_observer_fn) for the streams here; noted for the group's other
 * members (the note names the owner by its bytes, st_chat_owner_bytes). */
void st__ws_message_posted(void *arg, const st_owner_t *o, const char *conv, size_t clen,
                           uint64_t msg_id, const char *json, size_t len, uint64_t wait);

/* ---- rx.c: RFC 6455 checks on client frames, ahead of libwebsockets ---- */
/* Records the loop's thread: only its reads are checked. */
void st__ws_rx_init(st_ws_t *ws);
void st__ws_rx_free(void);
/* Starts checking fd, a socket being adopted with buf (the upgrade request, then what the
 * client sent behind it): *len is cut before the first bad frame in buf, if any. */
int st__ws_rx_adopt(int fd, const char *buf, size_t *len);
/* fd's stream became c: returns why it must fail (a literal) if a bad frame came already,
 * NULL otherwise; from now on a bad frame fails c at once. */
const char *st__ws_rx_attach(int fd, st_wsconn_t *c);
/* The close code a stream fails with for `bad`, a reason st__ws_rx_attach returned. */
uint16_t st__ws_rx_code(const char *bad);
/* Stops checking fd (its stream closed). */
void st__ws_rx_detach(int fd);

/* notes.c: stream frames carried in a group's Raft entries */
void st__ws_notes_init(st_ws_t *ws);
void st__ws_topics_detach(st_ws_t *ws);
void st__ws_counter_changed(st_ws_t *ws, const char *name, size_t nlen, int64_t value,
                            uint64_t wait);
void st__ws_note_counter(st_ws_t *ws, const char *name, size_t nlen, int64_t value);
void st__ws_note_seats(st_ws_t *ws, const char *event_id, size_t elen, const char *tail,
                       size_t tlen);
/* ws.c: the streams whose token was issued to `user` before its erasure at erased_us (Unix µs)
 * are cut ("token revoked") once batch `wait` is durable and their queue is out. */
void st__ws_revoke(st_ws_t *ws, const char *user, size_t ulen, int64_t erased_us, uint64_t wait);
/* An edit, delete or erasure (st_chat_change_fn) for the streams here; noted for the group's
 * other members like the rest. */
void st__ws_message_changed(void *arg, const char *kind, const st_owner_t *o, const char *conv,
                            size_t clen, uint64_t msg_id, const char *json, size_t len,
                            uint64_t wait);
void st__ws_note_change(st_ws_t *ws, const char *kind, const char *user, size_t ulen,
                        const char *conv, size_t clen, uint64_t msg_id, const char *json,
                        size_t len);
void st__ws_note_message(st_ws_t *ws, const char *user, size_t ulen, const char *conv, size_t clen,
                         uint64_t msg_id, const char *json, size_t len);
/* A room's membership changed (the rooms observer, topics.c); noted for a group's members. */
void st__ws_room_member(void *arg, const char *room, size_t rl, const char *user, size_t ul,
                        bool added, uint64_t wait);
void st__ws_note_room_member(st_ws_t *ws, const char *room, size_t rl, const char *user, size_t ul,
                             bool added);
/* subscribe.c: handles one complete client text message. */
void st__ws_on_message(st_ws_t *ws, st_wsconn_t *c, const char *p, size_t n);
/* ---- replay.c ---- */
/* One page of s's replay (see replay.c); false when the replay failed and s must be removed. */
bool st__ws_replay_step(st_ws_t *ws, st_wssub_t *s);
/* Continues paged replays on c while its queue is short. */
void st__ws_replay_more(st_ws_t *ws, st_wsconn_t *c);
/* Batches from `first` on were rolled back: subscriptions whose snapshot waited for a fence
 * among them end with error no_leader (this member was deposed; it proved nothing). */
void st__ws_fence_failed(st_ws_t *ws, st_wsconn_t *c, uint64_t first);
/* Drops every subscription of c. */
void st__ws_unsubscribe_all(st_ws_t *ws, st_wsconn_t *c);

#endif
