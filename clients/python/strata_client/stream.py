# SPDX-License-Identifier: MIT
"""Live streams (SPEC §3, §10) as async iterators that resume by themselves.

One WebSocket per routing key, with ``?route=KIND:KEY`` (so a proxy reaches the key's group) and
the token in an ``Authorization`` header. When the connection drops — a restart, a network cut, a
slow-consumer close (1008), an expired token — the stream reconnects with full-jitter backoff
(refreshing the token first when it ran out) and subscribes again: messages resume after the last
``msg_id`` the iterator yielded (anything at or before it is dropped: no duplicate, no gap); seats
and counters start again from a fresh snapshot, which the iterator yields.

The client always names where a messages stream starts (``after``): without one it reads the
newest ``msg_id`` first and resumes after it, so "live only" means the same on every server
version, and a reconnect before the first message still loses nothing.
"""
from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Deque,
    Dict,
    Generic,
    List,
    Optional,
    TypeVar,
    Union,
    cast,
)

from websockets.exceptions import ConnectionClosed, InvalidStatusCode, WebSocketException
from websockets.legacy.client import WebSocketClientProtocol, connect

from . import _routes as R
from ._core import AsyncCore, full_jitter, token_ttl, url_of
from .errors import StrataError
from .types import EventState, Message, RoomMessage, SeatStats

Y = TypeVar("Y")

# A subscription refused with one of these would be refused again: the stream ends with it.
_FINAL = {"not_found": 404, "forbidden": 403, "invalid_argument": 400, "unauthenticated": 401}
_SUB = "s"


@dataclass(frozen=True)
class StateDetail:
    """What came with a state change: the close code and reason, the reconnect attempt."""

    code: Optional[int] = None
    reason: str = ""
    attempt: int = 0


StateHook = Callable[[str, StateDetail], None]
"""Called with "connecting", "open", "reconnecting" or "closed"."""

ChangeHook = Callable[[str, Dict[str, Any]], None]
"""Called with "edited" or "deleted" and the message's new state (SPEC §2.2): an edit or delete of
a message the stream may already have yielded (a replay yields each message as it is now)."""

MemberHook = Callable[[str, str], None]
"""A room's membership changed: called with the user and the change ("added", "removed")."""

TypingHook = Callable[[str, int], None]
"""A member is typing until ``until`` (Unix µs); ephemeral (SPEC §2.1 v5)."""

PresenceHook = Callable[[str, bool], None]
"""A member came online (its first stream of the room on any member of the group) or went offline
(its last one closed); called with the user and ``online``. Ephemeral (SPEC §2.1 v5)."""


@dataclass(frozen=True)
class SeatsSnapshot:
    """The whole event state, yielded on every (re)subscribe."""

    event_id: str
    state: EventState


@dataclass(frozen=True)
class SeatChange:
    state: str
    """available, reserved or sold"""
    seat: Optional[str] = None
    """a seated section's seat ("row-col")"""
    quantity: Optional[int] = None
    """a general admission section: how many places"""


@dataclass(frozen=True)
class SeatsUpdate:
    """Seats of one section that one operation changed, and the stats after it."""

    event_id: str
    section: str
    changes: List[SeatChange]
    stats: SeatStats
    event_stats: Optional[SeatStats]


@dataclass(frozen=True)
class CounterValue:
    name: str
    value: int
    snapshot: bool
    """True for the value sent on (re)subscribe, False for a change"""
    exists: bool = True
    """False on a snapshot of a counter never written (value 0; GET answers 404)"""


