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
    """Build a small report and return it. tickwork does not keep return values: a real
    report would be written to where its readers look."""
    return {
        "format": (job.payload or {}).get("format", "text"),
        "generated_at": datetime.now(UTC).isoformat(),
        "attempt": job.attempt,
    }


@app.task("examples.slow", timeout=60)
async def slow(job: Job) -> None:
    """Take a few seconds without blocking the worker: ``{"seconds": 3}``."""
    await asyncio.sleep(float((job.payload or {}).get("seconds", 3)))
