# SPDX-License-Identifier: MIT
# Every route through the sync and the asyncio client against the real server: typed answers,
# and every failure as StrataError with the §0 error body (status, code, message, extra fields).
# Each of the two tests records the requests its clients sent and checks them against the
# operations of the server's own OpenAPI document: a route added there and not called through
# the client fails them (streams are tested in test_stream.py; members-only and test-hook
# routes are not for clients).
from __future__ import annotations

import asyncio
import re
import time
from typing import Any, Callable, Dict, List, Set, Tuple

import httpx
import pytest
from conftest import Server, admin, token

from strata_client import AsyncStrata, Backoff, Strata, StrataError, call

FAST = Backoff(base=0.02, cap=0.3)
# a group's internal routes (cluster-secret only: the outbox between groups, Raft members) and
# the stream upgrade (covered by the streams); the Iceberg tables' commit status (operators'
# scripts poll it with curl; engines read the tables themselves)
NOT_FOR_CLIENTS = {"openStream", "adminTestDrift", "clusterSnapshot", "clusterAnnounce",
                   "clusterReadIndex", "clusterTyping", "clusterPresence",
                   "userRoomsRemote", "roomUserErasure",
                   # the Iceberg REST catalog is for query engines (DuckDB, Spark, PyIceberg)
                   "icebergConfig", "icebergListNamespaces", "icebergLoadNamespace",
                   "icebergListTables", "icebergLoadTable", "icebergReportMetrics",
                   "icebergOauthTokens", "adminTables"}


class Sent:
    """The (method, path) of every request the clients built on it sent."""

    def __init__(self) -> None:
        self.requests: Set[Tuple[str, str]] = set()
        self.queries: List[Tuple[str, str, str]] = []  # method, path, query of every request

    def sync(self) -> httpx.HTTPTransport:
        sent = self

        class T(httpx.HTTPTransport):
            def handle_request(self, request: httpx.Request) -> httpx.Response:
                sent.requests.add((request.method, request.url.path))
                sent.queries.append((request.method, request.url.path,
                                     request.url.query.decode()))
                return super().handle_request(request)

        return T()

    def aio(self) -> httpx.AsyncHTTPTransport:
        sent = self

        class T(httpx.AsyncHTTPTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                sent.requests.add((request.method, request.url.path))
                sent.queries.append((request.method, request.url.path,
                                     request.url.query.decode()))
                return await super().handle_async_request(request)

        return T()

    def uncalled(self, spec: Dict[str, Any]) -> List[str]:
        """The operations of the OpenAPI document no recorded request matched."""
        out = []
        for path, item in spec["paths"].items():
            rx = re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(path)) + "$")
            for method, op in item.items():
                if not isinstance(op, dict) or op.get("operationId") in NOT_FOR_CLIENTS:
                    continue
                if not any(m == method.upper() and rx.match(p) for m, p in self.requests):
                    out.append(str(op["operationId"]))
        return out


def raises(fn: Callable[[], Any]) -> StrataError:
    with pytest.raises(StrataError) as e:
        fn()
    return e.value


