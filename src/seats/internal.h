/* SPDX-License-Identifier: MIT */
/* seats internals shared by event.c (events, bitmaps, persistence) and booking.c. */
#ifndef STRATA_SEATS_INTERNAL_H
#define STRATA_SEATS_INTERNAL_H

#include "strata/iceberg.h"
#include "strata/metrics.h"
#include "strata/parquet.h"
#include "strata/seats.h"
#include "strata/tier.h"

enum { ST_SEAT_AVAILABLE = 0, ST_SEAT_RESERVED = 1, ST_SEAT_SOLD = 2 };
enum { ST_BK_RESERVED = 1, ST_BK_SOLD = 2, ST_BK_CANCELLED = 3, ST_BK_EXPIRED = 4 };

#define ST_KS_EVENT   'E' /* event_id -> definition (JSON) */
#define ST_KS_BOOKING 'B' /* u64 id (big-endian) -> booking record */
#define ST_KS_HOLD    'H' /* u64 id (big-endian) -> i64 expires_at: bookings still reserved */
#define ST_KS_SEATMAP 'S' /* event_id 0 u16 section u32 chunk -> i64 updated_at | 2-bit states */
#define ST_KS_SEATS_V 'V' /* "seats" -> layout version (absent: bookings only, before chunks) */

/* Seat maps are persisted in chunks, so a booking rewrites ~256 bytes, not its whole section. */
#define ST_SEATS_CHUNK_BYTES 256
#define ST_SEATS_CHUNK_SEATS (ST_SEATS_CHUNK_BYTES * 4)

typedef struct {
    int64_t available, reserved, sold;
} st_counts_t;

typedef struct {
    char *name;
    size_t name_len;
    int64_t rows, cols, price;
    uint8_t *bits;      /* 2 bits per seat, the wire layout */
    int32_t *row_avail; /* available seats per row, for best-available */
    /* per row: the longest run of available seats (high 16 bits) and the longest run shorter
     * than that (low 16 bits), so a row with a run that leaves no orphan is known in O(1);
     * ST_RUN_STALE: recounted lazily */
    uint32_t *row_run;
    st_counts_t c;
    bool loaded; /* start-up read a chunk of it: counts need a recount */
    /* General admission: one "row" of `cols` = capacity places, booked by quantity only; no
     * place below ga_hint is free (first-free search starts there). */
    bool ga;
    uint32_t ga_hint;
} st_section_t;

#define ST_RUN_STALE UINT32_MAX

typedef struct st_event {
    st_map_node_t node;
    char *id;
    size_t id_len;
    char *name;
    int64_t hold_seconds, created_at, updated_at;
    int64_t first_reserved_at, fully_reserved_at;
    st_section_t *sections;
    size_t nsections;
    int64_t total;
    st_counts_t c;
    uint64_t last_batch; /* newest batch that changed this event */
} st_event_t;

/* One section of a booking: seats[off, off + n) of the booking's seat list. */
typedef struct {
    const char *section;
    size_t section_len;
    uint32_t off, n;
} st_bitem_t;

typedef struct {
    uint64_t id;
    int status;
    int64_t total_price, created_at, expires_at, updated_at;
    const char *event_id;
    size_t event_len;
    uint32_t *seats; /* seat (GA: place) indices of every item, item after item */
    uint32_t nseats;
    st_bitem_t items[ST_SEATS_MAX_PER_BOOKING]; /* every item holds at least one seat */
    size_t nitems;
    const char *owner; /* the token subject that booked it ("" when auth was off) */
    size_t owner_len;
} st_booking_t;

typedef struct {
    int64_t at;
    uint64_t id;
} st_hold_t;

struct st_seats {
    uv_loop_t *loop;
    st_store_t *store;
    st_seats_opts_t opts;
    st_map_t events;
    ST_VEC(st_event_t *) sorted; /* by id, for listing */
    uint64_t total_seats;        /* cost of all events against opts.max_total_seats (event.c) */
    st_snowflake_t ids;
    ST_VEC(st_hold_t) heap; /* min-heap of hold expiries (stale entries are skipped when popped) */
    uv_timer_t timer;       /* the next hold expiry */
    uv_idle_t idle;         /* while holds are due: one slice of expiries per loop turn */
    int open_handles;       /* freed when both have closed */
    uint64_t expire_batch;  /* the batch of the last slice of expiries */
    bool expire_parked;     /* more are due: the next slice waits for that batch to be durable */
    st_store_listener_t listener;
    st_observers_t observers; /* of seat changes (st_seats_observer_fn) */
    st_metric_t *m_booked, *m_conflicts, *m_expired, *m_confirmed, *m_cancelled;
    struct st_bkcold *cold; /* the cold tier's booking kind (tier.c); NULL: none, or stopped */
};

