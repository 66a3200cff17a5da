"""The example App served by ``tickwork dev`` (and by ``tickwork worker --app
tickwork.examples:app``). The manifests in ``examples/schedules/`` schedule these tasks.

Tasks may run more than once (a worker that dies mid-job leaves it to be run again), so
each one is written to be harmless when repeated.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from typing import Any

from tickwork import App, Backoff, Job

app = App()


@app.task("examples.hello")
def hello(job: Job) -> None:
    """Print a greeting: ``{"name": "you"}``."""
    name = (job.payload or {}).get("name", "world")
    # One write per line: print() writes the text and the newline separately, so lines from
    # tasks running at once in threads would run together.
    print(f"Hello, {name}! (job {job.id})\n", end="", flush=True)


@app.task("examples.flaky", max_attempts=5, retry=Backoff(base=1, rate=2, max=10))
def flaky(job: Job) -> None:
    """Fail about half the time; each failure is retried after 1 s, 2 s, 4 s, ..."""
    if random.random() < 0.5:
        raise RuntimeError(f"flaky failure on attempt {job.attempt}")


@app.task("examples.report", timeout=30)
def report(job: Job) -> dict[str, Any]:
    """Build a small report and return it: the job keeps it as its result (``tickwork jobs
    get ID``), and as a schedule's job it becomes the payload of the next occurrence."""
    return {
        "format": (job.payload or {}).get("format", "text"),
        "generated_at": datetime.now(UTC).isoformat(),
        "attempt": job.attempt,
    }


@app.task("examples.slow", timeout=60)
async def slow(job: Job) -> None:
    """Take a few seconds without blocking the worker: ``{"seconds": 3}``."""
    await asyncio.sleep(float((job.payload or {}).get("seconds", 3)))


@app.task("examples.copy", timeout=600)
async def copy(job: Job) -> dict[str, Any]:
    """Copy some tables (pretend: ``{"tables": 10, "seconds": 0.5}``), reporting progress after
    each one, and return what was copied. ``tickwork jobs get ID`` (and the console's job
    page) shows the progress while it runs and the result once it is done (docs/results.md)."""
    payload = job.payload or {}
    tables = int(payload.get("tables", 10))
    rows = 0
    for done in range(1, tables + 1):
        await asyncio.sleep(float(payload.get("seconds", 0.5)))
        rows += 1000 * done
        # Never waits: the worker writes the latest report at most once every 2 s.
        await job.progress(done / tables, f"copied {done} of {tables} tables")
    return {"tables": tables, "rows": rows}