class _Stream(Generic[Y]):
    """The reconnecting machinery; subclasses say what to subscribe to and what to yield.

    Iterate it from one task. ``await s.ready()`` waits for the first subscription (and raises
    :class:`StrataError` if the server refuses it); ``await s.aclose()`` stops it for good.
    """

    def __init__(self, core: AsyncCore, route: str, on_state: Optional[StateHook]) -> None:
        self._core = core
        self._route = route
        self._on_state = on_state
        self._ws: Optional[WebSocketClientProtocol] = None
        self._pending: Deque[Y] = deque()
        self._attempt = 0
        self._closed = False
        self._need_refresh = False
        self._token: Optional[str] = None
        self.state = "connecting"
        self.reconnects = 0
        """how many times the stream has reconnected"""

    # ---- what a topic says ----
    def _subscribe(self) -> Dict[str, Any]:
        raise NotImplementedError

    async def _prepare(self) -> None:
        """Runs before each connect (the messages stream finds where it starts)."""

    def _frame(self, f: Dict[str, Any]) -> Optional[Y]:
        raise NotImplementedError

    # ---- the iterator ----
    def __aiter__(self) -> AsyncIterator[Y]:
        return self

    async def __anext__(self) -> Y:
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._closed:
                raise StopAsyncIteration
            if self._ws is None:
                await self._connect()
                continue
            ws = self._ws
            try:
                raw = await ws.recv()
            except ConnectionClosed as e:
                self._dropped(ws, e)
                continue
            f = _parse(raw)
            if f is None:
                continue
            if f.get("type") == "error" and f.get("id") == _SUB:
                await self._error_frame(ws, f)
                continue
            item = self._frame(f)
            if item is not None:
                return item

    async def ready(self) -> None:
        """Connects and subscribes now (iterating does it too); raises if refused."""
        while self._ws is None and not self._closed:
            await self._connect()

    async def aclose(self) -> None:
        """Stops for good: no reconnect; iteration ends."""
        if self._closed:
            return
        self._closed = True
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close(1000, "bye")
        self._set_state("closed", StateDetail())

    async def __aenter__(self) -> "_Stream[Y]":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- connecting ----
    def _set_state(self, s: str, d: StateDetail) -> None:
        self.state = s
        if self._on_state is not None:
            self._on_state(s, d)

    def _dropped(self, ws: WebSocketClientProtocol, e: ConnectionClosed) -> None:
        if self._ws is ws:
            self._ws = None
        if self._closed:
            return
        code = e.rcvd.code if e.rcvd is not None else 1006
        reason = e.rcvd.reason if e.rcvd is not None else ""
        # 1008 "token expired", or a token that has run out by now
        if "token" in reason.lower() or (self._token is not None and token_ttl(self._token) < 5):
            self._need_refresh = True
        self.reconnects += 1
        self._set_state("reconnecting", StateDetail(code, reason, self._attempt))

    async def _error_frame(self, ws: WebSocketClientProtocol, f: Dict[str, Any]) -> None:
        code = str(f.get("code", ""))
        if code in _FINAL:
            await self.aclose()
            raise StrataError(_FINAL[code], {"code": code, "message": str(f.get("message", ""))})
        # e.g. cold_unavailable during a replay: subscribe again later, from where we are
        self._ws = None
        await ws.close(1000, "resubscribe")
        self.reconnects += 1
        self._set_state("reconnecting", StateDetail(None, code, self._attempt))

    async def _connect(self) -> None:
        """One attempt (after its backoff); on success self._ws is set and subscribed."""
        if self._attempt > 0:
            await asyncio.sleep(full_jitter(self._attempt - 1, self._core.opts.backoff))
        if self._closed:
            return
        self._attempt += 1
        if self._attempt > 1 or self.reconnects:
            self._set_state("reconnecting", StateDetail(attempt=self._attempt - 1))
        else:
            self._set_state("connecting", StateDetail())
        ws: Optional[WebSocketClientProtocol] = None
        try:
            try:
                if self._need_refresh and self._core.refresh_hook is not None:
                    await self._core.refresh()
                self._need_refresh = False
                self._token = await self._core.token()
            except Exception:  # the token hooks failed (an identity provider down): try later
                return
            await self._prepare()
            base = self._core.opts.base_url
            url = "ws" + url_of(base, "/v1/stream", {"route": self._route})[4:]
            headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
            ws = await connect(url, extra_headers=headers, open_timeout=self._core.opts.timeout,
                               max_size=64 << 20, ping_interval=20, ping_timeout=20)
            await ws.send(json.dumps(self._subscribe()))
            while True:
                f = _parse(await asyncio.wait_for(ws.recv(), self._core.opts.timeout))
                if f is None:
                    continue
                if f.get("id") == _SUB and f.get("type") == "subscribed":
                    break
                if f.get("id") == _SUB and f.get("type") == "error":
                    await self._error_frame(ws, f)
                    return
                item = self._frame(f)
                if item is not None:
                    self._pending.append(item)
        except InvalidStatusCode as e:
            if e.status_code == 401:
                self._need_refresh = True
            return
        except StrataError as e:
            if e.code in _FINAL and e.status != 401:
                await self.aclose()
                raise
            return
        except (OSError, asyncio.TimeoutError, WebSocketException):
            if ws is not None:
                await ws.close()
            return
        if self._closed:  # closed while we were connecting
            await ws.close(1000, "bye")
            return
        self._ws = ws
        self._attempt = 0
        self._set_state("open", StateDetail())


