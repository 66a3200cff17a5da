"""Which operator of a peering is active (:mod:`tickwork.operator.peers`), and what an operator
that becomes active again trusts of its index: pure decisions with a clock the test moves, the
re-activation barrier on a hand-made index, and the registry letting a peering's replicas in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork.db.operators import Registration
from tickwork.operator import handlers, peers, tenants
from tickwork.operator.config import OperatorConfig
from tickwork.operator.database import Database
from tickwork.operator.reporter import Shown

NOW = 1_800_000_000.0
SPEC = {"schedule": "0 3 * * *", "job": {"kind": "k"}}


def seen(at: float, priority: int, lifetime: int = 10) -> dict[str, Any]:
    lastseen = datetime.fromtimestamp(at, UTC).isoformat()
    return {"priority": priority, "lifetime": lifetime, "lastseen": lastseen}


def test_the_older_operator_has_the_higher_priority_and_ties_are_unlikely() -> None:
    older = peers.derived_priority(NOW, jitter=999)
    younger = peers.derived_priority(NOW + 0.001, jitter=0)
    assert older > younger
    assert older < 0, "a kopf operator of the default priority 0 pauses them"
    assert peers.derived_priority(NOW, jitter=1) != peers.derived_priority(NOW, jitter=2)
    assert abs(peers.derived_priority(NOW)) < 2**53, "a JSON number every client reads exactly"


def test_only_live_peers_of_a_priority_as_high_block() -> None:
    status = {
        "me": seen(NOW, -5),
        "higher": seen(NOW - 1, -1),
        "equal": seen(NOW - 1, -5),
        "lower": seen(NOW - 1, -9),
        "dead": seen(NOW - 11, 100),
    }
    found = {p.identity for p in peers.blockers([status], "me", -5, NOW)}
    assert found == {"higher", "equal"}
    assert peers.blockers([{"me": seen(NOW, -5), "lower": seen(NOW, -9)}], "me", -5, NOW) == []


class Scripted:
    """The peering object's statuses, set by the test; raises what it is given."""

    def __init__(self) -> None:
        self.answer: list[Mapping[str, Any]] | Exception = []

    def __call__(self) -> list[Mapping[str, Any]]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_the_watch_follows_the_peering_object(caplog: pytest.LogCaptureFixture) -> None:
    clock = [NOW]
    changes: list[bool] = []
    missing: list[str | None] = []
    script = Scripted()

    async def changed(active: bool) -> None:
        changes.append(active)

    watch = peers.Watch(
        script,
        identity="me",
        priority=-5,
        lifetime=10,
        interval=0,
        where="ClusterKopfPeering 'tickwork'",
        on_change=changed,
        on_missing=missing.append,
        now=lambda: clock[0],
    )
    script.answer = [{"other": seen(NOW, -9)}]
    await watch.check()
    assert changes == [], "not active before its own keep-alive is in the object"
    script.answer = [{"me": seen(NOW, -5), "older": seen(NOW, -1)}]
    with caplog.at_level(logging.INFO, logger="tickwork.operator.peers"):
        await watch.check()
    assert changes == [] and "standby: operator older" in caplog.text
    clock[0] = NOW + 10  # the older one's lifetime ran out: killed
    await watch.check()
    assert changes == [True]
    script.answer = RuntimeError("connection refused")
    clock[0] = NOW + 15
    await watch.check()
    assert changes == [True], "a read failing for less than a lifetime changes nothing"
    clock[0] = NOW + 21
    await watch.check()
    assert changes == [True, False], "unread for a lifetime: it may have been replaced"
    script.answer = [{"me": seen(NOW + 21, -5)}]
    await watch.check()
    assert changes == [True, False, True]
    script.answer = peers.Missing("ClusterKopfPeering 'tickwork'")
    await watch.check()
    assert changes[-1] is False and missing == []
    clock[0] += peers.MISSING_WARN_SECONDS
    with caplog.at_level(logging.WARNING, logger="tickwork.operator.peers"):
        await watch.check()
        await watch.check()
    (reason,) = missing
    assert reason and "clusterkopfpeerings.kopf.dev" in reason and "--standalone" in reason
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warned if "missing" in w]) == 1
    assert len([w for w in warned if "reading the peering object failed" in w]) == 1
    script.answer = [{"me": seen(clock[0], -5)}]
    await watch.check()
    assert missing == [reason, None] and changes[-1] is True
    script.answer = [{"other": seen(clock[0], -9)}]  # its keep-alives stopped reaching it
    await watch.check()
    clock[0] += peers.MISSING_WARN_SECONDS
    await watch.check()
    assert changes[-1] is False
    assert missing[-1] and "holds no keep-alive of this operator ('me')" in missing[-1]


