// SPDX-License-Identifier: MIT
// The shapes of strata's API (SPEC v2; docs/openapi.yaml is the reference). 64-bit ids travel as
// strings of decimal digits; timestamps are Unix microseconds.

/** A 64-bit id (msg_id, booking_id) as a string of decimal digits. */
export type Id64 = string;
/** Unix time in microseconds (UTC). */
export type Micros = number;

export interface Counter {
  name: string;
  value: number;
}
export interface DistinctResult extends Counter {
  added: boolean;
}
export interface SequenceRange {
  name: string;
  first: number;
  last: number;
}
export interface Sequence {
  name: string;
  last: number;
}

export interface MessageIn {
  conversation_id: string;
  from: string;
  content: string;
  metadata?: Record<string, unknown> | null;
}
export interface MessagePosted {
  msg_id: Id64;
  conversation_id: string;
  seq: number;
  timestamp: Micros;
}
/** One earlier version of an edited message (SPEC §2.2), oldest first. */
export interface MessageVersion {
  content: string | null;
  metadata: Record<string, unknown> | null;
  edited_at: Micros | null;
}
export interface Message {
  msg_id: Id64;
  conversation_id: string;
  from: string;
  timestamp: Micros;
  seq: number;
  /** null once deleted (a tombstone keeps its place so seq stays gapless) */
  content: string | null;
  metadata: Record<string, unknown> | null;
  /** set by an edit (SPEC §2.2) */
  edited_at?: Micros | null;
  edit_history?: MessageVersion[];
  /** set on a tombstone */
  deleted_at?: Micros | null;
}
/** PATCH of a message: new content and/or metadata. */
export interface MessageEdit {
  content?: string;
  metadata?: Record<string, unknown> | null;
}
/** Listings of messages may hide tombstones (SPEC §2.2). */
export interface DeletedQuery {
  include_deleted?: boolean;
}
export interface Erasure {
  erasure_id: string;
}
export interface ErasureStatus {
  erasure_id?: string;
  /** A user's erasure names the user; a deleted room's names the room. */
  user?: string;
  room_id?: string;
  status: 'pending' | 'done';
  [k: string]: unknown;
}
export interface Page {
  /** Pass back as `cursor` for the next page; null on the last page. */
  next: string | null;
}
export interface MessagePage extends Page {
  messages: Message[];
}
export interface MessageQuery {
  conversation_id?: string;
  after?: Id64;
  before?: Id64;
  limit?: number;
  order?: 'asc' | 'desc';
  cursor?: string;
}
// ---- rooms (SPEC §2.1) ----
export interface RoomIn {
  room_id: string;
  name?: string | null;
  /** with auth off the first is the owner; with auth on the token's sub is */
  members: string[];
}
export interface Room {
  room_id: string;
  name: string | null;
  created: Micros;
  updated: Micros;
  first_msg_id: Id64 | null;
  last_msg_id: Id64 | null;
  total_messages: number;
  /** how many members */
  members: number;
}
/** A member's role in a room (SPEC §2.1 v5): owners manage everything and change roles; admins
 * add and remove members (not owners) and edit or delete any message; members post, read and
 * leave. */
export type RoomRole = 'owner' | 'admin' | 'member';
/** An `add` item: a user name (role `member`), or a user with its role (`owner` only when an
 * owner adds). Adding someone already in the room changes nothing: roles change by
 * setRoomMemberRole. */
export type RoomMemberAdd = string | { user: string; role?: RoomRole };
/** POST /v1/rooms/{room}/members: at least one of the two; a user in both is 400. */
export interface RoomMembersChange {
  add?: RoomMemberAdd[];
  remove?: string[];
}
export interface RoomMembersChanged {
  room_id: string;
  /** the new count */
  members: number;
}
/** A room's member; also the answer of setRoomMemberRole (PATCH /v1/rooms/{room}/members/{user}). */
export interface RoomMember {
  user: string;
  role: RoomRole;
  joined_at: Micros;
  last_read_seq: number;
  unread: number;
}
export interface RoomMemberPage extends Page {
  members: RoomMember[];
}
export interface RoomMessageIn {
  from: string;
  content: string;
  metadata?: Record<string, unknown> | null;
}
export interface RoomMessagePosted {
  msg_id: Id64;
  room_id: string;
  seq: number;
  timestamp: Micros;
}
/** A message with room_id in place of conversation_id. */
export interface RoomMessage extends Omit<Message, 'conversation_id' | 'from'> {
  room_id: string;
  /** null in the tombstone of an erased author's message (SPEC §2.2 v5) */
  from: string | null;
}
export interface RoomMessagePage extends Page {
  messages: RoomMessage[];
}
export type RoomMessageQuery = Omit<MessageQuery, 'conversation_id'>;
/** Who is online in a room (SPEC §2.1 v5): the members streaming it on any member of the group,
 * sorted. Ephemeral: kept in memory, never stored. */
