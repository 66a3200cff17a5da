"""The App the worker processes of test_connection_faults.py, test_pgbouncer.py and
bench/faults.py serve (``--app fault_app:app``).

Every run of a task body appends ``<job id> <attempt>`` to ``$FAULT_DIR/runs-<pid>`` when
the body has finished (one file per process), so a test can count how often each job ran and
in which process; ``f.work`` also appends it to ``$FAULT_DIR/starts-<pid>`` when it starts
(a run cut short by a shutdown counts there). ``f.work`` takes ``$FAULT_WORK_SECONDS``
(default 0.2) so that connection cuts land while jobs run; ``f.tick`` is the kind of the
every-second schedules; with ``payload["until"]`` (a path), ``f.work`` runs until that file
exists (at most ``payload["seconds"]``), so a test ends a job when it is ready. ``f.block``
blocks the worker's event loop (a sync sleep in an async task) for ``payload["seconds"]``, and
is recorded as it starts, so that a second start shows even if it never finishes.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import tickwork

WORK = "f.work"
TICK = "f.tick"
BLOCK = "f.block"

app = tickwork.App()
_runs = Path(os.environ.get("FAULT_DIR", ".")) / f"runs-{os.getpid()}"
_starts = _runs.with_name(f"starts-{os.getpid()}")
_seconds = float(os.environ.get("FAULT_WORK_SECONDS", "0.2"))


def _ran(job: tickwork.Job, record: Path = _runs) -> None:
    with record.open("a") as out:
        out.write(f"{job.id} {job.attempt}\n")


@app.task(WORK)
async def work(job: tickwork.Job) -> None:
    _ran(job, _starts)
    seconds = float(job.payload.get("seconds", _seconds))
    release = job.payload.get("until")
    if release is None:
        await asyncio.sleep(seconds)
    else:  # runs until the test creates the file (at most ``seconds``)
        deadline = time.monotonic() + seconds
        while not Path(release).exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    _ran(job)


@app.task(TICK)
async def tick(job: tickwork.Job) -> None:
    _ran(job)


@app.task(BLOCK, max_attempts=3)
async def block(job: tickwork.Job) -> None:
    _ran(job)
    time.sleep(float(job.payload["seconds"]))  # what an async task must not do