def shown(name: str, uid: str, version: str, at: float) -> Shown:
    metadata = {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": version}
    return Shown.of({"metadata": metadata, "spec": SPEC}, at)


async def test_a_reactivated_operator_waits_for_edits_and_forgets_deletions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Active, paused (kopf's watch stops), active again: its index still holds ``gone``
    (deleted meanwhile) and ``kept`` at the version before an edit. The barrier waits until
    the edit is indexed, and the view leaves ``gone`` out; so does a stale TenantPolicy."""
    config = OperatorConfig("postgresql://unused", listing_interval=0.01)
    runtime = handlers.Runtime(config, Database("postgresql://unused"), None)
    loop = asyncio.get_running_loop()
    before = loop.time() - 100
    index = {"ns": [shown("kept", "u1", "1", before), shown("gone", "u2", "1", before)]}
    runtime.index = index  # type: ignore[assignment]
    runtime.policies.observe(None, {"metadata": {"name": "old", "uid": "p1"}, "spec": {}})
    runtime.policies._versions["old"] = ("1", before)  # observed before the pause
    monkeypatch.setattr(tenants, "listed_versions", lambda: set())
    monkeypatch.setattr(runtime.lister, "versions", lambda: {("ns", "kept", "u1", "2")})

    barrier = asyncio.create_task(runtime._barrier(first=False))
    await asyncio.sleep(0.1)
    assert not barrier.done(), "kept is indexed at version 1, the listing says 2"
    assert runtime.policies.current() == (), "a policy deleted meanwhile is forgotten"
    index["ns"][0] = shown("kept", "u1", "2", loop.time())
    await asyncio.wait_for(barrier, 5)
    assert [s.entry.key for s in runtime.shown()] == [("ns", "kept")]
    late = shown("late", "u3", "1", loop.time())  # created after the listing
    index["ns"].append(late)
    assert [s.entry.key[1] for s in runtime.shown()] == ["kept", "late"]


async def test_the_first_activation_wants_every_listed_object_indexed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = OperatorConfig("postgresql://unused", listing_interval=0.01)
    runtime = handlers.Runtime(config, Database("postgresql://unused"), None)
    index: dict[str, list[Shown]] = {"ns": []}
    runtime.index = index  # type: ignore[assignment]
    monkeypatch.setattr(tenants, "listed_keys", lambda: set())
    monkeypatch.setattr(runtime.lister, "versions", lambda: {("ns", "a", "u1", "7")})
    barrier = asyncio.create_task(runtime._barrier(first=True))
    await asyncio.sleep(0.05)
    assert not barrier.done()
    index["ns"].append(shown("a", "u1", "6", 0.0))  # any version: kopf's watch never paused
    await asyncio.wait_for(barrier, 5)
    assert runtime.policies_complete


def registration(identity: str, scope: tuple[str, ...], peering: str | None) -> Registration:
    token = identity + ("" if peering is None else f"/{peering}")
    return Registration("operator:x", identity, token, scope, "host", 1, peering)


async def test_the_replicas_of_one_peering_share_the_registry(database_url: str) -> None:
    database = Database(database_url)
    try:
        assert await database.join(registration("a", (), "tickwork"), 30) == []
        assert await database.join(registration("b", (), "tickwork"), 30) == []
        refused = await database.join(registration("c", (), None), 30)
        assert {m.identity for m in refused} == {"a", "b"}, "a standalone one overlaps"
        other = await database.join(registration("d", (), "another"), 30)
        assert {m.identity for m in other} == {"a", "b"}, "another peering overlaps"
        narrower = await database.join(registration("e", ("team-a",), "tickwork"), 30)
        assert {m.identity for m in narrower} == {"a", "b"}, "another scope overlaps"
    finally:
        database.close()
