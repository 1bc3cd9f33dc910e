/* SPDX-License-Identifier: MIT */
/*
 * seats: ticketing inventory. Each section's seat states live in memory as a 2-bit bitmap
 * (0 available, 1 reserved, 2 sold; seat i at bits 2*(i%4) of byte i/4, least significant
 * first — the wire layout of the seat map), with counts kept in step in O(1). Each booking is
 * one LMDB record; the bitmaps are persisted too, in chunks staged in the same batch as the
 * booking that changed them, and reserved bookings are indexed, so start-up reads the seat maps
 * and the active holds only — never the finished bookings. A booking takes all its seats or none.
 *
 * Everything runs on the loop thread. Functions that change or show state raise *wait to the
 * batch that must be durable first (see store.h). JSON renderers append to a caller's buffer.
 */
#ifndef STRATA_SEATS_H
#define STRATA_SEATS_H

#include "strata/store.h"

#include <uv.h>

typedef struct st_seats st_seats_t;

#define ST_SEATS_MAX_SECTIONS    1000
#define ST_SEATS_MAX_PER_BOOKING 100
/* Per section: memory per event stays proportional to its seats (a row costs 4 bytes). */
#define ST_SEATS_MAX_ROWS 10000
#define ST_SEATS_MAX_COLS 10000

typedef struct {
    const char *name; /* valid name */
    size_t name_len;
    int64_t rows, cols, price;
    int64_t capacity; /* > 0: a general admission section (rows and cols 0), booked by quantity */
} st_section_spec_t;

typedef struct {
    const char *event_id;
    size_t id_len;
    const char *name; /* may be NULL */
    size_t name_len;
    int64_t hold_seconds;
    st_section_spec_t *sections;
    size_t nsections;
} st_event_spec_t;

typedef struct {
    uint64_t max_seats; /* per event */
    uint64_t node_id;
    uint64_t max_total_seats; /* over all events (rows of < 16 seats count 16); 0 = no limit */
    int64_t max_hold_seconds; /* a hold lasts at most this long since created (0: 7200) */
} st_seats_opts_t;

/* One section of a booking request: explicit seats ("row-col", borrowed), or with seats NULL
 * `quantity` best-available seats (general admission: places). */
typedef struct {
    const char *section;
    size_t section_len;
    const char *const *seats;
    const size_t *seat_lens;
    size_t nseats;
    int64_t quantity;
} st_seats_item_t;

/* A change to a reserved booking's seats in one section (section NULL: its first). */
typedef struct {
    const char *section;
    size_t section_len;
    const char *const *add; /* explicit seats to add, borrowed */
    const size_t *add_lens;
    size_t nadd;
    const char *const *remove; /* seats of the booking to give back */
    const size_t *remove_lens;
    size_t nremove;
    int64_t add_quantity;    /* best-available seats (GA: places) to add */
    int64_t remove_quantity; /* places to give back (GA sections) */
    bool allow_orphans;
} st_seats_change_t;

/* Who asks about a booking. With event_id set the booking must be of that event (else
 * ST_ENOTFOUND); unless admin, the booking must belong to subject (else ST_EFORBIDDEN). */
typedef struct {
    const char *event_id; /* may be NULL: any event */
    size_t event_len;
    const char *subject; /* borrowed; "" when auth is off */
    size_t subject_len;
    bool admin;
} st_booking_ref_t;

/* Rebuilds every event from the store (expiring holds that ran out while strata was down). */
int st_seats_open(st_seats_t **out, uv_loop_t *loop, st_store_t *store, const st_seats_opts_t *o);
/* Stops hold expiry (closes its handles: run the loop once after) and frees everything. */
void st_seats_close(st_seats_t *s);

/* ST_ECONFLICT if the id exists; ST_EINVAL (with *why) if the spec breaks a limit; ST_EFULL
 * (with *why) when its seats would pass --max-total-seats. */
int st_seats_create(st_seats_t *s, const st_event_spec_t *spec, st_buf_t *out, const char **why,
                    uint64_t *wait);
/* Event state JSON. ST_ENOTFOUND. */
int st_seats_event_json(st_seats_t *s, const char *id, size_t len, st_buf_t *out, uint64_t *wait);
/* {"events":[…],"next"} in event_id order after `cursor` (may be NULL). */
int st_seats_list_json(st_seats_t *s, const char *cursor, size_t clen, size_t limit, st_buf_t *out,
                       uint64_t *wait);
/* Seat map. as_json: {"rows","cols","seats":[[…]…]}, else 2bit-base64. */
int st_seats_map_json(st_seats_t *s, const char *id, size_t len, const char *section, size_t slen,
                      bool as_json, st_buf_t *out, uint64_t *wait);

/* Books explicit seats ("row-col", n of them) or, with seats == NULL, `quantity` best-available
 * seats, for `owner` (borrowed; "" when auth is off). ST_ESEATS writes {"seats":[taken…]} into
 * *taken_json; ST_ENOTFOUND for an unknown event or section (*why says which); ST_EINVAL with
 * *why for bad seats. */
int st_seats_book(st_seats_t *s, const char *id, size_t len, const char *section, size_t slen,
                  const char *const *seats, const size_t *seat_lens, size_t nseats,
                  int64_t quantity, const char *owner, size_t owner_len, st_buf_t *out,
                  st_buf_t *taken_json, const char **why, uint64_t *wait);
