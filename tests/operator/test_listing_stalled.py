"""A start whose index never fills (kopf paused: no peering CRDs, or another operator holds the
peering) says so: one WARNING naming the cause and the way out, and a reason for ``/readyz``
until the view is complete. The clock is a counter the test moves; nothing sleeps."""

from __future__ import annotations

import logging

import pytest

from tickwork.operator import handlers, listing
from tickwork.operator.config import OperatorConfig
from tickwork.operator.database import Database

KEY = ("ns", "nightly", "uid-1")


class Counter:
    """A monotonic clock that moves ``step`` seconds on every reading."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


async def test_a_stalled_view_warns_once_and_is_reported_until_complete(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reasons: list[str | None] = []
    rounds = iter([set()] * 6 + [{KEY}])  # indexed: nothing for six rounds, then the object
    with caplog.at_level(logging.INFO, logger="tickwork.operator.listing"):
        await listing.wait_for_complete_view(
            lambda: {KEY},
            lambda: next(rounds),
            interval=0,
            on_error=pytest.fail,
            on_stalled=reasons.append,
            peering="tickwork",
            monotonic=Counter(listing.STALLED_SECONDS / 3),
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "1 Schedules listed but not indexed" in warnings[0]
    assert "kopfpeerings.kopf.dev" in warnings[0] and "--standalone" in warnings[0]
    assert "'tickwork'" in warnings[0]
    assert reasons[-1] is None  # complete: ready again
    assert reasons[:-1] and all(r and "nothing syncs" in r for r in reasons[:-1])
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert infos  # the first rounds, within STALLED_SECONDS, only at INFO


async def test_a_quick_view_reports_nothing(caplog: pytest.LogCaptureFixture) -> None:
    reasons: list[str | None] = []
    await listing.wait_for_complete_view(
        lambda: {KEY},
        lambda: {KEY},
        interval=0,
        on_error=pytest.fail,
        on_stalled=reasons.append,
        monotonic=Counter(1),
    )
    assert reasons == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_standalone_operator_is_pointed_at_its_watches() -> None:
    reason = listing.stalled_reason(3, 45, None)
    assert reason.startswith("3 Schedules listed but not indexed after 45s")
    assert "peering" not in reason and "RBAC" in reason


async def test_the_operators_readiness_carries_the_stalled_reason() -> None:
    runtime = handlers.Runtime(
        OperatorConfig("postgresql://unused"), Database("postgresql://unused"), None
    )
    assert await runtime.readiness() is None
    runtime._view_stalled(listing.stalled_reason(2, 31, "tickwork"))
    assert (await runtime.readiness() or "").startswith("2 Schedules listed but not indexed")
    runtime._view_stalled(None)
    assert await runtime.readiness() is None
