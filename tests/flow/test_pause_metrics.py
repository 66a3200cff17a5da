"""The fleet gauges of pauses: how long each paused queue and namespace has been paused, on
the database's clock of the sample; nothing for what is not paused. A paused namespace's
schedules are not counted overdue (TickworkSchedulesOverdue is for schedules nobody holds)."""

from __future__ import annotations

from typing import Any

import psycopg
from prometheus_client import REGISTRY

import tickwork
from tests.support.helpers import at
from tests.support.schedule_helpers import NS, every
from tickwork.clock import SettableClock
from tickwork.maintenance import gauges


async def test_paused_targets_have_a_gauge_of_their_pause_age(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(NS, [every("s", 60)])
    app.pause_queue("held")
    clock.set(at(600))
    app.pause_namespace(NS)
    app.pause_queue("brief")
    app.resume_queue("brief")

    gauges.export(await gauges.sample(aconn, 60.0, at(4200)), fresh_for=3600)

    def value(name: str, **labels: str) -> float | None:
        return REGISTRY.get_sample_value(name, labels)

    assert value("tickwork_fleet_queue_paused_seconds", queue="held") == 4200
    assert value("tickwork_fleet_namespace_paused_seconds", schedule_namespace=NS) == 3600
    assert value("tickwork_fleet_queue_paused_seconds", queue="brief") is None
    # Its schedule, due at 60, is held on purpose: not counted overdue.
    overdue = "tickwork_fleet_overdue_schedules"
    assert value(overdue, schedule_namespace=NS) == 0

    app.resume_queue("held")
    gauges.export(await gauges.sample(aconn, 60.0, at(4300)), fresh_for=3600)
    assert value("tickwork_fleet_queue_paused_seconds", queue="held") is None
    app.resume_namespace(NS)
    gauges.export(await gauges.sample(aconn, 60.0, at(4300)), fresh_for=3600)
    assert value(overdue, schedule_namespace=NS) == 1
