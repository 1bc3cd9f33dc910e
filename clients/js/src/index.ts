// SPDX-License-Identifier: MIT
// strata's client: every HTTP route with typed results and errors (StrataError), and live
// streams that resume by themselves. No runtime dependencies: the platform's fetch and
// WebSocket (browsers and Node >= 22 have a global one; Node 18 has none and Node 20 only behind
// --experimental-websocket: there pass ClientOptions.WebSocket, e.g. the `ws` package's).
//
//   const db = new Strata({ baseUrl: 'http://127.0.0.1:8080', token, refreshToken });
//
// Tokens usually come from an identity provider: strata checks its RS256/ES256 access tokens
// against the provider's JWKS (--jwt-jwks-url, --jwt-issuer, --jwt-audience; Keycloak's roles
// with --jwt-roles-claim realm_access.roles). With keycloak-js, for instance:
//
//   const db = new Strata({ baseUrl: 'https://strata.example', token: () => kc.token,
//     refreshToken: async () => { await kc.updateToken(-1); return kc.token!; } });
//   await db.postMessage('alice', { conversation_id: 'c1', from: 'alice', content: 'hi' });
//   const s = db.stream({ topic: 'messages', user: 'alice' }, { onMessage: (m) => show(m) });
import { HttpCore, enc, type ClientOptions, type Method, type RequestOptions, type WebSocketConstructor } from './http.js';
import { Stream, type StreamHandlers, type StreamOptions } from './stream.js';
import type {
  Booking,
  BookingIn,
  ClusterState,
  Conversation,
  ConversationPage,
  Counter,
  DistinctResult,
  EventIn,
  EventPage,
  BookingPage,
  EventState,
  Health,
  DeletedQuery,
  Erasure,
  ErasureStatus,
  Message,
  MessageEdit,
  MessageIn,
  MessagePage,
  MessagePosted,
  MessageQuery,
  Outbox,
  OutboxRetried,
  ReconcileKey,
  Room,
  RoomIn,
  RoomMember,
  RoomMemberPage,
  RoomMembersChange,
  RoomMembersChanged,
  RoomRole,
  RoomMessage,
  RoomMessageIn,
  RoomMessagePage,
  RoomMessagePosted,
  RoomMessageQuery,
  RoomPresence,
  RoomRead,
  UserRoomPage,
  SeatMapBitmap,
  SeatMapJson,
  SeatsChangeIn,
  Sequence,
  SequenceRange,
  StreamTopic,
  UserStats,
} from './types.js';

export * from './types.js';
export { StrataError, StrataNetworkError, fullJitter, tokenTtl } from './http.js';
export type { Backoff, ClientOptions, Method, TokenSource, WebSocketConstructor, WebSocketLike } from './http.js';
export { Stream } from './stream.js';
export type { StreamHandlers, StreamOptions, StreamState } from './stream.js';

/** Options of one write: its Idempotency-Key (default: a fresh one, reused by retries). */
export interface WriteOptions {
  idempotencyKey?: string;
  signal?: AbortSignal;
}
export interface ReadOptions {
  signal?: AbortSignal;
}
export interface PageQuery {
  limit?: number;
  cursor?: string;
}
/** GET /v1/events/{id}/bookings: one status, one owner (an admin's query; others see their own). */
export interface BookingQuery extends PageQuery {
  status?: 'reserved' | 'sold' | 'cancelled' | 'expired';
  owner?: string;
}

export class Strata {
  private readonly core: HttpCore;

  constructor(opts: ClientOptions) {
    this.core = new HttpCore(opts);
  }

  /** Any route: for what this class does not cover yet. */
  request<T>(method: Method, path: string, o?: RequestOptions): Promise<T> {
    return this.core.request<T>(method, path, o);
  }

  private get<T>(path: string, query?: RequestOptions['query'], o: ReadOptions = {}): Promise<T> {
    return this.core.request<T>('GET', path, { query, ...o });
  }
  private post<T>(path: string, body: unknown, o: WriteOptions = {}, query?: RequestOptions['query']): Promise<T> {
    return this.core.request<T>('POST', path, { body, query, ...o });
  }
  private write<T>(method: 'PATCH' | 'DELETE', path: string, body: unknown, o: WriteOptions = {}): Promise<T> {
    return this.core.request<T>(method, path, { body, ...o });
  }