/* One booking over several sections (each at most once), all or nothing. On ST_ESEATS,
 * *taken_json holds "seats":[…],"items":[{"section","seats":[…]}…] (the rest of an error
 * object). Best available leaves no orphan seat when it can, unless allow_orphans. */
int st_seats_book_items(st_seats_t *s, const char *id, size_t len, const st_seats_item_t *items,
                        size_t nitems, bool allow_orphans, const char *owner, size_t owner_len,
                        st_buf_t *out, st_buf_t *taken_json, const char **why, uint64_t *wait);
/* Moves a reserved booking's expires_at later by seconds. ST_EINVAL (*why) past
 * max_hold_seconds since it was created; ST_ECONFLICT when it is not reserved (out holds it). */
int st_seats_extend(st_seats_t *s, uint64_t booking_id, const st_booking_ref_t *ref,
                    int64_t seconds, st_buf_t *out, const char **why, uint64_t *wait);
/* Adds and gives back seats of a reserved booking, all or nothing (ST_ESEATS as for
 * st_seats_book_items); giving back every seat cancels it. ST_EINVAL (*why), ST_ECONFLICT. */
int st_seats_change(st_seats_t *s, uint64_t booking_id, const st_booking_ref_t *ref,
                    const st_seats_change_t *ch, st_buf_t *out, st_buf_t *taken_json,
                    const char **why, uint64_t *wait);
/* Booking JSON. ST_ENOTFOUND, ST_EFORBIDDEN (see st_booking_ref_t). */
int st_seats_booking_json(st_seats_t *s, uint64_t booking_id, const st_booking_ref_t *ref,
                          st_buf_t *out, uint64_t *wait);
/* An event's bookings (SPEC §4.2), newest first. */
typedef struct {
    const char *event_id;
    size_t event_len;
    int status;        /* 0: any; else st_seats_status */
    const char *owner; /* NULL: any owner */
    size_t owner_len;
    uint64_t cursor; /* 0: from the newest; else the bookings older than this one */
    size_t limit;
} st_bookings_query_t;
/* {"bookings":[…],"next":"<booking_id>"|null}. ST_ENOTFOUND for an unknown event. */
int st_seats_bookings_json(st_seats_t *s, const st_bookings_query_t *q, st_buf_t *out,
                           uint64_t *wait);
/* A booking status by name (reserved, sold, cancelled, expired): 1..4; 0 for anything else. */
int st_seats_status(const char *name, size_t len);

/* Finished bookings as a kind of the cold tier (SPEC §4.2): the member to join (st_tier_join);
 * bookings cool hot_seconds after they finished. Reads of cold bookings may then return
 * ST_EPARKED (the caller parks on st_tier_wait and re-runs). s and t NULL: a member for
 * `strata rebuild-meta` only (its rebuild hook, which needs the store alone), never joined.
 * Its rebuild (after chat's settled the writer record): the cold bookings' manifests made again
 * from this store's objects under events/ that the bookings table names (objects repeating
 * another's bookings recorded for deletion), and the id floor; other writers' objects are left
 * alone; with no writer record before the rebuild the one writer the objects name is adopted. */
typedef struct st_tier st_tier_t;
typedef struct st_tier_member st_tier_member_t;
st_tier_member_t *st_seats_tier_member(st_seats_t *s, st_tier_t *t, uint64_t hot_seconds);

/* ST_ECONFLICT when the booking is already sold, cancelled or expired (out then holds it). */
int st_seats_confirm(st_seats_t *s, uint64_t booking_id, const st_booking_ref_t *ref, st_buf_t *out,
                     uint64_t *wait);
int st_seats_cancel(st_seats_t *s, uint64_t booking_id, const st_booking_ref_t *ref, st_buf_t *out,
                    uint64_t *wait);

/* Told about every seat change as it is staged; `wait` is the batch that must be durable before
 * anyone may see it. Observers are called in registration order (at most ST_OBSERVERS_MAX); arg
 * is borrowed until st_seats_unobserve. tail is the rest of a JSON object (borrowed for the call):
 * "event_id":…,"section":…,"changes":[{"seat":"r-c","state":…}…],"stats":{…},"event_stats":{…}} */
typedef void (*st_seats_observer_fn)(void *arg, const char *event_id, size_t elen, const char *tail,
                                     size_t tlen, uint64_t wait);
/* Would the observer do anything with a change of this event now? Asked for each change before
 * its message is built; when no observer wants it, none is built and no observer is called.
 * Must be cheap (a lookup) and must answer true whenever the observer could need the change:
 * anyone who starts following the event later must learn its state some other way (a snapshot
 * read at that moment). */
typedef bool (*st_seats_wants_fn)(void *arg, const char *event_id, size_t elen);
/* wants may be NULL: the observer takes every change. */
void st_seats_observe(st_seats_t *s, st_seats_observer_fn fn, st_seats_wants_fn wants, void *arg);
void st_seats_unobserve(st_seats_t *s, const void *arg);

/* Recounts every bitmap and compares with the kept stats (tests and /metrics). */
bool st_seats_check(st_seats_t *s);

#endif
