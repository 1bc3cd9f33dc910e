# SPDX-License-Identifier: MIT
"""The shapes of strata's answers (SPEC v4; docs/openapi.yaml is the reference).

Answers are the JSON the server sent, typed as TypedDicts (so unknown fields the server may add
later are kept, and nothing is converted on the way). 64-bit ids (``msg_id``, ``booking_id``)
are strings of decimal digits; timestamps are Unix microseconds.
"""
from __future__ import annotations

from typing import Any, Dict, List, Literal, NotRequired, Optional, Required, TypedDict, Union

Id64 = str
"""A 64-bit id as a string of decimal digits."""
Micros = int
"""Unix time in microseconds (UTC)."""


class Counter(TypedDict):
    name: str
    value: int


class DistinctResult(TypedDict):
    name: str
    value: int
    added: bool


class SequenceRange(TypedDict):
    name: str
    first: int
    last: int


class Sequence(TypedDict):
    name: str
    last: int


class MessagePosted(TypedDict):
    msg_id: Id64
    conversation_id: str
    seq: int
    timestamp: Micros


class MessageVersion(TypedDict):
    """One earlier version of an edited message (SPEC §2.2), oldest first."""
    content: Optional[str]
    metadata: Optional[Dict[str, Any]]
    edited_at: Optional[Micros]


# Functional form: "from" is a Python keyword (read it as m["from"]). content and metadata are
# None on a tombstone (deleted_at set); edited_at, edit_history and deleted_at come with edits and
# deletes (SPEC §2.2).
Message = TypedDict(
    "Message",
    {
        "msg_id": Id64,
        "conversation_id": str,
        "from": str,
        "timestamp": Micros,
        "seq": int,
        "content": Optional[str],
        "metadata": Optional[Dict[str, Any]],
        "edited_at": NotRequired[Optional[Micros]],
        "edit_history": NotRequired[List[MessageVersion]],
        "deleted_at": NotRequired[Optional[Micros]],
    },
)


class MessagePage(TypedDict):
    messages: List[Message]
    next: Optional[str]


class Conversation(TypedDict):
    conversation_id: str
    first_msg_id: Id64
    last_msg_id: Id64
    created: Micros
    updated: Micros
    total_messages: int


class ConversationPage(TypedDict):
    conversations: List[Conversation]
    next: Optional[str]


class UserStats(TypedDict):
    total_messages: int
    conversations: int
    hot_messages: int
    cold_messages: int
    cold_bytes: int


class SeatStats(TypedDict):
    available: int
    reserved: int
    sold: int
    total: int


class EventStats(SeatStats):
    updated_at: Micros


class _SectionStateBase(TypedDict):
    price: int
    stats: SeatStats


class SectionState(_SectionStateBase, total=False):
    """A seated section has rows and cols; a general admission one has capacity."""

    rows: int
    cols: int
    capacity: int


class Sellout(TypedDict):
    first_ticket_reserved_at: Optional[Micros]
    fully_reserved_at: Optional[Micros]
    duration_seconds: Optional[float]


class _EventStateBase(TypedDict):
    event_id: str
    name: Optional[str]
    event_stats: EventStats
    sections: Dict[str, SectionState]
    sellout: Sellout


class EventState(_EventStateBase, total=False):
    hold_seconds: int
    created_at: Micros


class EventSummary(TypedDict):
    event_id: str
    name: Optional[str]
    event_stats: EventStats


class EventPage(TypedDict):
    events: List[EventSummary]
    next: Optional[str]


class BookingPage(TypedDict):
    """An event's bookings, newest first (SPEC §4.2)."""
    bookings: List["Booking"]
    next: Optional[str]


class SeatMapBitmap(TypedDict):
    rows: int
    cols: int
    encoding: Literal["2bit-base64"]
    seats: str


class SeatMapJson(TypedDict):
    rows: int
    cols: int
    seats: List[List[int]]
    """seats[row-1][col-1]: 0 available, 1 reserved, 2 sold"""


class BookingItem(TypedDict):
    section: str
    seats: List[str]
    """empty in a general admission section"""
    quantity: int


