"""The background services' shape: configs refuse bad values naming the field, every fleet
duty is listed, and the firing planner decides without a database."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tickwork import metrics
from tickwork.errors import ConfigurationError
from tickwork.maintenance import claim_floors, deadlines, duties, gauges, leases, retention, workers
from tickwork.maintenance.firing import planner
from tickwork.maintenance.firing.config import FiringConfig
from tickwork.schedules import occurrences
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import IntervalMode, JobTemplate, MisfirePolicy
from tickwork.settings import WorkerSettings
from tickwork.worker.deaths import PendingHooksConfig

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (retention.RetentionConfig, "interval"),
        (retention.RetentionConfig, "age_seconds"),
        (retention.RetentionConfig, "batch"),
        (retention.RetentionConfig, "history_batch"),
        (leases.LeaseRecoveryConfig, "batch"),
        (workers.WorkerExpiryConfig, "ttl_seconds"),
        (claim_floors.ClaimFloorsConfig, "interval"),
        (claim_floors.ClaimFloorsConfig, "margin_seconds"),
        (deadlines.DeadlineCheckConfig, "interval"),
        (deadlines.DeadlineCheckConfig, "batch"),
        (gauges.GaugeSamplingConfig, "fresh_seconds"),
        (PendingHooksConfig, "batch"),
        (FiringConfig, "chunk"),
        (FiringConfig, "max_sleep"),
    ],
)
def test_a_service_config_refuses_a_bad_value_naming_the_field(config: Any, field: str) -> None:
    config()  # the defaults are valid
    with pytest.raises(ConfigurationError, match=rf"^{field}: must be positive, not 0$"):
        config(**{field: 0})


def test_firing_config_refuses_a_negative_warm_idle() -> None:
    with pytest.raises(ConfigurationError, match=r"^warm_idle: must be >= 0"):
        FiringConfig(warm_idle=-1)


def test_the_fleet_duties_take_the_workers_settings() -> None:
    settings = WorkerSettings(
        maintenance_seconds=7,
        gauges_seconds=20,
        retention_seconds=99,
        retention_batch=3,
        worker_ttl_seconds=50,
    )
    listed = duties.fleet_duties(settings, metrics.JobMeters())
    assert [s.name for s in listed] == [
        "recover_leases",
        "retention",
        "expire_workers",
        "claim_floors",
        "check_deadlines",
        "sample_gauges",
    ]
    assert all(s.shared for s in listed)
    assert [s.interval for s in listed] == [7, 7, 7, 7, 7, 20]
    by_name: dict[str, Any] = {s.name: s for s in listed}
    assert (by_name["retention"].config.age_seconds, by_name["retention"].config.batch) == (99, 3)
    assert by_name["expire_workers"].config.ttl_seconds == 50
    assert by_name["sample_gauges"].config.fresh_seconds == gauges.FRESH_INTERVALS * 20


# --- the firing planner ---------------------------------------------------------------------


@dataclass(frozen=True)
class Due:
    next_run_at: datetime
    now: datetime
    missed_before: datetime | None = None


def _compiled(seconds: int, **fields: Any) -> planner.Compiled:
    definition = ScheduleDefinition(
        name="s", job=JobTemplate(kind="k"), every=timedelta(seconds=seconds), **fields
    )
    fixed_delay = definition.interval_mode is IntervalMode.FIXED_DELAY
    return planner.Compiled(
        definition=definition,
        timetable=None if fixed_delay else definition.timetable("ns"),
        zone=occurrences.load_zone("UTC"),
        delay=definition.every if fixed_delay else None,
    )


def test_latest_fires_the_newest_due_occurrence_and_skips_the_rest() -> None:
    every_minute = _compiled(60, misfire_policy=MisfirePolicy.LATEST)
    plan = planner.plan(Due(at(0), at(150)), every_minute, 1000, planner.NextAfter())
    assert plan.fire == (at(120),)
    assert (plan.computed, plan.misfired) == (3, 2)
    assert plan.next_run_at == at(180)
    assert not plan.backlog


def test_a_backlog_longer_than_a_chunk_is_left_for_the_next_pass() -> None:
    every_second = _compiled(1, misfire_policy=MisfirePolicy.CATCH_UP, catch_up_limit=5)
    plan = planner.plan(Due(at(0), at(100)), every_second, 10, planner.NextAfter())
    assert plan.computed == 15, "a chunk plus the occurrences catch-up may keep"
    assert (plan.fire, plan.misfired) == ((), 10), "the oldest ten: beyond the last five"
    assert plan.next_run_at == at(10)
    assert plan.backlog


def test_fixed_delay_fires_one_job_and_waits_for_it() -> None:
    delayed = _compiled(60, interval_mode=IntervalMode.FIXED_DELAY)
    due = Due(at(0), at(30))
    plan = planner.plan(due, delayed, 1000, planner.NextAfter())
    assert plan.fire == (at(0),)
    assert planner.advanced_runs(due, delayed, plan.next_run_at, fired=True, created=True) == (
        None,
        None,
    ), "the job's end sets the next run"
    assert planner.advanced_runs(due, delayed, plan.next_run_at, fired=True, created=False) == (
        at(90),
        None,
    ), "its occurrence had a job already: every from now"


def test_missed_before_is_kept_only_while_the_next_run_is_before_it() -> None:
    hourly = _compiled(3600)
    due = Due(at(0), at(10), missed_before=at(7200))
    assert planner.advanced_runs(due, hourly, at(3600), fired=True, created=True) == (
        at(3600),
        at(7200),
    )
    assert planner.advanced_runs(due, hourly, at(7200), fired=True, created=True) == (
        at(7200),
        None,
    )
