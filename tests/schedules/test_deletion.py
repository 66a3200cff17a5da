"""Pruning a schedule (its deletion) cancels its pending jobs — delayed, due, waiting for a
retry — in the sync's transaction; running ones finish; spec.pendingJobsOnDelete: Keep leaves
them. Other schedules' jobs and jobs enqueued outside schedules are untouched; a sync that
fails validation, a dry run, an update and a re-enable cancel nothing. Audited per disabled
schedule, counted as cancelled."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from prometheus_client import REGISTRY
from psycopg.rows import dict_row

import tickwork
from tests.support.helpers import claim, job_row, scalar
from tests.support.schedule_helpers import KIND, NS, at, every, fire, schedule
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.options import IntervalMode, JobTemplate, PendingJobsOnDelete
from tickwork.schedules.sync import AUDITED_JOB_IDS, SyncReport

OTHER_NS = "other"
JITTER = 59
KEEP = PendingJobsOnDelete.KEEP


def _jittered(name: str, queue: str | None = None, **fields: Any) -> tickwork.ScheduleDefinition:
    """Every minute, jittered; its jobs go to ``queue`` (default: a queue of its own name)."""
    job = JobTemplate(kind=KIND, queue=queue or name)
    return every(name, 60, jitter_seconds=JITTER, job=job, **fields)


def _kept() -> tickwork.ScheduleDefinition:
    return _jittered("kept", pending_jobs_on_delete=KEEP)


def _statuses(conn: psycopg.Connection[Any], name: str, namespace: str = NS) -> dict[int, str]:
    rows = conn.execute(
        "SELECT id, status FROM tickwork.jobs WHERE schedule_namespace = %s AND schedule_name = %s",
        (namespace, name),
    ).fetchall()
    return {int(r[0]): str(r[1]) for r in rows}


def _audit(conn: psycopg.Connection[Any], action: str = "disable") -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT * FROM tickwork.audit_log WHERE action = %s ORDER BY id", (action,)
        ).fetchall()


def _cancelled_metric(queue: str = "doomed", namespace: str = NS) -> float:
    labels = {"schedule_namespace": namespace, "queue": queue, "kind": KIND}
    value = REGISTRY.get_sample_value(
        "tickwork_jobs_completed_total", {**labels, "outcome": "cancelled"}
    )
    return value or 0.0


class Jobs:
    """One schedule's jobs in every pending shape, plus one running: occurrences at 0, 60,
    ..., 600 with the clock at 601 s, so the job of 600 is delayed by its jitter and the
    others are due; one claimed (running), one failed and waiting an hour for its retry."""

    def __init__(
        self,
        app: tickwork.App,
        conn: psycopg.Connection[Any],
        name: str,
        namespace: str = NS,
        queue: str | None = None,
    ) -> None:
        app.backfill(namespace, name, at(0), at(600))
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                "SELECT id, run_at FROM tickwork.jobs WHERE schedule_namespace = %s"
                " AND schedule_name = %s ORDER BY occurrence_at",
                (namespace, name),
            ).fetchall()
        assert len(rows) == 11
        self.ids = {int(r["id"]) for r in rows}
        self.delayed = int(rows[-1]["id"])
        assert rows[-1]["run_at"] > at(601), "the last occurrence's jitter delays it"
        running, retrying = claim(conn, kinds=[KIND], queues=[queue or name], now=at(601), limit=2)
        self.running = running.id
        assert store.run(conn, jobs_db.retry_job_later(retrying, 3600, "boom", at(601)))
        self.retrying = retrying.id


@pytest.fixture
def scene(app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock) -> None:
    """Schedules "doomed" and "kept" (Keep) in NS, "neighbour" in NS and "elsewhere" in
    OTHER_NS, each with pending jobs; the clock at 601 s."""
    clock.set(at(0))
    app.sync_schedules(NS, [_jittered("doomed"), _kept()])
    app.sync_schedules(NS, [_jittered("neighbour")], prune=False)
    app.sync_schedules(OTHER_NS, [_jittered("doomed", queue=OTHER_NS)])
    clock.set(at(601))


def test_pruning_cancels_delayed_due_and_retrying_jobs_and_lets_the_running_one_finish(
    app: tickwork.App, conn: psycopg.Connection[Any], scene: None
) -> None:
    doomed = Jobs(app, conn, "doomed")
    Jobs(app, conn, "neighbour")
    Jobs(app, conn, "doomed", OTHER_NS, queue=OTHER_NS)
    outside = app.enqueue(KIND, {"plain": True}, queue="doomed")
    before_neighbour = _statuses(conn, "neighbour")
    before_other = _statuses(conn, "doomed", OTHER_NS)
    counted = _cancelled_metric()

    report = app.sync_schedules(NS, [_jittered("neighbour"), _kept()])

    assert report == SyncReport(
        unchanged=["neighbour", "kept"], disabled=["doomed"], cancelled={"doomed": 10}
    )
    statuses = _statuses(conn, "doomed")
    assert statuses.pop(doomed.running) == "running"
    assert set(statuses.values()) == {"cancelled"}
    assert {doomed.delayed, doomed.retrying} <= set(statuses)
    retried = job_row(conn, doomed.retrying)
    assert (retried["attempt"], retried["finished_at"]) == (1, at(601))
    assert "disabled by pruning" in retried["last_error"]
    assert _statuses(conn, "neighbour") == before_neighbour
    assert _statuses(conn, "doomed", OTHER_NS) == before_other
    assert job_row(conn, outside)["status"] == "available"
    assert _cancelled_metric() - counted == 10
    stored = schedule(conn, "doomed")
    assert (stored["enabled"], stored["next_run_at"]) == (False, None)

    # the running job finishes and succeeds; nothing stopped it
    assert job_row(conn, doomed.running)["cancel_requested_at"] is None
    job = store.run(conn, jobs_db.get_job(doomed.running))
    assert job is not None
    assert store.run(conn, jobs_db.complete_jobs([job], at(602))) == {doomed.running}
    assert job_row(conn, doomed.running)["status"] == "succeeded"
    assert schedule(conn, "doomed")["last_success_at"] == at(602)


def test_an_audit_record_per_disabled_schedule_by_the_syncing_owner(
    app: tickwork.App, conn: psycopg.Connection[Any], scene: None
) -> None:
    doomed, kept = Jobs(app, conn, "doomed"), Jobs(app, conn, "kept")
    report = app.sync_schedules(NS, [_jittered("neighbour")], owner="tickwork")
    assert report.disabled == ["doomed", "kept"]
    assert report.cancelled == {"doomed": 10}
    records = {r["target"]: r for r in _audit(conn)}
    assert set(records) == {"schedule:ns/doomed", "schedule:ns/kept"}
    cancelled = records["schedule:ns/doomed"]
    assert (cancelled["actor"], cancelled["at"]) == ("tickwork", at(601))
    assert cancelled["details"] == {
        "reason": "pruned",
        "pending_jobs_on_delete": "Cancel",
        "cancelled_jobs": 10,
        "cancelled_job_ids": sorted(doomed.ids - {doomed.running}),
    }
    assert records["schedule:ns/kept"]["details"] == {
        "reason": "pruned",
        "pending_jobs_on_delete": "Keep",
        "cancelled_jobs": 0,
        "cancelled_job_ids": [],
    }
    assert set(_statuses(conn, "kept").values()) == {"available", "running"}
    assert len(kept.ids) == 11


def test_the_audit_lists_at_most_a_hundred_ids_with_the_exact_count(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    clock.set(at(0))
    app.sync_schedules(NS, [every("often", 1)])
    clock.set(at(200))
    app.backfill(NS, "often", at(1), at(150))
    app.sync_schedules(NS, [])
    (record,) = _audit(conn)
    assert record["details"]["cancelled_jobs"] == 150
    ids = record["details"]["cancelled_job_ids"]
    assert len(ids) == AUDITED_JOB_IDS
    assert ids == sorted(_statuses(conn, "often"))[:AUDITED_JOB_IDS]


def test_keep_leaves_the_pending_jobs_to_run(
    app: tickwork.App, conn: psycopg.Connection[Any], scene: None
) -> None:
    kept = Jobs(app, conn, "kept")
    before = _statuses(conn, "kept")
    report = app.sync_schedules(NS, [_jittered("doomed"), _jittered("neighbour")])
    assert report.disabled == ["kept"] and report.cancelled == {}
    assert _statuses(conn, "kept") == before
    assert job_row(conn, kept.retrying)["status"] == "available"
    # the kept jobs still run: a worker claims them though their schedule is disabled
    claimed = claim(conn, kinds=[KIND], queues=["kept"], now=at(4300), limit=100)
    assert kept.retrying in {j.id for j in claimed}


def test_a_spec_stored_before_the_field_existed_cancels(
    app: tickwork.App, conn: psycopg.Connection[Any], scene: None
) -> None:
    Jobs(app, conn, "kept")
    conn.execute(
        "UPDATE tickwork.schedules SET spec = spec - 'pendingJobsOnDelete' WHERE name = 'kept'"
    )
    report = app.sync_schedules(NS, [_jittered("doomed"), _jittered("neighbour")])
    assert report == SyncReport(
        unchanged=["doomed", "neighbour"], disabled=["kept"], cancelled={"kept": 10}
    )


def test_a_sync_that_fails_validation_cancels_nothing(
    app: tickwork.App, conn: psycopg.Connection[Any], scene: None
) -> None:
    Jobs(app, conn, "doomed")
    before = _statuses(conn, "doomed")
    invalid = every("broken", 60, job=JobTemplate(kind=KIND, priority=2**40))
    with pytest.raises(DefinitionError, match=r"spec\.job\.priority"):
        app.sync_schedules(NS, [_jittered("neighbour"), invalid])
    assert _statuses(conn, "doomed") == before
    assert schedule(conn, "doomed")["enabled"]
    assert _audit(conn) == []


def test_a_dry_run_reports_the_cancels_and_writes_nothing(
    app: tickwork.App, conn: psycopg.Connection[Any], scene: None
) -> None:
    Jobs(app, conn, "doomed")
    before = _statuses(conn, "doomed")
    counted = _cancelled_metric()
    report = app.sync_schedules(NS, [_kept()], dry_run=True)
    assert report.cancelled == {"doomed": 10}
    assert _statuses(conn, "doomed") == before
    assert _audit(conn) == [] and _cancelled_metric() == counted


def test_an_update_cancels_nothing_and_a_re_enable_brings_nothing_back(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock, scene: None
) -> None:
    doomed = Jobs(app, conn, "doomed")
    changed = every("doomed", 30, job=JobTemplate(kind=KIND, priority=3))
    report = app.sync_schedules(NS, [changed, _kept(), _jittered("neighbour")])
    assert report.updated == ["doomed"] and report.cancelled == {}
    assert set(_statuses(conn, "doomed").values()) == {"available", "running"}

    app.sync_schedules(NS, [_kept(), _jittered("neighbour")])
    cancelled = {i for i, s in _statuses(conn, "doomed").items() if s == "cancelled"}
    assert cancelled == doomed.ids - {doomed.running}
    clock.set(at(700))
    report = app.sync_schedules(NS, [changed, _kept(), _jittered("neighbour")])
    assert report.updated == ["doomed"]
    stored = schedule(conn, "doomed")
    assert stored["enabled"] and stored["next_run_at"] == at(720)  # a fresh start, no backlog
    assert {i for i, s in _statuses(conn, "doomed").items() if s == "cancelled"} == cancelled


def test_pruning_waits_for_a_claim_in_flight_and_leaves_what_it_claimed(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str, scene: None
) -> None:
    """A worker's claim holds some of the jobs when the sync reaches them: the sync waits,
    then sees them running and leaves them; the rest are cancelled, none both."""
    doomed = Jobs(app, conn, "doomed")
    reports: list[SyncReport] = []
    syncing = threading.Thread(target=lambda: reports.append(app.sync_schedules(NS, [_kept()])))
    with psycopg.connect(database_url) as claimer:
        claimed = {
            j.id for j in claim(claimer, kinds=[KIND], queues=["doomed"], now=at(601), limit=3)
        }
        assert len(claimed) == 3  # not committed: their rows stay locked
        syncing.start()
        syncing.join(0.5)
        assert syncing.is_alive(), "the sync waits for the claim's locks"
        claimer.commit()
    syncing.join(10)
    assert not syncing.is_alive()
    statuses = _statuses(conn, "doomed")
    running = claimed | {doomed.running}
    assert {i for i, s in statuses.items() if s == "running"} == running
    assert {i for i, s in statuses.items() if s == "cancelled"} == doomed.ids - running
    assert reports[0].cancelled == {"doomed": len(doomed.ids) - len(running)}


def test_jobs_cancelled_by_pruning_carry_their_attempt_and_no_worker(
    app: tickwork.App, conn: psycopg.Connection[Any], scene: None
) -> None:
    doomed = Jobs(app, conn, "doomed")
    app.sync_schedules(NS, [_kept()])
    delayed = job_row(conn, doomed.delayed)
    assert (delayed["status"], delayed["attempt"], delayed["picked_by"]) == ("cancelled", 0, None)
    assert delayed["run_at"] - delayed["occurrence_at"] <= timedelta(seconds=JITTER)
    assert (
        scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE cancel_requested_at IS NOT NULL")
        == 0
    )


async def test_a_pruned_fixed_delay_schedule_records_its_cancelled_job_and_stays_off(
    app: tickwork.App,
    conn: psycopg.Connection[Any],
    aconn: psycopg.AsyncConnection[Any],
    clock: SettableClock,
) -> None:
    """The trigger jobs_ended sees the cancel after the disable: the schedule's last
    job status is cancelled, and a FixedDelay schedule gets no next run from its job's end."""
    clock.set(at(0))
    app.sync_schedules(NS, [every("after", 60, interval_mode=IntervalMode.FIXED_DELAY)])
    assert (await fire(aconn, at(60))).fired == 1
    assert schedule(conn, "after")["next_run_at"] is None  # waits for its job
    clock.set(at(61))
    assert app.sync_schedules(NS, []).cancelled == {"after": 1}
    stored = schedule(conn, "after")
    assert (stored["enabled"], stored["next_run_at"]) == (False, None)
    assert stored["last_job_status"] == "cancelled"