/* event.c */
/* Every answer drawn from an event reports its state: *wait (may be NULL for internal use) is
 * raised to the newest batch that changed the event, as st_store_get does for staged values. */
st_event_t *st__event_find(st_seats_t *s, const char *id, size_t len, uint64_t *wait);
st_event_t *st__event_new(st_seats_t *s, const char *id, size_t len);
/* A GA section: rows 1, cols = capacity, ga set by the caller after init. */
void st__section_init(st_event_t *e, st_section_t *sec, const char *name, size_t nlen, int64_t rows,
                      int64_t cols, int64_t price);
/* Recomputes a section's counts, row_avail and row_run from its bitmap (after loading it). */
void st__section_recount(st_event_t *e, st_section_t *sec);
st_section_t *st__section_find(st_event_t *e, const char *name, size_t len);
int st__seat_get(const st_section_t *sec, uint32_t i);
/* The longest run of available seats in row r (recounted when a change made it stale), and the
 * longest run shorter than that (0 if none). */
int32_t st__row_run(st_section_t *sec, int64_t r);
int32_t st__row_run2(st_section_t *sec, int64_t r);
/* The next run of available seats in row r at or after column *c: its first column and length
 * (0 at the end of the row); *c moves past it. */
int64_t st__row_next_run(const st_section_t *sec, int64_t r, int64_t *c, int64_t *len);
/* Moves a seat between states, keeping section, event and row counts in step. */
void st__seat_set(st_event_t *e, st_section_t *sec, uint32_t i, int state);
int st__event_persist(st_seats_t *s, st_event_t *e, uint64_t *wait);
void st__seat_name(st_buf_t *out, const st_section_t *sec, uint32_t i);
void st__free_events(st_seats_t *s);
int st__load_event(void *arg, const void *key, size_t klen, const void *val, size_t vlen);

/* persist.c: seat-map chunks and the index of active holds, so start-up reads only those. */
/* Stages the chunks of sec that hold any of seats[0..n) (after their states changed). */
int st__chunks_save(st_seats_t *s, st_event_t *e, st_section_t *sec, const uint32_t *seats,
                    size_t n, uint64_t *wait);
int st__hold_index(st_seats_t *s, uint64_t id, int64_t expires_at, bool add, uint64_t *wait);
int st__rebuild(st_seats_t *s);

/* record.c: the booking record and its JSON */
void st__booking_encode(st_buf_t *out, const st_booking_t *b);
int st__booking_decode(const void *v, size_t n, st_booking_t *b); /* b->seats is malloc'd */
size_t st__bkey(uint8_t key[9], uint64_t id, char ks);
/* Loads a booking; its names point into a copy owned by *keep (free keep and b->seats after). */
int st__load(st_seats_t *s, uint64_t id, st_booking_t *b, st_buf_t *keep, uint64_t *wait);
int st__save(st_seats_t *s, const st_booking_t *b, uint64_t *wait);

/* history.c: an event's bookings, indexed as they are written (st__save stages the entry). */
int st__history_put(st_seats_t *s, const st_booking_t *b, uint64_t *wait);
/* Indexes the bookings of a data dir from before the index, once (a writable store only). */
int st__history_migrate(st_seats_t *s);
void st__booking_json(st_buf_t *out, st_seats_t *s, const st_booking_t *b);
/* The item of b in section (name), or -1. */
int st__item_of(const st_booking_t *b, const char *section, size_t len);

/* tier.c: finished bookings as a kind of the cold tier */
typedef struct st_bkcold st_bkcold_t;
extern const st_pq_schema_t st_seats_booking_schema;
/* Bookings rendered for a page (id, and their JSON at json[off, off + len)). */
typedef struct {
    uint64_t id;
    size_t off, len;
} st_cand_t;
typedef struct {
    ST_VEC(st_cand_t) v;
    st_buf_t json;
} st_cands_t;
/* The booking id's JSON from cold (ST_ENOTFOUND, ST_EFORBIDDEN, ST_EPARKED: wait and re-run). */
int st__cold_booking(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_buf_t *out,
                     uint64_t *wait);