def test_every_route_sync(server: Server) -> None:
    sent = Sent()
    with Strata(server.url, token=admin, backoff=FAST, transport=sent.sync()) as db, \
            Strata(server.url, token=token("alice"), transport=sent.sync()) as alice, \
            Strata(server.url, token=token("ivy"), transport=sent.sync()) as ivy:
        assert db.incr("c", 3) == {"name": "c", "value": 3}
        assert db.incr("c") == {"name": "c", "value": 4}
        assert db.counter("c") == {"name": "c", "value": 4}
        assert db.distinct("d", "m") == {"name": "d", "value": 1, "added": True}
        assert db.distinct("d", "m") == {"name": "d", "value": 1, "added": False}
        assert db.next("s", 2) == {"name": "s", "first": 1, "last": 2}
        assert db.sequence("s") == {"name": "s", "last": 2}

        m = alice.post_message("alice", "c1", "hello", metadata={"a": 1})
        assert m["msg_id"].isdigit() and m["seq"] == 1 and m["conversation_id"] == "c1"
        m2 = alice.post_message("alice", "c1", "again", from_="bot")
        # rooms (SPEC §2.1): alice creates and owns one, bob is in it
        r = alice.create_room("den", ["bob"], name="Den")
        assert (r["room_id"], r["members"], r["last_msg_id"]) == ("den", 2, None)
        assert alice.change_members("den", add=["carol"]) == {"room_id": "den", "members": 3}
        rp = alice.post_room_message("den", "alice", "hi den")
        assert rp["room_id"] == "den" and rp["seq"] == 1
        assert alice.room_messages("den", order="desc")["messages"][0]["room_id"] == "den"
        assert alice.room("den")["last_msg_id"] == rp["msg_id"]
        assert [x["role"] for x in alice.room_members("den", limit=1)["members"]] == ["owner"]
        assert alice.mark_read("den", "alice", 1)["unread"] == 0
        alice.typing("den", "alice")  # 204, nothing to answer
        assert alice.room_presence("den") == {"room_id": "den", "online": []}
        assert [x["room_id"] for x in alice.user_rooms("alice")["rooms"]] == ["den"]
        assert raises(lambda: alice.post_room_message("den", "bob", "x")).status == 403
        room_roles(alice, ivy, db)
        page = alice.messages("alice", conversation_id="c1")
        assert [x["content"] for x in page["messages"]] == ["hello", "again"]
        assert page["messages"][0]["metadata"] == {"a": 1}
        assert page["messages"][1]["from"] == "bot" and page["next"] is None
        assert [x["msg_id"] for x in alice.messages("alice", after=m["msg_id"])["messages"]] \
            == [m2["msg_id"]]
        assert alice.messages("alice", before=m2["msg_id"])["messages"][0]["msg_id"] == m["msg_id"]
        desc = alice.messages("alice", order="desc", limit=1)
        assert desc["messages"][0]["content"] == "again" and desc["next"]
        assert alice.messages("alice", order="desc", limit=1,
                              cursor=desc["next"])["messages"][0]["content"] == "hello"
        assert [x["seq"] for x in alice.iter_messages("alice", page_size=1)] == [1, 2]
        assert alice.conversations("alice")["conversations"][0]["conversation_id"] == "c1"
        conv = alice.conversation("alice", "c1")
        assert conv["total_messages"] == 2 and conv["last_msg_id"] == m2["msg_id"]
        assert alice.stats("alice")["total_messages"] == 2

        ev = db.create_event({"event_id": "gig", "sections": [
            {"name": "A", "rows": 2, "cols": 3, "price": 7}]})
        assert ev["event_stats"]["total"] == 6
        assert db.events()["events"][0]["event_id"] == "gig"
        assert db.event("gig")["sections"]["A"]["price"] == 7
        assert db.seat_map("gig", "A")["encoding"] == "2bit-base64"
        assert db.seat_map("gig", "A", "json")["seats"] == [[0, 0, 0], [0, 0, 0]]
        b = db.book("gig", {"section": "A", "seats": ["1-1"]})
        assert b["total_price"] == 7 and b["status"] == "reserved"
        # owner: the token's sub; finished_at: None while reserved, set once sold or cancelled
        assert (b["owner"], b["finished_at"]) == ("ops", None)
        assert db.booking(b["booking_id"])["status"] == "reserved"
        assert db.booking(b["booking_id"], "gig")["booking_id"] == b["booking_id"]
        sold = db.confirm(b["booking_id"])
        assert sold["status"] == "sold" and sold["owner"] == "ops"
        assert isinstance(sold["finished_at"], int)
        assert b["created_at"] <= sold["finished_at"] <= time.time() * 1e6 + 1e6
        assert db.booking(b["booking_id"])["finished_at"] == sold["finished_at"]
        b2 = db.book("gig", {"section": "A", "quantity": 2})
        assert db.cancel(b2["booking_id"], "gig")["status"] == "cancelled"
        b3 = db.book("gig", {"section": "A", "quantity": 1})
        assert db.confirm(b3["booking_id"], "gig")["status"] == "sold"
        b4 = db.book("gig", {"section": "A", "quantity": 1})
        assert db.cancel(b4["booking_id"])["status"] == "cancelled"
        # the event's bookings (SPEC §4.2): newest first, by status, paged
        ids = [x["booking_id"] for x in (b4, b3, b2, b)]
        bpage = db.bookings("gig", limit=3)
        assert [x["booking_id"] for x in bpage["bookings"]] == ids[:3] and bpage["next"] == ids[2]
        assert [x["booking_id"] for x in db.bookings("gig", cursor=bpage["next"])["bookings"]] == \
            ids[3:]
        assert [x["booking_id"] for x in db.bookings("gig", status="sold")["bookings"]] == \
            [b3["booking_id"], b["booking_id"]]
        ab = alice.book("gig", {"section": "A", "seats": ["2-3"]})
        assert (ab["owner"], ab["finished_at"]) == ("alice", None)
        gone = alice.cancel(ab["booking_id"], "gig")
        assert gone["owner"] == "alice" and isinstance(gone["finished_at"], int)
        assert [(x["owner"], x["status"]) for x in db.bookings("gig", owner="alice")["bookings"]] \
            == [("alice", "cancelled")]

        # the cart (SPEC §4.1): items over several sections, general admission, extend, seats
        db.create_event({"event_id": "cart", "sections": [
            {"name": "A", "rows": 1, "cols": 4, "price": 1}, {"name": "F", "capacity": 5,
                                                              "price": 2}]})
        c = db.book("cart", {"items": [{"section": "A", "quantity": 2},
                                       {"section": "F", "quantity": 3}]})
        assert c["items"] == [{"section": "A", "seats": ["1-1", "1-2"], "quantity": 2},
                              {"section": "F", "seats": [], "quantity": 3}]
        assert db.extend("cart", c["booking_id"], 60)["expires_at"] == c["expires_at"] + 60_000_000
        assert db.change_seats("cart", c["booking_id"], {"add": ["1-4"], "remove": ["1-1"]}
                               )["seats"] == ["1-2", "1-4"]
        assert db.change_seats("cart", c["booking_id"], {"section": "F", "add_quantity": 2}
                               )["total_price"] == 2 + 10

        assert db.health()["status"] == "ok"
        assert "strata_http_requests_total" in db.metrics()
        assert raises(db.cluster).status == 404  # one node: not a member of a group
        assert db.flush()["flushing"] >= 0
        assert db.compact()["compacting"] >= 0 and db.compact("alice")["compacting"] >= 0
        assert isinstance(db.reconcile()["pass"], int)  # every key, in the background
        assert db.reconcile(user="alice", conversation_id="c1")["reconciled"] >= 0
        assert db.reconcile(counter="d")["drift"] == 0
        assert db.request(call("GET", "/v1/counters/c")) == {"name": "c", "value": 4}
        # the outbox's admin routes (SPEC §10): 404 without --route-url (test_outbox has one)
        calls: List[Callable[[], Any]] = [db.outbox, lambda: db.outbox(limit=5),
                                          lambda: db.retry_outbox("7")]
        for f in calls:
            nf = raises(f)
            assert (nf.status, nf.code) == (404, "not_found")

        # Errors: one type, with the status, the code and the body's extra fields.
        taken = raises(lambda: db.book("gig", {"section": "A", "seats": ["1-1"]}))
        assert (taken.status, taken.code, taken.body.get("seats")) == \
            (409, "seats_unavailable", ["1-1"])
        assert raises(lambda: db.change_seats("cart", c["booking_id"], {"add": ["1-2"]})
                      ).code == "seats_unavailable"
        final = raises(lambda: db.confirm(b["booking_id"]))
        assert final.code == "conflict" and final.body["booking"]["status"] == "sold"
        nf = raises(lambda: db.counter("never"))
        assert (nf.status, nf.code) == (404, "not_found") and nf.message
        assert raises(lambda: db.incr("bad name")).code == "invalid_argument"
        assert raises(lambda: db.event("nope")).status == 404
        assert raises(lambda: alice.stats("bob")).status == 403
        with Strata(server.url) as anon:
            assert raises(lambda: anon.counter("c")).code == "unauthenticated"
        with pytest.raises(ValueError):
            db.counter("")

        edits_deletes_and_erasure(db, ivy, server.url)
        # the two creates whose key is in the body name it for proxies (SPEC §10)
        assert ("POST", "/v1/events", "route=event:gig") in sent.queries
        assert ("POST", "/v1/rooms", "route=room:den") in sent.queries
        spec = db.openapi()
        assert spec["openapi"].startswith("3.") and "/v1/users/{user}/messages" in spec["paths"]
        assert sent.uncalled(spec) == [], "routes of the server the sync client was not tested on"


