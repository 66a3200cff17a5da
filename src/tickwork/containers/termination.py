"""What a finished Kubernetes Job leaves for its tickwork job (pure): the termination message
of its first container (the one named first in the Job's pod template), read from the
newest pod that ended as the Job did, and the result a succeeded container job returns.

The message is what the container wrote to its ``terminationMessagePath``
(``/dev/termination-log``; or, with ``terminationMessagePolicy: FallbackToLogsOnError``, the
end of its log when it failed), at most 4096 bytes as Kubernetes keeps it. None when the pods
are gone (``ttlSecondsAfterFinished``, pruned) or the container wrote nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MAX_MESSAGE_LENGTH = 4096
"""Kubernetes keeps at most 4096 bytes of a container's termination message."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def pod_selector(job: Mapping[str, Any]) -> str:
    """The label selector of the Job's pods: the Job's own ``spec.selector.matchLabels`` (the
    API server sets it to the Job's controller uid), else its ``job-name`` label."""
    labels = _mapping(_mapping(_mapping(job.get("spec")).get("selector")).get("matchLabels"))
    if labels and all(isinstance(v, str) for v in labels.values()):
        return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
    return f"job-name={_mapping(job.get('metadata')).get('name', '')}"


def first_container(job: Mapping[str, Any]) -> str | None:
    """The name of the first container of the Job's pod template."""
    template = _mapping(_mapping(job.get("spec")).get("template"))
    containers = _list(_mapping(template.get("spec")).get("containers"))
    name = _mapping(containers[0]).get("name") if containers else None
    return name if isinstance(name, str) else None


def message(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], succeeded: bool
) -> str | None:
    """The termination message of the Job's first container, from the newest of its pods that
    ended as the Job did (Succeeded or Failed), else from the newest pod at all."""
    container = first_container(job)
    if container is None:
        return None
    phase = "Succeeded" if succeeded else "Failed"
    ordered = sorted(pods, key=_started, reverse=True)
    ended = [p for p in ordered if _mapping(p.get("status")).get("phase") == phase]
    for pod in ended + [p for p in ordered if p not in ended]:
        found = _container_message(pod, container)
        if found is not None:
            return found
    return None


def _started(pod: Mapping[str, Any]) -> str:
    status, metadata = _mapping(pod.get("status")), _mapping(pod.get("metadata"))
    return str(status.get("startTime") or metadata.get("creationTimestamp") or "")


def _container_message(pod: Mapping[str, Any], container: str) -> str | None:
    for status in _list(_mapping(pod.get("status")).get("containerStatuses")):
        status = _mapping(status)
        if status.get("name") != container:
            continue
        for key in ("state", "lastState"):
            terminated = _mapping(_mapping(status.get(key)).get("terminated"))
            text = terminated.get("message")
            if isinstance(text, str) and text.strip():
                return text.strip()[:MAX_MESSAGE_LENGTH]
    return None


def result(
    namespace: str,
    name: str,
    completion_time: str | None,
    container: str | None,
    termination_message: str | None,
) -> dict[str, Any]:
    """A succeeded container job's result: its Job's outcome and its first container's
    termination message."""
    return {
        "job": f"{namespace}/{name}",
        "outcome": "Complete",
        "completionTime": completion_time,
        "container": container,
        "terminationMessage": termination_message,
    }
