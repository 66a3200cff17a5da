"""The container-jobs reconciler: no Kubernetes Job left running for a tickwork job that ended
without its worker — cancelled, or dead by lease expiry, while no worker held it — or that no
longer exists.

A maintenance service (:mod:`tickwork.maintenance.service`) of every ``--container-jobs``
worker, and not one duty of the whole fleet: a pool may act only in the namespaces where it has
its Role, which are its ``--namespaces`` (the chart grants the Role in each). Each of those
Kubernetes namespaces has its own duty row, ``kubernetes_jobs/<namespace>`` in
``tickwork.duties`` (made on first use); the worker that claims it (SKIP LOCKED, as any duty)
reconciles that namespace, so each namespace is reconciled once per interval somewhere in the
fleet, by a worker allowed to.

A pass over a namespace lists the Jobs labelled ``tickwork.io/job-id`` (in pages), reads the
status of their tickwork jobs in one query, and deletes with background propagation each active
Job whose job is finished or gone (:func:`tickwork.containers.manifests.orphans` decides), each
deletion logged (``action=kubernetes_job_orphan_deleted``) and counted
(``tickwork_container_jobs_orphans_deleted_total{reason}``). The Jobs of available and running
jobs are kept: the next attempt adopts its job's active Job by that label (a job handed back at
shutdown, or made available again after its lease expired, finds its Job still running). A
running job asked to stop is its worker's to delete, or lease recovery makes it cancelled and
the next pass deletes its Job.

One race is left, harmless: a job read finished, then retried by hand before its Job is
deleted. Its new attempt may adopt the Job being deleted and see it vanish: that attempt fails
and the retry policy runs another, with a new Job.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import aiohttp

from tickwork import metrics
from tickwork.containers import kube, manifests
from tickwork.db import connections, store
from tickwork.db import duties as duties_db
from tickwork.db import jobs as jobs_db
from tickwork.logs import fields
from tickwork.maintenance.service import positive
from tickwork.schedules.container_jobs import LABEL_JOB_ID

log = logging.getLogger(__name__)

DUTY_PREFIX = "kubernetes_jobs/"
"""The duty row of a Kubernetes namespace is this followed by the namespace's name."""


@dataclass(frozen=True)
class OrphanJobsConfig:
    worker: str
    """The worker's name, recorded on the duty rows it claims."""
    namespaces: tuple[str, ...] = ()
    """The Kubernetes namespaces to reconcile: the worker's ``--namespaces``, where its pool
    has its Role. Empty: this worker reconciles nothing."""
    interval: float = 30.0
    """Seconds between two passes over one namespace somewhere in the fleet: an orphaned Job
    is deleted within this plus one maintenance interval (``--maintenance-seconds``)."""

    def __post_init__(self) -> None:
        positive(self, "interval")


@dataclass(frozen=True)
class Deleted:
    """An orphaned Job this worker deleted, in ``namespace``."""

    namespace: str
    orphan: manifests.Orphan


class OrphanJobs:
    """The reconciler of one worker. Not a shared service: run on every pass of the worker's
    maintenance loop, it claims the duty of each of its namespaces that is due."""

    name = "reconcile_kubernetes_jobs"
    shared = False

    def __init__(self, client: kube.Client, config: OrphanJobsConfig) -> None:
        self.client = client
        self.config = config
        self._made: set[str] = set()
        """Duty rows this process has made (or found there): made once each."""

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(
        self, conn: connections.AsyncConnection, now: datetime | None
    ) -> list[Deleted]:
        """Reconcile each namespace whose duty this worker claims at ``now``; returns the Jobs
        it deleted. An API error in one namespace is logged and skips it until its next turn."""
        due = [ns for ns in self.config.namespaces if await self._claim(conn, ns, now)]
        if not due:
            return []
        deleted: list[Deleted] = []
        async with self.client.session() as api:
            for namespace in due:
                try:
                    deleted += await self._reconcile(conn, api, namespace)
                except (kube.ApiError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    log.warning(
                        "reconciling the Kubernetes Jobs of namespace %s failed: %s",
                        namespace,
                        exc,
                        extra=fields(
                            action="kubernetes_reconcile_failed",
                            namespace=namespace,
                            error=str(exc),
                        ),
                    )
        return deleted

    async def _claim(
        self, conn: connections.AsyncConnection, namespace: str, now: datetime | None
    ) -> bool:
        duty = DUTY_PREFIX + namespace
        async with conn.transaction():
            if duty not in self._made:
                await store.arun(conn, duties_db.add_duty(duty, now))
            mine = await store.arun(
                conn, duties_db.claim_duty(duty, self.config.worker, self.config.interval, now)
            )
        self._made.add(duty)
        return mine

    async def _reconcile(
        self, conn: connections.AsyncConnection, api: kube.Jobs, namespace: str
    ) -> list[Deleted]:
        labelled = await api.list(namespace, LABEL_JOB_ID)
        running = [body for body in labelled if manifests.active(body)]
        ids = {job_id for body in running if (job_id := manifests.labelled_job(body)) is not None}
        if not ids:
            return []
        async with conn.transaction():
            statuses = await store.arun(conn, jobs_db.job_statuses(sorted(ids)))
        deleted = []
        for orphan in manifests.orphans(running, statuses):
            extra = fields(
                action="kubernetes_job_orphan_deleted",
                job_id=orphan.job_id,
                namespace=namespace,
                kubernetes_job=orphan.name,
                reason=orphan.reason,
            )
            if not await api.delete(namespace, orphan.name):  # its worker, or another, was first
                log.info("orphaned Job was already gone (job %s)", orphan.reason, extra=extra)
                continue
            metrics.CONTAINER_JOB_ORPHANS_DELETED.labels(orphan.reason).inc()
            log.warning("deleted an orphaned Job (job %s)", orphan.reason, extra=extra)
            deleted.append(Deleted(namespace, orphan))
        return deleted
