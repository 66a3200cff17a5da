"""Containers as jobs, the worker's side: the built-in task that runs a tickwork job of the
reserved kind :data:`~tickwork.schedules.container_jobs.KIND` as one Kubernetes Job per
attempt (:mod:`.task`), the Job's manifest and status (:mod:`.manifests`, pure) and the small
Kubernetes API client it uses (:mod:`.kube`). ``tickwork worker --container-jobs`` calls
:func:`register`."""

from __future__ import annotations

from tickwork.app import App
from tickwork.containers import kube, task
from tickwork.model import Job
from tickwork.schedules.container_jobs import KIND
from tickwork.tasks import Task

MAX_ATTEMPTS = 3
"""Attempts of a container job unless its Schedule sets ``maxAttempts``: each attempt is one
Job, whose ``backoffLimit`` already retries its pods."""


def register(app: App, client: kube.Client | None = None) -> None:
    """Register the container-job task in ``app``; ``client`` defaults to the in-cluster
    configuration or the kubeconfig (a ConfigurationError when there is neither)."""
    api = client or kube.Client(kube.load_configuration())

    async def run_container_job(job: Job) -> None:
        await task.run(job, api)

    app.registry.add(
        Task(
            KIND,
            run_container_job,
            max_attempts=MAX_ATTEMPTS,
            own_timeout=True,
            hand_back_on_shutdown=True,
        )
    )
