"""The task every worker runs for a Schedule with ``spec.steps``
(:mod:`tickwork.schedules.steps`): an occurrence's job spawns the steps as jobs wired by their
``after`` names, once per occurrence (the spawn's key), then succeeds, which releases the
steps that wait for nothing else."""

from __future__ import annotations

from tickwork.app import App
from tickwork.model import Job, Spawn
from tickwork.schedules import steps
from tickwork.tasks import Task

SPAWN_KEY = "steps"


async def run_steps(job: Job) -> None:
    """Spawn the steps of the occurrence ``job`` carries."""
    spawns = [
        Spawn(
            step.job.kind,
            step.job.payload,
            name=step.name,
            after=step.after,
            queue=step.job.queue,
            priority=step.job.priority,
            max_attempts=step.job.max_attempts,
            retry=step.job.retry,
            timeout=step.job.timeout_seconds,
            concurrency_key=step.job.concurrency_key,
            concurrency_limit=step.job.concurrency_limit,
        )
        for step in steps.steps_of_payload(job.payload)
    ]
    await job.spawn_async(spawns, key=SPAWN_KEY)


def register(app: App) -> None:
    """Every worker runs the occurrences of schedules with steps (unless its App already
    registers the kind)."""
    if app.registry.get(steps.KIND) is None:
        app.registry.add(Task(steps.KIND, run_steps))
