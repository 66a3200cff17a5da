"""The Kubernetes Job of one attempt of a container job, what a Job's status means, which
finished Jobs a schedule's history limits let go, and which active Jobs outlived their tickwork
job (pure).

The Job is the Schedule's ``jobTemplate`` with tickwork's name, labels (on the Job and on its
pod template), attempt annotation and owner reference added; its ``activeDeadlineSeconds`` is
the tickwork job's timeout unless the template sets one. A Job is finished when its
``Complete`` or ``Failed`` condition is true, as the Job controller (and CronJob's) decides.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.model import Job, JobId, JobStatus
from tickwork.schedules.container_jobs import (
    ANNOTATION_ATTEMPT,
    LABEL_JOB_ID,
    LABEL_SCHEDULE,
    LABEL_SCHEDULE_NAMESPACE,
    ContainerJob,
    job_labels,
    job_name,
)

SCHEDULE_API_VERSION = "tickwork.io/v1"
SCHEDULE_KIND = "Schedule"
DEADLINE_EXCEEDED = "DeadlineExceeded"
"""The Failed condition's reason when the Job ran past its activeDeadlineSeconds."""

Body = dict[str, Any]


@dataclass(frozen=True)
class Attempt:
    """One attempt's Job: where, what, and the labels that find it again."""

    namespace: str
    name: str
    job_id: int
    labels: dict[str, str]
    body: Body

    @property
    def deadline_seconds(self) -> int | None:
        """The Job's activeDeadlineSeconds (the template's, else the job's timeout)."""
        value = self.body["spec"].get("activeDeadlineSeconds")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def selector(self) -> str:
        """The label selector of every Job of this tickwork job (any attempt)."""
        return f"{LABEL_JOB_ID}={self.job_id}"

    @property
    def history_selector(self) -> str:
        """The label selector of every Job of this job's schedule."""
        return selector({k: self.labels[k] for k in (LABEL_SCHEDULE, LABEL_SCHEDULE_NAMESPACE)})


