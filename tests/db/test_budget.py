"""The connection budget (issue 31, item 3): the arithmetic of :mod:`tickwork.db.budget` and of
``tickwork doctor``'s suggestions, without a database; then that the pools the worker, the
operator and the App really open are the sizes the budget states, and that what workers and
operators record in their rows is that number."""

from __future__ import annotations

import logging
import math

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tickwork
from tests.support import helpers
from tickwork.cli import doctor
from tickwork.db import budget, operators, server, store
from tickwork.db import workers as workers_db
from tickwork.db.budget import Budget, Fleet, Kind, Server, Verdict
from tickwork.operator.database import Database
from tickwork.worker.runner import Worker


def test_each_process_holds_what_its_parts_add_up_to() -> None:
    assert budget.worker().total == 13  # 6 pool, heartbeat, listener, probe, 4 App pool
    assert budget.worker(listening=False, probing=False).total == 11
    assert budget.worker(pooled=True).total == 1  # only its direct listener counts
    assert budget.worker(pooled=True, listening=False).total == 0
    assert budget.operator().total == 3
    assert budget.console().total == 5
    assert budget.UNRECORDED == {Kind.WORKER: 13, Kind.OPERATOR: 3}
    assert str(budget.worker()) == (
        "13 (6 pool, 1 heartbeat, 1 listener, 1 readiness probe, 4 App pool)"
    )


servers = st.builds(
    Server,
    max_connections=st.integers(1, 10_000),
    superuser_reserved=st.integers(0, 50),
    reserved=st.integers(0, 50),
)
fleets = st.builds(
    Fleet,
    kind=st.sampled_from([Kind.WORKER, Kind.OPERATOR]),
    processes=st.integers(0, 500),
    recorded=st.integers(0, 5000),
    unrecorded=st.integers(0, 50),
)
owns = st.one_of(
    st.none(),
    st.builds(budget.worker, listening=st.booleans(), probing=st.booleans(), pooled=st.booleans()),
    st.just(budget.operator()),
)


@given(servers, st.lists(fleets, max_size=3), owns)
def test_the_verdict_compares_the_fleet_and_its_own_with_what_is_available(
    limits: Server, fleet: list[Fleet], own: budget.Footprint | None
) -> None:
    found = Budget(limits, tuple(fleet), own)
    expected = sum(f.recorded + f.unrecorded * budget.UNRECORDED[f.kind] for f in fleet)
    expected += own.total if own else 0
    assert found.total == expected
    available = max(0, limits.max_connections - limits.superuser_reserved - limits.reserved)
    assert limits.available == available
    if expected > available:
        assert found.verdict is Verdict.OVER
    elif expected > 0.8 * available:
        assert found.verdict is Verdict.TIGHT
    else:
        assert found.verdict is Verdict.OK
    text = str(found)
    assert f"may open {expected} connections" in text
    assert f"{available} available (max_connections {limits.max_connections}" in text


@given(st.integers(0, 100_000), st.integers(0, 50), st.integers(0, 50))
def test_the_max_connections_doctor_suggests_fits_the_fleet_within_the_warning_share(
    total: int, superuser_reserved: int, reserved: int
) -> None:
    now = Server(100, superuser_reserved, reserved)
    needed = doctor.needed_max_connections(total, now)
    raised = Budget(Server(needed, superuser_reserved, reserved), (Fleet(Kind.WORKER, 1, total),))
    assert raised.verdict is Verdict.OK
    if total:  # and it is the least such setting
        lower = Budget(Server(needed - 1, superuser_reserved, reserved), raised.fleet)
        assert lower.verdict is not Verdict.OK


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(1, 20))
def test_room_is_how_many_more_fit(fleet_total: int, available: int, each: int) -> None:
    more = doctor.room(fleet_total, available, each)
    assert fleet_total + more * each <= max(available, fleet_total)
    if fleet_total + (more + 1) * each <= available:
        raise AssertionError(f"room for {more + 1}, said {more}")
    assert doctor.room(fleet_total, available, each, 0.8) == max(
        0, math.floor((0.8 * available - fleet_total) / each)
    )


