"""Auto-suspend (spec.suspendAfterFailures, migration 0025): the consecutive occurrences of a
schedule that end dead are counted where a job's state changes (the jobs' triggers), a success
resets the count, and at N the schedule stops firing, once, naming the job; a run-now still
works; resuming (the App, a toggle of spec.suspend) starts the count again; several processes
ending jobs at once suspend it once. Real PostgreSQL, pinned times."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.forking import process_context
from tests.support.helpers import running, settings, wait_status
from tests.support.schedule_helpers import NS, T0, at, cron, fire, jobs
from tickwork.errors import InvalidTransition, ScheduleNotFound
from tickwork.worker.runner import Worker


def _sync(app: tickwork.App, suspend_after: int | None = 3, **fields: Any) -> None:
    app.sync_schedules(
        NS, [cron("hourly", "0 * * * *", suspend_after_failures=suspend_after, **fields)]
    )


def _occurrence(conn: psycopg.Connection[Any], hour: int, status: str) -> int:
    """A job of the occurrence at ``hour`` (after T0) that ended ``status``."""
    row = conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, occurrence_at) "
        "VALUES ('s.job', %s, 'hourly', %s) RETURNING id",
        (NS, at(hour * 3600)),
    ).fetchone()
    assert row is not None
    if status != "available":
        conn.execute(
            "UPDATE tickwork.jobs SET status = %s, finished_at = %s WHERE id = %s",
            (status, at(hour * 3600 + 60), row[0]),
        )
    return int(row[0])


def _state(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT suspended, dead_streak, dead_streak_job_id, failures_suspended_job_id "
        "FROM tickwork.schedules WHERE namespace = %s AND name = 'hourly'",
        (NS,),
    ).fetchone()
    assert row is not None
    return tuple(row)


async def _fire(database_url: str, hours: float) -> int:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
        report = await fire(c, at(hours * 3600))
    return report.fired


def test_n_consecutive_dead_occurrences_suspend_the_schedule_naming_the_jobs(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    _sync(app)
    first = _occurrence(conn, 1, "dead")
    second = _occurrence(conn, 2, "dead")
    assert _state(conn) == (False, 2, first, None)
    third = _occurrence(conn, 3, "dead")
    assert _state(conn) == (True, 3, first, third)
    row = app.get_schedule(NS, "hourly")
    assert row.failures_suspended_at == at(3 * 3600 + 60)
    assert second  # counted in between
    # It fires nothing while suspended...
    before = len(jobs(conn, "hourly"))
    assert asyncio.run(_fire(database_url, 6)) == 0
    assert len(jobs(conn, "hourly")) == before
    # ...but a run-now works.
    job_id = app.trigger(NS, "hourly", actor="test")
    assert app.get_job(job_id).status.value == "available"
    # A fourth dead job (one still open then) counts on, suspends nothing twice.
    _occurrence(conn, 4, "dead")
    assert _state(conn) == (True, 4, first, third)


def test_a_success_resets_the_count_and_other_endings_do_not_count(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    _sync(app)
    _occurrence(conn, 1, "dead")
    _occurrence(conn, 2, "dead")
    _occurrence(conn, 3, "succeeded")
    assert _state(conn) == (False, 0, None, None)
    dead = _occurrence(conn, 4, "dead")
    _occurrence(conn, 5, "cancelled")  # neither counts nor resets
    trigger = app.trigger(NS, "hourly", actor="test")  # a run-now is not an occurrence
    conn.execute("UPDATE tickwork.jobs SET status = 'dead' WHERE id = %s", (trigger,))
    _occurrence(conn, 6, "dead")
    assert _state(conn) == (False, 2, dead, None)


def test_one_statement_ending_several_jobs_counts_after_its_last_success(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    _sync(app)
    ids = [_occurrence(conn, hour, "available") for hour in range(1, 6)]
    statuses = ["dead", "succeeded", "dead", "dead", "dead"]
    conn.execute(
        "UPDATE tickwork.jobs j SET status = u.status::tickwork.job_status, finished_at = %s "
        "FROM unnest(%s::bigint[], %s::text[]) AS u(id, status) WHERE j.id = u.id",
        (T0, ids, statuses),
    )
    assert _state(conn) == (True, 3, ids[2], ids[4])


def test_without_the_field_it_counts_and_never_suspends(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    _sync(app, suspend_after=None)
    for hour in range(1, 8):
        _occurrence(conn, hour, "dead")
    assert _state(conn)[:2] == (False, 7)


def test_resuming_fires_again_and_counts_from_zero(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    _sync(app, suspend_after=1)
    _occurrence(conn, 1, "dead")
    assert _state(conn)[0] is True
    assert asyncio.run(_fire(database_url, 5)) == 0
    outcome = app.resume_schedule(NS, "hourly", actor="ops", reason="fixed the bucket")
    assert outcome.changed and "resumed" in outcome.message
    assert _state(conn) == (False, 0, None, None)
    assert app.get_schedule(NS, "hourly").failures_suspended_at is None
    assert asyncio.run(_fire(database_url, 5)) == 1  # the latest missed occurrence (Latest)
    audit = conn.execute(
        "SELECT actor, action, reason FROM tickwork.audit_log WHERE action = 'resume'"
    ).fetchall()
    assert audit == [("ops", "resume", "fixed the bucket")]
    again = app.resume_schedule(NS, "hourly", actor="ops")
    assert not again.changed
    # One more dead occurrence suspends it again.
    _occurrence(conn, 2, "dead")
    assert _state(conn)[0] is True


def test_a_resume_is_refused_for_a_spec_suspend_a_disabled_or_an_unknown_schedule(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    with pytest.raises(ScheduleNotFound, match="no schedule 'hourly'"):
        app.resume_schedule(NS, "hourly", actor="ops")
    _sync(app, suspend=True)
    with pytest.raises(InvalidTransition, match=r"spec.suspend: true"):
        app.resume_schedule(NS, "hourly", actor="ops")
    app.sync_schedules(NS, [])
    with pytest.raises(InvalidTransition, match="is disabled"):
        app.resume_schedule(NS, "hourly", actor="ops")


def test_toggling_spec_suspend_resumes_and_other_changes_do_not(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    _sync(app, suspend_after=2)
    first = _occurrence(conn, 1, "dead")
    second = _occurrence(conn, 2, "dead")
    assert _state(conn) == (True, 2, first, second)
    _sync(app, suspend_after=5)  # another change: still suspended, the count kept
    assert _state(conn) == (True, 2, first, second)
    _sync(app, suspend_after=5, suspend=True)
    assert _state(conn) == (True, 0, None, None)  # suspended by its spec now
    _sync(app, suspend_after=5, suspend=False)
    assert _state(conn) == (False, 0, None, None)
    assert app.get_schedule(NS, "hourly").failures_suspended_at is None


# Installed in the test's database only: every time a schedule becomes suspended by failures.
SUSPENSIONS = """
CREATE TABLE public.suspensions (job_id bigint);
CREATE FUNCTION public.record_suspension() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.suspensions VALUES (NEW.failures_suspended_job_id);
    RETURN NEW;