def attempt(container: ContainerJob, job: Job) -> Attempt:
    """The Job to create for ``job``'s current attempt."""
    occurrence = job.schedule.occurrence_at if job.schedule is not None else None
    schedule_namespace = job.schedule.namespace if job.schedule is not None else container.namespace
    name = job_name(container.schedule, occurrence, job.id, job.attempt)
    labels = job_labels(schedule_namespace, container.schedule, job.id, occurrence)
    template = container.template
    metadata = _mapping(template.get("metadata"))
    spec = copy.deepcopy(dict(_mapping(template.get("spec"))))
    pod = spec.setdefault("template", {})
    pod_metadata = pod.setdefault("metadata", {})
    pod_metadata["labels"] = {**_mapping(pod_metadata.get("labels")), **labels}
    if "activeDeadlineSeconds" not in spec and job.timeout is not None:
        spec["activeDeadlineSeconds"] = max(1, math.ceil(job.timeout))
    body_metadata: Body = {
        "name": name,
        "namespace": container.namespace,
        "labels": {**_mapping(metadata.get("labels")), **labels},
        "annotations": {
            **_mapping(metadata.get("annotations")),
            ANNOTATION_ATTEMPT: str(job.attempt),
        },
    }
    if container.owner_uid:
        body_metadata["ownerReferences"] = [
            {
                "apiVersion": SCHEDULE_API_VERSION,
                "kind": SCHEDULE_KIND,
                "name": container.schedule,
                "uid": container.owner_uid,
                "controller": True,
            }
        ]
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": body_metadata, "spec": spec}
    return Attempt(container.namespace, name, int(job.id), labels, body)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def matches(body: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether the Job carries every label of ``labels`` (the API server filters by the
    selector already; checking again costs nothing and never adopts a stranger)."""
    own = _mapping(_mapping(body.get("metadata")).get("labels"))
    return all(own.get(key) == value for key, value in labels.items())


def name_of(body: Mapping[str, Any]) -> str:
    return str(_mapping(body.get("metadata")).get("name", ""))


def job_id_label(body: Mapping[str, Any]) -> str | None:
    value = _mapping(_mapping(body.get("metadata")).get("labels")).get(LABEL_JOB_ID)
    return None if value is None else str(value)


def labelled_job(body: Mapping[str, Any]) -> JobId | None:
    """The tickwork job id of the Job's ``tickwork.io/job-id`` label; None when it has none or
    the label is not a job id."""
    value = job_id_label(body)
    return JobId(int(value)) if value is not None and value.isascii() and value.isdigit() else None


def resource_version(body: Mapping[str, Any]) -> str:
    return str(_mapping(body.get("metadata")).get("resourceVersion") or "")


@dataclass(frozen=True)
class State:
    """What a Job's status says: still running, or finished and how."""

    finished: bool
    succeeded: bool = False
    reason: str = ""
    message: str = ""
    completion_time: str | None = None

    @property
    def deadline_exceeded(self) -> bool:
        return self.finished and not self.succeeded and self.reason == DEADLINE_EXCEEDED


RUNNING = State(finished=False)


def state(body: Mapping[str, Any]) -> State:
    """The Job's ``Complete`` or ``Failed`` condition (status True), else running."""
    status = _mapping(body.get("status"))
    for condition in status.get("conditions") or []:
        if not isinstance(condition, Mapping) or condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            completion = status.get("completionTime") or condition.get("lastTransitionTime")
            return State(
                True, True, completion_time=None if completion is None else str(completion)
            )
        if condition.get("type") == "Failed":
            return State(
                True, False, str(condition.get("reason") or ""), str(condition.get("message") or "")
            )
    return RUNNING


def to_prune(jobs: list[Body], successful_limit: int, failed_limit: int) -> list[str]:
    """Names of the finished Jobs beyond the history limits: of the succeeded ones all but
    the ``successful_limit`` newest, of the failed ones all but the ``failed_limit`` newest
    (newest by start time, as CronJob's controller counts). Running Jobs are never pruned."""
    succeeded: list[Body] = []
    failed: list[Body] = []
    for body in jobs:
        outcome = state(body)
        if outcome.finished:
            (succeeded if outcome.succeeded else failed).append(body)
    names = []
    for group, limit in ((succeeded, successful_limit), (failed, failed_limit)):
        group.sort(key=_started, reverse=True)
        names += [name_of(body) for body in group[limit:]]
    return names


def _started(body: Mapping[str, Any]) -> tuple[str, str]:
    status = _mapping(body.get("status"))
    metadata = _mapping(body.get("metadata"))
    started = status.get("startTime") or metadata.get("creationTimestamp") or ""
    return str(started), name_of(body)


GONE = "gone"
"""Why an active Job is an orphan when its tickwork job no longer exists (retention deleted it)."""
FINAL = (JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED)


def active(body: Mapping[str, Any]) -> bool:
    """The Job runs on: not finished, and not already being deleted."""
    return not state(body).finished and not _mapping(body.get("metadata")).get("deletionTimestamp")


@dataclass(frozen=True)
class Orphan:
    """An active Job that outlived its tickwork job, and why: the job's final status, or
    :data:`GONE`."""

    name: str
    job_id: JobId
    reason: str


def orphans(jobs: list[Body], statuses: Mapping[JobId, JobStatus]) -> list[Orphan]:
    """The active Jobs among ``jobs`` whose tickwork job is finished (the reason is its status:
    succeeded, dead, cancelled) or gone (no status in ``statuses``). A Job whose job is
    available or running is kept: whichever attempt runs the job next adopts it. So is a Job
    without a job id label, and a finished one (the history limits and its
    ``ttlSecondsAfterFinished`` decide about those)."""
    found = []
    for body in jobs:
        job_id = labelled_job(body)
        if job_id is None or not active(body):
            continue
        status = statuses.get(job_id)
        if status is None:
            found.append(Orphan(name_of(body), job_id, GONE))
        elif status in FINAL:
            found.append(Orphan(name_of(body), job_id, status.value))
    return found
