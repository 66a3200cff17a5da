"""The App's methods on one job (``app.get_job``, ``app.job_result``, ``app.cancel``,
``app.retry``, ...): read it (and what its task returned and reported),
and change its state through :mod:`tickwork.transitions`, the one way a job's state changes.
:class:`tickwork.App` inherits them."""

from __future__ import annotations

from tickwork import transitions
from tickwork.db import jobs as jobs_db
from tickwork.db import results as results_db
from tickwork.db import store
from tickwork.db.connections import Connected
from tickwork.errors import JobNotFound
from tickwork.model import Actor, Job, JobId, JobStatus


class JobControls:
    """One job read, listed, cancelled, retried or released, for a class with a clock and
    connections (the App)."""

    def get_job(self: Connected, job_id: int) -> Job:
        """The job ``job_id`` (JobNotFound if there is none)."""
        with self.connection() as conn:
            job = store.run(conn, jobs_db.get_job(job_id))
        if job is None:
            raise JobNotFound(f"no job with id {job_id}")
        return job

    def job_result(self: Connected, job_id: int) -> results_db.JobResult:
        """What the job's task returned (its result, or why it was not kept) and the progress
        it last reported (docs/results.md); JobNotFound when there is no such job."""
        with self.connection() as conn:
            found = store.run(conn, results_db.job_results([job_id])).get(JobId(job_id))
        if found is None:
            raise JobNotFound(f"no job with id {job_id}")
        return found

    def list_jobs(
        self: Connected,
        *,
        status: str | None = None,
        kind: str | None = None,
        queue: str | None = None,
        limit: int = 100,
    ) -> list[Job]:
        """Jobs newest first, filtered by ``status``, ``kind`` and ``queue``."""
        with self.connection() as conn:
            return store.run(
                conn, jobs_db.list_jobs(status=status, kind=kind, queue=queue, limit=limit)
            )

    def cancel(
        self: Connected,
        job_id: int,
        *,
        actor: str = "api",
        reason: str | None = None,
        request_id: str | None = None,
    ) -> JobStatus:
        """Cancel an available job, or ask a running one to stop; returns the job's status
        after the call: ``cancelled``, or ``running`` while its worker stops it. A running job
        keeps its concurrency key until its worker records it cancelled (within about a second
        for an async task, which is cancelled; a sync task cannot be interrupted and is recorded
        cancelled when it returns) or its lease expires (lease recovery then cancels it)."""
        _act(self, transitions.JobAction.CANCEL, job_id, actor, reason, request_id)
        return JobControls.get_job(self, job_id).status

    def retry(
        self: Connected,
        job_id: int,
        *,
        actor: str = "api",
        reason: str | None = None,
        request_id: str | None = None,
    ) -> None:
        """Send a dead or cancelled job back to available with fresh attempts."""
        _act(self, transitions.JobAction.RETRY, job_id, actor, reason, request_id)

    def run_now(
        self: Connected,
        job_id: int,
        *,
        actor: str,
        reason: str | None = None,
        request_id: str | None = None,
    ) -> None:
        """Release a delayed job immediately; audited."""
        _act(self, transitions.JobAction.RUN_NOW, job_id, actor, reason, request_id)


def _act(
    app: Connected,
    action: transitions.JobAction,
    job_id: int,
    actor: str,
    reason: str | None,
    request_id: str | None,
) -> None:
    """:func:`transitions.act_on_job`, where a job not in a state the action applies to
    raises :class:`InvalidTransition` (a request id seen before changes nothing)."""
    who = Actor(actor, reason, request_id)
    with app.connection() as conn:
        transitions.act_on_job(conn, action, job_id, who, app.clock.now(), idempotent=False)
