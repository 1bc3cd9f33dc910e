# SPDX-License-Identifier: MIT
"""strata's Python client: every HTTP route with typed answers, one error type, retries that are
safe (an Idempotency-Key per write, reused by its retries), 307s followed to a group's leader,
token refresh, and live streams that resume without gaps or duplicates.

    from strata_client import Strata
    with Strata("http://127.0.0.1:8080", token=token) as db:
        db.post_message("alice", "trip", "hi")
        print([m["content"] for m in db.messages("alice", conversation_id="trip")["messages"]])
"""
from ._core import Backoff, Call, call, full_jitter, token_ttl
from .chat_history import ChatMessage, StrataChatMessageHistory
from .client import AsyncStrata, Strata
from .errors import StrataError, StrataNetworkError
from .stream import (
    ChangeHook,
    CounterStream,
    MemberHook,
    TypingHook,
    PresenceHook,
    CounterValue,
    MessageStream,
    RoomStream,
    SeatChange,
    SeatsEvent,
    SeatsSnapshot,
    SeatsStream,
    SeatsUpdate,
    StateDetail,
)
from .types import *  # noqa: F401,F403  (every answer's TypedDict)

__version__ = "0.1.0"
__all__ = [
    "AsyncStrata",
    "Backoff",
    "Call",
    "ChatMessage",
    "ChangeHook",
    "CounterStream",
    "CounterValue",
    "MemberHook",
    "TypingHook",
    "PresenceHook",
    "MessageStream",
    "RoomStream",
    "SeatChange",
    "SeatsEvent",
    "SeatsSnapshot",
    "SeatsStream",
    "SeatsUpdate",
    "StateDetail",
    "Strata",
    "StrataChatMessageHistory",
    "StrataError",
    "StrataNetworkError",
    "call",
    "full_jitter",
    "token_ttl",
]
