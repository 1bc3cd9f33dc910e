// SPDX-License-Identifier: MIT
// A live stream of one routing key (SPEC §3, §10): one WebSocket with ?route=KIND:KEY (so a proxy
// reaches the key's node) and ?access_token= (browsers cannot set headers on a WebSocket). When
// it drops — a restart, a network cut, a slow-consumer close (1008), an expired token — it
// reconnects with full-jitter backoff, refreshing the token first when needed, and subscribes
// again: messages resume after the last msg_id delivered (anything at or before it is dropped,
// so no duplicate and no gap), seats and counters start again from a fresh snapshot.
// A messages stream replays history only when asked (`after`: a msg_id, or "0" for everything,
// SPEC §3); without it, it starts live: the newest msg_id at the start (one GET) is where it
// resumes from should it drop before its first message.
import { StrataError, enc, fullJitter, tokenTtl, type Backoff, type HttpCore, type WebSocketConstructor, type WebSocketLike } from './http.js';
import type { EventState, Id64, Message, MessagePage, RoomMessage, SeatsChange, ServerFrame, StreamErrorFrame, StreamTopic } from './types.js';

export type StreamState = 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface StreamHandlers {
  /** messages topic: each message once, in msg_id order (replayed when `after` was given, then live) */
  onMessage?(m: Message): void;
  /** room topic: each message once, in msg_id order, as onMessage */
  onRoomMessage?(m: RoomMessage): void;
  /** messages and room topics: a message was edited or deleted (its new state; SPEC §2.2) */
  onEdit?(change: 'edited' | 'deleted', m: Message | RoomMessage): void;
  /** room topic: a member was added or removed */
  onMember?(m: { room_id: string; user: string; change: string }): void;
  /** a member is typing until `until` (Unix µs): ephemeral (SPEC §2.1 v5) */
  onTyping?(t: { room_id: string; user: string; until: number }): void;
  /** a member came online or went offline in the room: ephemeral (SPEC §2.1 v5) */
  onPresence?(p: { room_id: string; user: string; online: boolean }): void;
  /** messages and room topics: the replay of what was already there is complete */
  onReplayDone?(): void;
  /** seats topic: the event's whole state, on every (re)subscribe */
  onSnapshot?(e: EventState): void;
  /** seats topic: seats of one section that changed */
  onSeats?(c: SeatsChange): void;
  /** counter topic: the value on every (re)subscribe (`exists` false: never written, value 0;
   * HTTP answers 404 for it), then every change */
  onCounter?(value: number, info: { exists: boolean }): void;
  /** an error frame from the server (e.g. forbidden, not_found) */
  onError?(e: StreamErrorFrame): void;
  onState?(s: StreamState, detail?: { code?: number; reason?: string; attempt?: number }): void;
}

export interface StreamOptions {
  backoff?: Backoff;
}

const FINAL = new Set(['not_found', 'forbidden', 'invalid_argument', 'unauthenticated']);

function routeOf(t: StreamTopic): string {
  if (t.topic === 'messages') return `user:${t.user}`;
  if (t.topic === 'room') return `room:${t.room_id}`;
  if (t.topic === 'seats') return `event:${t.event_id}`;
  return `counter:${t.name}`;
}

export class Stream {
  private ws: WebSocketLike | undefined;
  private attempt = 0;
  private stopped = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private last: bigint | undefined;
  private needRefresh = false;
  private readyResolve!: () => void;
  private readyReject!: (e: StreamErrorFrame) => void;
  /** Resolves once the first subscription is confirmed; rejects if the server refuses it. */
  readonly ready: Promise<void>;

  constructor(
    private readonly core: HttpCore,
    private readonly WS: WebSocketConstructor,
    private readonly topic: StreamTopic,
    private readonly h: StreamHandlers,
    private readonly opts: StreamOptions = {},
  ) {
    this.ready = new Promise((resolve, reject) => {
      this.readyResolve = resolve;
      this.readyReject = reject;
    });
    this.ready.catch(() => undefined); // callers that never await it see onError instead
    if ((topic.topic === 'messages' || topic.topic === 'room') && topic.after != null) this.last = BigInt(topic.after);
    void this.connect();
  }

  /** The last msg_id delivered (messages topic). */
  get lastMsgId(): Id64 | undefined {
    return this.last?.toString();
  }

