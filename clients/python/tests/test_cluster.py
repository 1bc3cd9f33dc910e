# SPDX-License-Identifier: MIT
# A replicated group of 3 real strata processes on loopback (SPEC §8): a client pointed at a
# follower follows its 307 to the leader; when the leader is killed (-9) the client's writes go
# on through the follower to the new leader, each applied once; a stream on the follower sees
# every message once, in order, across the failover.
from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from typing import Any, Dict, Iterator, List

import httpx
import pytest
from conftest import SLOW, Server, free_port

from strata_client import AsyncStrata, Backoff, Strata, StrataError

FAST = Backoff(base=0.02, cap=0.3)


class Group:
    def __init__(self, n: int = 3) -> None:
        self.cold = tempfile.mkdtemp(prefix="strata-py-cold-")
        raft = {i: free_port() for i in range(1, n + 1)}
        spec = ",".join(f"{i}=127.0.0.1:{p}" for i, p in raft.items())
        self.members: Dict[int, Server] = {}
        for i in raft:
            self.members[i] = Server(args=["--cluster", spec, "--cluster-self", str(i),
                                           "--election-timeout", "1000",
                                           "--cold-url", f"file://{self.cold}"])

    def leader(self, alive: List[int], timeout: float = 20.0) -> int:
        end = time.monotonic() + timeout * SLOW
        while time.monotonic() < end:
            for i in alive:
                with Strata(self.members[i].url, retries=0, timeout=1) as c:
                    try:
                        if c.cluster()["leader"] != i:
                            continue
                        c.counter("__probe")
                    except StrataError as e:
                        if e.status != 404:  # a leader answers 404 itself, not 307 or 503
                            continue
                    return i
            time.sleep(0.05)
        raise AssertionError("no leader")


@pytest.fixture
def group() -> Iterator[Group]:
    g = Group()
    try:
        yield g
        for s in g.members.values():
            s.stop()
    finally:
        for s in g.members.values():
            s.cleanup()
        shutil.rmtree(g.cold, ignore_errors=True)


class Recording(httpx.AsyncHTTPTransport):
    """Records the status of every answer the client gets."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: List[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        res = await super().handle_async_request(request)
        self.statuses.append(res.status_code)
        return res


def test_failover_307_and_a_stream_across_it(group: Group) -> None:
    leader = group.leader(list(group.members))
    follower = next(i for i in group.members if i != leader)
    f = group.members[follower]

    async def main() -> None:
        rec = Recording()
        db = AsyncStrata(f.url, retries=80, backoff=FAST, transport=rec)
        assert (await db.cluster())["self"] == follower  # no redirect for /v1/cluster
        assert await db.incr("fo") == {"name": "fo", "value": 1}
        assert 307 in rec.statuses, "the follower sent the write to the leader"
        await db.create_event({"event_id": "ha", "sections": [{"name": "A", "rows": 1,
                                                               "cols": 4}]})
        got: List[Any] = []
        st = db.stream_messages("ha-user", after="0")  # served by the follower itself
        await st.ready()

        async def collect() -> None:
            async for m in st:
                got.append(m)

        task = asyncio.create_task(collect())
        for i in range(3):
            await db.post_message("ha-user", "c", f"before {i}")
        deadline = time.monotonic() + 20 * SLOW
        while len(got) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert len(got) == 3

        group.members[leader].kill9()
        rec.statuses.clear()
        # every call goes to the follower, which redirects (or answers no_leader) until a new
        # leader is elected; a redirect to the dead leader starts again at the follower
        for i in range(3):
            await db.post_message("ha-user", "c", f"after {i}")
        assert (await db.incr("fo"))["value"] == 2, "applied once across the failover"
        b = await db.book("ha", {"section": "A", "quantity": 2})
        assert (await db.confirm(b["booking_id"], "ha"))["status"] == "sold"
        assert (await db.event("ha"))["event_stats"]["sold"] == 2
        alive = [i for i in group.members if i != leader]
        new_leader = await asyncio.to_thread(group.leader, alive)
        assert new_leader != leader
        if new_leader != follower:
            assert 307 in rec.statuses

        while len(got) < 6 and time.monotonic() < deadline + 20 * SLOW:
            await asyncio.sleep(0.02)
        assert [m["content"] for m in got] == [f"before {i}" for i in range(3)] + \
            [f"after {i}" for i in range(3)]
        assert [m["seq"] for m in got] == [1, 2, 3, 4, 5, 6]
        page = await db.messages("ha-user", conversation_id="c")
        assert [m["seq"] for m in page["messages"]] == [1, 2, 3, 4, 5, 6]
        await st.aclose()
        await task
        await db.aclose()

    asyncio.run(main())