def _parse(raw: Any) -> Optional[Dict[str, Any]]:
    try:
        f = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return cast(Dict[str, Any], f) if isinstance(f, dict) else None


M = TypeVar("M", Message, RoomMessage)


class _Messages(_Stream[M]):
    """What a user's and a room's message streams share: resume after the last msg_id yielded,
    edits and deletes to a hook."""

    def __init__(self, core: AsyncCore, route: str, after: Optional[str],
                 on_state: Optional[StateHook], on_change: Optional[ChangeHook]) -> None:
        super().__init__(core, route, on_state)
        self._last: Optional[int] = int(after) if after is not None else None
        self._on_change = on_change
        self.replay_done = asyncio.Event()
        """set once the replay of what was already there is complete (first subscription)"""

    @property
    def last_msg_id(self) -> Optional[str]:
        """The last msg_id yielded (or where the stream starts)."""
        return None if self._last is None else str(self._last)

    def _frame(self, f: Dict[str, Any]) -> Optional[M]:
        t = f.get("type")
        if t == "replay_done":
            self.replay_done.set()
            return None
        if t in ("message_edited", "message_deleted") and isinstance(f.get("message"), dict):
            if self._on_change is not None:
                self._on_change("edited" if t == "message_edited" else "deleted", f["message"])
            return None
        if t != "message" or not isinstance(f.get("message"), dict):
            return self._other(f)
        m = cast(M, f["message"])
        mid = int(m["msg_id"])
        if self._last is not None and mid <= self._last:
            return None  # already yielded
        self._last = mid
        return m

    def _other(self, f: Dict[str, Any]) -> Optional[M]:
        return None


class RoomStream(_Messages[RoomMessage]):
    """A room's messages (SPEC §2.1, §3), each yielded once in msg_id order; membership changes
    go to ``on_member``. A member removed from the room sees the stream end with 403."""

    def __init__(self, core: AsyncCore, room_id: str, after: Optional[str],
                 on_state: Optional[StateHook], on_change: Optional[ChangeHook],
                 on_member: Optional[MemberHook],
                 on_typing: Optional[TypingHook] = None,
                 on_presence: Optional[PresenceHook] = None) -> None:
        super().__init__(core, f"room:{room_id}", after, on_state, on_change)
        self.room_id = room_id
        self._on_member = on_member
        self._on_typing = on_typing
        self._on_presence = on_presence

    async def _prepare(self) -> None:
        if self._last is not None:
            return
        page = await self._core.request(R.room_messages(self.room_id, None, None, 1, "desc",
                                                        None))
        self._last = int(page["messages"][0]["msg_id"]) if page["messages"] else 0

    def _subscribe(self) -> Dict[str, Any]:
        return {"type": "subscribe", "id": _SUB, "topic": "room", "room_id": self.room_id,
                "after": str(self._last or 0)}

    def _other(self, f: Dict[str, Any]) -> Optional[RoomMessage]:
        if f.get("type") == "room_member" and self._on_member is not None:
            self._on_member(str(f.get("user")), str(f.get("change")))
        if f.get("type") == "typing" and self._on_typing is not None:
            self._on_typing(str(f.get("user")), int(f.get("until") or 0))
        if f.get("type") == "presence" and self._on_presence is not None:
            self._on_presence(str(f.get("user")), f.get("online") is True)
        return None


