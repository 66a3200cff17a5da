"""The App of test_rolling_upgrade.py, served by workers of the previous release and of the
head alike (``--app upgrade_app:app``): it must import and run on both, so it uses only the
public API they share (``tickwork.App``, ``app.task``, ``Backoff``, ``enqueue_many``,
``sync_schedules``, ``ScheduleDefinition``, ``JobTemplate``).

Imported by a worker (``UPGRADE_DIR`` set), it writes ``<UPGRADE_DIR>/<worker name>.json``: the
tickwork it imported (file, installed version, ``tickwork.__version__`` where there is one)
and its pid; each run of a job leaves ``<UPGRADE_DIR>/runs/<job id>-<attempt>-<worker name>``.

Run as a script with the interpreter of either release, it acts with that release's code:
``enqueue N`` (N plain jobs, a tenth of them of the flaky kind) or ``sync NAMESPACE`` (the
namespace's schedules, every second).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import tickwork

KIND = "upgrade.work"
WORK_SECONDS = 0.01
"""What a job does: a little time spent, so that every worker gets some of a batch."""
SCHEDULES = ("every-second", "every-other-second")

app = tickwork.App()
_dir = Path(os.environ["UPGRADE_DIR"]) if "UPGRADE_DIR" in os.environ else None
_name = os.environ.get("TICKWORK_NAME", "")


FLAKY = "upgrade.flaky"
"""Fails its first attempt (a retry, its error written), succeeds on the second."""


def _trace(job: tickwork.Job) -> None:
    if _dir is not None:
        (_dir / "runs" / f"{job.id}-{job.attempt}-{_name}").touch()


@app.task(KIND)
def work(job: tickwork.Job) -> None:
    time.sleep(WORK_SECONDS)
    _trace(job)


@app.task(FLAKY, retry=tickwork.Backoff(base=0.1, rate=1, max=0.1))
def flaky(job: tickwork.Job) -> None:
    _trace(job)
    if job.attempt == 1:
        raise RuntimeError("the first attempt fails")


def definitions() -> list[tickwork.ScheduleDefinition]:
    """An every-second and an every-other-second schedule with a starting deadline, so that a
    pass that comes late on a loaded machine still fires every occurrence, and a history limit
    that keeps every job the test makes."""
    job = tickwork.JobTemplate(kind=KIND)
    return [
        tickwork.ScheduleDefinition(
            name=name,
            job=job,
            every=timedelta(seconds=seconds),
            starting_deadline_seconds=60,
            successful_jobs_history_limit=1000,
        )
        for name, seconds in zip(SCHEDULES, (1, 2), strict=True)
    ]


def _report() -> None:
    if _dir is None or not _name:
        return
    report: dict[str, Any] = {
        "pid": os.getpid(),
        "file": tickwork.__file__,
        "installed": importlib.metadata.version("tickwork"),
        "version": getattr(tickwork, "__version__", None),
    }
    # Written aside, then renamed: the test reads it as soon as the name exists.
    written = _dir / f"{_name}.json.part"
    written.write_text(json.dumps(report))
    os.replace(written, _dir / f"{_name}.json")


def enqueue(client: tickwork.App, jobs: int) -> None:
    """``jobs`` plain jobs, a tenth of them flaky."""
    client.enqueue_many(KIND, [{"n": n} for n in range(jobs - jobs // 10)])
    client.enqueue_many(FLAKY, [{"n": n} for n in range(jobs // 10)])


def main(argv: list[str]) -> None:
    command, argument = argv
    client = tickwork.App(os.environ["TICKWORK_DATABASE_URL"])
    try:
        if command == "enqueue":
            enqueue(client, int(argument))
        elif command == "sync":
            client.sync_schedules(argument, definitions())
        else:
            raise SystemExit(f"unknown command {command}")
    finally:
        client.close()


if __name__ == "__main__":
    main(sys.argv[1:])
else:
    _report()