  // ---- counters and sequences (SPEC §1) ----
  incr(name: string, by = 1, o?: WriteOptions): Promise<Counter> {
    return this.post(`/v1/counters/${enc(name)}/incr`, { by }, o);
  }
  counter(name: string, o?: ReadOptions): Promise<Counter> {
    return this.get(`/v1/counters/${enc(name)}`, undefined, o);
  }
  distinct(name: string, member: string, o?: WriteOptions): Promise<DistinctResult> {
    return this.post(`/v1/counters/${enc(name)}/distinct`, { member }, o);
  }
  next(name: string, count = 1, o?: WriteOptions): Promise<SequenceRange> {
    return this.post(`/v1/sequences/${enc(name)}/next`, { count }, o);
  }
  sequence(name: string, o?: ReadOptions): Promise<Sequence> {
    return this.get(`/v1/sequences/${enc(name)}`, undefined, o);
  }

  // ---- messages and conversations (SPEC §2) ----
  postMessage(user: string, m: MessageIn, o?: WriteOptions): Promise<MessagePosted> {
    return this.post(`/v1/users/${enc(user)}/messages`, m, o);
  }
  messages(user: string, q: MessageQuery & DeletedQuery = {}, o?: ReadOptions): Promise<MessagePage> {
    return this.get(`/v1/users/${enc(user)}/messages`, { ...q }, o);
  }
  conversations(user: string, q: PageQuery = {}, o?: ReadOptions): Promise<ConversationPage> {
    return this.get(`/v1/users/${enc(user)}/conversations`, { ...q }, o);
  }
  conversation(user: string, conversationId: string, o?: ReadOptions): Promise<Conversation> {
    return this.get(`/v1/users/${enc(user)}/conversations/${enc(conversationId)}`, undefined, o);
  }
  stats(user: string, o?: ReadOptions): Promise<UserStats> {
    return this.get(`/v1/users/${enc(user)}/stats`, undefined, o);
  }

  // ---- edits, deletes and erasure (SPEC §2.2) ----
  /** New content and/or metadata; earlier versions go to edit_history. A tombstone → 409. */
  editMessage(user: string, msgId: string, e: MessageEdit, o?: WriteOptions): Promise<Message> {
    return this.write('PATCH', `/v1/users/${enc(user)}/messages/${enc(msgId)}`, e, o);
  }
  /** Leaves a tombstone (seq stays gapless); deleting again answers the same tombstone. */
  deleteMessage(user: string, msgId: string, o?: WriteOptions): Promise<Message> {
    return this.write('DELETE', `/v1/users/${enc(user)}/messages/${enc(msgId)}`, undefined, o);
  }
  deleteConversation(user: string, conversationId: string, o?: WriteOptions): Promise<{ deleted: number }> {
    return this.write('DELETE', `/v1/users/${enc(user)}/conversations/${enc(conversationId)}`, undefined, o);
  }
  /** Erases a user (GDPR art. 17): gone from answers at once, from storage within --erase-within. */
  eraseUser(user: string, o?: WriteOptions): Promise<Erasure> {
    return this.write('DELETE', `/v1/users/${enc(user)}`, undefined, o);
  }
  erasure(erasureId: string, o?: ReadOptions): Promise<ErasureStatus> {
    return this.get(`/v1/admin/erasures/${enc(erasureId)}`, undefined, o);
  }
  /** A room message's author, a room owner or an admin edits and deletes it. */
  editRoomMessage(roomId: string, msgId: string, e: MessageEdit, o?: WriteOptions): Promise<RoomMessage> {
    return this.write('PATCH', `/v1/rooms/${enc(roomId)}/messages/${enc(msgId)}`, e, o);
  }
  deleteRoomMessage(roomId: string, msgId: string, o?: WriteOptions): Promise<RoomMessage> {
    return this.write('DELETE', `/v1/rooms/${enc(roomId)}/messages/${enc(msgId)}`, undefined, o);
  }

