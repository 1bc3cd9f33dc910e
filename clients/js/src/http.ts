// SPDX-License-Identifier: MIT
// The request engine: bearer tokens (refreshed on expiry or a 401), an Idempotency-Key on every
// POST that is reused by its retries, retries with full-jitter backoff (or Retry-After) on
// network errors, 429, 502, 503 and 504, and 307/308 followed to a group's leader.
import type { ErrorBody } from './types.js';

/** A token, or a function giving the current one (may be async). */
export type TokenSource = string | (() => string | undefined | Promise<string | undefined>);

export interface Backoff {
  /** first retry waits up to this (ms); default 100 */
  baseMs?: number;
  /** no wait is longer than this (ms); default 10 000 */
  capMs?: number;
}

export interface ClientOptions {
  /** e.g. "http://127.0.0.1:8080" (a proxy, a node, or any member of a group) */
  baseUrl: string;
  /** The Bearer token: an access token from your identity provider (RS256/ES256 checked against
   * strata's --jwt-jwks-url), or an HS256 token signed with --jwt-secret. */
  token?: TokenSource;
  /** Called when the token has expired (or is about to) and on a 401; returns a fresh token. */
  refreshToken?: () => string | Promise<string>;
  /** default globalThis.fetch */
  fetch?: typeof fetch;
  /** default globalThis.WebSocket (none on Node 18, nor on Node 20 without
   * --experimental-websocket: pass one there, e.g. the `ws` package's) */
  WebSocket?: WebSocketConstructor;
  /** retries after the first attempt; default 4 */
  retries?: number;
  backoff?: Backoff;
  /** default 5 */
  maxRedirects?: number;
}

