"""Restarts: nothing is disabled while the new operator's view is incomplete, and what was
deleted while it was down is pruned once the view is complete."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.operator.harness import Cluster, OperatorFactory, row
from tests.support.helpers import wait_until

SPEC: dict[str, Any] = {"schedule": "0 * * * *", "job": {"kind": "s.job"}}

# Every write to tickwork.schedules, recorded by the database itself: a restart must write none.
RECORD_WRITES = """
CREATE TABLE public.schedule_writes (
    name text, old_enabled boolean, new_enabled boolean, old_revision int, new_revision int);
CREATE FUNCTION public.record_schedule_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.schedule_writes
    VALUES (NEW.name, OLD.enabled, NEW.enabled, OLD.revision, NEW.revision);
    RETURN NEW;
END $$;
CREATE TRIGGER record_schedule_write AFTER UPDATE ON tickwork.schedules
FOR EACH ROW EXECUTE FUNCTION public.record_schedule_write();
"""


def writes(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT * FROM public.schedule_writes").fetchall()


async def test_a_restart_disables_nothing_even_for_a_moment(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    first = await start_operator()
    names = [f"s{i}" for i in range(20)]
    for name in names:
        await cluster.create(name, SPEC)
    for name in names:
        await cluster.wait_ready(name, "Synced")
    await first.stop()
    with psycopg.connect(database_url) as conn:
        conn.execute(RECORD_WRITES)

    await start_operator()
    await cluster.create("after-restart", SPEC)
    await cluster.wait_ready("after-restart", "Synced")  # the new operator has synced ns
    assert writes(database_url) == []
    for name in names:
        stored = row(database_url, name)
        assert stored is not None and stored["enabled"] and stored["revision"] == 1


async def test_deleted_while_stopped_is_pruned_after_the_start(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    first = await start_operator()
    for name in ("kept", "forced", "pending"):
        await cluster.create(name, SPEC)
    for name in ("kept", "forced", "pending"):
        await cluster.wait_ready(name, "Synced")
    await first.stop()
    # "forced": its finalizer was removed by hand, so it is gone for good; "pending": deleted,
    # held by the finalizer until an operator disables it.
    await cluster.patch("forced", {"metadata": {"finalizers": None}})
    await cluster.delete("forced")
    await cluster.delete("pending")
    assert cluster.get("forced") is None and cluster.get("pending") is not None

    await start_operator()
    await wait_until(
        lambda: not (row(database_url, "forced") or {}).get("enabled", True),
        what="the schedule deleted while stopped to be disabled",
    )
    await wait_until(lambda: cluster.get("pending") is None, what="the pending deletion")
    pending = row(database_url, "pending")
    assert pending is not None and not pending["enabled"]
    kept = row(database_url, "kept")
    assert kept is not None and kept["enabled"] and kept["revision"] == 1


async def test_a_namespace_with_no_schedules_left_is_pruned_after_the_start(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    first = await start_operator()
    await cluster.create("only", SPEC, namespace="lonely")
    await cluster.wait_ready("only", "Synced", namespace="lonely")
    await first.stop()
    await cluster.patch("only", {"metadata": {"finalizers": None}}, namespace="lonely")
    await cluster.delete("only", namespace="lonely")

    await start_operator()
    await wait_until(
        lambda: not (row(database_url, "only", "lonely") or {}).get("enabled", True),
        what="the last schedule of the namespace to be disabled",
    )