export interface RoomPresence {
  room_id: string;
  online: string[];
}
export interface RoomRead {
  room_id: string;
  user: string;
  last_read_seq: number;
  unread: number;
}
/** A room in a user's list. A room on another group (SPEC §10: `remote`) comes with room_id,
 * name and joined_at only; the client reads its activity (last_msg_id, updated, total_messages)
 * from the room itself, and has no unread count for it. */
export interface UserRoom {
  room_id: string;
  name: string | null;
  joined_at: Micros;
  last_msg_id?: Id64 | null;
  updated?: Micros;
  total_messages?: number;
  unread?: number;
  remote?: boolean;
}
export interface UserRoomPage extends Page {
  rooms: UserRoom[];
}

export interface Conversation {
  conversation_id: string;
  first_msg_id: Id64;
  last_msg_id: Id64;
  created: Micros;
  updated: Micros;
  total_messages: number;
}
export interface ConversationPage extends Page {
  conversations: Conversation[];
}
export interface UserStats {
  total_messages: number;
  conversations: number;
  hot_messages: number;
  cold_messages: number;
  cold_bytes: number;
}

export interface SeatStats {
  available: number;
  reserved: number;
  sold: number;
  total: number;
}
export interface EventStats extends SeatStats {
  updated_at: Micros;
}
/** A seated section (rows x cols), or a general admission one (capacity places, booked by quantity). */
export type SectionIn =
  | { name: string; rows: number; cols: number; capacity?: never; price?: number }
  | { name: string; capacity: number; rows?: never; cols?: never; price?: number };
export interface EventIn {
  event_id: string;
  name?: string | null;
  hold_seconds?: number;
  sections: SectionIn[];
}
export interface EventState {
  event_id: string;
  name: string | null;
  event_stats: EventStats;
  hold_seconds?: number;
  created_at?: Micros;
  /** a seated section has rows and cols; a general admission one has capacity */
  sections: Record<string, { rows?: number; cols?: number; capacity?: number; price: number; stats: SeatStats }>;
  sellout: {
    first_ticket_reserved_at: Micros | null;
    fully_reserved_at: Micros | null;
    duration_seconds: number | null;
  };
}
export interface EventSummary {
  event_id: string;
  name: string | null;
  event_stats: EventStats;
}
export interface EventPage extends Page {
  events: EventSummary[];
}
/** An event's bookings, newest first (SPEC §4.2). */
export interface BookingPage extends Page {
  bookings: Booking[];
}
export interface SeatMapBitmap {
  rows: number;
  cols: number;
  encoding: '2bit-base64';
  seats: string;
}
export interface SeatMapJson {
  rows: number;
  cols: number;
  /** seats[row-1][col-1]: 0 available, 1 reserved, 2 sold */
  seats: (0 | 1 | 2)[][];
}
/** One section's named seats, or a quantity (best available; general admission: places). */
export type BookingItemIn = { section: string; seats: string[] } | { section: string; quantity: number };
/** One section, or `items` for one booking over several sections (all or nothing). Best
 * available leaves no orphan seat when it can, unless `allow_orphans`. */
export type BookingIn = (BookingItemIn | { items: BookingItemIn[] }) & { allow_orphans?: boolean };
/** A change to a reserved booking's seats in one section (default: its first); all or nothing. */
export type SeatsChangeIn = {
  section?: string;
  remove?: string[];
  /** places to give back in a general admission section */
  remove_quantity?: number;
  allow_orphans?: boolean;
} & ({ add?: string[]; add_quantity?: never } | { add_quantity?: number; add?: never });
export interface BookingItem {
  section: string;
  /** empty in a general admission section */
  seats: string[];
  quantity: number;
}
export type BookingStatus = 'reserved' | 'sold' | 'cancelled' | 'expired';
export interface Booking {
  booking_id: Id64;
  event_id: string;
  /** section and seats describe the first of items */
  section: string;
  seats: string[];
  items: BookingItem[];
  status: BookingStatus;
  total_price: number;
  created_at: Micros;
  expires_at: Micros;
  /** the token subject that made the booking ("" when auth was off) */
  owner: string;
  /** when it was sold, cancelled or expired; null while reserved */
  finished_at: Micros | null;
}