  // ---- rooms (SPEC §2.1) ----
  /** Carries ?route=room:{id} so a proxy (deploy/) creates it on the room's node. */
  createRoom(r: RoomIn, o?: WriteOptions): Promise<Room> {
    return this.post('/v1/rooms', r, o, { route: `room:${r.room_id}` });
  }
  room(roomId: string, o?: ReadOptions): Promise<Room> {
    return this.get(`/v1/rooms/${enc(roomId)}`, undefined, o);
  }
  /** Adds (names, or {user, role}) and removes members; returns {room_id, members} (the new
   * count). Removing the last owner is 409 `last_owner`. */
  changeMembers(roomId: string, change: RoomMembersChange, o?: WriteOptions): Promise<RoomMembersChanged> {
    return this.post(`/v1/rooms/${enc(roomId)}/members`, change, o);
  }
  /** An owner (or a global admin) changes a member's role; answers the member. Demoting the
   * last owner is 409 `last_owner`; a user not in the room is 404. */
  setRoomMemberRole(roomId: string, user: string, role: RoomRole, o?: WriteOptions): Promise<RoomMember> {
    return this.write('PATCH', `/v1/rooms/${enc(roomId)}/members/${enc(user)}`, { role }, o);
  }
  /** An owner (or a global admin) deletes the room and everything in it: 404 at once, its
   * messages erased hot and cold in the background (poll erasure(id) for `done`). */
  deleteRoom(roomId: string, o?: WriteOptions): Promise<Erasure> {
    return this.write('DELETE', `/v1/rooms/${enc(roomId)}`, undefined, o);
  }
  roomMembers(roomId: string, q: PageQuery = {}, o?: ReadOptions): Promise<RoomMemberPage> {
    return this.get(`/v1/rooms/${enc(roomId)}/members`, { ...q }, o);
  }
  postRoomMessage(roomId: string, m: RoomMessageIn, o?: WriteOptions): Promise<RoomMessagePosted> {
    return this.post(`/v1/rooms/${enc(roomId)}/messages`, m, o);
  }
  roomMessages(roomId: string, q: RoomMessageQuery & DeletedQuery = {}, o?: ReadOptions): Promise<RoomMessagePage> {
    return this.get(`/v1/rooms/${enc(roomId)}/messages`, { ...q }, o);
  }
  /** Says `user` is typing (SPEC §2.1 v5): the room's subscribers get a `typing` frame; never
   * stored, at most one frame per user per room per second (call it as often as keys are
   * pressed). Resolves with nothing (204). */
  async typing(roomId: string, user: string, o?: WriteOptions): Promise<void> {
    await this.post(`/v1/rooms/${enc(roomId)}/typing`, { user }, o);
  }
  /** Who is online in the room (SPEC §2.1 v5): the members holding a stream of it on any member
   * of the group, sorted; a stream's `onPresence` hears each change. */
  roomPresence(roomId: string, o?: ReadOptions): Promise<RoomPresence> {
    return this.get(`/v1/rooms/${enc(roomId)}/presence`, undefined, o);
  }
  /** last_read_seq only moves forward. */
  markRead(roomId: string, user: string, seq: number, o?: WriteOptions): Promise<RoomRead> {
    return this.post(`/v1/rooms/${enc(roomId)}/read`, { user, seq }, o);
  }
  /** Newest activity first. */
  /** Rooms on other groups (`remote`, SPEC §10) get their activity from the room itself (one
   * GET each, through the same base URL: a proxy routes it to the room's group); a room that
   * cannot be read now keeps only what the list gave. */
  async userRooms(user: string, q: PageQuery = {}, o?: ReadOptions): Promise<UserRoomPage> {
    const page = await this.get<UserRoomPage>(`/v1/users/${enc(user)}/rooms`, { ...q }, o);
    await Promise.all(page.rooms.filter((r) => r.remote).map(async (r) => {
      try {
        const room = await this.room(r.room_id, o);
        r.last_msg_id = room.last_msg_id;
        r.updated = room.updated;
        r.total_messages = room.total_messages;
      } catch {
        // the room's group is down, or the user is no longer a member: the list's row as it is
      }
    }));
    return page;
  }

