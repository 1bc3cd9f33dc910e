# SPDX-License-Identifier: MIT
"""The request engine, shared by the sync and the asyncio client.

Bearer tokens (refreshed when they expire within 5 s and on a 401), an Idempotency-Key on every
POST/PATCH/DELETE that every retry of the call reuses, retries with full-jitter backoff (or the
server's Retry-After) on network errors, 429, 502, 503 and 504, and 307/308 followed to a group's
leader with the method, body, key and token kept. The decisions live in :class:`_Attempts`; the
two engines only do the I/O.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import inspect
import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    Generic,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
    Union,
    cast,
)
from urllib.parse import quote, urljoin

import httpx

from .errors import StrataError, StrataNetworkError
from .types import ErrorBody

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

RETRYABLE = frozenset({429, 502, 503, 504})
WRITES = frozenset({"POST", "PATCH", "DELETE", "PUT"})
QueryValue = Union[str, int, None]
Query = Mapping[str, QueryValue]

TokenSource = Union[str, Callable[[], Optional[str]]]
"""A token, or a function giving the current one."""
AsyncTokenSource = Union[str, Callable[[], Union[Optional[str], Awaitable[Optional[str]]]]]
"""A token, or a function (plain or async) giving the current one."""


@dataclass(frozen=True)
class Backoff:
    """Full-jitter backoff: retry n waits uniform in [0, min(cap, base * 2**n)) seconds."""

    base: float = 0.1
    cap: float = 10.0


def full_jitter(attempt: int, b: Backoff) -> float:
    """Full jitter (AWS architecture blog): uniform in [0, min(cap, base * 2**attempt))."""
    return random.random() * min(b.cap, b.base * float(1 << min(attempt, 30)))


def enc(s: str) -> str:
    """Percent-encodes a name for a path or query, keeping ':' (proxies hash the key as it is)."""
    return quote(s, safe=":")


def token_ttl(token: str, now: Optional[float] = None) -> float:
    """Seconds until a JWT's ``exp`` (infinity without one, or if it is not a JWT)."""
    parts = token.split(".")
    if len(parts) < 2 or not parts[1]:
        return float("inf")
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        exp = json.loads(raw).get("exp")
    except (ValueError, binascii.Error, AttributeError):
        return float("inf")
    if isinstance(exp, bool) or not isinstance(exp, (int, float)):
        return float("inf")
    return float(exp) - (time.time() if now is None else now)


def retry_after(headers: httpx.Headers) -> Optional[float]:
    """Retry-After in seconds (delta-seconds or an HTTP date), or None."""
    v = headers.get("retry-after")
    if v is None:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    return max(0.0, float(when.timestamp()) - time.time())


@dataclass(frozen=True)
class Call(Generic[T_co]):
    """One route call: what to send and (as T_co) what the answer is."""

    method: str
    path: str
    query: Optional[Query] = None
    body: Any = None
    has_body: bool = False
    text: bool = False
    """the answer is text (/metrics), not JSON"""
    accept: Tuple[int, ...] = ()
    """statuses besides 2xx whose body is the answer (e.g. 503 of /healthz), not retried"""


def call(method: str, path: str, *, query: Optional[Query] = None, body: Any = None,
         has_body: Optional[bool] = None, text: bool = False,
         accept: Tuple[int, ...] = ()) -> Call[Any]:
    return Call(method, path, query, body, body is not None if has_body is None else has_body,
                text, accept)


@dataclass
class Options:
    base_url: str
    retries: int = 4
    """retries after the first attempt"""
    backoff: Backoff = field(default_factory=Backoff)
    max_redirects: int = 5
    timeout: float = 30.0
    """seconds for one attempt (connect, write, read)"""


@dataclass
class _Done:
    value: Any


@dataclass
class _Wait:
    seconds: float


class _Redirect:
    pass


class _Refresh:
    pass


Outcome = Union[_Done, _Wait, _Redirect, _Refresh]