def test_every_route_async(server: Server) -> None:
    sent = Sent()

    async def main() -> None:
        async with AsyncStrata(server.url, token=admin, backoff=FAST, transport=sent.aio()) as db, \
                AsyncStrata(server.url, token=lambda: token("alice"),
                            transport=sent.aio()) as alice:
            assert await db.incr("c", 2) == {"name": "c", "value": 2}
            assert await db.counter("c") == {"name": "c", "value": 2}
            assert (await db.distinct("d", "m"))["added"] is True
            assert await db.next("s") == {"name": "s", "first": 1, "last": 1}
            assert await db.sequence("s") == {"name": "s", "last": 1}
            m = await alice.post_message("alice", "c1", "hi", metadata={"model": "m1"})
            assert (await alice.messages("alice"))["messages"][0]["msg_id"] == m["msg_id"]
            assert [x["content"] async for x in alice.iter_messages("alice", page_size=1)] == ["hi"]
            assert (await alice.conversations("alice"))["conversations"][0]["total_messages"] == 1
            await alice.create_room("aden", ["bob"])
            rp = await alice.post_room_message("aden", "alice", "hi")
            assert (await alice.room_messages("aden"))["messages"][0]["msg_id"] == rp["msg_id"]
            assert (await alice.mark_read("aden", "alice", 1))["last_read_seq"] == 1
            await alice.typing("aden", "alice")
            assert (await alice.room_presence("aden"))["online"] == []
            assert (await alice.user_rooms("alice"))["rooms"][0]["room_id"] == "aden"
            assert (await alice.change_members(
                "aden", add=[{"user": "cy", "role": "admin"}]))["members"] == 3
            me = await alice.set_room_member_role("aden", "bob", "admin")
            assert (me["user"], me["role"], me["last_read_seq"]) == ("bob", "admin", 0)
            assert {x["user"]: x["role"] for x in (await alice.room_members("aden"))["members"]} \
                == {"alice": "owner", "bob": "admin", "cy": "admin"}
            with pytest.raises(StrataError) as e:
                await alice.set_room_member_role("aden", "alice", "member")
            assert (e.value.status, e.value.code) == (409, "last_owner")
            with pytest.raises(StrataError) as e:
                await alice.change_members("aden", remove=["alice"])
            assert (e.value.status, e.value.code) == (409, "last_owner")
            assert (await alice.change_members("aden", remove=["bob", "cy"]))["members"] == 1
            assert (await alice.room("aden"))["total_messages"] == 1
            assert len((await alice.room_members("aden"))["members"]) == 1
            await alice.create_room("gone", [])
            gone = await alice.delete_room("gone")
            assert (await db.erasure(gone["erasure_id"]))["room_id"] == "gone"
            with pytest.raises(StrataError) as e:
                await alice.room("gone")
            assert e.value.status == 404
            assert (await alice.conversation("alice", "c1"))["first_msg_id"] == m["msg_id"]
            assert (await alice.stats("alice"))["conversations"] == 1
            await db.create_event({"event_id": "e", "name": "E", "sections": [
                {"name": "A", "rows": 1, "cols": 4, "price": 5}, {"name": "F", "capacity": 9}]})
            assert (await db.events(limit=1))["events"][0]["name"] == "E"
            assert (await db.event("e"))["sections"]["F"]["capacity"] == 9
            assert (await db.seat_map("e", "A", "json"))["seats"] == [[0, 0, 0, 0]]
            assert (await db.seat_map("e", "A"))["rows"] == 1
            b = await db.book("e", {"section": "A", "seats": ["1-1", "1-2"]})
            assert (await db.booking(b["booking_id"], "e"))["seats"] == ["1-1", "1-2"]
            b = await db.extend("e", b["booking_id"], 30)
            b = await db.change_seats("e", b["booking_id"], {"remove": ["1-1"]})
            assert b["seats"] == ["1-2"]
            assert (await db.confirm(b["booking_id"], "e"))["status"] == "sold"
            b2 = await db.book("e", {"section": "F", "quantity": 4})
            assert (await db.cancel(b2["booking_id"]))["status"] == "cancelled"
            b3 = await db.book("e", {"items": [{"section": "A", "quantity": 1},
                                               {"section": "F", "quantity": 2}]})
            assert [i["section"] for i in b3["items"]] == ["A", "F"]
            assert (await db.booking(b3["booking_id"]))["status"] == "reserved"
            assert (await db.cancel(b3["booking_id"], "e"))["status"] == "cancelled"
            b4 = await db.book("e", {"section": "F", "quantity": 1})
            assert (await db.confirm(b4["booking_id"]))["status"] == "sold"
            page = await db.bookings("e", limit=2)
            assert [x["booking_id"] for x in page["bookings"]] == \
                [b4["booking_id"], b3["booking_id"]] and page["next"] == b3["booking_id"]
            assert [x["booking_id"] for x in (await db.bookings("e", status="sold"))["bookings"]] \
                == [b4["booking_id"], b["booking_id"]]
            assert (await db.health())["status"] == "ok"
            assert "strata_" in await db.metrics()
            with pytest.raises(StrataError) as e:
                await db.cluster()
            assert e.value.status == 404
            assert (await db.flush())["flushing"] >= 0
            assert (await db.compact("alice"))["compacting"] >= 0
            assert isinstance((await db.reconcile())["pass"], int)
            assert (await db.reconcile(counter="d"))["reconciled"] >= 0
            for aw in (db.outbox(), db.retry_outbox("7")):
                with pytest.raises(StrataError) as e:
                    await aw
                assert (e.value.status, e.value.code) == (404, "not_found")
            with pytest.raises(StrataError) as e:
                await db.book("e", {"section": "A", "seats": ["1-2"]})
            assert e.value.code == "seats_unavailable" and e.value.body.get("seats") == ["1-2"]
            with pytest.raises(StrataError) as e:
                await alice.messages("bob")
            assert e.value.status == 403 and e.value.code == "forbidden"

            # edits, deletes and erasure (SPEC §2.2)
            m2 = await alice.post_message("alice", "c1", "secnod")
            ed = await alice.edit_message("alice", m2["msg_id"], content="second")
            assert ed["content"] == "second" and ed.get("edit_history", [])[0]["content"] == \
                "secnod"
            t = await alice.delete_message("alice", m2["msg_id"])
            assert t["content"] is None and t.get("deleted_at")
            assert [x["msg_id"] for x in (await alice.messages(
                "alice", include_deleted=False))["messages"]] == [m["msg_id"]]
            await alice.post_message("alice", "c2", "to go")
            assert await alice.delete_conversation("alice", "c2") == {"deleted": 1}
            rm = await alice.post_room_message("aden", "alice", "typo")
            assert (await alice.edit_room_message("aden", rm["msg_id"],
                                                  metadata={"k": 1}))["metadata"] == {"k": 1}
            assert (await alice.delete_room_message("aden", rm["msg_id"]))["content"] is None
            er = await db.erase_user("alice")
            for _ in range(200):
                if (await db.erasure(er["erasure_id"]))["status"] == "done":
                    break
                await asyncio.sleep(0.05)
            assert (await db.erasure(er["erasure_id"]))["status"] == "done"
            with pytest.raises(StrataError) as e:  # its old token: issued before the erasure
                await alice.messages("alice")
            assert e.value.code == "token_revoked"
            async with AsyncStrata(server.url,
                                   token=token("alice", iat=int(time.time()) + 1)) as again:
                assert (await again.messages("alice"))["messages"] == []

            spec = await db.openapi()
            assert sent.uncalled(spec) == [], "routes the async client was not tested on"

    asyncio.run(main())