class MessageStream(_Messages[Message]):
    """A user's messages (optionally one conversation's), each yielded once in msg_id order."""

    def __init__(self, core: AsyncCore, user: str, conversation_id: Optional[str],
                 after: Optional[str], on_state: Optional[StateHook],
                 on_change: Optional[ChangeHook] = None) -> None:
        super().__init__(core, f"user:{user}", after, on_state, on_change)
        self.user = user
        self.conversation_id = conversation_id

    async def _prepare(self) -> None:
        if self._last is not None:
            return
        page = await self._core.request(R.messages(self.user, self.conversation_id, None, None,
                                                   1, "desc", None))
        self._last = int(page["messages"][0]["msg_id"]) if page["messages"] else 0

    def _subscribe(self) -> Dict[str, Any]:
        sub: Dict[str, Any] = {"type": "subscribe", "id": _SUB, "topic": "messages",
                               "user": self.user, "after": str(self._last or 0)}
        if self.conversation_id is not None:
            sub["conversation_id"] = self.conversation_id
        return sub


SeatsEvent = Union[SeatsSnapshot, SeatsUpdate]


class SeatsStream(_Stream[SeatsEvent]):
    """An event's seats: :class:`SeatsSnapshot` on every (re)subscribe, then :class:`SeatsUpdate`."""

    def __init__(self, core: AsyncCore, event_id: str, on_state: Optional[StateHook]) -> None:
        super().__init__(core, f"event:{event_id}", on_state)
        self.event_id = event_id

    def _subscribe(self) -> Dict[str, Any]:
        return {"type": "subscribe", "id": _SUB, "topic": "seats", "event_id": self.event_id}

    def _frame(self, f: Dict[str, Any]) -> Optional[SeatsEvent]:
        if f.get("type") != "seats":
            return None
        if isinstance(f.get("snapshot"), dict):
            return SeatsSnapshot(str(f.get("event_id", self.event_id)),
                                 cast(EventState, f["snapshot"]))
        changes = [SeatChange(str(c.get("state")), c.get("seat"), c.get("quantity"))
                   for c in f.get("changes", []) if isinstance(c, dict)]
        return SeatsUpdate(str(f.get("event_id", self.event_id)), str(f.get("section")), changes,
                           cast(SeatStats, f.get("stats")),
                           cast(Optional[SeatStats], f.get("event_stats")))


class CounterStream(_Stream[CounterValue]):
    """A counter's value on every (re)subscribe (``snapshot=True``), then every change."""

    def __init__(self, core: AsyncCore, name: str, on_state: Optional[StateHook]) -> None:
        super().__init__(core, f"counter:{name}", on_state)
        self.name = name
        self._fresh = True

    def _subscribe(self) -> Dict[str, Any]:
        self._fresh = True
        return {"type": "subscribe", "id": _SUB, "topic": "counter", "name": self.name}

    def _frame(self, f: Dict[str, Any]) -> Optional[CounterValue]:
        if f.get("type") != "counter":
            return None
        snap, self._fresh = self._fresh, False
        exists = f.get("exists", True) is not False
        return CounterValue(str(f.get("name", self.name)), int(f["value"]), snap, exists)