@pytest.mark.parametrize(
    ("fleet_total", "level", "words"),
    [
        (0, logging.INFO, "connection budget: the tickwork fleet may open 13 connections"),
        (2, logging.WARNING, "connection budget tight (88%)"),
        (5, logging.ERROR, "connection budget exceeded"),
    ],
)
def test_the_start_up_report_logs_ok_tight_and_over_at_rising_levels(
    caplog: pytest.LogCaptureFixture, fleet_total: int, level: int, words: str
) -> None:
    found = Budget(Server(20, 3), (Fleet(Kind.WORKER, 1, fleet_total),), budget.worker())
    with caplog.at_level(logging.INFO):
        budget.report(found, logging.getLogger("budget-test"))
    (record,) = caplog.records
    assert record.levelno == level
    assert words in record.getMessage()
    assert "17 available (max_connections 20 - superuser_reserved_connections 3)" in (
        record.getMessage()
    )
    if level > logging.INFO:
        assert "raise max_connections" in record.getMessage()
        assert "PgBouncer" in record.getMessage()


def test_an_earlier_versions_row_counts_as_that_versions_default() -> None:
    fleet = Fleet(Kind.WORKER, 3, recorded=13, unrecorded=2)
    assert fleet.connections == 13 + 2 * 13
    assert "2 of an earlier version counted as 13 each" in str(fleet)


# --- the pools are the sizes the budget states --------------------------------------------


async def test_the_worker_opens_the_pool_the_budget_states_and_records_its_total(
    database_url: str, conn: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    app = helpers.make_app(database_url)
    worker = Worker(app, helpers.settings(database_url, http_port=0))
    assert worker.footprint == budget.worker(listening=True, probing=False)
    with caplog.at_level(logging.INFO, logger="tickwork.worker.runner"):
        async with helpers.running(worker):
            assert worker.pool.max_size == budget.WORKER_POOL
            assert worker.pool.min_size == budget.WORKER_POOL_MIN
            recorded = helpers.scalar(
                conn, "SELECT connections FROM tickwork.workers WHERE name = %s", (worker.name,)
            )
            assert recorded == worker.footprint.total == 12
    await app.close_async()
    (line,) = [r for r in caplog.records if "connection budget" in r.getMessage()]
    assert line.levelno == logging.INFO  # the server of the suite allows 200
    assert "this worker 12 (6 pool, 1 heartbeat, 1 listener, 4 App pool)" in line.getMessage()


async def test_a_worker_behind_a_transaction_pooler_records_its_direct_connections_only(
    database_url: str, conn: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    app = helpers.make_app(database_url)
    worker = Worker(app, helpers.settings(database_url, pooler="transaction"))
    with caplog.at_level(logging.INFO, logger="tickwork.worker.runner"):
        assert await worker.check_budget() is None
    assert worker.footprint.total == 0  # no --listen-url: it polls
    assert "behind a transaction pooler" in caplog.text


def test_the_apps_pool_is_the_size_the_budget_states(database_url: str) -> None:
    app = tickwork.App(database_url)
    try:
        with app.connection():
            pass
        assert app._pool is not None and app._pool.max_size == budget.APP_POOL
    finally:
        app.close()


async def test_the_operator_opens_the_pool_the_budget_states_and_records_its_total(
    database_url: str, conn: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    database = Database(database_url)
    try:
        assert database._connection_pool().max_size == budget.OPERATOR_POOL
        registration = operators.Registration(
            owner="operator:test", identity="op-1", token="t", scope=(), host="h", pid=1
        )
        assert await database.join(registration, 30.0) == []
    finally:
        database.close()
    assert helpers.scalar(conn, "SELECT connections FROM tickwork.operators") == (
        budget.operator().total
    )
    with caplog.at_level(logging.INFO):
        server.check_at_start(database_url, budget.operator(), logging.getLogger("op-test"))
    assert "1 operator: 3; this operator 3 (2 pool, 1 readiness probe)" in caplog.text


def test_the_fleet_counts_live_workers_and_operators_only(conn: psycopg.Connection) -> None:
    def worker(name: str, connections: int | None, seen: float) -> None:
        store.run(
            conn,
            workers_db.register_worker(
                name=name,
                queues=["default"],
                kinds=[],
                namespaces=[],
                concurrency=1,
                host="h",
                pid=1,
                heartbeat_seconds=10,
                connections=connections,
                now=helpers.at(seen),
            ),
        )

    worker("live", 13, 0)
    worker("old-version", None, -5)  # NULL: counted as this version's default
    worker("stale", 13, -21)  # missed two heartbeats of 10 s: not live
    fleet = store.run(conn, server.fleet_connections(helpers.at(0)))
    (workers,) = [f for f in fleet if f.kind is Kind.WORKER]
    assert (workers.processes, workers.recorded, workers.unrecorded) == (2, 13, 1)
    assert workers.connections == 26
