# SPDX-License-Identifier: MIT
# The chat-history adapter for LLM apps against the real server: LangChain's protocol methods,
# role and model metadata stored with each turn, LangChain-shaped messages accepted (duck-typed,
# no LangChain here), deleted messages left out, clear() deleting the conversation, and the async
# twins.
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Dict

import pytest
from conftest import Server, token

from strata_client import AsyncStrata, ChatMessage, Strata, StrataChatMessageHistory


@dataclass
class FakeLangChainAI:  # the attributes langchain_core's AIMessage has
    content: Any
    type: str = "ai"
    response_metadata: Dict[str, Any] = field(default_factory=dict)
    usage_metadata: Dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeLangChainHuman:
    content: str
    type: str = "human"


def test_chat_history_in_an_llm_loop(server: Server) -> None:
    with Strata(server.url, token=token("alice")) as db:
        h = StrataChatMessageHistory(db, "alice", "trip", model="llama-3-8b")
        assert h.messages == []
        h.add_user_message("Where should I go in May?")
        h.add_ai_message("Lisbon.", metadata={"tokens": 3})
        h.add_ai_message("Or Porto.", model="other-model")
        msgs = h.messages
        assert [(m.role, m.type, m.content) for m in msgs] == [
            ("user", "human", "Where should I go in May?"), ("assistant", "ai", "Lisbon."),
            ("assistant", "ai", "Or Porto.")]
        assert msgs[1].metadata == {"model": "llama-3-8b", "tokens": 3}
        assert msgs[2].metadata == {"model": "other-model"}
        assert msgs[0].msg_id and msgs[0].timestamp
        # what strata stored: role and model in metadata, `from` the user or the assistant
        raw = db.messages("alice", conversation_id="trip")["messages"]
        assert [m["from"] for m in raw] == ["alice", "assistant", "assistant"]
        assert raw[1]["metadata"] == {"role": "assistant", "model": "llama-3-8b", "tokens": 3}

        # LangChain-shaped messages, dicts and ChatMessages in one add_messages
        h.add_messages([
            FakeLangChainHuman("and in June?"),
            FakeLangChainAI("Oslo", response_metadata={"model_name": "gpt-x"},
                            usage_metadata={"input_tokens": 9, "output_tokens": 1}),
            FakeLangChainAI([{"type": "text", "text": "parts"}]),
            FakeLangChainAI(""),
            {"role": "system", "content": "be brief"},
            ChatMessage("tool", "42", {"tool_call_id": "t1"}),
        ])
        tail = h.messages[3:]
        assert [(m.role, m.content) for m in tail] == [
            ("user", "and in June?"), ("assistant", "Oslo"),
            ("assistant", [{"type": "text", "text": "parts"}]), ("assistant", ""),
            ("system", "be brief"), ("tool", "42")]
        assert tail[1].metadata == {"model": "gpt-x",
                                    "usage": {"input_tokens": 9, "output_tokens": 1}}
        assert tail[5].metadata == {"tool_call_id": "t1"}
        # an LLM loop feeds the history back as role/content pairs
        prompt = [{"role": m.role, "content": m.content} for m in h.messages]
        assert prompt[0] == {"role": "user", "content": "Where should I go in May?"}

        with pytest.raises(ValueError):
            h.add_message({"role": "narrator", "content": "x"})
        with pytest.raises(TypeError):
            h.add_message("no role")

        # a message deleted by hand (a tombstone in strata's listing) is left out
        gone = h.messages[4]
        assert gone.msg_id and gone.content == "Oslo"
        db.delete_message("alice", gone.msg_id)
        assert [m.content for m in h.messages][3:5] == ["and in June?", [
            {"type": "text", "text": "parts"}]]
        assert len(h.messages) == 8

        # clear(): the conversation's messages are deleted in strata, not only hidden
        h.clear()
        assert h.messages == []
        assert db.messages("alice", conversation_id="trip")["messages"] == []
        h.clear()  # nothing left: no error
        StrataChatMessageHistory(db, "alice", "never-written").clear()
        h.add_user_message("fresh start")
        assert [m.content for m in h.messages] == ["fresh start"]
        conv = db.conversation("alice", "trip")
        assert conv["total_messages"] == 1
        assert db.messages("alice", conversation_id="trip")["messages"][0]["seq"] == 10, \
            "seq goes on after a clear"
        # another conversation and another adapter on the same one see the same thing
        assert StrataChatMessageHistory(db, "alice", "trip").messages[0].content == "fresh start"
        assert StrataChatMessageHistory(db, "alice", "other").messages == []
        # a message posted by something else than the adapter gets a role from `from`
        db.post_message("alice", "trip", "by hand")
        db.post_message("alice", "trip", "from a bot", from_="bot")
        assert [m.role for m in h.messages][-2:] == ["user", "assistant"]

        async def twins() -> None:
            await h.aclear()
            await h.aadd_messages([FakeLangChainHuman("async hi")])
            assert [m.content for m in await h.aget_messages()] == ["async hi"]

        asyncio.run(twins())


def test_chat_history_on_an_async_client(server: Server) -> None:
    async def run() -> None:
        async with AsyncStrata(server.url, token=token("ana")) as adb:
            h = StrataChatMessageHistory(adb, "ana", "chat", model="m-1")
            assert await h.aget_messages() == []
            await h.aadd_messages([FakeLangChainHuman("hi"), {"role": "assistant", "content": "hello"},
                                   FakeLangChainAI([{"type": "text", "text": "parts"}])])
            got = await h.aget_messages()
            assert [(m.role, m.content) for m in got] == [
                ("user", "hi"), ("assistant", "hello"),
                ("assistant", [{"type": "text", "text": "parts"}])]
            assert got[1].metadata == {"model": "m-1"}
            # stored as the sync adapter stores them: the same history through a sync client
            with Strata(server.url, token=token("ana")) as db:
                assert StrataChatMessageHistory(db, "ana", "chat").messages == got
            with pytest.raises(TypeError):  # made with an AsyncStrata: only the a-methods
                h.add_user_message("sync")
            await h.aclear()
            assert await h.aget_messages() == []
            await h.aclear()  # nothing there: nothing to do

    asyncio.run(run())