def room_roles(alice: Strata, ivy: Strata, db: Strata) -> None:
    """SPEC §2.1 v5: add items with a role, set_room_member_role answering the member, admin in
    the listing, 409 last_owner as StrataError's code."""
    alice.create_room("crew", ["bob"])
    assert alice.change_members("crew", add=[{"user": "ivy", "role": "admin"}, "dee",
                                             {"user": "eve"}]) == {"room_id": "crew", "members": 5}

    def roles() -> Dict[str, str]:
        return {x["user"]: x["role"] for x in alice.room_members("crew")["members"]}

    assert roles() == {"alice": "owner", "bob": "member", "ivy": "admin", "dee": "member",
                       "eve": "member"}
    bob = alice.set_room_member_role("crew", "bob", "admin")
    assert sorted(bob) == ["joined_at", "last_read_seq", "role", "unread", "user"]
    assert (bob["user"], bob["role"], bob["last_read_seq"], bob["unread"]) == \
        ("bob", "admin", 0, 0) and bob["joined_at"] > 0
    assert alice.set_room_member_role("crew", "dee", "owner")["role"] == "owner"
    assert alice.set_room_member_role("crew", "dee", "member")["role"] == "member"
    assert roles() == {"alice": "owner", "bob": "admin", "ivy": "admin", "dee": "member",
                       "eve": "member"}
    # a room admin adds and removes members but changes no role; a non-member has none
    assert ivy.change_members("crew", remove=["eve"])["members"] == 4
    assert (lambda e: (e.status, e.code))(
        raises(lambda: ivy.set_room_member_role("crew", "dee", "admin"))) == (403, "forbidden")
    assert raises(lambda: alice.set_room_member_role("crew", "zoe", "admin")).status == 404
    with pytest.raises(ValueError):
        alice.change_members("crew", add="zoe")  # a str is a Sequence too: refused
    # the last owner neither leaves nor is demoted: 409 last_owner, and nothing changes
    for f in (lambda: alice.change_members("crew", remove=["alice"]),
              lambda: alice.set_room_member_role("crew", "alice", "admin")):
        e = raises(f)
        assert (e.status, e.code, e.body["code"]) == (409, "last_owner", "last_owner")
    assert roles()["alice"] == "owner"
    # ownership passes by a role change first; then the old owner steps down and leaves
    alice.set_room_member_role("crew", "bob", "owner")
    assert alice.set_room_member_role("crew", "alice", "member")["role"] == "member"
    assert alice.change_members("crew", remove=("alice",))["members"] == 3
    assert raises(roles).status == 403
    # SPEC §2.1 v5: an owner deletes the room; 404 at once, the erasure names the room
    assert raises(lambda: ivy.delete_room("crew")).status == 403  # a room admin may not
    gone = db.delete_room("crew")  # a global admin may
    assert gone["erasure_id"].isdigit()
    assert raises(lambda: db.room("crew")).status == 404
    st = db.erasure(gone["erasure_id"])
    assert st["room_id"] == "crew" and "user" not in st