/* The event's cold bookings matching q below q->cursor, highest ids first, into out (unordered;
 * rows of whole row groups, at least need of them when there are, within budget rows looked
 * at); *frontier: every cold id >= it was looked at (0: all). ST_EPARKED: wait and re-run. */
int st__cold_page(st_seats_t *s, const st_bookings_query_t *q, size_t need, size_t budget,
                  st_cands_t *out, uint64_t *frontier, uint64_t *wait);
/* Start-up: the id generator stays above every booking id that went cold. */
int st__cold_floor(st_seats_t *s);
/* Stages the floor raised to id (when it is higher). */
int st__cold_floor_raise(st_store_t *store, uint64_t id, uint64_t *wait);
/* rebuild.c: the member's rebuild hook (st_tier_member_t.rebuild; strata/seats.h says what). */
int st__bk_rebuild(void *arg, st_tier_rebuild_t *rb, uint64_t *wait);

/* pick.c: which seats a booking takes (explicit, best available with no orphans, GA) */
/* Best available q seats of sec into out (false: fewer than q are available). */
bool st__best(st_section_t *sec, int64_t q, bool allow_orphans, uint32_t *out);
/* Parses "row-col" into a seat index of sec. */
/* A *why that names the value at fault (SPEC §7: every 400 names it): formatted into a
 * per-thread buffer, valid until the next call on this thread (the caller writes it into the
 * answer at once). Quote values with "%.*s%s", ST__WV(s, n). */
const char *st__whyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define ST__WV(s, n) (int)st_clip((s), (n)), (s), (n) > ST_CLIP_MAX ? "..." : ""

int st__parse_seat(const st_section_t *sec, const char *p, size_t n, uint32_t *idx);
/* Picks the seats of one requested item into out[0..*n): ST_ESEATS (taken names appended to
 * taken, comma-separated, *ntaken counted), ST_EINVAL with *why. */
int st__pick(st_section_t *sec, const st_seats_item_t *it, bool allow_orphans, uint32_t *out,
             size_t *n, st_buf_t *taken, size_t *ntaken, const char **why);

/* booking.c */
void st__hold_push(st_seats_t *s, int64_t at, uint64_t id);
void st__arm_timer(st_seats_t *s);
void st__on_timer(uv_timer_t *t);
/* Seats of one section moved to one state (borrowed seats). */
typedef struct {
    const uint32_t *seats;
    size_t n;
    int state;
} st_seatmove_t;
/* The moves of one section made by one operation, in batch w: one message to the observers
 * (live streams), with the stats after the whole operation — built only when an observer wants
 * changes of e (st_seats_wants_fn); the state itself has moved either way. */
void st__notify(st_seats_t *s, const st_event_t *e, const st_section_t *sec,
                const st_seatmove_t *mv, size_t nmv, uint64_t w);
/* Moves seats of one section to state and stages their chunks; the caller publishes the
 * operation's moves with st__notify once they are all made. */
void st__move(st_seats_t *s, st_event_t *e, st_section_t *sec, const uint32_t *seats, size_t n,
              int state, int64_t now, uint64_t *w);
/* Every item of b moves to state (in batch *w), one message per section. */
void st__apply_all(st_seats_t *s, st_booking_t *b, int state, int64_t now, uint64_t *w);
/* first_ticket_reserved_at / fully_reserved_at after seats were reserved. */
void st__sellout_mark(st_seats_t *s, st_event_t *e, int64_t now, uint64_t *w);
/* Ends a reserved booking (cancel or expiry): its seats go back to available. */
int st__release(st_seats_t *s, st_booking_t *b, int status, uint64_t *wait);
/* The booking's event and owner against who asks (ST_ENOTFOUND, ST_EFORBIDDEN). */
int st__check_ref(const st_booking_t *b, const st_booking_ref_t *ref);
/* Loads a booking for who asks and expires it if it is past its time. */
int st__load_live(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_booking_t *b,
                  st_buf_t *keep, uint64_t *wait);

/* ---- table.c: the Iceberg table `bookings`, st_seats_kind's (kinds.h) ---- */
extern const st_table_def_t st_seats_table;

#endif