class _Attempts:
    """The decisions of one call across its attempts (shared by the sync and async engines)."""

    def __init__(self, opts: Options, c: Call[Any], idempotency_key: Optional[str],
                 can_refresh: bool) -> None:
        self.opts = opts
        self.call = c
        self.method = c.method.upper()
        self.start_url = url_of(opts.base_url, c.path, c.query)
        self.url = self.start_url
        self.key = idempotency_key or (uuid.uuid4().hex if self.method in WRITES else None)
        self.content = json.dumps(c.body).encode() if c.has_body else None
        self.attempt = 0
        self.redirects = 0
        self.refreshed = False
        self.can_refresh = can_refresh

    def headers(self, token: Optional[str]) -> Dict[str, str]:
        h = {"accept": "application/json"}
        if self.content is not None:
            h["content-type"] = "application/json"
        if self.key:
            h["idempotency-key"] = self.key
        if token:
            h["authorization"] = f"Bearer {token}"
        return h

    def on_network_error(self, exc: Exception) -> float:
        """The wait before the next attempt; raises once the retries are spent."""
        if self.attempt >= self.opts.retries:
            raise StrataNetworkError(f"{self.method} {self.url}: {exc!r}", exc)
        # The member we were sent to may be the one that died (a leader's failover): start again
        # where the call started, which sends us to whoever leads now.
        self.url = self.start_url
        self.redirects = 0
        wait = full_jitter(self.attempt, self.opts.backoff)
        self.attempt += 1
        return wait

    def on_response(self, status: int, headers: httpx.Headers, read: Callable[[], bytes]) -> Outcome:
        location = headers.get("location")
        if status in (307, 308) and location:
            if self.redirects >= self.opts.max_redirects:
                raise StrataError(status, {"code": "too_many_redirects",
                                           "message": f"redirected more than {self.redirects} times"})
            self.redirects += 1
            self.url = urljoin(self.url, location)
            return _Redirect()
        if status == 401 and self.can_refresh and not self.refreshed:
            self.refreshed = True
            return _Refresh()
        ra = retry_after(headers)
        if status in RETRYABLE and status not in self.call.accept and self.attempt < self.opts.retries:
            wait = ra if ra is not None else full_jitter(self.attempt, self.opts.backoff)
            self.attempt += 1
            return _Wait(wait)
        raw = read()
        text = raw.decode("utf-8", "replace")
        ok = 200 <= status < 300 or status in self.call.accept
        if ok and self.call.text:
            return _Done(text)
        try:
            js: Any = json.loads(text) if text else None
        except ValueError:
            js = None
        if ok:
            return _Done(js if js is not None else text)
        err = js.get("error") if isinstance(js, dict) else None
        if not (isinstance(err, dict) and isinstance(err.get("code"), str)):
            err = {"code": "http_error", "message": text or f"HTTP {status}"}
        err.setdefault("message", "")
        raise StrataError(status, cast(ErrorBody, err), ra)


def url_of(base: str, path: str, query: Optional[Query] = None) -> str:
    q = "&".join(f"{quote(k, safe='')}={enc(str(v))}" for k, v in (query or {}).items()
                 if v is not None)
    return f"{base.rstrip('/')}{path}{'?' + q if q else ''}"


