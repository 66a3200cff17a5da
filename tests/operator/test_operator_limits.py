"""Hostile Schedule objects against the real operator (kopf against kmock, a real database):
payloads nested 600 and 5000 levels deep, and hypothesis-generated values at and beyond every
field's limit, several objects created at once. Each is InvalidSpec naming the field, or
synced; a good Schedule in another namespace syncs meanwhile; after a restart the complete
view is reached and syncs; and every hostile object can be deleted (finalizer gone, object
gone). kmock checks no schema, so the operator sees values the CRD would refuse: it must cope
with them too."""

from __future__ import annotations

import asyncio
from itertools import count
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.operator.harness import DEADLINE, Cluster, OperatorFactory, OperatorThread, row
from tests.schedules import limit_helpers, limit_strategies
from tests.support.helpers import wait_until
from tickwork.operator.config import FINALIZER
from tickwork.schedules import limits

BAD = "hostile"
OTHER = "other"
GOOD: dict[str, Any] = {"schedule": "0 * * * *", "job": {"kind": "s.job"}}
DEEP = f"nests deeper than {limits.PAYLOAD_MAX_DEPTH} levels"
OUTCOMES = ("Synced", "InvalidSpec")


def deep_spec(levels: int) -> dict[str, Any]:
    return {"every": "1m", "job": {"kind": "s.job", "payload": limit_helpers.nested(levels)}}


async def wait_outcome(cluster: Cluster, name: str, namespace: str = BAD) -> dict[str, Any]:
    """The object's Ready condition once it says Synced or InvalidSpec."""
    await wait_until(
        lambda: (cluster.ready(name, namespace) or {}).get("reason") in OUTCOMES,
        timeout=DEADLINE,
        what=f"{namespace}/{name}: Synced or InvalidSpec",
    )
    condition = cluster.ready(name, namespace)
    assert condition is not None
    return condition


async def delete_and_wait(cluster: Cluster, names: list[str], namespace: str = BAD) -> None:
    for name in names:
        body = cluster.get(name, namespace)
        assert body is not None and FINALIZER in body["metadata"].get("finalizers", [])
        await cluster.delete(name, namespace)
    await wait_until(
        lambda: all(cluster.get(name, namespace) is None for name in names),
        timeout=DEADLINE,
        what=f"{names} to be deleted",
    )


async def test_deep_payloads_are_invalid_and_never_hold_up_the_view(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    first = await start_operator()
    await cluster.create("deep600", deep_spec(600), namespace=BAD)
    await cluster.create("deep5000", deep_spec(5000), namespace=BAD)
    await cluster.create("good", GOOD, namespace=OTHER)
    await cluster.wait_ready("good", "Synced", namespace=OTHER)
    for name in ("deep600", "deep5000"):
        await cluster.wait_ready(name, "InvalidSpec", namespace=BAD)
        condition = cluster.ready(name, BAD)
        assert condition is not None
        path = "spec.job.payload" + ".a" * limits.PAYLOAD_MAX_DEPTH
        assert condition["message"] == f"{path}: {DEEP}"
        assert row(database_url, name, BAD) is None

    await first.stop()
    await cluster.create("after-restart", GOOD, namespace=OTHER)
    await start_operator()
    await cluster.wait_ready("after-restart", "Synced", namespace=OTHER)  # the view completed
    await delete_and_wait(cluster, ["deep600", "deep5000"])
    stored = row(database_url, "good", OTHER)
    assert stored is not None and stored["enabled"]


def hostile_spec(changes: list[tuple[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedule": "@daily", "job": {"kind": "s.job"}}
    for path, value in changes:
        spec = limit_helpers.spec_with(path, value, base=spec)
    spec.pop("scheduleNamespace", None)  # another target namespace is another test's subject
    return spec


FIELDS = sorted(set(limits.FIELDS) - {"spec.scheduleNamespace"})
CHANGES = st.lists(
    st.sampled_from([*FIELDS, "spec.job.payload"]), min_size=1, max_size=2, unique=True
).flatmap(
    lambda paths: st.tuples(
        *(
            st.tuples(
                st.just(path),
                limit_strategies.PAYLOADS
                if path == "spec.job.payload"
                else limit_strategies.field_values(path),
            )
            for path in paths
        )
    ).map(list)
)
NAMES = count()


class Running:
    """The one operator the examples of a test share (started by the first)."""

    operator: OperatorThread | None = None


@settings(
    max_examples=8,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(CHANGES, min_size=2, max_size=3))
async def test_hostile_objects_are_invalid_or_synced_and_can_be_deleted(
    batch: list[list[tuple[str, Any]]],
    cluster: Cluster,
    start_operator: OperatorFactory,
    database_url: str,
) -> None:
    if Running.operator is None or not Running.operator._thread.is_alive():
        Running.operator = await start_operator()
    number = next(NAMES)
    names = [f"h{number}-{index}" for index in range(len(batch))]
    await asyncio.gather(
        *(
            cluster.create(name, hostile_spec(changes), namespace=BAD)
            for name, changes in zip(names, batch, strict=True)
        ),
        cluster.create(f"good{number}", GOOD, namespace=OTHER),
    )
    await cluster.wait_ready(f"good{number}", "Synced", namespace=OTHER)
    for name, changes in zip(names, batch, strict=True):
        condition = await wait_outcome(cluster, name)
        stored = row(database_url, name, BAD)
        if condition["reason"] == "InvalidSpec":
            message = condition["message"]
            assert any(path in message for path, _ in changes), (message, changes)
            assert len(message) < 500
            assert stored is None
        else:
            assert stored is not None and stored["enabled"]
    await delete_and_wait(cluster, names)
    for name in names:
        stored = row(database_url, name, BAD)
        assert stored is None or not stored["enabled"]
