"""Containers as jobs, the worker's side: the built-in task that runs a tickwork job of the
reserved kind :data:`~tickwork.schedules.container_jobs.KIND` as one Kubernetes Job per
attempt (:mod:`.task`), the reconciler deleting the Jobs that outlived their job
(:mod:`.orphans`), the Job's manifest and status (:mod:`.manifests`, pure), what a finished Job
leaves as the job's result (:mod:`.termination`, pure) and the small
Kubernetes API client they use (:mod:`.kube`). ``tickwork worker --container-jobs`` calls
:func:`connect`, :func:`register` and adds :func:`reconciler` to the worker's services."""

from __future__ import annotations

from typing import Any

from tickwork.app import App
from tickwork.containers import kube, orphans, task
from tickwork.model import Job
from tickwork.schedules.container_jobs import KIND
from tickwork.settings import WorkerSettings
from tickwork.tasks import Task

MAX_ATTEMPTS = 3
"""Attempts of a container job unless its Schedule sets ``maxAttempts``: each attempt is one
Job, whose ``backoffLimit`` already retries its pods."""


def connect() -> kube.Client:
    """The client of the in-cluster configuration or the kubeconfig (a ConfigurationError
    when there is neither)."""
    return kube.Client(kube.load_configuration())


def register(app: App, client: kube.Client | None = None) -> None:
    """Register the container-job task in ``app``; ``client`` defaults to :func:`connect`."""
    api = client or connect()

    async def run_container_job(job: Job) -> dict[str, Any]:
        return await task.run(job, api)

    app.registry.add(
        Task(
            KIND,
            run_container_job,
            max_attempts=MAX_ATTEMPTS,
            own_timeout=True,
            hand_back_on_shutdown=True,
        )
    )


def reconciler(client: kube.Client, settings: WorkerSettings) -> orphans.OrphanJobs:
    """The worker's reconciler of orphaned Jobs, over its ``--namespaces``."""
    return orphans.OrphanJobs(
        client, orphans.OrphanJobsConfig(worker=settings.name, namespaces=settings.namespaces)
    )
