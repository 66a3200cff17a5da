"""Server-side prepared statements (``--prepared-statements``): a worker on a direct connection
prepares what its pool runs, the first time it runs there; behind a transaction-mode pooler
(``--pooler transaction``, which would lose them) nothing, unless told ``on``
(tests/db/test_pgbouncer.py runs whole workers through PgBouncer 1.18 with the default)."""

from __future__ import annotations

import pytest

import tickwork
from tests.support.helpers import running, settings
from tickwork.worker.runner import Worker

PROBE = "SELECT %s::int AS probe"


async def _prepared_on_the_pool(worker: Worker) -> int:
    """How many statements the worker's pool has prepared of one it runs once (0 or 1)."""
    async with worker.pool.connection() as conn:
        await conn.execute(PROBE, [1])
        cur = await conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement = %s",
            [PROBE.replace("%s", "$1")],
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize(
    ("overrides", "prepared"),
    [
        ({}, 1),
        ({"pooler": "transaction"}, 0),
        ({"prepared_statements": "off"}, 0),
        ({"pooler": "transaction", "prepared_statements": "on"}, 1),
    ],
    ids=["direct", "transaction pooler", "off", "on behind a pooler"],
)
async def test_the_workers_pool_prepares_on_a_direct_connection_only(
    database_url: str, overrides: dict[str, str], prepared: int
) -> None:
    app = tickwork.App(database_url)

    @app.task("t.prepared")
    def noop(job: tickwork.Job) -> None:
        return None

    worker = Worker(app, settings(database_url, **overrides))
    async with running(worker):
        assert await _prepared_on_the_pool(worker) == prepared
    app.close()