  // ---- events, seats, bookings (SPEC §4) ----
  /** Carries ?route=event:{id} so a proxy (deploy/) creates it on the event's node. */
  createEvent(e: EventIn, o?: WriteOptions): Promise<EventState> {
    return this.post('/v1/events', e, o, { route: `event:${e.event_id}` });
  }
  events(q: PageQuery = {}, o?: ReadOptions): Promise<EventPage> {
    return this.get('/v1/events', { ...q }, o);
  }
  event(eventId: string, o?: ReadOptions): Promise<EventState> {
    return this.get(`/v1/events/${enc(eventId)}`, undefined, o);
  }
  seatMap(eventId: string, section: string, format?: 'bitmap', o?: ReadOptions): Promise<SeatMapBitmap>;
  seatMap(eventId: string, section: string, format: 'json', o?: ReadOptions): Promise<SeatMapJson>;
  seatMap(eventId: string, section: string, format: 'bitmap' | 'json' = 'bitmap', o?: ReadOptions): Promise<SeatMapBitmap | SeatMapJson> {
    return this.get(`/v1/events/${enc(eventId)}/sections/${enc(section)}/seats`, { format }, o);
  }
  /** An event's bookings, newest first; pass a page's next as cursor for older ones. */
  bookings(eventId: string, q: BookingQuery = {}, o?: ReadOptions): Promise<BookingPage> {
    return this.get(`/v1/events/${enc(eventId)}/bookings`, { ...q }, o);
  }
  book(eventId: string, b: BookingIn, o?: WriteOptions): Promise<Booking> {
    return this.post(`/v1/events/${enc(eventId)}/bookings`, b, o);
  }
  /** With eventId, the nested route (routed by event through proxies); else the flat one. */
  booking(bookingId: string, eventId?: string, o?: ReadOptions): Promise<Booking> {
    return this.get(this.bookingPath(bookingId, eventId), undefined, o);
  }
  confirm(bookingId: string, eventId?: string, o?: WriteOptions): Promise<Booking> {
    return this.post(`${this.bookingPath(bookingId, eventId)}/confirm`, undefined, o);
  }
  cancel(bookingId: string, eventId?: string, o?: WriteOptions): Promise<Booking> {
    return this.post(`${this.bookingPath(bookingId, eventId)}/cancel`, undefined, o);
  }
  /** Moves a reserved booking's expires_at later (400 past --max-hold-seconds since created). */
  extend(eventId: string, bookingId: string, seconds: number, o?: WriteOptions): Promise<Booking> {
    return this.post(`${this.bookingPath(bookingId, eventId)}/extend`, { seconds }, o);
  }
  /** Adds and gives back seats of a reserved booking, all or nothing; giving back every seat
   * cancels it. */
  changeSeats(eventId: string, bookingId: string, change: SeatsChangeIn, o?: WriteOptions): Promise<Booking> {
    return this.post(`${this.bookingPath(bookingId, eventId)}/seats`, change, o);
  }
  private bookingPath(bookingId: string, eventId?: string): string {
    return eventId ? `/v1/events/${enc(eventId)}/bookings/${enc(bookingId)}` : `/v1/bookings/${enc(bookingId)}`;
  }

  // ---- operations (SPEC §5, §7, §8) ----
  health(o?: ReadOptions): Promise<Health> {
    return this.get('/healthz', undefined, o);
  }
  metrics(o?: ReadOptions): Promise<string> {
    return this.get('/metrics', undefined, o);
  }
  cluster(o?: ReadOptions): Promise<ClusterState> {
    return this.get('/v1/cluster', undefined, o);
  }
  flush(o?: WriteOptions): Promise<{ flushing: number }> {
    return this.post('/v1/admin/flush', undefined, o);
  }
  compact(user?: string, o?: WriteOptions): Promise<Record<string, unknown>> {
    return this.post('/v1/admin/compact', user ? { user } : undefined, o);
  }
  /** One key: recounted now. No key: a pass over every key starts in the background (202); it is
   *  done once strata_reconcile_all_passes_total reaches `pass`. */
  reconcile(key: ReconcileKey, o?: WriteOptions): Promise<{ reconciled: number; drift: number }>;
  reconcile(key?: undefined, o?: WriteOptions): Promise<{ pass: number }>;
  reconcile(key?: ReconcileKey, o?: WriteOptions): Promise<{ reconciled: number; drift: number } | { pass: number }> {
    return this.post('/v1/admin/reconcile', key, o);
  }

  /** The rooms outbox (SPEC §10, strata with --route-url; 404 without): pending records and
   * dead letters, at most `limit` (1..1000, default 100) of each. */
  outbox(q: { limit?: number } = {}, o?: ReadOptions): Promise<Outbox> {
    return this.get('/v1/admin/outbox', { ...q }, o);
  }
  /** Sends a dead letter again (once its cause is fixed): it is pending again under a new id.
   * 404 when there is no such dead letter (one retried already included) or no outbox. */
  retryOutbox(id: string, o?: WriteOptions): Promise<OutboxRetried> {
    return this.post(`/v1/admin/outbox/${enc(id)}/retry`, undefined, o);
  }

  // ---- live streams (SPEC §3) ----
  /** Opens one stream for one routing key; it reconnects and resumes until close(). */
  stream(topic: StreamTopic, handlers: StreamHandlers, o?: StreamOptions): Stream {
    const WS = this.core.opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WS) throw new Error('no WebSocket implementation: pass ClientOptions.WebSocket (e.g. the `ws` package)');
    return new Stream(this.core, WS, topic, handlers, o);
  }
}
