"""Pause and resume on a real PostgreSQL: the claim passes over a paused queue's jobs (never
held back behind them), pause and resume are idempotent and audited, a paused namespace's
schedules fire nothing and its misses follow the misfire policy on resume, and KEDA's count
leaves paused work out."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import T0, at, claim, scalar
from tests.support.schedule_helpers import NS, every, fire, occurrences, schedule
from tickwork.clock import SettableClock
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.errors import InvalidInput
from tickwork.schedules.options import MisfirePolicy

KIND = "t.pause"


def _audit(conn: psycopg.Connection[Any]) -> list[tuple[str, str, str, str | None]]:
    rows = conn.execute(
        "SELECT actor, action, target, reason FROM tickwork.audit_log ORDER BY id"
    ).fetchall()
    return [tuple(row) for row in rows]


def test_the_claim_passes_over_a_paused_queue_and_takes_the_rest(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    # The paused queue's jobs come first in claim order (older, higher priority): they must
    # not hold back the other queue's.
    held = [app.enqueue(KIND, {}, queue="held", priority=5, run_at=at(-60)) for _ in range(3)]
    free = [app.enqueue(KIND, {}, queue="free") for _ in range(2)]
    app.pause_queue("held", actor="alice", reason="incident 7")

    got = claim(conn, kinds=[KIND], queues=["held", "free"], limit=2)
    assert sorted(job.id for job in got) == sorted(free)
    assert claim(conn, kinds=[KIND], queues=["held", "free"]) == []
    assert claim(conn, kinds=[KIND], queues=["held"]) == []  # all served queues paused

    app.resume_queue("held", actor="bob")
    assert sorted(job.id for job in claim(conn, kinds=[KIND], queues=["held"])) == sorted(held)


def test_running_jobs_of_a_paused_queue_stay_running(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    job = app.enqueue(KIND, {}, queue="held")
    assert [j.id for j in claim(conn, kinds=[KIND], queues=["held"])] == [job]
    app.pause_queue("held")
    assert app.get_job(job).status.value == "running"


def test_pause_and_resume_are_idempotent_and_audited(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    first = app.pause_queue("held", actor="alice", reason="incident 7")
    again = app.pause_queue("held", actor="carol")
    assert (first.changed, again.changed) == (True, False)
    assert again.message == "queue held is paused already"
    [pause] = app.list_pauses()
    assert (pause.scope, pause.name, pause.paused_by, pause.reason) == (
        "queue",
        "held",
        "alice",
        "incident 7",
    )
    assert pause.paused_at == T0  # the App's clock

    resumed = app.resume_queue("held", actor="bob")
    assert resumed.changed and not app.resume_queue("held", actor="bob").changed
    assert app.list_pauses() == []
    assert _audit(conn) == [
        ("alice", "pause", "queue:held", "incident 7"),
        ("bob", "resume", "queue:held", None),
    ]
    assert resumed.audit_id is not None


def test_a_request_id_seen_before_changes_nothing(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.pause_queue("held", request_id="r1")
    app.resume_queue("held")
    replay = app.pause_queue("held", request_id="r1")  # the client's retry of the first
    assert replay.replayed and not replay.changed
    assert app.list_pauses() == []


def test_a_namespace_never_synced_is_refused(app: tickwork.App) -> None:
    with pytest.raises(InvalidInput, match="namespace: no schedule namespace 'nope'"):
        app.pause_namespace("nope")
    with pytest.raises(InvalidInput, match="queue: must not be empty"):
        app.pause_queue(" ")


@pytest.mark.parametrize(
    ("policy", "fired_after_resume", "skipped"),
    [
        (MisfirePolicy.SKIP, [], 4),
        (MisfirePolicy.LATEST, [300], 3),
        (MisfirePolicy.CATCH_UP, [240, 300], 2),
    ],
)
async def test_a_paused_namespace_fires_nothing_and_its_misses_follow_the_misfire_policy(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
    policy: MisfirePolicy,
    fired_after_resume: list[int],
    skipped: int,
) -> None:
    app.sync_schedules(NS, [every("s", 60, misfire_policy=policy, catch_up_limit=2)])
    await fire(aconn, at(60))
    clock.set(at(90))
    app.pause_namespace(NS, actor="alice")
    assert (await fire(aconn, at(300))).claimed == 0  # paused: nothing fires
    next_due = store.run(conn, schedules_db.next_due([NS], at(300)))
    assert next_due.next_run_at is None  # the firing loop does not wake for it either
    assert schedule(conn, "s")["suspended"] is False  # the definition is untouched

    clock.set(at(330))
    app.resume_namespace(NS, actor="alice")
    assert schedule(conn, "s")["missed_before"] == at(330)
    await fire(aconn, at(331))  # 120 ... 300 fell due while paused
    assert occurrences(conn, "s") == [at(60)] + [at(s) for s in fired_after_resume]
    assert schedule(conn, "s")["skipped_occurrences"] == skipped
    await fire(aconn, at(360))  # on time again
    assert occurrences(conn, "s")[-1] == at(360)


async def test_pausing_one_namespace_leaves_the_others_firing(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("s", 60)])
    app.sync_schedules("other", [every("t", 60)])
    app.pause_namespace(NS)
    report = await fire(aconn, at(60), (NS, "other"))
    assert report.claimed == 1
    assert occurrences(conn, "s") == []
    assert occurrences(conn, "t") == [at(60)]


def test_keda_leaves_out_paused_work_but_counts_running_jobs(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("s", 60)])
    for _ in range(3):
        app.enqueue(KIND, {}, queue="held", run_at=at(-10))
    assert len(claim(conn, kinds=[KIND], queues=["held"], limit=1)) == 1
    app.enqueue(KIND, {}, queue="free", run_at=at(-10))

    def due() -> int:
        # On the database's clock, the pinned T0 is years ahead: a lead time that reaches it.
        query = "SELECT tickwork.keda_due_work(NULL, %s, 1e9)"
        return int(scalar(conn, query, ([NS],)))

    assert due() == 3 + 1 + 1  # jobs of both queues, and the schedule
    app.pause_queue("held")
    app.pause_namespace(NS)
    assert due() == 1 + 1  # the running job of the paused queue, the free queue's
