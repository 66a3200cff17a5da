"""Schedules that fire alike share one outcome in the firing statement (the jobs' fields but
for the schedule's name, the occurrences and the next run are sent once for all of them).
Whatever the mix of definitions, carried state and occurrences that already have a job, a
batch fires exactly what the same schedules fired one at a time (a batch of one shares with
nobody) would: the same jobs, field for field, and the same schedule rows after."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

import tickwork
from tests.firing.test_container_firing import JOB as CONTAINER_JOB
from tests.firing.test_container_firing import container
from tests.support.schedule_helpers import at, cron, every
from tickwork.clock import SettableClock
from tickwork.maintenance import firing
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import ConcurrencyPolicy, IntervalMode, JobTemplate, MisfirePolicy

VARIANTS: dict[str, Callable[[str], ScheduleDefinition]] = {
    "every": lambda name: every(name, 60),
    "every-other-kind": lambda name: every(name, 60, job=JobTemplate(kind="s.other", priority=3)),
    "cron": lambda name: cron(name, "*/2 * * * *"),
    "hashed": lambda name: cron(name, "H * * * *"),
    "jitter": lambda name: every(name, 60, jitter_seconds=40),
    "buffer-one": lambda name: every(name, 60, concurrency_policy=ConcurrencyPolicy.BUFFER_ONE),
    "forbid": lambda name: every(name, 60, concurrency_policy=ConcurrencyPolicy.FORBID),
    "catch-up": lambda name: every(
        name, 60, misfire_policy=MisfirePolicy.CATCH_UP, catch_up_limit=3
    ),
    "skip": lambda name: every(name, 60, misfire_policy=MisfirePolicy.SKIP),
    "fixed-delay": lambda name: every(name, 60, interval_mode=IntervalMode.FIXED_DELAY),
    "container": lambda name: every(name, 60, job=CONTAINER_JOB, container=container()),
}

_namespaces = itertools.count()

_JOB_FIELDS = """
SELECT schedule_name, occurrence_at, kind, queue, payload, priority, run_at, max_attempts,
       retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key,
       status, trace_context IS NULL AS untraced
FROM tickwork.jobs WHERE schedule_namespace = %s
ORDER BY schedule_name, occurrence_at
"""
_SCHEDULE_FIELDS = """
SELECT s.name, s.next_run_at, s.missed_before, s.last_occurrence_at, s.skipped_occurrences,
       s.last_job_status, j.occurrence_at AS last_job_occurrence, s.firing_error, s.revision
FROM tickwork.schedules s LEFT JOIN tickwork.jobs j ON j.id = s.last_job_id
WHERE s.namespace = %s
ORDER BY s.name
"""


async def _fired(
    conn: psycopg.AsyncConnection[Any], namespace: str, now: datetime, batch: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fire ``namespace`` at ``now`` inside a transaction rolled back after: what it made."""
    async with conn.transaction(force_rollback=True):
        await firing.run_once(conn, [namespace], now, config=firing.FiringConfig(batch=batch))
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(_JOB_FIELDS, (namespace,))
            made = await cur.fetchall()
            await cur.execute(_SCHEDULE_FIELDS, (namespace,))
            return made, await cur.fetchall()


flags = st.tuples(st.booleans(), st.booleans())  # (carries state, has a job already)
schedules = st.lists(
    st.tuples(st.sampled_from(sorted(VARIANTS)), st.lists(flags, min_size=1, max_size=3)),
    min_size=1,
    max_size=6,
)
"""Definitions, each for one to three schedules (those alike share a parsed definition)."""


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(drawn=schedules, minutes=st.sampled_from([1, 2, 7]))
def test_a_batch_fires_what_each_schedule_fired_alone_would(
    database_url: str,
    conn: psycopg.Connection[Any],
    drawn: list[tuple[str, list[tuple[bool, bool]]]],
    minutes: int,
) -> None:
    namespace = f"alike-{next(_namespaces)}"
    listed = [("every", False, False)]  # one at least fires
    listed += [(variant, *flag) for variant, flagged in drawn for flag in flagged]
    definitions = [VARIANTS[variant](f"s{i:02}") for i, (variant, _, _) in enumerate(listed)]
    app = tickwork.App(database_url, clock=SettableClock(at(0)))
    try:
        app.sync_schedules(namespace, definitions)
    finally:
        app.close()
    for definition, (_, carries_state, has_job) in zip(definitions, listed, strict=True):
        if carries_state:
            conn.execute(
                "UPDATE tickwork.schedules SET state = %s WHERE namespace = %s AND name = %s",
                (Jsonb({"from": definition.name}), namespace, definition.name),
            )
        if has_job:  # its first due occurrence has a job already (another worker's)
            conn.execute(
                "INSERT INTO tickwork.jobs (kind, queue, schedule_namespace, schedule_name,"
                " occurrence_at) SELECT 'other', 'default', namespace, name, next_run_at"
                " FROM tickwork.schedules WHERE namespace = %s AND name = %s",
                (namespace, definition.name),
            )
    conn.commit()
    now = at(60 * minutes) + timedelta(seconds=1)

    async def both() -> tuple[Any, Any]:
        async with await psycopg.AsyncConnection.connect(database_url) as aconn:
            alone = await _fired(aconn, namespace, now, batch=1)
            return alone, await _fired(aconn, namespace, now, batch=500)

    alone, together = asyncio.run(both())
    assert together == alone
    assert any(job["kind"] != "other" for job in together[0])