  /** Stops for good: no reconnect. */
  close(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.ws?.close(1000, 'bye');
    this.h.onState?.('closed');
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    this.h.onState?.(this.attempt ? 'reconnecting' : 'connecting', { attempt: this.attempt });
    let token: string | undefined;
    try {
      if (this.needRefresh && this.core.opts.refreshToken) await this.core.refresh();
      this.needRefresh = false;
      token = await this.core.token();
    } catch {
      this.retry();
      return;
    }
    if (this.stopped || !(await this.startLive())) return;
    const base = this.core.base.replace(/^http/, 'ws');
    let url = `${base}/v1/stream?route=${enc(routeOf(this.topic))}`;
    if (token) url += `&access_token=${encodeURIComponent(token)}`;
    let ws: WebSocketLike;
    try {
      ws = new this.WS(url);
    } catch {
      this.retry();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      const sub: Record<string, unknown> = { type: 'subscribe', id: 's', ...this.topic };
      if ((this.topic.topic === 'messages' || this.topic.topic === 'room') && this.last !== undefined) sub.after = this.last.toString();
      ws.send(JSON.stringify(sub));
    };
    ws.onmessage = (ev) => this.frame(ev.data);
    ws.onerror = () => undefined; // a close follows
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = undefined;
      if (this.stopped) return;
      // 1008 "token expired", or a refused upgrade (1006) with a token that has run out.
      if (/token/i.test(ev.reason) || (token && tokenTtl(token) < 5)) this.needRefresh = true;
      this.h.onState?.('reconnecting', { code: ev.code, reason: ev.reason, attempt: this.attempt });
      this.retry();
    };
  }

  /** A messages stream without `after` starts live: it learns the newest msg_id now and resumes
   * after it, so a reconnect before its first message has no gap (and no old history). False when
   * it cannot go on now (a retry is scheduled, or the stream was refused and closed). */
  private async startLive(): Promise<boolean> {
    const t = this.topic;
    if ((t.topic !== 'messages' && t.topic !== 'room') || this.last !== undefined) return true;
    try {
      const page = t.topic === 'room'
        ? await this.core.request<MessagePage>('GET', `/v1/rooms/${enc(t.room_id)}/messages`, { query: { order: 'desc', limit: 1 } })
        : await this.core.request<MessagePage>('GET', `/v1/users/${enc(t.user)}/messages`, { query: { order: 'desc', limit: 1, conversation_id: t.conversation_id } });
      this.last ??= page.messages[0] ? BigInt(page.messages[0].msg_id) : 0n;
      return !this.stopped;
    } catch (e) {
      if (e instanceof StrataError && FINAL.has(e.code)) {
        this.frame(JSON.stringify({ type: 'error', id: 's', code: e.code, message: e.body.message }));
      } else {
        this.retry();
      }
      return false;
    }
  }

  private retry(): void {
    if (this.stopped) return;
    const wait = fullJitter(this.attempt++, this.opts.backoff ?? this.core.opts.backoff);
    this.timer = setTimeout(() => void this.connect(), wait);
  }

  private frame(data: unknown): void {
    const text = typeof data === 'string' ? data : new TextDecoder().decode(data as ArrayBuffer);
    let f: ServerFrame;
    try {
      f = JSON.parse(text) as ServerFrame;
    } catch {
      return;
    }
    switch (f.type) {
      case 'subscribed':
        this.attempt = 0;
        this.h.onState?.('open');
        this.readyResolve();
        break;
      case 'message': {
        const id = BigInt(f.message.msg_id);
        if (this.last !== undefined && id <= this.last) return; // already delivered
        this.last = id;
        if ('room_id' in f.message) this.h.onRoomMessage?.(f.message);
        else this.h.onMessage?.(f.message);
        break;
      }
      case 'message_edited':
      case 'message_deleted':
        this.h.onEdit?.(f.type === 'message_edited' ? 'edited' : 'deleted', f.message);
        break;
      case 'room_member':
        this.h.onMember?.({ room_id: f.room_id, user: f.user, change: f.change });
        break;
      case 'typing':
        this.h.onTyping?.({ room_id: f.room_id, user: f.user, until: f.until });
        break;
      case 'presence':
        this.h.onPresence?.({ room_id: f.room_id, user: f.user, online: f.online });
        break;
      case 'replay_done':
        this.h.onReplayDone?.();
        break;
      case 'seats':
        if (f.snapshot) this.h.onSnapshot?.(f.snapshot);
        else this.h.onSeats?.(f);
        break;
      case 'counter':
        this.h.onCounter?.(f.value, { exists: f.exists !== false });
        break;
      case 'error':
        this.h.onError?.(f);
        // A refused subscription (no such event, another user's messages, bad input) would be
        // refused again: stop rather than reconnect forever.
        if (f.id === 's' && FINAL.has(f.code)) {
          this.readyReject(f);
          this.close();
        }
        break;
    }
  }
}
