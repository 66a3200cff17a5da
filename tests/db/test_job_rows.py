"""A job read from the database (``jobs_db._jobs``, which fills the frozen dataclass without
its ``__init__`` from the row's values in the order of ``JOB_COLUMNS``, for speed) is the same
:class:`Job` its constructor builds: every field set, equal, still frozen."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tickwork
from tests.support.helpers import T0
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.model import Backoff, Job, JobStatus


def _fields(job: Job) -> dict[str, object]:
    return {field.name: getattr(job, field.name) for field in dataclasses.fields(Job)}


def test_a_claimed_job_is_the_job_its_constructor_builds(
    app: tickwork.App, clock: SettableClock, conn: psycopg.Connection
) -> None:
    app.enqueue(
        "rows.full",
        {"nested": [1, {"a": None}]},
        queue="q",
        priority=3,
        run_at=T0 - timedelta(seconds=5),
        unique_key="u",
        max_attempts=4,
        retry=Backoff(2.0, 3.0, 60.0),
        timeout=9.5,
        concurrency_key="c",
    )
    app.enqueue("rows.bare", None)
    claimed = store.run(
        conn,
        jobs_db.claim_jobs("w1", ["q", "default"], {"rows.full": 7, "rows.bare": 2}, 10, 30, T0),
    )
    assert [job.kind for job in claimed] == ["rows.full", "rows.bare"]
    for job in claimed:
        assert set(vars(job)) == {field.name for field in dataclasses.fields(Job)}
        rebuilt = Job(**_fields(job))
        assert job == rebuilt
        assert job.status is JobStatus.RUNNING
        with pytest.raises(dataclasses.FrozenInstanceError):
            job.attempt = 5  # type: ignore[misc]
    full, bare = claimed
    assert (full.retry, full.timeout, full.max_attempts) == (Backoff(2.0, 3.0, 60.0), 9.5, 4)
    assert (full.unique_key, full.concurrency_key, full.priority) == ("u", "c", 3)
    assert full.payload == {"nested": [1, {"a": None}]}
    assert (bare.retry, bare.schedule, bare.max_attempts, bare.last_error) == (None, None, 2, None)
    fetched = store.run(conn, jobs_db.get_job(full.id))
    assert fetched is not None and fetched.created_at is not None
    assert set(vars(fetched)) == set(vars(full))
    assert dataclasses.replace(fetched, attempt=9).attempt == 9


TEXT = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))
"""What a jsonb string holds (NUL is refused at enqueue, tested with the limits)."""
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
).filter(lambda value: value is not None)  # None is enqueued as {}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(payload=JSON)
def test_a_payload_reads_back_as_the_drivers_jsonb_loader_reads_it(
    app: tickwork.App, conn: psycopg.Connection, payload: object
) -> None:
    """The worker parses the payload's JSON text itself; what it gets is what psycopg's jsonb
    loader gives (a float stored as an integral numeric comes back an int either way)."""
    job_id = app.enqueue("rows.payload", payload)
    job = store.run(conn, jobs_db.get_job(job_id))
    stored = conn.execute("SELECT payload FROM tickwork.jobs WHERE id = %s", (job_id,)).fetchone()
    assert job is not None and stored is not None
    assert job.payload == stored[0]
    assert type(job.payload) is type(stored[0])
    if not _has_float(payload):
        assert job.payload == payload


def _has_float(value: object) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, list):
        return any(_has_float(item) for item in value)
    if isinstance(value, dict):
        return any(_has_float(item) for item in value.values())
    return False


def test_a_result_whose_columns_are_not_job_columns_is_refused_not_misread() -> None:
    """Jobs are read by position (the columns checked once per result): a query listing the
    columns in another order would otherwise fill one field with another's value."""
    swapped = ["kind", "id", *jobs_db.JOB_COLUMNS[2:]]
    with pytest.raises(RuntimeError, match="JOB_COLUMNS"):
        jobs_db._jobs(swapped, [])
    assert jobs_db._jobs(list(jobs_db.JOB_COLUMNS[:-3]), []) == []
