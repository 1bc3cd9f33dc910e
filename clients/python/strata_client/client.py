# SPDX-License-Identifier: MIT
"""strata's clients: :class:`Strata` (sync, for scripts, threads and WSGI apps) and
:class:`AsyncStrata` (asyncio, with live streams). Both cover every route with typed answers and
raise :class:`~strata_client.StrataError` for every failure.
"""
from __future__ import annotations

import asyncio

from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Iterator,
    List,
    Literal,
    Optional,
    Union,
    overload,
)
from typing import Sequence as Seq

import httpx

from . import _routes as R
from ._core import AsyncCore, AsyncTokenSource, Backoff, Call, Options, SyncCore, T, TokenSource
from .errors import StrataError
from .stream import (
    ChangeHook,
    CounterStream,
    MemberHook,
    MessageStream,
    TypingHook,
    PresenceHook,
    RoomStream,
    SeatsStream,
    StateHook,
)
from .types import (
    Booking,
    BookingIn,
    BookingPage,
    ClusterState,
    Compacting,
    Conversation,
    ConversationDeleted,
    ConversationPage,
    Counter,
    DistinctResult,
    Erasure,
    ErasureStatus,
    EventIn,
    EventPage,
    EventState,
    Flushing,
    Health,
    Message,
    MessagePage,
    MessagePosted,
    Order,
    Outbox,
    OutboxRetried,
    ReconcilePass,
    Reconciled,
    Room,
    RoomMember,
    RoomMemberAdd,
    RoomMemberPage,
    RoomMembers,
    RoomMessage,
    RoomMessagePage,
    RoomMessagePosted,
    RoomPresence,
    RoomRead,
    RoomRole,
    SeatMapBitmap,
    SeatMapJson,
    SeatsChangeIn,
    Sequence,
    SequenceRange,
    UserRoom,
    UserRoomPage,
    UserStats,
)


def _options(base_url: str, retries: int, backoff: Optional[Backoff], max_redirects: int,
             timeout: float) -> Options:
    if not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
    return Options(base_url.rstrip("/"), retries, backoff or Backoff(), max_redirects, timeout)


def _reconcile_key(user: Optional[str], conversation_id: Optional[str],
                   counter: Optional[str]) -> Optional[Dict[str, str]]:
    if counter is not None:
        return {"counter": counter}
    if user is not None and conversation_id is not None:
        return {"user": user, "conversation_id": conversation_id}
    if user is not None or conversation_id is not None:
        raise ValueError("reconcile: give user and conversation_id together, or counter")
    return None


def _activity(r: UserRoom, room: Room) -> None:
    r["last_msg_id"] = room["last_msg_id"]
    r["updated"] = room["updated"]
    r["total_messages"] = room["total_messages"]


