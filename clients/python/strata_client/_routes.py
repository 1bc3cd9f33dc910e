# SPDX-License-Identifier: MIT
"""Every route as a :class:`Call` (path, query, body, answer type), used by both clients."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union
from typing import Sequence as Seq

from ._core import Call, call, enc
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
    UserRoomPage,
    UserStats,
)


def _name(kind: str, v: str) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"{kind} must be a non-empty string, not {v!r}")
    return enc(v)


# ---- counters and sequences (SPEC §1) ----
def incr(name: str, by: int) -> Call[Counter]:
    return call("POST", f"/v1/counters/{_name('name', name)}/incr", body={"by": by})


def counter(name: str) -> Call[Counter]:
    return call("GET", f"/v1/counters/{_name('name', name)}")


def distinct(name: str, member: str) -> Call[DistinctResult]:
    return call("POST", f"/v1/counters/{_name('name', name)}/distinct", body={"member": member})


def next_(name: str, count: int) -> Call[SequenceRange]:
    return call("POST", f"/v1/sequences/{_name('name', name)}/next", body={"count": count})


def sequence(name: str) -> Call[Sequence]:
    return call("GET", f"/v1/sequences/{_name('name', name)}")


# ---- messages and conversations (SPEC §2) ----
def post_message(user: str, conversation_id: str, from_: str, content: str,
                 metadata: Optional[Dict[str, Any]]) -> Call[MessagePosted]:
    body: Dict[str, Any] = {"conversation_id": conversation_id, "from": from_, "content": content}
    if metadata is not None:
        body["metadata"] = metadata
    return call("POST", f"/v1/users/{_name('user', user)}/messages", body=body)


def _deleted(include_deleted: Optional[bool]) -> Optional[str]:
    return None if include_deleted is None else ("true" if include_deleted else "false")


def messages(user: str, conversation_id: Optional[str], after: Optional[str],
             before: Optional[str], limit: Optional[int], order: Optional[Order],
             cursor: Optional[str], include_deleted: Optional[bool] = None) -> Call[MessagePage]:
    return call("GET", f"/v1/users/{_name('user', user)}/messages",
                query={"conversation_id": conversation_id, "after": after, "before": before,
                       "limit": limit, "order": order, "cursor": cursor,
                       "include_deleted": _deleted(include_deleted)})


# ---- edits, deletes and erasure (SPEC §2.2) ----
def _edit_body(content: Optional[str], metadata: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if content is not None:
        body["content"] = content
    if metadata is not None:
        body["metadata"] = metadata
    if not body:
        raise ValueError("an edit needs content or metadata")
    return body


def edit_message(user: str, msg_id: str, content: Optional[str],
                 metadata: Optional[Dict[str, Any]]) -> Call[Message]:
    return call("PATCH", f"/v1/users/{_name('user', user)}/messages/{_name('msg_id', msg_id)}",
                body=_edit_body(content, metadata))


def delete_message(user: str, msg_id: str) -> Call[Message]:
    return call("DELETE", f"/v1/users/{_name('user', user)}/messages/{_name('msg_id', msg_id)}")


def delete_conversation(user: str, conversation_id: str) -> Call[ConversationDeleted]:
    return call("DELETE", f"/v1/users/{_name('user', user)}/conversations/"
                f"{_name('conversation_id', conversation_id)}")


def erase_user(user: str) -> Call[Erasure]:
    return call("DELETE", f"/v1/users/{_name('user', user)}")


def erasure(erasure_id: str) -> Call[ErasureStatus]:
    return call("GET", f"/v1/admin/erasures/{_name('erasure_id', erasure_id)}")


def conversations(user: str, limit: Optional[int], cursor: Optional[str]) -> Call[ConversationPage]:
    return call("GET", f"/v1/users/{_name('user', user)}/conversations",
                query={"limit": limit, "cursor": cursor})


def conversation(user: str, conversation_id: str) -> Call[Conversation]:
    return call("GET", f"/v1/users/{_name('user', user)}/conversations/"
                f"{_name('conversation_id', conversation_id)}")


def stats(user: str) -> Call[UserStats]:
    return call("GET", f"/v1/users/{_name('user', user)}/stats")


# ---- rooms (SPEC §2.1) ----
def create_room(room_id: str, members: List[str], name: Optional[str]) -> Call[Room]:
    body: Dict[str, Any] = {"room_id": room_id, "members": members}
    if name is not None:
        body["name"] = name
    # ?route=room:{id}: a proxy (SPEC §10) creates the room on the group that owns it
    return call("POST", "/v1/rooms", body=body, query={"route": f"room:{room_id}"})


def room(room_id: str) -> Call[Room]:
    return call("GET", f"/v1/rooms/{_name('room_id', room_id)}")


def _names(what: str, v: Optional[Seq[Any]]) -> Optional[List[Any]]:
    # a str is a Sequence too: "bob" would go out as ["b", "o", "b"]
    if isinstance(v, str):
        raise ValueError(f"{what} must be a list, not the string {v!r}")
    return None if v is None else list(v)


def change_members(room_id: str, add: Optional[Seq[RoomMemberAdd]],
                   remove: Optional[Seq[str]]) -> Call[RoomMembers]:
    body: Dict[str, Any] = {}
    if add is not None:
        body["add"] = _names("add", add)
    if remove is not None:
        body["remove"] = _names("remove", remove)
    return call("POST", f"/v1/rooms/{_name('room_id', room_id)}/members", body=body)


def delete_room(room_id: str) -> Call[Erasure]:
    return call("DELETE", f"/v1/rooms/{_name('room_id', room_id)}")


def set_room_member_role(room_id: str, user: str, role: RoomRole) -> Call[RoomMember]:
    return call("PATCH", f"/v1/rooms/{_name('room_id', room_id)}/members/{_name('user', user)}",
                body={"role": role})


def room_members(room_id: str, limit: Optional[int],
                 cursor: Optional[str]) -> Call[RoomMemberPage]:
    return call("GET", f"/v1/rooms/{_name('room_id', room_id)}/members",
                query={"limit": limit, "cursor": cursor})


def post_room_message(room_id: str, from_: str, content: str,
                      metadata: Optional[Dict[str, Any]]) -> Call[RoomMessagePosted]:
    body: Dict[str, Any] = {"from": from_, "content": content}
    if metadata is not None:
        body["metadata"] = metadata
    return call("POST", f"/v1/rooms/{_name('room_id', room_id)}/messages", body=body)


def room_messages(room_id: str, after: Optional[str], before: Optional[str],
                  limit: Optional[int], order: Optional[Order],
                  cursor: Optional[str],
                  include_deleted: Optional[bool] = None) -> Call[RoomMessagePage]:
    return call("GET", f"/v1/rooms/{_name('room_id', room_id)}/messages",
                query={"after": after, "before": before, "limit": limit, "order": order,
                       "cursor": cursor, "include_deleted": _deleted(include_deleted)})


def edit_room_message(room_id: str, msg_id: str, content: Optional[str],
                      metadata: Optional[Dict[str, Any]]) -> Call[RoomMessage]:
    return call("PATCH", f"/v1/rooms/{_name('room_id', room_id)}/messages/"
                f"{_name('msg_id', msg_id)}", body=_edit_body(content, metadata))


def delete_room_message(room_id: str, msg_id: str) -> Call[RoomMessage]:
    return call("DELETE", f"/v1/rooms/{_name('room_id', room_id)}/messages/"
                f"{_name('msg_id', msg_id)}")


def typing(room_id: str, user: str) -> Call[None]:
    return call("POST", f"/v1/rooms/{_name('room_id', room_id)}/typing", body={"user": user})


def room_presence(room_id: str) -> Call[RoomPresence]:
    return call("GET", f"/v1/rooms/{_name('room_id', room_id)}/presence")


def mark_read(room_id: str, user: str, seq: int) -> Call[RoomRead]:
    return call("POST", f"/v1/rooms/{_name('room_id', room_id)}/read",
                body={"user": user, "seq": seq})


def user_rooms(user: str, limit: Optional[int], cursor: Optional[str]) -> Call[UserRoomPage]:
    return call("GET", f"/v1/users/{_name('user', user)}/rooms",
                query={"limit": limit, "cursor": cursor})


# ---- events, seats, bookings (SPEC §4, §4.1) ----
def create_event(e: EventIn) -> Call[EventState]:
    # ?route=event:{id}: a proxy (SPEC §10) creates the event on the group that owns it
    return call("POST", "/v1/events", body=e, query={"route": f"event:{e['event_id']}"})


def events(limit: Optional[int], cursor: Optional[str]) -> Call[EventPage]:
    return call("GET", "/v1/events", query={"limit": limit, "cursor": cursor})


def event(event_id: str) -> Call[EventState]:
    return call("GET", f"/v1/events/{_name('event_id', event_id)}")


def seat_map(event_id: str, section: str,
             fmt: str) -> Call[Union[SeatMapBitmap, SeatMapJson]]:
    return call("GET", f"/v1/events/{_name('event_id', event_id)}/sections/"
                f"{_name('section', section)}/seats", query={"format": fmt})


def bookings(event_id: str, status: Optional[str], owner: Optional[str], limit: Optional[int],
             cursor: Optional[str]) -> Call[BookingPage]:
    return call("GET", f"/v1/events/{_name('event_id', event_id)}/bookings",
                query={"status": status, "owner": owner, "limit": limit, "cursor": cursor})


def book(event_id: str, b: BookingIn) -> Call[Booking]:
    return call("POST", f"/v1/events/{_name('event_id', event_id)}/bookings", body=b)


def _booking_path(booking_id: str, event_id: Optional[str]) -> str:
    bid = _name("booking_id", booking_id)
    if event_id is not None:
        return f"/v1/events/{_name('event_id', event_id)}/bookings/{bid}"
    return f"/v1/bookings/{bid}"


def booking(booking_id: str, event_id: Optional[str]) -> Call[Booking]:
    return call("GET", _booking_path(booking_id, event_id))


def confirm(booking_id: str, event_id: Optional[str]) -> Call[Booking]:
    return call("POST", _booking_path(booking_id, event_id) + "/confirm")


def cancel(booking_id: str, event_id: Optional[str]) -> Call[Booking]:
    return call("POST", _booking_path(booking_id, event_id) + "/cancel")


def extend(event_id: str, booking_id: str, seconds: int) -> Call[Booking]:
    return call("POST", _booking_path(booking_id, event_id) + "/extend",
                body={"seconds": seconds})


def change_seats(event_id: str, booking_id: str, change: SeatsChangeIn) -> Call[Booking]:
    return call("POST", _booking_path(booking_id, event_id) + "/seats", body=change)


# ---- operations (SPEC §5, §7, §8) ----
def health() -> Call[Health]:
    return call("GET", "/healthz", accept=(503,))


def metrics() -> Call[str]:
    return call("GET", "/metrics", text=True)


def cluster() -> Call[ClusterState]:
    return call("GET", "/v1/cluster")


def flush() -> Call[Flushing]:
    return call("POST", "/v1/admin/flush")


def compact(user: Optional[str]) -> Call[Compacting]:
    return call("POST", "/v1/admin/compact", body={"user": user} if user else None)


def reconcile_key(key: Dict[str, str]) -> Call[Reconciled]:
    return call("POST", "/v1/admin/reconcile", body=key)


def reconcile_all() -> Call[ReconcilePass]:
    return call("POST", "/v1/admin/reconcile")


def outbox(limit: Optional[int]) -> Call[Outbox]:
    return call("GET", "/v1/admin/outbox", query={"limit": limit})


def retry_outbox(record_id: str) -> Call[OutboxRetried]:
    return call("POST", f"/v1/admin/outbox/{_name('id', record_id)}/retry")


def openapi() -> Call[Dict[str, Any]]:
    return call("GET", "/v1/openapi.json")
