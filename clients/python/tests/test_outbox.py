# SPDX-License-Identifier: MIT
# The rooms outbox's admin routes (SPEC §10) through both clients, on a strata with --route-url
# at a stand-in receiving group: it refuses one user's records with a 400, so that record becomes
# a dead letter (listed with the refusal's status and answer); once it accepts, retry_outbox
# sends the dead letter again under a new id and it is delivered; a second retry is 404.
# (Without --route-url both routes are 404: test_routes.py.)
from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator, List, Tuple

import pytest
from conftest import SECRET, SLOW, Server, admin

from strata_client import AsyncStrata, Backoff, Outbox, Strata, StrataError

FAST = Backoff(base=0.02, cap=0.3)


class Receiver:
    """The receiving group's stand-in: answers 400 to records for `refused` while `refuse`."""

    def __init__(self, refused: str) -> None:
        self.refuse = True
        self.got: List[Tuple[str, int]] = []
        rx = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                no = rx.refuse and self.path.startswith(f"/v1/users/{refused}/")
                body = (b'{"error":{"code":"invalid_argument","message":"test: refused"}}'
                        if no else b"{}")
                rx.got.append((self.path, 400 if no else 200))
                self.send_response(400 if no else 200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def routed() -> Iterator[Tuple[Server, Receiver]]:
    rx = Receiver("guest")
    s = Server(args=["--jwt-secret", SECRET, "--cluster-secret",
                     "py-client-cluster-secret-of-32-bytes", "--route-url", rx.url])
    try:
        yield s, rx
        s.stop()
    finally:
        s.cleanup()
        rx.close()


def wait_outbox(what: str, db: Strata, dead: int, pending: int) -> Outbox:
    end = time.monotonic() + 20 * SLOW
    while True:
        ob = db.outbox(limit=10)
        if len(ob["dead"]) == dead and len(ob["pending"]) == pending:
            return ob
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}: {ob}")
        time.sleep(0.05)


def test_outbox_dead_letter_and_retry(routed: Tuple[Server, Receiver]) -> None:
    s, rx = routed
    with Strata(s.url, token=admin, backoff=FAST, retries=30) as db:
        assert db.outbox() == {"route_url": rx.url, "pending": [], "dead": [],
                               "pending_count": 0, "dead_count": 0}
        db.create_room("hall", ["guest"], name="Hall")
        ob = wait_outbox("the refused record among the dead letters", db, 1, 0)
        d = ob["dead"][0]
        assert (d["kind"], d["user"], d["room_id"], d.get("name"), d["status"]) == \
            ("added", "guest", "hall", "Hall", 400)
        assert (ob["dead_count"], ob["pending_count"]) == (1, 0)
        assert d["id"].isdigit() and "test: refused" in d["answer"]
        assert d["dead_at"] > 0 and d.get("joined_at", 0) > 0
        rx.refuse = False
        again = db.retry_outbox(d["id"])
        assert (again["retried"], again["kind"], again["user"], again["room_id"]) == \
            (d["id"], "added", "guest", "hall")
        assert int(again["id"]) > int(d["id"]), "pending again under a new id"
        wait_outbox("the retried record delivered", db, 0, 0)
        sent = [st for p, st in rx.got if p.startswith("/v1/users/guest/")]
        assert sent[0] == 400 and sent.count(400) == 1 and 200 in sent, \
            f"refused once (not sent again while dead), then delivered: {sent}"
        with pytest.raises(StrataError) as e:
            db.retry_outbox(d["id"])
        assert (e.value.status, e.value.code) == (404, "not_found"), "a dead letter is retried once"

    async def aio() -> None:
        async with AsyncStrata(s.url, token=admin, backoff=FAST) as adb:
            ob = await adb.outbox(limit=1)
            assert (ob["route_url"], ob["dead"], ob["dead_count"]) == (rx.url, [], 0)
            with pytest.raises(StrataError) as e:
                await adb.retry_outbox(d["id"])
            assert e.value.status == 404

    asyncio.run(aio())
