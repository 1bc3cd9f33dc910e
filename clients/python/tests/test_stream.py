# SPDX-License-Identifier: MIT
# Streams as async iterators against the real server: across a kill -9 and restart they resume
# after the last msg_id yielded (no gap, no duplicate) and yield fresh seats/counter snapshots;
# `after` names where a messages stream starts (None: live from now, "0": everything, an id:
# after it), including a reconnect before the first message; a refused subscription raises
# StrataError; a stream whose token expires (1008) refreshes it and resumes.
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, List

import pytest
from conftest import SLOW, Server, admin, token

from strata_client import (
    AsyncStrata,
    Backoff,
    CounterValue,
    SeatsSnapshot,
    SeatsUpdate,
    StrataError,
)
import strata_client.stream as stream_module
from strata_client.stream import StateDetail, _Stream

FAST = Backoff(base=0.02, cap=0.2)


async def until(what: str, fn: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout * SLOW
    while not fn():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def collect(stream: _Stream[Any], out: List[Any]) -> "asyncio.Task[None]":
    async def run() -> None:
        async for x in stream:
            out.append(x)

    return asyncio.create_task(run())


def test_streams_survive_a_crash_and_restart(server: Server) -> None:
    async def main() -> None:
        alice = AsyncStrata(server.url, token=token("alice"), retries=60, backoff=FAST)
        db = AsyncStrata(server.url, token=admin, retries=60, backoff=FAST)
        for i in range(3):
            await alice.post_message("alice", "r", f"before {i}")
        await alice.post_message("alice", "other", "not this conversation")
        await db.incr("rc", 3)
        await db.create_event({"event_id": "rgig", "sections": [{"name": "A", "rows": 1,
                                                                 "cols": 2}]})
        states: List[str] = []
        got: List[Any] = []
        counters: List[CounterValue] = []
        seats: List[Any] = []
        st = alice.stream_messages("alice", conversation_id="r", after="0",
                                   on_state=lambda s, d: states.append(s))
        ct = db.stream_counter("rc")
        se = db.stream_seats("rgig")
        await asyncio.gather(st.ready(), ct.ready(), se.ready())
        tasks = [collect(st, got), collect(ct, counters), collect(se, seats)]
        await until("the replay", lambda: len(got) == 3 and len(counters) == 1 and len(seats) == 1)
        await until("replay_done", st.replay_done.is_set)
        assert counters[0] == CounterValue("rc", 3, True)
        never: List[CounterValue] = []  # a counter never written: 0, and it says so
        cn = db.stream_counter("rc_never_written")
        await cn.ready()
        tasks.append(collect(cn, never))
        await until("a never-written counter's snapshot", lambda: len(never) == 1)
        assert never[0] == CounterValue("rc_never_written", 0, True, False)
        await cn.aclose()
        assert isinstance(seats[0], SeatsSnapshot) and seats[0].state["event_stats"]["total"] == 2
        await db.book("rgig", {"section": "A", "seats": ["1-2"]})
        await until("a seat change", lambda: len(seats) == 2)
        change = seats[1]
        assert isinstance(change, SeatsUpdate) and change.section == "A"
        assert [(c.seat, c.state) for c in change.changes] == [("1-2", "reserved")]
        assert change.stats["reserved"] == 1

        server.kill9()  # a crash: nothing is closed cleanly

        async def writes() -> None:  # while the server is down: the client retries
            for i in range(2):
                await alice.post_message("alice", "r", f"after {i}")
            await db.incr("rc", 10)

        w = asyncio.create_task(writes())
        await asyncio.sleep(0.15)
        await asyncio.to_thread(server.restart)
        await w
        await until("the messages written across the restart", lambda: len(got) >= 5)
        await until("the counter after the restart", lambda: counters[-1].value == 13)
        await until("a fresh seats snapshot", lambda: isinstance(seats[-1], SeatsSnapshot))
        assert [m["content"] for m in got] == ["before 0", "before 1", "before 2", "after 0",
                                               "after 1"]
        assert [m["seq"] for m in got] == [1, 2, 3, 4, 5]
        assert "reconnecting" in states and st.reconnects >= 1
        assert st.last_msg_id == got[-1]["msg_id"]
        snaps = [c for c in counters if c.snapshot]
        assert len(snaps) >= 2, "the counter came again on the reconnect"
        assert seats[-1].state["event_stats"]["reserved"] == 1

        refused = db.stream_seats("no-such-event")
        with pytest.raises(StrataError) as e:
            await refused.ready()
        assert (e.value.status, e.value.code) == (404, "not_found")
        assert refused.state == "closed"
        with pytest.raises(StrataError) as e:
            await alice.stream_messages("bob").ready()  # another user's messages
        assert e.value.code == "forbidden"

        streams: List[_Stream[Any]] = [st, ct, se]
        for s in streams:
            await s.aclose()
        await asyncio.gather(*tasks)  # iteration ends on aclose
        assert len(got) == 5
        await alice.aclose()
        await db.aclose()

    asyncio.run(main())


def test_streams_name_their_routing_key_for_proxies(server: Server,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    urls: List[str] = []
    real = getattr(stream_module, "connect")

    def spy(url: str, **kw: Any) -> Any:
        urls.append(url)
        return real(url, **kw)

    monkeypatch.setattr(stream_module, "connect", spy)

    async def main() -> None:
        async with AsyncStrata(server.url, token=admin) as db:
            await db.create_room("rt", ["root"])
            await db.create_event({"event_id": "rt-ev", "sections": [{"name": "A", "rows": 1,
                                                                      "cols": 1}]})
            streams: List[_Stream[Any]] = [db.stream_room("rt"), db.stream_seats("rt-ev"),
                                           db.stream_counter("rt:c")]
            async with AsyncStrata(server.url, token=token("rt-user")) as u:
                streams.append(u.stream_messages("rt-user", after="0"))
                for st in streams:
                    await st.ready()
                    await st.aclose()

    asyncio.run(main())
    assert [u.split("?", 1)[1] for u in urls] == [
        "route=room:rt", "route=event:rt-ev", "route=counter:rt:c", "route=user:rt-user"]
    assert all(u.startswith(f"ws://127.0.0.1:{server.port}/v1/stream?") for u in urls)


def test_after_names_where_a_stream_starts(server: Server) -> None:
    async def main() -> None:
        async with AsyncStrata(server.url, token=token("carol"), retries=60,
                               backoff=FAST) as db:
            first = await db.post_message("carol", "k", "old 1")
            await db.post_message("carol", "k", "old 2")
            everything: List[Any] = []
            after_first: List[Any] = []
            live: List[Any] = []
            s_all = db.stream_messages("carol", after="0")
            s_after = db.stream_messages("carol", after=first["msg_id"])
            s_live = db.stream_messages("carol")  # live from now, on every server version
            await asyncio.gather(s_all.ready(), s_after.ready(), s_live.ready())
            tasks = [collect(s_all, everything), collect(s_after, after_first),
                     collect(s_live, live)]
            await until("the replays", lambda: len(everything) == 2 and len(after_first) == 1)
            assert live == [] and s_live.last_msg_id is not None
            # a crash before the live stream's first message: written while the server is down,
            # the message still arrives (the stream resumes from where it started)
            server.kill9()
            w = asyncio.create_task(db.post_message("carol", "k", "new"))
            await asyncio.sleep(0.1)
            await asyncio.to_thread(server.restart)
            await w
            await until("the new message on every stream",
                        lambda: len(live) == 1 and len(everything) == 3 and len(after_first) == 2)
            assert [m["content"] for m in everything] == ["old 1", "old 2", "new"]
            assert [m["content"] for m in after_first] == ["old 2", "new"]
            assert [m["content"] for m in live] == ["new"]
            for s in (s_all, s_after, s_live):
                await s.aclose()
            await asyncio.gather(*tasks)

    asyncio.run(main())


def test_a_stream_whose_token_expires_refreshes_it_and_resumes(server: Server) -> None:
    async def main() -> None:
        refreshed: List[int] = []

        def refresh() -> str:
            refreshed.append(1)
            return token("dave")

        closes: List[StateDetail] = []
        # outlives the 5 s early-refresh margin at connect, then expires while streaming
        dave = AsyncStrata(server.url, token=token("dave", ttl=7), refresh_token=refresh,
                           backoff=FAST)
        writer = AsyncStrata(server.url, token=token("dave"))
        got: List[Any] = []
        st = dave.stream_messages("dave", on_state=lambda s, d: closes.append(d)
                                  if s == "reconnecting" and d.code else None)
        await st.ready()
        task = collect(st, got)
        await writer.post_message("dave", "x", "one")
        await until("the close for the expired token", lambda: len(closes) > 0, 20)
        assert (closes[0].code, closes[0].reason) == (1008, "token expired")
        await until("the refresh", lambda: len(refreshed) == 1)
        await writer.post_message("dave", "x", "two")
        await until("the message after the refresh", lambda: len(got) == 2)
        assert [m["content"] for m in got] == ["one", "two"]
        await st.aclose()
        await task
        await dave.aclose()
        await writer.aclose()

    asyncio.run(main())


def test_a_room_stream_hears_messages_edits_and_members(server: Server) -> None:
    async def main() -> None:
        async with AsyncStrata(server.url, token=admin, retries=60, backoff=FAST) as db:
            await db.create_room("lounge", ["root", "kim"])
            first = await db.post_room_message("lounge", "kim", "before")
            changes: List[Any] = []
            members: List[Any] = []
            typing: List[Any] = []
            presence: List[Any] = []
            got: List[Any] = []
            s = db.stream_room("lounge", after="0", on_change=lambda k, m: changes.append((k, m)),
                               on_member=lambda u, c: members.append((u, c)),
                               on_typing=lambda u, t: typing.append((u, t)),
                               on_presence=lambda u, o: presence.append((u, o)))
            live: List[Any] = []
            s_live = db.stream_room("lounge")  # no after: from now on
            await asyncio.gather(s.ready(), s_live.ready())
            task = collect(s, got)
            live_task = collect(s_live, live)
            await until("the replay", lambda: len(got) == 1)
            await db.post_room_message("lounge", "root", "live")
            await until("the live stream's message", lambda: len(live) == 1)
            assert live[0]["content"] == "live" and s_live.last_msg_id == live[0]["msg_id"]
            await s_live.aclose()
            await live_task
            await db.edit_room_message("lounge", first["msg_id"], content="before!")
            await db.change_members("lounge", add=["lee"])
            await until("the live message, the edit and the member",
                        lambda: len(got) == 2 and len(changes) == 1 and len(members) == 1)
            assert [m["content"] for m in got] == ["before", "live"]
            assert got[0]["room_id"] == "lounge"
            assert changes[0][0] == "edited" and changes[0][1]["content"] == "before!"
            assert members == [("lee", "added")]
            await db.typing("lounge", "kim")  # SPEC §2.1 v5: ephemeral, to on_typing
            await until("the typing frame", lambda: len(typing) == 1)
            assert typing[0][0] == "kim" and typing[0][1] > 0
            # SPEC §2.1 v5: the stream's member (its token's sub) is online, to on_presence and
            # room_presence
            await until("the presence frame", lambda: len(presence) >= 1)
            assert presence[0][1] is True
            assert (await db.room_presence("lounge"))["online"] == [presence[0][0]]
            await s.aclose()
            await task

    asyncio.run(main())
