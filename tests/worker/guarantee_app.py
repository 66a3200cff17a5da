"""The App the worker processes of test_job_guarantees.py serve (``--app guarantee_app:app``).

``GUARANTEE_KINDS`` (comma-separated) picks the kinds this process registers, so a test can
run a mixed fleet; ``GUARANTEE_DIR`` is where the tasks leave their traces: one file per event,
``<event>-<job id>``, holding the wall-clock time of the event (every process runs on this
machine, so the times compare).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import tickwork

HOLD = "g.hold"
"""Runs until cancelled; on cancellation it cleans up for CLEANUP_SECONDS, then stops."""
QUICK = "g.quick"
ORPHAN = "g.orphan"
"""Hangs on its first attempt; its on_dead hook leaves a trace (and fails if told to)."""

CLEANUP_SECONDS = 0.5

app = tickwork.App()
_kinds = set(filter(None, os.environ.get("GUARANTEE_KINDS", "").split(",")))
_dir = Path(os.environ.get("GUARANTEE_DIR", "."))


def trace(event: str, job_id: int) -> None:
    """Written aside, then renamed: a test reads it as soon as the name exists."""
    written = _dir / f".{event}-{job_id}"
    written.write_text(repr(time.time()))
    os.replace(written, _dir / f"{event}-{job_id}")


def _task(kind: str, **options: Any) -> Any:
    def register(function: Any) -> Any:
        if kind in _kinds:
            app.task(kind, **options)(function)
        return function

    return register


@_task(HOLD)
async def hold(job: tickwork.Job) -> None:
    trace("started", job.id)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        trace("cancelled", job.id)
        await asyncio.sleep(CLEANUP_SECONDS)  # still running, still holding its key
        trace("stopped", job.id)
        raise


@_task(QUICK)
async def quick(job: tickwork.Job) -> None:
    trace("started", job.id)


def on_dead(job: tickwork.Job, conn: Any, error: str) -> None:
    trace("on-dead", job.id)
    if job.payload.get("hook_fails"):
        raise ValueError(f"hook of job {job.id} broke")


@_task(ORPHAN, on_dead=on_dead)
async def orphan(job: tickwork.Job) -> None:
    trace("started", job.id)
    if job.attempt == 1 and job.payload.get("hang", True):
        await asyncio.Event().wait()
    if job.payload.get("fail"):
        raise RuntimeError("failing as told")
