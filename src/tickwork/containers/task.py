"""The built-in task of container jobs: one attempt of a tickwork job of the reserved kind
:data:`~tickwork.schedules.container_jobs.KIND` is one Kubernetes Job, followed until it
finishes.

An attempt
1. lists the Jobs labelled with the tickwork job's id: one still active is *adopted* (a worker
   that died left it running; never a second one), one that succeeded ends the attempt
   successfully; otherwise
2. creates its Job (:func:`tickwork.containers.manifests.attempt`); a Job of that name that
   already exists is adopted when its ``tickwork.io/job-id`` label is this job's, and refused
   (the attempt fails, the other Job untouched) when it is not;
3. watches the Job (resourceVersion from the last read, the watch re-established when it ends
   or drops, reads again after an error with backoff: no tight polling) while the worker's
   heartbeat keeps the lease: ``Complete`` → success; ``Failed`` → an error naming the Job and
   its reason, and tickwork's retry policy decides (the next attempt is a new Job, ``-a2``, …);
4. prunes the schedule's finished Jobs beyond its history limits (background propagation
   deletes their pods).

Cancelled (the job was asked to stop: ``tickwork cancel``, or the Replace policy), it deletes
the Job (background propagation) and re-raises. Interrupted for any other reason it leaves the
Job running for the next attempt to adopt: the worker shuts down
(``Task.hand_back_on_shutdown``: the job is handed back at once, its attempt not counted) or
the job's lease was taken over.

The task enforces the job's timeout itself (``Task.own_timeout``): the Job's
``activeDeadlineSeconds`` is the timeout, the Job failing with ``DeadlineExceeded`` is the
attempt timing out, and only a Job still running :data:`DEADLINE_MARGIN_SECONDS` past its
deadline is deleted by the worker.

A finished Job's result (:mod:`tickwork.containers.termination`): succeeded, the task returns
its outcome and the termination message of its first container (read from its pods before any
pruning), which the job keeps as its result (a container schedule carries no state: its payload
is always its template); failed, that message ends the attempt's error. Reading the pods never
fails an attempt: an error is logged and the message left out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp

from tickwork.clock import sleep
from tickwork.containers import kube, manifests, termination
from tickwork.containers.manifests import Attempt, Body
from tickwork.logs import fields
from tickwork.model import Job
from tickwork.schedules.container_jobs import LABEL_JOB_ID, LABEL_OCCURRENCE, ContainerJob
from tickwork.tasks import CANCEL_REQUESTED

log = logging.getLogger(__name__)

DEADLINE_MARGIN_SECONDS = 30.0
"""How long past the Job's activeDeadlineSeconds the worker waits for the Job controller to
fail it before deleting it and failing the attempt as timed out itself."""
WATCH_SECONDS = 300.0
"""How long one watch lasts before it is re-established (the server's ``timeoutSeconds``)."""
SHORTEST_WATCH_SECONDS = 1.0
"""A watch that ends sooner than this (a proxy cutting it) is re-established after a pause."""
RETRY_SECONDS = (1.0, 30.0)
"""First and longest pause before reading the Job again after an API error."""


class ContainerJobFailed(Exception):
    """The Job failed, vanished, or could not be created or adopted."""


class ContainerJobTimedOut(TimeoutError):
    """The Job ran past its activeDeadlineSeconds."""


async def run(job: Job, client: kube.Client) -> dict[str, Any]:
    container = ContainerJob.from_payload(job.payload)  # a ValueError names the field
    wanted = manifests.attempt(container, job)
    async with client.session() as api:
        found: Body | None = None
        try:
            found = await _adopt_or_create(api, wanted, job)
            final = await _follow_within_deadline(api, wanted, found, job)
        except asyncio.CancelledError as exc:
            name = wanted.name if found is None else manifests.name_of(found)
            if exc.args[:1] == (CANCEL_REQUESTED,):
                await _delete(api, wanted.namespace, name, job, "cancelled")
            else:
                log.info(
                    "interrupted; Job left running for the next attempt to adopt",
                    extra=_fields("kubernetes_job_left", job, wanted.namespace, name),
                )
            raise
        outcome = manifests.state(final)
        said = await _termination_message(api, wanted.namespace, final, outcome.succeeded, job)
        await _prune(api, container, wanted, job)
    name = f"{wanted.namespace}/{manifests.name_of(final)}"
    if outcome.succeeded:
        log.info(
            "Job complete at %s",
            outcome.completion_time,
            extra=_fields(
                "kubernetes_job_complete", job, wanted.namespace, manifests.name_of(final)
            ),
        )
        return termination.result(
            wanted.namespace,
            manifests.name_of(final),
            outcome.completion_time,
            termination.first_container(final),
            said,
        )
    told = "" if said is None else f"; its container said: {said}"
    if outcome.deadline_exceeded:
        raise ContainerJobTimedOut(
            f"timed out: Job {name} ran past its activeDeadlineSeconds "
            f"({wanted.deadline_seconds}s): {outcome.reason}: {outcome.message}{told}"
        )
    raise ContainerJobFailed(f"Job {name} failed: {outcome.reason}: {outcome.message}{told}")


async def _termination_message(
    api: kube.Jobs, namespace: str, final: Body, succeeded: bool, job: Job
) -> str | None:
    """The finished Job's first container's termination message; None when there is none or
    its pods cannot be read (logged)."""
    try:
        pods = await api.pods(namespace, termination.pod_selector(final))
    except (kube.ApiError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
        log.warning(
            "could not read the pods of Job %s/%s for its termination message: %s",
            namespace,
            manifests.name_of(final),
            exc,
            extra=fields(action="kubernetes_pods_unread", job_id=job.id, namespace=namespace),
        )
        return None
    return termination.message(final, pods, succeeded)


async def _adopt_or_create(api: kube.Jobs, wanted: Attempt, job: Job) -> Body:
    try:
        return await _find_or_create(api, wanted, job)
    except (kube.ApiError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise ContainerJobFailed(
            f"Job {wanted.namespace}/{wanted.name}: the Kubernetes API failed: {exc}"
        ) from None


async def _find_or_create(api: kube.Jobs, wanted: Attempt, job: Job) -> Body:
    ours = [
        body
        for body in await api.list(wanted.namespace, wanted.selector)
        if manifests.job_id_label(body) == str(wanted.job_id)
    ]
    ours.sort(key=manifests.name_of)
    for body in ours:
        if not manifests.state(body).finished:
            _log("adopted a running Job", "kubernetes_job_adopted", job, wanted, body)
            return body
    for body in ours:
        if manifests.state(body).succeeded:
            _log("adopted a succeeded Job", "kubernetes_job_adopted", job, wanted, body)
            return body
    try:
        created = await api.create(wanted.namespace, wanted.body)
    except kube.ApiError as exc:
        if exc.status != 409:
            raise
        existing = await api.get(wanted.namespace, wanted.name)
        if existing is None:  # deleted meanwhile: the next attempt creates it
            raise ContainerJobFailed(
                f"Job {wanted.namespace}/{wanted.name} existed, then vanished"
            ) from None
        label = manifests.job_id_label(existing)
        if label != str(wanted.job_id):
            owner = "no tickwork job" if label is None else f"tickwork job {label}"
            raise ContainerJobFailed(
                f"Job {wanted.namespace}/{wanted.name} already exists and belongs to {owner} "
                f"(label tickwork.io/job-id), not to job {wanted.job_id}: not adopted"
            ) from None
        _log("adopted the Job of this attempt", "kubernetes_job_adopted", job, wanted, existing)
        return existing
    _log("Job created", "kubernetes_job_created", job, wanted, created)
    return created


async def _follow_within_deadline(api: kube.Jobs, wanted: Attempt, found: Body, job: Job) -> Body:
    deadline = wanted.deadline_seconds
    if deadline is None:
        return await _follow(api, wanted.namespace, found)
    limit = asyncio.timeout(deadline + DEADLINE_MARGIN_SECONDS)
    try:
        async with limit:
            return await _follow(api, wanted.namespace, found)
    except TimeoutError:
        if not limit.expired():
            raise
    name = manifests.name_of(found)
    await _delete(api, wanted.namespace, name, job, "timed out")
    raise ContainerJobTimedOut(
        f"timed out: Job {wanted.namespace}/{name} still running "
        f"{DEADLINE_MARGIN_SECONDS:g}s past its activeDeadlineSeconds ({deadline}s); deleted"
    )


async def _follow(api: kube.Jobs, namespace: str, body: Body) -> Body:
    """The Job once finished: watched from the version last read, re-read after an error."""
    name = manifests.name_of(body)
    pause = RETRY_SECONDS[0]
    while not manifests.state(body).finished:
        version = manifests.resource_version(body)
        started = time.monotonic()
        try:
            async for kind, obj in api.watch(namespace, name, version, WATCH_SECONDS):
                if manifests.name_of(obj) != name:
                    continue
                if kind == "DELETED":
                    raise ContainerJobFailed(
                        f"Job {namespace}/{name} was deleted before it finished"
                    )
                if kind == "BOOKMARK":
                    body = {**body, "metadata": {**body["metadata"], **obj.get("metadata", {})}}
                    continue
                body = obj
                if manifests.state(body).finished:
                    return body
            pause = RETRY_SECONDS[0]
            if time.monotonic() - started < SHORTEST_WATCH_SECONDS:
                await sleep(SHORTEST_WATCH_SECONDS)
            continue
        except kube.WatchExpired:
            pass  # read it again below, no pause: the server asked for it
        except (kube.ApiError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning(
                "watching Job %s/%s failed (%s); reading it again in %gs",
                namespace,
                name,
                exc,
                pause,
                extra=fields(action="kubernetes_watch_failed", namespace=namespace),
            )
            await sleep(pause)
            pause = min(pause * 2, RETRY_SECONDS[1])
        body = await _read_again(api, namespace, name, pause)
    return body


async def _read_again(api: kube.Jobs, namespace: str, name: str, pause: float) -> Body:
    while True:
        try:
            again = await api.get(namespace, name)
        except (kube.ApiError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning(
                "reading Job %s/%s failed (%s); again in %gs",
                namespace,
                name,
                exc,
                pause,
                extra=fields(action="kubernetes_read_failed", namespace=namespace),
            )
            await sleep(pause)
            pause = min(pause * 2, RETRY_SECONDS[1])
            continue
        if again is None:
            raise ContainerJobFailed(f"Job {namespace}/{name} was deleted before it finished")
        return again


async def _delete(api: kube.Jobs, namespace: str, name: str, job: Job, why: str) -> None:
    try:
        deleted = await api.delete(namespace, name)
    except (kube.ApiError, aiohttp.ClientError, TimeoutError) as exc:
        log.error(
            "could not delete Job %s/%s (%s): %s",
            namespace,
            name,
            why,
            exc,
            extra=fields(action="kubernetes_job_delete_failed", job_id=job.id, namespace=namespace),
        )
        return
    log.info(
        "Job deleted (%s)" if deleted else "Job was already gone (%s)",
        why,
        extra=_fields("kubernetes_job_deleted", job, namespace, name, reason=why),
    )


async def _prune(api: kube.Jobs, container: ContainerJob, wanted: Attempt, job: Job) -> None:
    """Delete the schedule's finished Jobs beyond its history limits; failures only logged
    (the next finished Job prunes again)."""
    labels = {k: v for k, v in wanted.labels.items() if k not in (LABEL_JOB_ID, LABEL_OCCURRENCE)}
    try:
        history = [
            body
            for body in await api.list(wanted.namespace, wanted.history_selector)
            if manifests.matches(body, labels)
        ]
        for name in manifests.to_prune(
            history, container.successful_jobs_history_limit, container.failed_jobs_history_limit
        ):
            await _delete(api, wanted.namespace, name, job, "history limit")
    except (kube.ApiError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
        log.warning(
            "pruning the Jobs of schedule %s failed: %s",
            container.schedule,
            exc,
            extra=fields(
                action="kubernetes_prune_failed", job_id=job.id, namespace=wanted.namespace
            ),
        )


def _log(message: str, action: str, job: Job, wanted: Attempt, body: Body) -> None:
    name = manifests.name_of(body)
    log.info(message, extra=_fields(action, job, wanted.namespace, name))


def _fields(action: str, job: Job, namespace: str, name: str, **more: Any) -> dict[str, Any]:
    return fields(
        action=action,
        job_id=job.id,
        kind=job.kind,
        attempt=job.attempt,
        namespace=namespace,
        kubernetes_job=name,
        **more,
    )