export interface Health {
  status: 'ok' | 'degraded';
  reasons?: string[];
  [extra: string]: unknown;
}
export interface ClusterState {
  self: number;
  leader: number | null;
  term: number;
  commit_index: number;
  applied_index: number;
  members: { id: number; raft: string; http: string; role: string }[];
}
/** A record of the rooms outbox (SPEC §10): a membership change (`added`, `removed`: with
 * `name` and `joined_at`) or an erasure (`erased`) on its way to another group. */
export interface OutboxRecord {
  id: Id64;
  kind: 'added' | 'removed' | 'erased';
  user: string;
  room_id: string;
  name?: string | null;
  joined_at?: Micros;
}
/** A record the receiving group refused for good: its answer's status (a 4xx), body (the first
 * 512 bytes) and when. Kept until retried. */
export interface OutboxDeadLetter extends OutboxRecord {
  status: number;
  answer: string;
  dead_at: Micros;
}
/** GET /v1/admin/outbox: pending records in the order they are sent, dead letters oldest first
 * (at most `limit` of each), and how many of each there are. */
export interface Outbox {
  route_url: string;
  pending: OutboxRecord[];
  dead: OutboxDeadLetter[];
  pending_count: number;
  dead_count: number;
}
/** POST /v1/admin/outbox/{id}/retry: the dead letter, pending again under a new `id`; `retried`
 * is the dead letter's id. */
export interface OutboxRetried extends OutboxRecord {
  retried: Id64;
}
export type ReconcileKey = { user: string; conversation_id: string } | { counter: string };

/** The `error` object of every error body, with the extra fields some carry. */
export interface ErrorBody {
  /** e.g. not_found, forbidden, conflict, seats_unavailable, last_owner (409: a room's last
   * owner would leave or be demoted) */
  code: string;
  message: string;
  /** 400: the body field at fault, as a path (`bye`, `items[0].bye`), when one is */
  field?: string;
  /** 409 seats_unavailable: the seats that are taken */
  seats?: string[];
  /** 409 seats_unavailable: per section that could not be served, its taken seats */
  items?: { section: string; seats: string[] }[];
  /** 409 conflict on confirm/cancel: the booking as it is */
  booking?: Booking;
  [extra: string]: unknown;
}

// ---- streams ----
export type StreamTopic =
  /** after: replay every message with a greater msg_id ("0": all of them), then go live;
   * without it the stream is live only */
  | { topic: 'messages'; user: string; conversation_id?: string; after?: Id64 }
  | { topic: 'room'; room_id: string; after?: Id64 }
  | { topic: 'seats'; event_id: string }
  | { topic: 'counter'; name: string };

export interface SeatsChange {
  event_id: string;
  section: string;
  /** seat: a seated section's seat; quantity: how many places of a general admission section */
  changes: { seat?: string; quantity?: number; state: 'available' | 'reserved' | 'sold' }[];
  stats: SeatStats;
  event_stats?: SeatStats;
}
export interface StreamErrorFrame {
  type: 'error';
  id?: string | null;
  code: string;
  message: string;
}
export type ServerFrame =
  | { type: 'subscribed' | 'replay_done'; id: string }
  | { type: 'message'; id: string; message: Message | RoomMessage }
  /** an edit or a delete of a message (SPEC §2.2): its new state */
  | { type: 'message_edited' | 'message_deleted'; id: string; message: Message | RoomMessage }
  /** a room's membership changed (SPEC §3) */
  | { type: 'room_member'; id: string; room_id: string; user: string; change: string }
  /** a member is typing until `until` (Unix µs); ephemeral, never replayed (SPEC §2.1 v5) */
  | { type: 'typing'; id: string; room_id: string; user: string; until: number }
  /** a member came online (its first stream of the room on any member of the group) or went
   * offline (its last one closed); ephemeral, never replayed (SPEC §2.1 v5) */
  | { type: 'presence'; id: string; room_id: string; user: string; online: boolean }
  | { type: 'seats'; id: string; event_id: string; snapshot: EventState }
  | ({ type: 'seats'; id: string; snapshot?: undefined } & SeatsChange)
  /** exists: on the first frame of a subscription; false for a counter never written */
  | { type: 'counter'; id: string; name: string; value: number; exists?: boolean }
  | StreamErrorFrame;
