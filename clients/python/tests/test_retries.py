# SPDX-License-Identifier: MIT
# Retries through a faulty proxy in front of the real server: connections dropped before and after
# the server applied a write, 429/502/503/504 (with and without Retry-After), 307 to the leader.
# Every retry of a write carries the call's one Idempotency-Key and the write is applied once.
# Tokens: an expired one is refreshed before sending, a rejected one (401) after.
from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Deque, Dict, List, Optional, Tuple

import pytest
from conftest import Server, admin, token

from strata_client import AsyncStrata, Backoff, Strata, StrataError, StrataNetworkError

FAST = Backoff(base=0.01, cap=0.05)


class FaultProxy:
    """HTTP/1.1 proxy to strata. For requests whose path contains `match`, it plays the queued
    faults in order: "drop" (close before forwarding), "lost" (forward, let the server apply it,
    then close without answering), "503", "503+1" (Retry-After: 1), "429", "502", "504",
    "307" (send the client to the server itself); then it passes requests through."""

    def __init__(self, upstream: int, match: str, faults: List[str]) -> None:
        self.upstream = upstream
        self.match = match
        self.faults: Deque[str] = deque(faults)
        self.seen: List[Tuple[str, str, Optional[str], str]] = []  # method, path, key, fault
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.handle_any()

            def do_POST(self) -> None:
                self.handle_any()

            def do_PATCH(self) -> None:
                self.handle_any()

            def do_DELETE(self) -> None:
                self.handle_any()

            def handle_any(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                with proxy.lock:
                    fault = proxy.faults.popleft() if proxy.match in self.path and proxy.faults \
                        else "pass"
                    proxy.seen.append((self.command, self.path,
                                       self.headers.get("idempotency-key"), fault))
                if fault == "drop":
                    return self.hang_up()
                if fault[:3] in ("429", "502", "503", "504"):
                    extra = {"retry-after": fault[4:]} if "+" in fault else {}
                    return self.answer(int(fault[:3]), b'{"error":{"code":"unavailable",'
                                       b'"message":"injected"}}', extra)
                if fault == "307":
                    loc = f"http://127.0.0.1:{proxy.upstream}{self.path}"
                    return self.answer(307, b"", {"location": loc})
                up = http.client.HTTPConnection("127.0.0.1", proxy.upstream, timeout=30)
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() not in ("host", "connection")}
                up.request(self.command, self.path, body=body or None, headers=hdrs)
                res = up.getresponse()
                data = res.read()
                up.close()
                if fault == "lost":
                    return self.hang_up()  # applied by the server; the answer never arrives
                self.answer(res.status, data, {k: v for k, v in res.getheaders()
                                               if k.lower() in ("content-type", "retry-after",
                                                                "location")})

            def answer(self, status: int, data: bytes, headers: Dict[str, str]) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def hang_up(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def keys(self) -> List[Optional[str]]:
        return [k for (_, p, k, _) in self.seen if self.match in p]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


ALL_FAULTS = ["lost", "503", "drop", "502", "429", "lost", "504"]


def test_sync_write_retried_with_one_key_and_applied_once(server: Server) -> None:
    p = FaultProxy(server.port, "/incr", list(ALL_FAULTS))
    try:
        with Strata(p.url, token=admin, retries=10, backoff=FAST) as db:
            assert db.incr("once", 5) == {"name": "once", "value": 5}
            keys = p.keys()
            assert len(keys) == len(ALL_FAULTS) + 1
            assert keys[0] and all(k == keys[0] for k in keys), "every retry carries the same key"
            assert db.counter("once") == {"name": "once", "value": 5}, "applied once"
            db.incr("once", 5)
            assert p.keys()[-1] != keys[0], "a new call gets a new key"
            assert db.counter("once")["value"] == 10
            # a caller's own key is sent as it is, and a replay answers the first outcome
            assert db.incr("mine", 1, idempotency_key="k-1")["value"] == 1
            assert db.incr("mine", 1, idempotency_key="k-1")["value"] == 1
            assert p.keys()[-1] == "k-1"
    finally:
        p.close()


def test_async_post_retried_with_one_key_and_stored_once(server: Server) -> None:
    p = FaultProxy(server.port, "/messages", list(ALL_FAULTS))

    async def main() -> None:
        async with AsyncStrata(p.url, token=token("alice"), retries=10, backoff=FAST) as db:
            m = await db.post_message("alice", "t", "exactly once")
            assert m["seq"] == 1
            page = await db.messages("alice")
            assert [x["content"] for x in page["messages"]] == ["exactly once"]

    try:
        asyncio.run(main())
        posts = [k for (meth, path, k, _) in p.seen if meth == "POST"]
        assert len(posts) == len(ALL_FAULTS) + 1 and len(set(posts)) == 1 and posts[0]
    finally:
        p.close()


def test_patch_and_delete_retried_with_one_key_and_applied_once(server: Server) -> None:
    # A lost answer to an edit or a delete: the retry must not edit twice (a second entry in
    # edit_history) nor find the conversation gone (404): the server replays the first answer.
    with Strata(server.url, token=token("pat")) as direct:
        m = direct.post_message("pat", "p", "frist")
        direct.post_message("pat", "p", "two")
    p = FaultProxy(server.port, "/users/pat/", ["lost", "503", "drop", "lost"])
    try:
        with Strata(p.url, token=token("pat"), retries=10, backoff=FAST) as db:
            ed = db.edit_message("pat", m["msg_id"], content="first")
            assert [v["content"] for v in ed.get("edit_history", [])] == ["frist"]
            patches = [k for (meth, _, k, _) in p.seen if meth == "PATCH"]
            assert len(patches) == 5 and len(set(patches)) == 1 and patches[0]
            p.faults.extend(["lost", "502", "lost"])
            assert db.delete_conversation("pat", "p") == {"deleted": 2}, "not a 404 on the retry"
            deletes = [k for (meth, _, k, _) in p.seen if meth == "DELETE"]
            assert len(deletes) == 4 and len(set(deletes)) == 1 and deletes[0]
            assert deletes[0] != patches[0]
            assert db.messages("pat")["messages"] == []
    finally:
        p.close()


def test_retry_after_is_honoured_and_retries_end(server: Server) -> None:
    p = FaultProxy(server.port, "/counters/", ["503+1"])
    try:
        with Strata(p.url, token=admin, retries=3, backoff=FAST) as db:
            t0 = time.monotonic()
            db.incr("ra")
            assert time.monotonic() - t0 >= 0.9, "waited Retry-After: 1, not the 10 ms backoff"
            p.faults.extend(["503"] * 4)  # one attempt + 3 retries, all refused
            with pytest.raises(StrataError) as e:
                db.incr("ra")
            assert (e.value.status, e.value.code, e.value.message) == (503, "unavailable",
                                                                        "injected")
            p.faults.extend(["drop"] * 4)
            with pytest.raises(StrataNetworkError) as ne:
                db.counter("ra")
            assert isinstance(ne.value, StrataError) and ne.value.status == 0
            assert db.counter("ra")["value"] == 1, "the refused writes changed nothing"
        with Strata("http://127.0.0.1:1", retries=1, backoff=FAST) as dead:
            with pytest.raises(StrataError) as e:
                dead.health()
            assert e.value.code == "unreachable"
    finally:
        p.close()


def test_307_followed_with_method_body_key_and_token(server: Server) -> None:
    # a follower that first has no leader (503 + Retry-After: 0), then sends us to the leader
    p = FaultProxy(server.port, "/counters/", ["503+0", "307", "307"])

    async def main() -> None:
        async with AsyncStrata(p.url, token=admin, backoff=FAST) as db:
            assert await db.incr("led", 4) == {"name": "led", "value": 4}
            assert await db.counter("led") == {"name": "led", "value": 4}

    try:
        asyncio.run(main())
        assert [f for (_, _, _, f) in p.seen] == ["503+0", "307", "307"]
    finally:
        p.close()
    # a redirect loop (the proxy sending us to itself) ends after max_redirects
    loop = FaultProxy(server.port, "/counters/", ["307"] * 5)
    loop.upstream = loop.httpd.server_address[1]
    try:
        with Strata(loop.url, token=admin, max_redirects=2) as looping:
            with pytest.raises(StrataError) as e:
                looping.counter("x")
            assert e.value.code == "too_many_redirects"
            assert len(loop.seen) == 3
    finally:
        loop.close()


def test_tokens_refreshed_when_expired_and_on_401(server: Server) -> None:
    calls = []

    def refresh() -> str:
        calls.append(1)
        return admin()

    expired = token("ops", ttl=-10, role="admin")
    with Strata(server.url, token=expired, refresh_token=refresh) as db:
        assert db.incr("r")["value"] == 1
        assert len(calls) == 1, "refreshed before sending, from exp"
        assert db.incr("r")["value"] == 2
        assert len(calls) == 1, "the fresh token is kept"
    forged = token("ops", role="admin", secret="wrong")
    with Strata(server.url, token=forged, refresh_token=refresh) as db:
        assert db.incr("r")["value"] == 3
        assert len(calls) == 2, "refreshed on the 401"

    async def main() -> None:
        async def arefresh() -> str:
            calls.append(1)
            await asyncio.sleep(0.01)
            return admin()

        async with AsyncStrata(server.url, token=forged, refresh_token=arefresh) as db:
            got = await asyncio.gather(*(db.incr("r") for _ in range(8)))
            assert sorted(g["value"] for g in got) == list(range(4, 12))
        assert 1 <= len(calls) - n <= 8, "concurrent 401s share a refresh in flight"
        m = len(calls)
        async with AsyncStrata(server.url, token=expired, refresh_token=arefresh) as db:
            await asyncio.gather(*(db.counter("r") for _ in range(8)))
        assert len(calls) - m == 1, "eight requests on an expired token share one refresh"

    n = len(calls)
    asyncio.run(main())


def test_backoff_is_full_jitter() -> None:
    from strata_client import full_jitter

    b = Backoff(base=0.1, cap=1.0)
    waits = [full_jitter(3, b) for _ in range(2000)]
    assert all(0 <= w < 0.8 for w in waits) and max(waits) > 0.6 and min(waits) < 0.1
    assert all(0 <= full_jitter(40, b) < 1.0 for _ in range(100))
