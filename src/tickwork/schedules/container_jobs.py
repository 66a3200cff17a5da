"""Containers as jobs: the contract between a Schedule's ``jobTemplate`` and the worker that
runs it (pure).

A Schedule with ``spec.jobTemplate`` (a batch/v1 ``JobTemplateSpec``) instead of ``spec.job.kind``
fires, per occurrence, one tickwork job of the reserved kind :data:`KIND`, whose payload is a
:class:`ContainerJob`. A worker registering that kind creates one Kubernetes Job for it, named
by :func:`job_name` and labelled by :func:`job_labels`, and holds the job's lease while the Job
runs. Names and labels are derived from the schedule, the occurrence and the attempt only, so
a worker replacing a dead one finds (adopts) the Job the dead one created instead of creating
a second.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

KIND = "tickwork.kubernetes-job"
"""The reserved task kind of container jobs; task kinds starting ``tickwork.`` are reserved."""
RESERVED_PREFIX = "tickwork."

LABEL_SCHEDULE = "tickwork.io/schedule"
LABEL_SCHEDULE_NAMESPACE = "tickwork.io/schedule-namespace"
LABEL_JOB_ID = "tickwork.io/job-id"
LABEL_OCCURRENCE = "tickwork.io/occurrence"
"""The occurrence as seconds since the epoch (label values allow no ':'); absent for a job
outside the timetable (run now)."""
ANNOTATION_ATTEMPT = "tickwork.io/attempt"

MAX_JOB_NAME = 63
"""A Job's name becomes its pods' ``job-name`` label value: 63 characters at most."""
_BASE_LENGTH = 40
_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class ContainerJob:
    """The payload of a :data:`KIND` job: where and what to create."""

    namespace: str
    """The Kubernetes namespace the Job is created in: the Schedule's own."""
    schedule: str
    """The Schedule's name (its Kubernetes name; the schedule's name in tickwork)."""
    template: Mapping[str, Any]
    """The batch/v1 ``JobTemplateSpec`` (``metadata`` and ``spec``)."""
    owner_uid: str | None = None
    """The Schedule object's uid, for the Job's owner reference; None outside Kubernetes."""
    successful_jobs_history_limit: int = 3
    failed_jobs_history_limit: int = 1

    def to_payload(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "schedule": self.schedule,
            "ownerUid": self.owner_uid,
            "jobTemplate": dict(self.template),
            "successfulJobsHistoryLimit": self.successful_jobs_history_limit,
            "failedJobsHistoryLimit": self.failed_jobs_history_limit,
        }

    @classmethod
    def from_payload(cls, payload: Any) -> ContainerJob:
        """Read a payload written by :meth:`to_payload`; ValueError names what is wrong."""
        if not isinstance(payload, Mapping):
            raise ValueError("payload: must be an object")
        for key in ("namespace", "schedule"):
            if not isinstance(payload.get(key), str) or not payload[key]:
                raise ValueError(f"payload.{key}: must be a non-empty string")
        template = payload.get("jobTemplate")
        if not isinstance(template, Mapping):
            raise ValueError("payload.jobTemplate: must be an object")
        owner = payload.get("ownerUid")
        if owner is not None and not isinstance(owner, str):
            raise ValueError("payload.ownerUid: must be a string or null")
        limits = {}
        for key in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
            value = payload.get(key, 3 if key.startswith("successful") else 1)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"payload.{key}: must be a non-negative integer")
            limits[key] = value
        return cls(
            namespace=payload["namespace"],
            schedule=payload["schedule"],
            template=template,
            owner_uid=owner,
            successful_jobs_history_limit=limits["successfulJobsHistoryLimit"],
            failed_jobs_history_limit=limits["failedJobsHistoryLimit"],
        )


def job_name(schedule: str, occurrence_at: datetime | None, job_id: int, attempt: int) -> str:
    """The Kubernetes Job's name for one attempt of one tickwork job.

    ``<base>-<occurrence seconds>`` (``<base>-x<job id>`` outside the timetable), ``-a<n>``
    added from the second attempt on. ``base`` is the schedule's name made a DNS label,
    shortened with a hash of the full name when longer than 40 characters, so two long names
    sharing a prefix never share a Job name.
    """
    base = _NOT_DNS.sub("-", schedule.lower()).strip("-") or "job"
    if len(base) > _BASE_LENGTH or base != schedule:
        digest = hashlib.sha256(schedule.encode()).hexdigest()[:8]
        base = f"{base[: _BASE_LENGTH - 9].rstrip('-')}-{digest}"
    key = f"{int(occurrence_at.timestamp())}" if occurrence_at is not None else f"x{job_id}"
    name = f"{base}-{key}"
    if attempt > 1:
        name += f"-a{attempt}"
    return name[:MAX_JOB_NAME]


def job_labels(
    schedule_namespace: str, schedule: str, job_id: int, occurrence_at: datetime | None
) -> dict[str, str]:
    """The labels every Job of a tickwork job carries (values made valid label values)."""
    labels = {
        LABEL_SCHEDULE_NAMESPACE: _label_value(schedule_namespace),
        LABEL_SCHEDULE: _label_value(schedule),
        LABEL_JOB_ID: str(job_id),
    }
    if occurrence_at is not None:
        labels[LABEL_OCCURRENCE] = str(int(occurrence_at.timestamp()))
    return labels


def _label_value(value: str) -> str:
    """At most 63 characters of ``[A-Za-z0-9_.-]``, starting and ending alphanumeric; a
    value that had to change carries a hash of the original, so two never collide."""
    clean = _LABEL_VALUE.sub("-", value).strip("-_.")
    if clean == value and len(value) <= 63:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return f"{clean[:54].rstrip('-_.')}-{digest}".lstrip("-_.")
