"""A database outage: the operator reports DatabaseUnavailable, keeps running, and catches up
with every change made meanwhile once the database is back."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.operator.harness import DEADLINE, Cluster, OperatorThread, operator_config, row
from tests.support.helpers import wait_until
from tickwork.db import migrate
from tickwork.db.embedded import EmbeddedPostgres

SPEC: dict[str, Any] = {"schedule": "0 * * * *", "job": {"kind": "s.job"}}


@pytest.fixture
def server() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of this test's own, to stop and start."""
    with tempfile.TemporaryDirectory(prefix="tickwork-test-operator-pg-") as tmp:
        os.chmod(tmp, 0o711)
        server = EmbeddedPostgres(Path(tmp), durable=False)
        migrate.apply(server.start())
        try:
            yield server
        finally:
            server.stop()


async def test_database_down_then_up(cluster: Cluster, server: EmbeddedPostgres) -> None:
    url = server.conninfo
    operator = OperatorThread(operator_config(url))
    await operator.start()
    try:
        await cluster.create("before", SPEC)
        await cluster.wait_ready("before", "Synced")

        await asyncio.to_thread(server.stop)
        await cluster.create("during", SPEC)
        await cluster.patch("before", {"spec": {"schedule": "30 * * * *"}})
        await cluster.wait_ready("during", "DatabaseUnavailable")
        await cluster.wait_ready("before", "DatabaseUnavailable")
        await wait_until(
            lambda: any(e["reason"] == "SyncFailed" for e in cluster.events("during")),
            what="a SyncFailed event",
        )

        await asyncio.to_thread(server.start)
        await cluster.wait_ready("during", "Synced")
        await cluster.wait_ready("before", "Synced")
        # The Ready reason comes from the sync, the revision from the next read of the row:
        # a status written between the two shows the old revision for one refresh.
        await wait_until(
            lambda: ((cluster.get("before") or {}).get("status") or {}).get("revision") == 2,
            timeout=DEADLINE,
            what="before: status revision 2",
        )
        during, before = row(url, "during"), row(url, "before")
        assert during is not None and during["enabled"]
        assert before is not None and before["spec"]["schedule"] == "30 * * * *"
    finally:
        await asyncio.wait_for(operator.stop(), DEADLINE)