BookingStatus = Literal["reserved", "sold", "cancelled", "expired"]


class Booking(TypedDict):
    booking_id: Id64
    event_id: str
    section: str
    """section and seats describe the first of items"""
    seats: List[str]
    items: List[BookingItem]
    status: BookingStatus
    total_price: int
    created_at: Micros
    expires_at: Micros
    owner: str
    """the token subject that made the booking ("" when auth was off)"""
    finished_at: Optional[Micros]
    """when it was sold, cancelled or expired; None while reserved"""


class _HealthBase(TypedDict):
    status: Literal["ok", "degraded"]


class Health(_HealthBase, total=False):
    reasons: List[str]


class ClusterMember(TypedDict):
    id: int
    raft: str
    http: str
    role: str


class ClusterState(TypedDict):
    self: int
    leader: Optional[int]
    term: int
    commit_index: int
    applied_index: int
    members: List[ClusterMember]


class Flushing(TypedDict):
    flushing: int


class Compacting(TypedDict):
    compacting: int
    """users queued for a major compaction"""


class Reconciled(TypedDict):
    reconciled: int
    drift: int


# "pass" is a Python keyword: read it as r["pass"]
ReconcilePass = TypedDict("ReconcilePass", {"pass": int})


class _ErrorBodyBase(TypedDict):
    code: str
    """e.g. not_found, forbidden, conflict, seats_unavailable, last_owner (409: a room's last
    owner would leave or be demoted)"""
    message: str


class SeatsTaken(TypedDict):
    section: str
    seats: List[str]


class ErrorBody(_ErrorBodyBase, total=False):
    """The ``error`` object of every error answer (SPEC §0), with the extra fields some carry."""

    field: str
    """400: the body field at fault, as a path ("bye", "items[0].bye"), when one is"""
    seats: List[str]
    """409 seats_unavailable: the seats that are taken"""
    items: List[SeatsTaken]
    """409 seats_unavailable: per section that could not be served, its taken seats"""
    booking: Booking
    """409 conflict on confirm/cancel: the booking as it is"""


# ---- what callers send ----

class _SectionInBase(TypedDict):
    name: str


class SectionIn(_SectionInBase, total=False):
    """A seated section (rows and cols) or a general admission one (capacity)."""

    rows: int
    cols: int
    capacity: int
    price: int


class _EventInBase(TypedDict):
    event_id: str
    sections: List[SectionIn]


class EventIn(_EventInBase, total=False):
    name: Optional[str]
    hold_seconds: int


class BookingItemIn(TypedDict, total=False):
    """One section's named seats, or a quantity (best available; general admission: places)."""

    section: str
    seats: List[str]
    quantity: int


class BookingIn(TypedDict, total=False):
    """One section (section + seats or quantity), or ``items`` over several (all or nothing)."""

    section: str
    seats: List[str]
    quantity: int
    items: List[BookingItemIn]
    allow_orphans: bool


class SeatsChangeIn(TypedDict, total=False):
    """A change to a reserved booking's seats in one section (default: its first)."""

    section: str
    add: List[str]
    remove: List[str]
    add_quantity: int
    remove_quantity: int
    allow_orphans: bool


Order = Literal["asc", "desc"]
JsonValue = Union[None, bool, int, float, str, List[Any], Dict[str, Any]]


# ---- deletes and erasure (SPEC §2.2) ----
class ConversationDeleted(TypedDict):
    deleted: int


class Erasure(TypedDict):
    erasure_id: str


class ErasureStatus(TypedDict, total=False):
    erasure_id: str
    user: str  # a user's erasure
    room_id: str  # a deleted room's
    status: Required[Literal["pending", "done"]]


# ---- rooms (SPEC §2.1) ----
class Room(TypedDict):
    room_id: str
    name: Optional[str]
    created: Micros
    updated: Micros
    first_msg_id: Optional[Id64]
    last_msg_id: Optional[Id64]
    total_messages: int
    members: int
    """How many members."""