END;
$$;
CREATE TRIGGER record_suspension AFTER UPDATE ON tickwork.schedules FOR EACH ROW
    WHEN (OLD.failures_suspended_at IS NULL AND NEW.failures_suspended_at IS NOT NULL)
    EXECUTE FUNCTION public.record_suspension();
"""


def _end_in_process(database_url: str, job_id: int, barrier: Any) -> None:
    with psycopg.connect(database_url, autocommit=True) as c:
        barrier.wait()
        c.execute(
            "UPDATE tickwork.jobs SET status = 'dead', finished_at = now() WHERE id = %s",
            (job_id,),
        )


def test_processes_ending_the_nth_failure_at_once_suspend_it_once(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    _sync(app, suspend_after=3)
    conn.execute(SUSPENSIONS)
    _occurrence(conn, 1, "dead")
    open_ids = [_occurrence(conn, hour, "available") for hour in range(2, 8)]
    spawn = process_context()
    barrier = spawn.Barrier(len(open_ids))
    processes = [
        spawn.Process(target=_end_in_process, args=(database_url, job_id, barrier))
        for job_id in open_ids
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    suspended, streak, _, by = _state(conn)
    assert (suspended, streak) == (True, 7)
    assert conn.execute("SELECT job_id FROM public.suspensions").fetchall() == [(by,)]
    assert by in open_ids


async def test_a_worker_ending_its_last_attempt_counts(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    """Through the real completion path: a worker runs a task that raises on its only attempt."""
    _sync(app, suspend_after=1)

    @app.task("s.job", max_attempts=1)
    def fail(job: tickwork.Job) -> None:
        raise RuntimeError("no")

    job = _occurrence(conn, -1, "available")
    worker = Worker(app, settings(database_url))
    async with (
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn,
        running(worker),
    ):
        await wait_status(aconn, job, "dead")
    assert _state(conn) == (True, 1, job, job)