/** What the client needs of a WebSocket implementation (the browser's, Node 22's, `ws`). */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** An answer that is not 2xx: `status`, the error `code` (e.g. "not_found"; "last_owner", 409,
 * when a room's last owner would leave or be demoted) and its body. */
export class StrataError extends Error {
  readonly status: number;
  readonly code: string;
  readonly body: ErrorBody;
  /** seconds, from Retry-After */
  readonly retryAfter: number | undefined;
  constructor(status: number, body: ErrorBody, retryAfter?: number) {
    super(`${status} ${body.code}: ${body.message}`);
    this.name = 'StrataError';
    this.status = status;
    this.code = body.code;
    this.body = body;
    this.retryAfter = retryAfter;
  }
}

/** The server could not be reached, after every retry. */
export class StrataNetworkError extends Error {
  override readonly cause: unknown;
  constructor(message: string, cause: unknown) {
    super(message);
    this.name = 'StrataNetworkError';
    this.cause = cause;
  }
}

/** Every write (POST, PATCH, DELETE) carries an Idempotency-Key its retries reuse. */
export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** POST only: defaults to a fresh random key, reused by every retry of this call */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

const RETRYABLE = new Set([429, 502, 503, 504]);

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Full jitter (AWS architecture blog): uniform in [0, min(cap, base·2^attempt)). */
export function fullJitter(attempt: number, b: Backoff = {}): number {
  const base = b.baseMs ?? 100;
  const cap = b.capMs ?? 10_000;
  return Math.random() * Math.min(cap, base * 2 ** Math.min(attempt, 30));
}

/** A fresh Idempotency-Key. Node 18 has no global `crypto`: keys need to be unique, not secret. */
export function randomKey(): string {
  const c = (globalThis as { crypto?: Crypto }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  const b = new Uint8Array(16);
  if (c?.getRandomValues) c.getRandomValues(b);
  else for (let i = 0; i < b.length; i++) b[i] = Math.floor(Math.random() * 256);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** Percent-encodes a name, keeping ':' (names are [A-Za-z0-9_.:-]; proxies hash the key as is). */
export function enc(s: string): string {
  return encodeURIComponent(s).replace(/%3A/gi, ':');
}

/** Seconds until a JWT's `exp` (Infinity without one or if it is not a JWT). */
export function tokenTtl(token: string, nowMs = Date.now()): number {
  const part = token.split('.')[1];
  if (!part) return Infinity;
  try {
    const json = atob(part.replace(/-/g, '+').replace(/_/g, '/'));
    const exp = (JSON.parse(json) as { exp?: unknown }).exp;
    return typeof exp === 'number' ? exp - nowMs / 1000 : Infinity;
  } catch {
    return Infinity;
  }
}

export class HttpCore {
  readonly base: string;
  readonly opts: ClientOptions;
  private tokenOverride: string | undefined;
  private refreshing: Promise<string> | undefined;
  private redirectMode: RequestRedirect = 'manual';

  constructor(opts: ClientOptions) {
    this.opts = opts;
    this.base = opts.baseUrl.replace(/\/+$/, '');
  }

  /** The token to send now: refreshed first when it expires within 5 s. */
  async token(): Promise<string | undefined> {
    let t = this.tokenOverride;
    if (t === undefined) {
      const src = this.opts.token;
      t = typeof src === 'function' ? await src() : src;
    }
    if (t !== undefined && this.opts.refreshToken && tokenTtl(t) < 5) t = await this.refresh();
    return t;
  }

  /** Calls the refresh hook once for everyone waiting, and keeps its token. */
  refresh(): Promise<string> {
    const hook = this.opts.refreshToken;
    if (!hook) return Promise.reject(new Error('no refreshToken hook'));
    this.refreshing ??= Promise.resolve()
      .then(hook)
      .then((t) => {
        this.tokenOverride = t;
        return t;
      })
      .finally(() => {
        this.refreshing = undefined;
      });
    return this.refreshing;
  }

  url(path: string, query?: RequestOptions['query']): string {
    const q = Object.entries(query ?? {})
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${encodeURIComponent(k)}=${enc(String(v))}`)
      .join('&');
    return `${this.base}${path}${q ? `?${q}` : ''}`;
  }

  async request<T>(method: Method, path: string, o: RequestOptions = {}): Promise<T> {
    const doFetch = this.opts.fetch ?? globalThis.fetch.bind(globalThis);
    const retries = this.opts.retries ?? 4;
    const key = method !== 'GET' ? (o.idempotencyKey ?? randomKey()) : undefined;
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    let url = this.url(path, o.query);
    let attempt = 0;
    let redirects = 0;
    let refreshed = false;
    for (;;) {
      const headers: Record<string, string> = { accept: 'application/json' };
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (key) headers['idempotency-key'] = key;
      const tok = await this.token();
      if (tok) headers.authorization = `Bearer ${tok}`;
      let res: Response;
      try {
        const init: RequestInit = { method, headers, redirect: this.redirectMode };
        if (body !== undefined) init.body = body;
        if (o.signal) init.signal = o.signal;
        res = await doFetch(url, init);
      } catch (e) {
        if (o.signal?.aborted || attempt >= retries) {
          throw new StrataNetworkError(`${method} ${url}: ${String(e)}`, e);
        }
        await sleep(fullJitter(attempt++, this.opts.backoff));
        continue;
      }
      if (res.type === 'opaqueredirect') {
        // A browser hides a manual redirect's Location: let it follow them from now on.
        this.redirectMode = 'follow';
        continue;
      }
      const location = res.headers.get('location');
      if ((res.status === 307 || res.status === 308) && location) {
        if (redirects++ >= (this.opts.maxRedirects ?? 5)) {
          throw new StrataError(res.status, { code: 'too_many_redirects', message: `redirected more than ${redirects - 1} times` });
        }
        url = new URL(location, url).toString();
        continue;
      }
      if (res.status === 401 && this.opts.refreshToken && !refreshed) {
        refreshed = true;
        await this.refresh();
        continue;
      }
      const retryAfter = Number(res.headers.get('retry-after') ?? NaN);
      if (RETRYABLE.has(res.status) && attempt < retries) {
        await res.body?.cancel().catch(() => undefined);
        const wait = Number.isFinite(retryAfter) ? retryAfter * 1000 : fullJitter(attempt, this.opts.backoff);
        attempt++;
        await sleep(wait);
        continue;
      }
      const text = await res.text();
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      if (!res.ok) {
        const err = (json as { error?: ErrorBody } | undefined)?.error ?? { code: 'http_error', message: text || res.statusText };
        throw new StrataError(res.status, err, Number.isFinite(retryAfter) ? retryAfter : undefined);
      }
      return (json ?? text) as T;
    }
  }
}