class Strata:
    """The sync client. ``with Strata(...) as db:`` closes its connections at the end.

    ``token`` is a token or a function returning the current one; ``refresh_token`` is called
    when the token expires within 5 s or the server answers 401, and its token is used from then
    on. ``retries`` counts retries after the first attempt; ``timeout`` is per attempt (s).
    ``transport`` is an ``httpx.BaseTransport`` (tests, custom TLS or proxies).
    """

    def __init__(self, base_url: str, *, token: Optional[TokenSource] = None,
                 refresh_token: Optional[Callable[[], str]] = None, retries: int = 4,
                 backoff: Optional[Backoff] = None, max_redirects: int = 5,
                 timeout: float = 30.0, transport: Optional[httpx.BaseTransport] = None) -> None:
        opts = _options(base_url, retries, backoff, max_redirects, timeout)
        self._core = SyncCore(opts, token, refresh_token, transport)

    def __enter__(self) -> "Strata":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._core.close()

    def request(self, c: Call[T], *, idempotency_key: Optional[str] = None) -> T:
        """Any route (``strata_client.call(...)``): for what this class does not cover yet."""
        return self._core.request(c, idempotency_key)

    # ---- counters and sequences (SPEC §1) ----
    def incr(self, name: str, by: int = 1, *, idempotency_key: Optional[str] = None) -> Counter:
        return self._core.request(R.incr(name, by), idempotency_key)

    def counter(self, name: str) -> Counter:
        return self._core.request(R.counter(name))

    def distinct(self, name: str, member: str, *,
                 idempotency_key: Optional[str] = None) -> DistinctResult:
        return self._core.request(R.distinct(name, member), idempotency_key)

    def next(self, name: str, count: int = 1, *,
             idempotency_key: Optional[str] = None) -> SequenceRange:
        return self._core.request(R.next_(name, count), idempotency_key)

    def sequence(self, name: str) -> Sequence:
        return self._core.request(R.sequence(name))

    # ---- messages and conversations (SPEC §2) ----
    def post_message(self, user: str, conversation_id: str, content: str, *,
                     from_: Optional[str] = None, metadata: Optional[Dict[str, Any]] = None,
                     idempotency_key: Optional[str] = None) -> MessagePosted:
        """Posts a message to a user's history; ``from_`` defaults to the user."""
        return self._core.request(
            R.post_message(user, conversation_id, from_ or user, content, metadata),
            idempotency_key)

    def messages(self, user: str, *, conversation_id: Optional[str] = None,
                 after: Optional[str] = None, before: Optional[str] = None,
                 limit: Optional[int] = None, order: Optional[Order] = None,
                 cursor: Optional[str] = None,
                 include_deleted: Optional[bool] = None) -> MessagePage:
        return self._core.request(
            R.messages(user, conversation_id, after, before, limit, order, cursor,
                       include_deleted))

    def iter_messages(self, user: str, *, conversation_id: Optional[str] = None,
                      after: Optional[str] = None, before: Optional[str] = None,
                      order: Optional[Order] = None, include_deleted: Optional[bool] = None,
                      page_size: int = 1000) -> Iterator[Message]:
        """Every message that matches, page after page (following ``next``)."""
        cursor: Optional[str] = None
        while True:
            page = self.messages(user, conversation_id=conversation_id, after=after,
                                 before=before, limit=page_size, order=order, cursor=cursor,
                                 include_deleted=include_deleted)
            yield from page["messages"]
            cursor = page["next"]
            if not cursor:
                return

    def conversations(self, user: str, *, limit: Optional[int] = None,
                      cursor: Optional[str] = None) -> ConversationPage:
        return self._core.request(R.conversations(user, limit, cursor))

    def conversation(self, user: str, conversation_id: str) -> Conversation:
        return self._core.request(R.conversation(user, conversation_id))

    def stats(self, user: str) -> UserStats:
        return self._core.request(R.stats(user))

    # ---- edits, deletes and erasure (SPEC §2.2) ----
    def edit_message(self, user: str, msg_id: str, *, content: Optional[str] = None,
                     metadata: Optional[Dict[str, Any]] = None,
                     idempotency_key: Optional[str] = None) -> Message:
        """New content and/or metadata (SPEC §2.2); earlier versions go to ``edit_history``."""
        return self._core.request(R.edit_message(user, msg_id, content, metadata), idempotency_key)

    def delete_message(self, user: str, msg_id: str, *,
                       idempotency_key: Optional[str] = None) -> Message:
        """Leaves a tombstone (``seq`` stays gapless); deleting again answers the same one."""
        return self._core.request(R.delete_message(user, msg_id), idempotency_key)

    def delete_conversation(self, user: str, conversation_id: str, *,
                            idempotency_key: Optional[str] = None) -> ConversationDeleted:
        return self._core.request(R.delete_conversation(user, conversation_id), idempotency_key)

    def erase_user(self, user: str, *, idempotency_key: Optional[str] = None) -> Erasure:
        """Erases a user (GDPR art. 17): gone from every answer at once, from storage within
        --erase-within; poll :meth:`erasure` for ``done``."""
        return self._core.request(R.erase_user(user), idempotency_key)

    def erasure(self, erasure_id: str) -> ErasureStatus:
        return self._core.request(R.erasure(erasure_id))

    def edit_room_message(self, room_id: str, msg_id: str, *, content: Optional[str] = None,
                          metadata: Optional[Dict[str, Any]] = None,
                          idempotency_key: Optional[str] = None) -> RoomMessage:
        """The author, a room owner or an admin edits a room's message."""
        return self._core.request(
            R.edit_room_message(room_id, msg_id, content, metadata), idempotency_key)

    def delete_room_message(self, room_id: str, msg_id: str, *,
                            idempotency_key: Optional[str] = None) -> RoomMessage:
        return self._core.request(R.delete_room_message(room_id, msg_id), idempotency_key)

    # ---- rooms (SPEC §2.1) ----
    def create_room(self, room_id: str, members: List[str], *, name: Optional[str] = None,
                    idempotency_key: Optional[str] = None) -> Room:
        """Carries ``?route=room:{id}``; with auth on the token's sub owns it, else members[0]."""
        return self._core.request(R.create_room(room_id, members, name), idempotency_key)

    def room(self, room_id: str) -> Room:
        return self._core.request(R.room(room_id))

    def change_members(self, room_id: str, *, add: Optional[Seq[RoomMemberAdd]] = None,
                       remove: Optional[Seq[str]] = None,
                       idempotency_key: Optional[str] = None) -> RoomMembers:
        """``add`` items are names (role ``member``) or ``{"user", "role"}``; answers the new
        count. Removing the last owner raises :class:`StrataError` 409 ``last_owner``."""
        return self._core.request(R.change_members(room_id, add, remove), idempotency_key)

    def delete_room(self, room_id: str, *, idempotency_key: Optional[str] = None) -> Erasure:
        """An owner (or a global admin) deletes the room and everything in it: 404 at once, its
        messages erased hot and cold in the background; poll :meth:`erasure` for ``done``."""
        return self._core.request(R.delete_room(room_id), idempotency_key)

    def set_room_member_role(self, room_id: str, user: str, role: RoomRole, *,
                             idempotency_key: Optional[str] = None) -> RoomMember:
        """An owner (or a global admin) makes a member ``owner``, ``admin`` or ``member``;
        answers the member. Demoting the last owner raises 409 ``last_owner``; a user not in
        the room, 404."""
        return self._core.request(R.set_room_member_role(room_id, user, role), idempotency_key)

    def room_members(self, room_id: str, *, limit: Optional[int] = None,
                     cursor: Optional[str] = None) -> RoomMemberPage:
        return self._core.request(R.room_members(room_id, limit, cursor))

    def post_room_message(self, room_id: str, from_: str, content: str, *,
                          metadata: Optional[Dict[str, Any]] = None,
                          idempotency_key: Optional[str] = None) -> RoomMessagePosted:
        return self._core.request(R.post_room_message(room_id, from_, content, metadata),
                                  idempotency_key)

    def room_messages(self, room_id: str, *, after: Optional[str] = None,
                      before: Optional[str] = None, limit: Optional[int] = None,
                      order: Optional[Order] = None,
                      cursor: Optional[str] = None,
                      include_deleted: Optional[bool] = None) -> RoomMessagePage:
        return self._core.request(
            R.room_messages(room_id, after, before, limit, order, cursor, include_deleted))

    def typing(self, room_id: str, user: str) -> None:
        """Says ``user`` is typing (SPEC §2.1 v5): the room's subscribers get a ``typing`` frame;
        never stored, at most one frame per user per room per second (call it on every key)."""
        self._core.request(R.typing(room_id, user))

    def room_presence(self, room_id: str) -> RoomPresence:
        """Who is online in the room (SPEC §2.1 v5): the members holding a stream of it on any
        member of the group, sorted; a room stream's ``on_presence`` hears each change."""
        return self._core.request(R.room_presence(room_id))

    def mark_read(self, room_id: str, user: str, seq: int, *,
                  idempotency_key: Optional[str] = None) -> RoomRead:
        """``last_read_seq`` only moves forward."""
        return self._core.request(R.mark_read(room_id, user, seq), idempotency_key)

    def user_rooms(self, user: str, *, limit: Optional[int] = None,
                   cursor: Optional[str] = None) -> UserRoomPage:
        """Newest activity first. Rooms on other groups (``remote``, SPEC §10) get their
        activity from the room itself (one GET each through the same base URL, which a proxy
        routes to the room's group); one that cannot be read now keeps the list's row."""
        page = self._core.request(R.user_rooms(user, limit, cursor))
        for r in page["rooms"]:
            if r.get("remote"):
                try:
                    _activity(r, self._core.request(R.room(r["room_id"])))
                except StrataError:
                    pass
        return page

    # ---- events, seats, bookings (SPEC §4, §4.1) ----
    def create_event(self, event: EventIn, *,
                     idempotency_key: Optional[str] = None) -> EventState:
        """Carries ``?route=event:{id}`` so a proxy creates it on the event's group."""
        return self._core.request(R.create_event(event), idempotency_key)

    def events(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> EventPage:
        return self._core.request(R.events(limit, cursor))

    def event(self, event_id: str) -> EventState:
        return self._core.request(R.event(event_id))

    @overload
    def seat_map(self, event_id: str, section: str,
                 format: Literal["bitmap"] = "bitmap") -> SeatMapBitmap: ...
    @overload
    def seat_map(self, event_id: str, section: str, format: Literal["json"]) -> SeatMapJson: ...
    def seat_map(self, event_id: str, section: str,
                 format: str = "bitmap") -> Union[SeatMapBitmap, SeatMapJson]:
        return self._core.request(R.seat_map(event_id, section, format))

    def bookings(self, event_id: str, *, status: Optional[str] = None,
                 owner: Optional[str] = None, limit: Optional[int] = None,
                 cursor: Optional[str] = None) -> BookingPage:
        """An event's bookings, newest first (one ``status``, one ``owner``); pass a page's
        ``next`` as ``cursor`` for older ones. With auth on, only an admin sees others'."""
        return self._core.request(R.bookings(event_id, status, owner, limit, cursor))

    def book(self, event_id: str, booking: BookingIn, *,
             idempotency_key: Optional[str] = None) -> Booking:
        return self._core.request(R.book(event_id, booking), idempotency_key)

    def booking(self, booking_id: str, event_id: Optional[str] = None) -> Booking:
        """With ``event_id``, the nested route (routed by event through proxies)."""
        return self._core.request(R.booking(booking_id, event_id))

    def confirm(self, booking_id: str, event_id: Optional[str] = None, *,
                idempotency_key: Optional[str] = None) -> Booking:
        return self._core.request(R.confirm(booking_id, event_id), idempotency_key)

    def cancel(self, booking_id: str, event_id: Optional[str] = None, *,
               idempotency_key: Optional[str] = None) -> Booking:
        return self._core.request(R.cancel(booking_id, event_id), idempotency_key)

    def extend(self, event_id: str, booking_id: str, seconds: int, *,
               idempotency_key: Optional[str] = None) -> Booking:
        """Moves a reserved booking's ``expires_at`` later (SPEC §4.1)."""
        return self._core.request(R.extend(event_id, booking_id, seconds), idempotency_key)

    def change_seats(self, event_id: str, booking_id: str, change: SeatsChangeIn, *,
                     idempotency_key: Optional[str] = None) -> Booking:
        """Adds and gives back seats of a reserved booking, all or nothing (SPEC §4.1)."""
        return self._core.request(R.change_seats(event_id, booking_id, change), idempotency_key)

    # ---- operations (SPEC §5, §7, §8) ----
    def health(self) -> Health:
        """``{"status":"ok"}``, or ``"degraded"`` with reasons (a 503, not raised)."""
        return self._core.request(R.health())

    def metrics(self) -> str:
        return self._core.request(R.metrics())

    def openapi(self) -> Dict[str, Any]:
        """The server's OpenAPI 3.1 description (``/v1/openapi.json``)."""
        return self._core.request(R.openapi())

    def cluster(self) -> ClusterState:
        return self._core.request(R.cluster())

    def flush(self, *, idempotency_key: Optional[str] = None) -> Flushing:
        return self._core.request(R.flush(), idempotency_key)

    def compact(self, user: Optional[str] = None, *,
                idempotency_key: Optional[str] = None) -> Compacting:
        return self._core.request(R.compact(user), idempotency_key)

    def outbox(self, *, limit: Optional[int] = None) -> Outbox:
        """The rooms outbox (SPEC §10; 404 without ``--route-url``): pending records and dead
        letters, at most ``limit`` (1..1000, default 100) of each."""
        return self._core.request(R.outbox(limit))

    def retry_outbox(self, record_id: str, *,
                     idempotency_key: Optional[str] = None) -> OutboxRetried:
        """Sends a dead letter again (once its cause is fixed): pending again under a new id.
        404 when there is no such dead letter (one retried already included) or no outbox."""
        return self._core.request(R.retry_outbox(record_id), idempotency_key)

    @overload
    def reconcile(self, *, idempotency_key: Optional[str] = None) -> ReconcilePass: ...
    @overload
    def reconcile(self, *, user: str, conversation_id: str,
                  idempotency_key: Optional[str] = None) -> Reconciled: ...
    @overload
    def reconcile(self, *, counter: str,
                  idempotency_key: Optional[str] = None) -> Reconciled: ...
    def reconcile(self, *, user: Optional[str] = None, conversation_id: Optional[str] = None,
                  counter: Optional[str] = None,
                  idempotency_key: Optional[str] = None) -> Union[ReconcilePass, Reconciled]:
        """One key: recounted now. No key: a pass over every key starts in the background."""
        key = _reconcile_key(user, conversation_id, counter)
        if key is None:
            return self._core.request(R.reconcile_all(), idempotency_key)
        return self._core.request(R.reconcile_key(key), idempotency_key)


class AsyncStrata:
    """The asyncio client: the same routes as :class:`Strata`, awaited, and live streams.

    ``token`` and ``refresh_token`` may be plain or async functions. ``transport`` is an
    ``httpx.AsyncBaseTransport``. ``async with AsyncStrata(...) as db:`` closes it at the end.
    """

    def __init__(self, base_url: str, *, token: Optional[AsyncTokenSource] = None,
                 refresh_token: Optional[Callable[[], Union[str, Awaitable[str]]]] = None,
                 retries: int = 4, backoff: Optional[Backoff] = None, max_redirects: int = 5,
                 timeout: float = 30.0,
                 transport: Optional[httpx.AsyncBaseTransport] = None) -> None:
        opts = _options(base_url, retries, backoff, max_redirects, timeout)
        self._core = AsyncCore(opts, token, refresh_token, transport)

    async def __aenter__(self) -> "AsyncStrata":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._core.aclose()

    async def request(self, c: Call[T], *, idempotency_key: Optional[str] = None) -> T:
        """Any route (``strata_client.call(...)``): for what this class does not cover yet."""
        return await self._core.request(c, idempotency_key)

    # ---- counters and sequences (SPEC §1) ----
    async def incr(self, name: str, by: int = 1, *,
                   idempotency_key: Optional[str] = None) -> Counter:
        return await self._core.request(R.incr(name, by), idempotency_key)

    async def counter(self, name: str) -> Counter:
        return await self._core.request(R.counter(name))

    async def distinct(self, name: str, member: str, *,
                       idempotency_key: Optional[str] = None) -> DistinctResult:
        return await self._core.request(R.distinct(name, member), idempotency_key)

    async def next(self, name: str, count: int = 1, *,
                   idempotency_key: Optional[str] = None) -> SequenceRange:
        return await self._core.request(R.next_(name, count), idempotency_key)

    async def sequence(self, name: str) -> Sequence:
        return await self._core.request(R.sequence(name))

    # ---- messages and conversations (SPEC §2) ----
    async def post_message(self, user: str, conversation_id: str, content: str, *,
                           from_: Optional[str] = None, metadata: Optional[Dict[str, Any]] = None,
                           idempotency_key: Optional[str] = None) -> MessagePosted:
        """Posts a message to a user's history; ``from_`` defaults to the user."""
        return await self._core.request(
            R.post_message(user, conversation_id, from_ or user, content, metadata),
            idempotency_key)

    async def messages(self, user: str, *, conversation_id: Optional[str] = None,
                       after: Optional[str] = None, before: Optional[str] = None,
                       limit: Optional[int] = None, order: Optional[Order] = None,
                       cursor: Optional[str] = None,
                       include_deleted: Optional[bool] = None) -> MessagePage:
        return await self._core.request(
            R.messages(user, conversation_id, after, before, limit, order, cursor,
                       include_deleted))

    async def iter_messages(self, user: str, *, conversation_id: Optional[str] = None,
                            after: Optional[str] = None, before: Optional[str] = None,
                            order: Optional[Order] = None,
                            include_deleted: Optional[bool] = None,
                            page_size: int = 1000) -> AsyncIterator[Message]:
        """Every message that matches, page after page (following ``next``)."""
        cursor: Optional[str] = None
        while True:
            page = await self.messages(user, conversation_id=conversation_id, after=after,
                                       before=before, limit=page_size, order=order,
                                       cursor=cursor, include_deleted=include_deleted)
            for m in page["messages"]:
                yield m
            cursor = page["next"]
            if not cursor:
                return

    async def conversations(self, user: str, *, limit: Optional[int] = None,
                            cursor: Optional[str] = None) -> ConversationPage:
        return await self._core.request(R.conversations(user, limit, cursor))

    async def conversation(self, user: str, conversation_id: str) -> Conversation:
        return await self._core.request(R.conversation(user, conversation_id))

    async def stats(self, user: str) -> UserStats:
        return await self._core.request(R.stats(user))

    # ---- edits, deletes and erasure (SPEC §2.2) ----
    async def edit_message(self, user: str, msg_id: str, *, content: Optional[str] = None,
                           metadata: Optional[Dict[str, Any]] = None,
                           idempotency_key: Optional[str] = None) -> Message:
        """New content and/or metadata (SPEC §2.2); earlier versions go to ``edit_history``."""
        return await self._core.request(
            R.edit_message(user, msg_id, content, metadata), idempotency_key)

    async def delete_message(self, user: str, msg_id: str, *,
                             idempotency_key: Optional[str] = None) -> Message:
        """Leaves a tombstone (``seq`` stays gapless); deleting again answers the same one."""
        return await self._core.request(R.delete_message(user, msg_id), idempotency_key)

    async def delete_conversation(self, user: str, conversation_id: str, *,
                                  idempotency_key: Optional[str] = None) -> ConversationDeleted:
        return await self._core.request(
            R.delete_conversation(user, conversation_id), idempotency_key)

    async def erase_user(self, user: str, *, idempotency_key: Optional[str] = None) -> Erasure:
        """Erases a user (GDPR art. 17): gone from every answer at once, from storage within
        --erase-within; poll :meth:`erasure` for ``done``."""
        return await self._core.request(R.erase_user(user), idempotency_key)

    async def erasure(self, erasure_id: str) -> ErasureStatus:
        return await self._core.request(R.erasure(erasure_id))

    async def edit_room_message(self, room_id: str, msg_id: str, *, content: Optional[str] = None,
                                metadata: Optional[Dict[str, Any]] = None,
                                idempotency_key: Optional[str] = None) -> RoomMessage:
        """The author, a room owner or an admin edits a room's message."""
        return await self._core.request(
            R.edit_room_message(room_id, msg_id, content, metadata), idempotency_key)

    async def delete_room_message(self, room_id: str, msg_id: str, *,
                                  idempotency_key: Optional[str] = None) -> RoomMessage:
        return await self._core.request(R.delete_room_message(room_id, msg_id), idempotency_key)

    # ---- rooms (SPEC §2.1) ----
    async def create_room(self, room_id: str, members: List[str], *, name: Optional[str] = None,
                          idempotency_key: Optional[str] = None) -> Room:
        """Carries ``?route=room:{id}``; with auth on the token's sub owns it, else members[0]."""
        return await self._core.request(R.create_room(room_id, members, name), idempotency_key)

    async def room(self, room_id: str) -> Room:
        return await self._core.request(R.room(room_id))

    async def change_members(self, room_id: str, *, add: Optional[Seq[RoomMemberAdd]] = None,
                             remove: Optional[Seq[str]] = None,
                             idempotency_key: Optional[str] = None) -> RoomMembers:
        """As :meth:`Strata.change_members`."""
        return await self._core.request(R.change_members(room_id, add, remove), idempotency_key)

    async def delete_room(self, room_id: str, *,
                          idempotency_key: Optional[str] = None) -> Erasure:
        """As :meth:`Strata.delete_room`."""
        return await self._core.request(R.delete_room(room_id), idempotency_key)

    async def set_room_member_role(self, room_id: str, user: str, role: RoomRole, *,
                                   idempotency_key: Optional[str] = None) -> RoomMember:
        """As :meth:`Strata.set_room_member_role`."""
        return await self._core.request(R.set_room_member_role(room_id, user, role),
                                        idempotency_key)

    async def room_members(self, room_id: str, *, limit: Optional[int] = None,
                           cursor: Optional[str] = None) -> RoomMemberPage:
        return await self._core.request(R.room_members(room_id, limit, cursor))

    async def post_room_message(self, room_id: str, from_: str, content: str, *,
                                metadata: Optional[Dict[str, Any]] = None,
                                idempotency_key: Optional[str] = None) -> RoomMessagePosted:
        return await self._core.request(R.post_room_message(room_id, from_, content, metadata),
                                        idempotency_key)

    async def room_messages(self, room_id: str, *, after: Optional[str] = None,
                            before: Optional[str] = None, limit: Optional[int] = None,
                            order: Optional[Order] = None,
                            cursor: Optional[str] = None,
                            include_deleted: Optional[bool] = None) -> RoomMessagePage:
        return await self._core.request(
            R.room_messages(room_id, after, before, limit, order, cursor, include_deleted))

    async def typing(self, room_id: str, user: str) -> None:
        """As :meth:`Strata.typing`."""
        await self._core.request(R.typing(room_id, user))

    async def room_presence(self, room_id: str) -> RoomPresence:
        """As :meth:`Strata.room_presence`."""
        return await self._core.request(R.room_presence(room_id))

    async def mark_read(self, room_id: str, user: str, seq: int, *,
                        idempotency_key: Optional[str] = None) -> RoomRead:
        """``last_read_seq`` only moves forward."""
        return await self._core.request(R.mark_read(room_id, user, seq), idempotency_key)

    async def user_rooms(self, user: str, *, limit: Optional[int] = None,
                         cursor: Optional[str] = None) -> UserRoomPage:
        """Newest activity first; remote rooms as in :meth:`Strata.user_rooms`."""
        page = await self._core.request(R.user_rooms(user, limit, cursor))
        remote = [r for r in page["rooms"] if r.get("remote")]
        rooms = await asyncio.gather(*(self._core.request(R.room(r["room_id"])) for r in remote),
                                     return_exceptions=True)
        for r, room in zip(remote, rooms):
            if not isinstance(room, BaseException):
                _activity(r, room)
        return page

    # ---- events, seats, bookings (SPEC §4, §4.1) ----
    async def create_event(self, event: EventIn, *,
                           idempotency_key: Optional[str] = None) -> EventState:
        """Carries ``?route=event:{id}`` so a proxy creates it on the event's group."""
        return await self._core.request(R.create_event(event), idempotency_key)

    async def events(self, *, limit: Optional[int] = None,
                     cursor: Optional[str] = None) -> EventPage:
        return await self._core.request(R.events(limit, cursor))

    async def event(self, event_id: str) -> EventState:
        return await self._core.request(R.event(event_id))

    @overload
    async def seat_map(self, event_id: str, section: str,
                       format: Literal["bitmap"] = "bitmap") -> SeatMapBitmap: ...
    @overload
    async def seat_map(self, event_id: str, section: str,
                       format: Literal["json"]) -> SeatMapJson: ...
    async def seat_map(self, event_id: str, section: str,
                       format: str = "bitmap") -> Union[SeatMapBitmap, SeatMapJson]:
        return await self._core.request(R.seat_map(event_id, section, format))

    async def bookings(self, event_id: str, *, status: Optional[str] = None,
                       owner: Optional[str] = None, limit: Optional[int] = None,
                       cursor: Optional[str] = None) -> BookingPage:
        return await self._core.request(R.bookings(event_id, status, owner, limit, cursor))

    async def book(self, event_id: str, booking: BookingIn, *,
                   idempotency_key: Optional[str] = None) -> Booking:
        return await self._core.request(R.book(event_id, booking), idempotency_key)

    async def booking(self, booking_id: str, event_id: Optional[str] = None) -> Booking:
        return await self._core.request(R.booking(booking_id, event_id))

    async def confirm(self, booking_id: str, event_id: Optional[str] = None, *,
                      idempotency_key: Optional[str] = None) -> Booking:
        return await self._core.request(R.confirm(booking_id, event_id), idempotency_key)

    async def cancel(self, booking_id: str, event_id: Optional[str] = None, *,
                     idempotency_key: Optional[str] = None) -> Booking:
        return await self._core.request(R.cancel(booking_id, event_id), idempotency_key)

    async def extend(self, event_id: str, booking_id: str, seconds: int, *,
                     idempotency_key: Optional[str] = None) -> Booking:
        return await self._core.request(R.extend(event_id, booking_id, seconds), idempotency_key)

    async def change_seats(self, event_id: str, booking_id: str, change: SeatsChangeIn, *,
                           idempotency_key: Optional[str] = None) -> Booking:
        return await self._core.request(R.change_seats(event_id, booking_id, change),
                                        idempotency_key)

    # ---- operations (SPEC §5, §7, §8) ----
    async def health(self) -> Health:
        return await self._core.request(R.health())

    async def metrics(self) -> str:
        return await self._core.request(R.metrics())

    async def openapi(self) -> Dict[str, Any]:
        return await self._core.request(R.openapi())

    async def cluster(self) -> ClusterState:
        return await self._core.request(R.cluster())

    async def flush(self, *, idempotency_key: Optional[str] = None) -> Flushing:
        return await self._core.request(R.flush(), idempotency_key)

    async def compact(self, user: Optional[str] = None, *,
                      idempotency_key: Optional[str] = None) -> Compacting:
        return await self._core.request(R.compact(user), idempotency_key)

    async def outbox(self, *, limit: Optional[int] = None) -> Outbox:
        """As :meth:`Strata.outbox`."""
        return await self._core.request(R.outbox(limit))

    async def retry_outbox(self, record_id: str, *,
                           idempotency_key: Optional[str] = None) -> OutboxRetried:
        """As :meth:`Strata.retry_outbox`."""
        return await self._core.request(R.retry_outbox(record_id), idempotency_key)

    @overload
    async def reconcile(self, *, idempotency_key: Optional[str] = None) -> ReconcilePass: ...
    @overload
    async def reconcile(self, *, user: str, conversation_id: str,
                        idempotency_key: Optional[str] = None) -> Reconciled: ...
    @overload
    async def reconcile(self, *, counter: str,
                        idempotency_key: Optional[str] = None) -> Reconciled: ...
    async def reconcile(self, *, user: Optional[str] = None,
                        conversation_id: Optional[str] = None, counter: Optional[str] = None,
                        idempotency_key: Optional[str] = None
                        ) -> Union[ReconcilePass, Reconciled]:
        key = _reconcile_key(user, conversation_id, counter)
        if key is None:
            return await self._core.request(R.reconcile_all(), idempotency_key)
        return await self._core.request(R.reconcile_key(key), idempotency_key)

    # ---- live streams (SPEC §3) ----
    def stream_messages(self, user: str, *, conversation_id: Optional[str] = None,
                        after: Optional[str] = None,
                        on_state: Optional[StateHook] = None,
                        on_change: Optional[ChangeHook] = None) -> MessageStream:
        """A user's messages as an async iterator: each message once, in msg_id order.

        ``after=None``: only messages posted from now on (the client reads the newest msg_id
        first and resumes after it, so this holds on every server version); ``after="0"``: the
        whole history, then live; ``after=ID``: everything after that message. It reconnects by
        itself and resumes after the last message it yielded. ``on_change`` hears of edits and
        deletes ("edited"/"deleted", the message's new state).
        """
        return MessageStream(self._core, user, conversation_id, after, on_state, on_change)

    def stream_room(self, room_id: str, *, after: Optional[str] = None,
                    on_state: Optional[StateHook] = None,
                    on_change: Optional[ChangeHook] = None,
                    on_member: Optional[MemberHook] = None,
                    on_typing: Optional[TypingHook] = None,
                    on_presence: Optional[PresenceHook] = None) -> RoomStream:
        """A room's messages as an async iterator, as :meth:`stream_messages` (``after`` alike);
        ``on_member(user, change)`` hears of membership changes, ``on_typing(user, until)`` of
        members typing and ``on_presence(user, online)`` of members coming online or going
        offline (both ephemeral). It ends with a 403 :class:`StrataError` once the reader is
        removed from the room."""
        return RoomStream(self._core, room_id, after, on_state, on_change, on_member, on_typing,
                          on_presence)

    def stream_seats(self, event_id: str, *, on_state: Optional[StateHook] = None) -> SeatsStream:
        """An event's seats: a :class:`SeatsSnapshot` on every (re)subscribe, then changes."""
        return SeatsStream(self._core, event_id, on_state)

    def stream_counter(self, name: str, *, on_state: Optional[StateHook] = None) -> CounterStream:
        """A counter's value on every (re)subscribe, then every change."""
        return CounterStream(self._core, name, on_state)

