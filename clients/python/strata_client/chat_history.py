# SPDX-License-Identifier: MIT
"""A chat message history for LLM apps, over one strata conversation.

:class:`StrataChatMessageHistory` has the methods of LangChain's chat message history protocol
(``messages``, ``add_message``, ``add_messages``, ``add_user_message``, ``add_ai_message``,
``clear`` and their ``a``-prefixed async twins), so it can stand where that protocol is expected
(e.g. ``RunnableWithMessageHistory``), without depending on LangChain. It accepts LangChain
message objects (anything with ``type``/``role`` and ``content``), plain dicts
(``{"role", "content"}``) and its own :class:`ChatMessage`, and returns :class:`ChatMessage`
objects (``role``, ``content``, ``metadata``; ``type`` gives LangChain's name for the role).

Each message is one strata message: ``from`` is the user for the user's turns and
``assistant_name`` (default ``"assistant"``) for the model's; ``metadata`` holds ``role`` and,
for the model's turns, ``model`` (and ``usage`` when a LangChain message carries it), plus
whatever metadata the caller adds. Every write carries its own Idempotency-Key, so a retried
write is stored once.

``clear()`` deletes the conversation (``DELETE /v1/users/{user}/conversations/{id}``, SPEC
§2.2): its messages are gone from every read; the next turn starts it again (``seq`` goes on
from where it was). ``messages`` leaves out messages deleted one by one (tombstones).
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from .client import AsyncStrata, Strata
from .errors import StrataError
from .types import Message

_TO_ROLE = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
            "system": "system", "tool": "tool", "function": "tool", "developer": "system"}
_TO_TYPE = {"user": "human", "assistant": "ai", "system": "system", "tool": "tool"}
_FORMAT = "strata_content"  # metadata key: "json" (content was not a string) or "empty"


@dataclass(frozen=True)
class ChatMessage:
    """One turn: ``role`` is "user", "assistant", "system" or "tool" (OpenAI's names)."""

    role: str
    content: Any
    """a string, or what a LangChain message held (e.g. a list of content parts)"""
    metadata: Dict[str, Any] = field(default_factory=dict)
    """what was stored besides the role: ``model``, ``usage``, the caller's own keys"""
    msg_id: Optional[str] = None
    timestamp: Optional[int] = None

    @property
    def type(self) -> str:
        """LangChain's name for the role: "human", "ai", "system" or "tool"."""
        return _TO_TYPE.get(self.role, self.role)


MessageLike = Union[ChatMessage, Mapping[str, Any], Any]
"""A ChatMessage, a dict with "role" and "content", or an object with type/role and content."""


class StrataChatMessageHistory:
    """The history of ``conversation_id`` in ``user``'s messages.

    With a :class:`Strata` client every method works (the ``a``-methods run it in a thread);
    with an :class:`AsyncStrata` the ``a``-methods are native asyncio and the sync ones raise
    TypeError. ``model`` is recorded on the model's turns unless a turn names its own.
    """

    def __init__(self, client: Union[Strata, AsyncStrata], user: str, conversation_id: str, *,
                 model: Optional[str] = None, assistant_name: str = "assistant") -> None:
        self.client = client
        self.user = user
        self.conversation_id = conversation_id
        self.model = model
        self.assistant_name = assistant_name

    # ---- reading ----
    @property
    def messages(self) -> List[ChatMessage]:
        """The conversation, oldest first (deleted messages left out)."""
        return [_from_stored(m, self.user) for m in self._sync().iter_messages(
            self.user, conversation_id=self.conversation_id, include_deleted=False)]

    def get_messages(self) -> List[ChatMessage]:
        return self.messages

    # ---- writing ----
    def add_message(self, message: MessageLike) -> None:
        role, content, meta = self._turn(message)
        self._post(role, content, meta)

    def add_messages(self, messages: Sequence[MessageLike]) -> None:
        """Stores each message in order (one write each; a retried write is stored once)."""
        for m in messages:
            self.add_message(m)

    def add_user_message(self, message: Union[str, MessageLike], *,
                         metadata: Optional[Dict[str, Any]] = None) -> None:
        _, content, meta = self._turn(message, "user")
        self._post("user", content, {**meta, **(metadata or {})})

    def add_ai_message(self, message: Union[str, MessageLike], *, model: Optional[str] = None,
                       metadata: Optional[Dict[str, Any]] = None) -> None:
        _, content, meta = self._turn(message, "assistant")
        if model is not None:
            meta["model"] = model
        self._post("assistant", content, {**meta, **(metadata or {})})

    def clear(self) -> None:
        """Deletes the conversation's messages (none there: nothing to do)."""
        try:
            self._sync().delete_conversation(self.user, self.conversation_id)
        except StrataError as e:
            if e.status != 404:
                raise

    # ---- the async twins (LangChain's aget_messages, aadd_messages, aclear) ----
    async def aget_messages(self) -> List[ChatMessage]:
        if not isinstance(self.client, AsyncStrata):
            return await asyncio.to_thread(lambda: self.messages)
        return [_from_stored(m, self.user) async for m in self.client.iter_messages(
            self.user, conversation_id=self.conversation_id, include_deleted=False)]

    async def aadd_messages(self, messages: Sequence[MessageLike]) -> None:
        """As add_messages: each in order, one write each."""
        if not isinstance(self.client, AsyncStrata):
            await asyncio.to_thread(self.add_messages, messages)
            return
        for m in messages:
            text, frm, meta = self._stored(*self._turn(m))
            await self.client.post_message(self.user, self.conversation_id, text, from_=frm,
                                           metadata=meta)

    async def aclear(self) -> None:
        if not isinstance(self.client, AsyncStrata):
            await asyncio.to_thread(self.clear)
            return
        try:
            await self.client.delete_conversation(self.user, self.conversation_id)
        except StrataError as e:
            if e.status != 404:
                raise

    # ---- helpers ----
    def _turn(self, message: Union[str, MessageLike],
              default_role: Optional[str] = None) -> "tuple[str, Any, Dict[str, Any]]":
        if isinstance(message, str):
            if default_role is None:
                raise TypeError("a bare string needs a role: use add_user_message/add_ai_message")
            role, content, meta = default_role, message, {}
        elif isinstance(message, ChatMessage):
            role, content, meta = message.role, message.content, dict(message.metadata)
        elif isinstance(message, Mapping):
            role = str(message.get("role") or message.get("type") or default_role or "")
            content, meta = message.get("content", ""), dict(message.get("metadata") or {})
        else:  # a LangChain BaseMessage, or anything shaped like one
            role = str(getattr(message, "role", None) or getattr(message, "type", None)
                       or default_role or "")
            content, meta = getattr(message, "content", ""), {}
            rm = getattr(message, "response_metadata", None) or {}
            if isinstance(rm, Mapping) and (rm.get("model_name") or rm.get("model")):
                meta["model"] = rm.get("model_name") or rm.get("model")
            usage = getattr(message, "usage_metadata", None)
            if isinstance(usage, Mapping) and usage:
                meta["usage"] = dict(usage)
            tcid = getattr(message, "tool_call_id", None)
            if isinstance(tcid, str):
                meta["tool_call_id"] = tcid
        if role not in _TO_ROLE:
            raise ValueError(f"unknown role {role!r} (user, assistant, system or tool)")
        return _TO_ROLE[role], content, meta

    def _sync(self) -> Strata:
        if isinstance(self.client, AsyncStrata):
            raise TypeError("this history was made with an AsyncStrata: use its a-methods "
                            "(aget_messages, aadd_messages, aclear)")
        return self.client

    def _post(self, role: str, content: Any, meta: Dict[str, Any]) -> None:
        text, frm, stored = self._stored(role, content, meta)
        self._sync().post_message(self.user, self.conversation_id, text, from_=frm,
                                  metadata=stored)

    def _stored(self, role: str, content: Any,
                meta: Dict[str, Any]) -> "tuple[str, str, Dict[str, Any]]":
        """The message's content, ``from`` and metadata as strata stores them."""
        meta = {k: v for k, v in meta.items() if k not in ("role", _FORMAT)}
        if role == "assistant" and self.model is not None:
            meta.setdefault("model", self.model)
        if not isinstance(content, str):
            text, meta[_FORMAT] = json.dumps(content), "json"
        elif content == "":
            text, meta[_FORMAT] = " ", "empty"  # strata stores no empty content
        else:
            text = content
        frm = {"user": self.user, "assistant": self.assistant_name}.get(role, role)
        return text, frm, {"role": role, **meta}


def _from_stored(m: Message, user: str) -> ChatMessage:
    meta = dict(m["metadata"] or {})
    # a message written by something else than this adapter: the user's own turn, or not
    role = str(meta.pop("role", None) or ("user" if m["from"] == user else "assistant"))
    fmt = meta.pop(_FORMAT, None)
    content: Any = m["content"]
    if fmt == "json":
        content = json.loads(content)
    elif fmt == "empty":
        content = ""
    return ChatMessage(role, content, meta, m["msg_id"], m["timestamp"])