def edits_deletes_and_erasure(db: Strata, ivy: Strata, url: str) -> None:
    if True:
        m = ivy.post_message("ivy", "e", "helo")
        ivy.post_message("ivy", "e", "second")
        ed = ivy.edit_message("ivy", m["msg_id"], content="hello", metadata={"fixed": True})
        assert ed["content"] == "hello" and ed["metadata"] == {"fixed": True}
        assert ed.get("edit_history", [])[0]["content"] == "helo"
        with pytest.raises(ValueError):
            ivy.edit_message("ivy", m["msg_id"])  # nothing to change: refused before sending
        t = ivy.delete_message("ivy", m["msg_id"])
        assert t["content"] is None and t.get("deleted_at")
        assert ivy.delete_message("ivy", m["msg_id"]) == t
        assert raises(lambda: ivy.edit_message("ivy", m["msg_id"], content="x")).status == 409
        assert [x["seq"] for x in ivy.messages("ivy", include_deleted=False)["messages"]] == [2]
        assert ivy.conversation("ivy", "e")["total_messages"] == 1
        assert ivy.delete_conversation("ivy", "e") == {"deleted": 1}
        assert raises(lambda: ivy.conversation("ivy", "e")).status == 404
        # a room's message: its author edits, the owner deletes
        db.create_room("ivyroom", ["ivy", "root"])
        rm = ivy.post_room_message("ivyroom", "ivy", "in the room")
        assert ivy.edit_room_message("ivyroom", rm["msg_id"], content="edited")["room_id"] \
            == "ivyroom"
        assert db.delete_room_message("ivyroom", rm["msg_id"])["content"] is None
        assert db.room_messages("ivyroom", include_deleted=False)["messages"] == []
        # erasure: 202 with an id, then done
        e = db.erase_user("ivy")
        assert e["erasure_id"].isdigit()
        for _ in range(200):
            if db.erasure(e["erasure_id"])["status"] == "done":
                break
            time.sleep(0.05)
        assert db.erasure(e["erasure_id"])["status"] == "done"
        # its old token is refused (issued before the erasure); a new one sees a user never seen
        assert raises(lambda: ivy.messages("ivy")).code == "token_revoked"
        with Strata(url, token=token("ivy", iat=int(time.time()) + 1)) as again:
            assert again.messages("ivy")["messages"] == []
        assert "ivy" not in [x["user"] for x in db.room_members("ivyroom")["members"]]