class SyncCore:
    """The sync engine on an ``httpx.Client``."""

    def __init__(self, opts: Options, token: Optional[TokenSource],
                 refresh_token: Optional[Callable[[], str]],
                 transport: Optional[httpx.BaseTransport] = None) -> None:
        self.opts = opts
        self.token_source = token
        self.refresh_hook = refresh_token
        self._override: Optional[str] = None
        self._lock = threading.Lock()
        self._gen = 0
        self.http = httpx.Client(timeout=opts.timeout, follow_redirects=False, transport=transport)

    def token(self) -> Optional[str]:
        """The token to send now: refreshed first when it expires within 5 s."""
        t = self._override
        if t is None:
            src = self.token_source
            t = src() if callable(src) else src
        if t is not None and self.refresh_hook is not None and token_ttl(t) < 5:
            t = self.refresh()
        return t

    def refresh(self) -> str:
        """Calls the refresh hook once for every thread waiting at the time, and keeps its token."""
        if self.refresh_hook is None:
            raise RuntimeError("no refresh_token hook")
        gen = self._gen
        with self._lock:
            if self._gen != gen and self._override is not None:
                return self._override  # another thread refreshed while we waited
            self._override = self.refresh_hook()
            self._gen += 1
            return self._override

    def request(self, c: Call[T], idempotency_key: Optional[str] = None) -> T:
        a = _Attempts(self.opts, c, idempotency_key, self.refresh_hook is not None)
        while True:
            try:
                res = self.http.request(a.method, a.url, content=a.content,
                                        headers=a.headers(self.token()))
            except httpx.TransportError as e:
                time.sleep(a.on_network_error(e))
                continue
            try:
                try:
                    out = a.on_response(res.status_code, res.headers, lambda: res.read())
                except httpx.TransportError as e:  # the body was cut off
                    time.sleep(a.on_network_error(e))
                    continue
            finally:
                res.close()
            if isinstance(out, _Done):
                return cast(T, out.value)
            if isinstance(out, _Wait):
                time.sleep(out.seconds)
            elif isinstance(out, _Refresh):
                self.refresh()

    def close(self) -> None:
        self.http.close()


async def _maybe_await(v: Union[T, Awaitable[T]]) -> T:
    if inspect.isawaitable(v):
        return cast(T, await v)
    return cast(T, v)


class AsyncCore:
    """The asyncio engine on an ``httpx.AsyncClient``."""

    def __init__(self, opts: Options, token: Optional[AsyncTokenSource],
                 refresh_token: Optional[Callable[[], Union[str, Awaitable[str]]]],
                 transport: Optional[httpx.AsyncBaseTransport] = None) -> None:
        self.opts = opts
        self.token_source = token
        self.refresh_hook = refresh_token
        self._override: Optional[str] = None
        self._refreshing: Optional[asyncio.Future[str]] = None
        self.http = httpx.AsyncClient(timeout=opts.timeout, follow_redirects=False,
                                      transport=transport)

    async def token(self) -> Optional[str]:
        """The token to send now: refreshed first when it expires within 5 s."""
        t = self._override
        if t is None:
            src = self.token_source
            t = await _maybe_await(src()) if callable(src) else src
        if t is not None and self.refresh_hook is not None and token_ttl(t) < 5:
            t = await self.refresh()
        return t

    async def refresh(self) -> str:
        """Calls the refresh hook once for every task waiting, and keeps its token."""
        hook = self.refresh_hook
        if hook is None:
            raise RuntimeError("no refresh_token hook")
        if self._refreshing is not None:
            return await asyncio.shield(self._refreshing)
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._refreshing = fut
        try:
            t = await _maybe_await(hook())
            self._override = t
            fut.set_result(t)
            return t
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: no "never retrieved" warning when nobody else waits
            raise
        finally:
            self._refreshing = None

    async def request(self, c: Call[T], idempotency_key: Optional[str] = None) -> T:
        a = _Attempts(self.opts, c, idempotency_key, self.refresh_hook is not None)
        while True:
            try:
                res = await self.http.request(a.method, a.url, content=a.content,
                                              headers=a.headers(await self.token()))
            except httpx.TransportError as e:
                await asyncio.sleep(a.on_network_error(e))
                continue
            try:
                try:
                    body = await res.aread() if res.status_code not in (307, 308) else b""
                except httpx.TransportError as e:
                    await asyncio.sleep(a.on_network_error(e))
                    continue
            finally:
                await res.aclose()
            out = a.on_response(res.status_code, res.headers, lambda: body)
            if isinstance(out, _Done):
                return cast(T, out.value)
            if isinstance(out, _Wait):
                await asyncio.sleep(out.seconds)
            elif isinstance(out, _Refresh):
                await self.refresh()

    async def aclose(self) -> None:
        await self.http.aclose()