class RoomMembers(TypedDict):
    room_id: str
    members: int


RoomRole = Literal["owner", "admin", "member"]
"""A member's role in a room (SPEC §2.1 v5): owners manage everything and change roles; admins
add and remove members (not owners) and edit or delete any message; members post, read and
leave."""


class RoomMemberIn(TypedDict):
    """An ``add`` item with a role (``owner`` only when an owner adds); a plain name is a
    ``member``."""
    user: str
    role: NotRequired[RoomRole]


RoomMemberAdd = Union[str, RoomMemberIn]
"""An ``add`` item of :meth:`~strata_client.Strata.change_members`: a name, or a name and a role.
Adding someone already in the room changes nothing (roles change by ``set_room_member_role``)."""


class RoomMember(TypedDict):
    """A room's member; also the answer of ``set_room_member_role``."""
    user: str
    role: RoomRole
    joined_at: Micros
    last_read_seq: int
    unread: int


class RoomMemberPage(TypedDict):
    members: List[RoomMember]
    next: Optional[str]


class RoomMessagePosted(TypedDict):
    msg_id: Id64
    room_id: str
    seq: int
    timestamp: Micros


# A Message with room_id in place of conversation_id.
RoomMessage = TypedDict(
    "RoomMessage",
    {
        "msg_id": Id64,
        "room_id": str,
        "from": Optional[str],  # null in an erased author's tombstone (SPEC §2.2 v5)
        "timestamp": Micros,
        "seq": int,
        "content": Optional[str],
        "metadata": Optional[Dict[str, Any]],
        "edited_at": NotRequired[Optional[Micros]],
        "edit_history": NotRequired[List[MessageVersion]],
        "deleted_at": NotRequired[Optional[Micros]],
    },
)


class RoomMessagePage(TypedDict):
    messages: List[RoomMessage]
    next: Optional[str]


class RoomPresence(TypedDict):
    """Who is online in a room (SPEC §2.1 v5): the members holding a stream of it on any member
    of the group, sorted. Ephemeral: kept in memory, never stored."""
    room_id: str
    online: List[str]


class RoomRead(TypedDict):
    room_id: str
    user: str
    last_read_seq: int
    unread: int


class UserRoom(TypedDict):
    """A room in a user's list. A room on another group (``remote``, SPEC §10) comes with
    room_id, name and joined_at only; the client reads its activity (last_msg_id, updated,
    total_messages) from the room itself, and has no unread count for it."""
    room_id: str
    name: Optional[str]
    joined_at: Micros
    last_msg_id: NotRequired[Optional[Id64]]
    updated: NotRequired[Micros]
    total_messages: NotRequired[int]
    unread: NotRequired[int]
    remote: NotRequired[bool]


class UserRoomPage(TypedDict):
    rooms: List[UserRoom]
    next: Optional[str]


# ---- the rooms outbox (SPEC §10; strata with --route-url) ----
class OutboxRecord(TypedDict):
    """A record of the rooms outbox: a membership change (``added``, ``removed``: with ``name``
    and ``joined_at``) or an erasure (``erased``) on its way to another group."""
    id: Id64
    kind: Literal["added", "removed", "erased"]
    user: str
    room_id: str
    name: NotRequired[Optional[str]]
    joined_at: NotRequired[Micros]


class OutboxDeadLetter(OutboxRecord):
    """A record the receiving group refused for good, kept until retried."""
    status: int
    """the receiving group's answer (a 4xx)"""
    answer: str
    """its body (the first 512 bytes)"""
    dead_at: Micros


class Outbox(TypedDict):
    """``GET /v1/admin/outbox``: pending records in the order they are sent, dead letters oldest
    first (at most ``limit`` of each), and how many of each there are."""
    route_url: str
    pending: List[OutboxRecord]
    dead: List[OutboxDeadLetter]
    pending_count: int
    dead_count: int


class OutboxRetried(OutboxRecord):
    """``POST /v1/admin/outbox/{id}/retry``: the dead letter, pending again under a new ``id``."""
    retried: Id64
    """the dead letter's id"""
