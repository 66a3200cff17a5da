"""Reading a manifest's ``spec``: each field read with its type checked, unknown fields
refused (with a did-you-mean), ``null`` as "not set", and errors naming the field's path;
the job, retry policy and container template read into their parts.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tickwork.errors import did_you_mean
from tickwork.model import DEFAULT_QUEUE, Backoff
from tickwork.schedules import container_jobs, limits, occurrences
from tickwork.schedules.checks import (
    DefinitionError,
    check_container_template,
    check_payload,
    key_name,
    limit_problem,
    tidy_number,
    type_name,
)
from tickwork.schedules.options import ContainerTemplate, JobTemplate
from tickwork.schedules.stored import TARGET_FIELD, TARGET_LENGTHS, copy_json

_T = TypeVar("_T")


_V = TypeVar("_V", str | None, int | None, float | None)


_E = TypeVar("_E", bound=enum.StrEnum)


def job_from_spec(fields: Fields | None, *, container: bool) -> JobTemplate:
    """``spec.job``; with a ``jobTemplate`` (``container``), without kind and payload (the
    kind is :data:`container_jobs.KIND`, the payload made at firing) and maybe absent."""
    if fields is None:
        return JobTemplate(kind=container_jobs.KIND)
    kind = fields.string("kind")
    if container:
        # null is "not set" (the API server prunes it), but for the payload, a JSON value.
        if kind is not None:
            raise fields.error("kind", "set exactly one of spec.job.kind or spec.jobTemplate")
        if "payload" in fields.values:
            reason = "is not used with spec.jobTemplate (the Job's template is the payload)"
            raise fields.error("payload", reason)
        kind = container_jobs.KIND
    elif kind is None:
        raise fields.error("kind", "is required (or spec.jobTemplate instead)")
    retry = fields.mapping("retryPolicy", _RETRY_FIELDS)
    payload = fields.values.get("payload", {})
    where = f"{fields.path}.payload"
    check_payload(lambda path, reason: DefinitionError(fields.name, path, reason), where, payload)
    return JobTemplate(
        kind=kind,
        queue=or_default(fields.string("queue"), DEFAULT_QUEUE),
        payload=copy_json(payload),
        priority=or_default(fields.integer("priority"), 0),
        max_attempts=fields.integer("maxAttempts"),
        retry=None if retry is None else _retry_from_spec(retry),
        timeout_seconds=fields.number("timeoutSeconds"),
        concurrency_key=fields.string("concurrencyKey"),
        concurrency_limit=fields.integer("concurrencyLimit"),
    )


def container_from_spec(fields: Fields) -> ContainerTemplate | None:
    """``spec.jobTemplate`` and, in a stored spec, :data:`TARGET_FIELD`."""
    template = fields.values.get("jobTemplate")
    target = fields.mapping(TARGET_FIELD, frozenset(TARGET_LENGTHS))
    if template is None:
        if target is not None:
            raise fields.error(TARGET_FIELD, "is only valid with spec.jobTemplate")
        return None
    check_container_template(
        lambda path, reason: DefinitionError(fields.name, path, reason), template
    )
    return ContainerTemplate(
        template=copy_json(template),
        namespace=None if target is None else target.string("namespace"),
        owner_uid=None if target is None else target.string("ownerUid"),
    )


def _retry_from_spec(fields: Fields) -> Backoff:
    default = Backoff()
    base = or_default(fields.number("baseDelaySeconds"), default.base)
    rate = or_default(fields.number("backoffRate"), default.rate)
    top = or_default(fields.number("maxDelaySeconds"), default.max)
    if top < base:
        reason = f"must be >= baseDelaySeconds ({tidy_number(base)}), not {tidy_number(top)}"
        raise fields.error("maxDelaySeconds", reason)
    return Backoff(base=base, rate=rate, max=top)


def or_default(value: _T | None, default: _T) -> _T:
    return default if value is None else value


SPEC_FIELDS = frozenset(
    {
        "schedule",
        "every",
        "intervalMode",
        "timeZone",
        "suspend",
        "concurrencyPolicy",
        "startingDeadlineSeconds",
        "misfirePolicy",
        "catchUpLimit",
        "jitterSeconds",
        "pendingJobsOnDelete",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
        "job",
        "jobTemplate",
        "steps",
        TARGET_FIELD,
        "scheduleNamespace",
        # calendars (docs/calendars.md)
        "exclude",
        "startTime",
        "endTime",
        # deadlines and auto-suspend (docs/deadlines.md)
        "deadline",
        "suspendAfterFailures",
    }
)


JOB_FIELDS = frozenset(
    {
        "kind",
        "queue",
        "payload",
        "priority",
        "maxAttempts",
        "retryPolicy",
        "timeoutSeconds",
        "concurrencyKey",
        "concurrencyLimit",
    }
)


_RETRY_FIELDS = frozenset({"baseDelaySeconds", "backoffRate", "maxDelaySeconds"})


class Fields:
    """The fields of one spec mapping, read with type checks; errors name the field's path."""

    def __init__(
        self,
        name: str,
        path: str,
        value: Any,
        known: frozenset[str],
        limits_path: str | None = None,
    ) -> None:
        """``limits_path``: where this mapping's limits are found, when its own path is not
        (a step's job, ``spec.steps[2].job``, has the limits of ``spec.job``)."""
        self.name = name
        self.path = path
        self.limits_path = path if limits_path is None else limits_path
        if not isinstance(value, Mapping):
            raise DefinitionError(name, path, f"must be a mapping, not {type_name(value)}")
        self.values: Mapping[str, Any] = value
        for key in value:
            if key not in known:
                hint = did_you_mean(key, known) if isinstance(key, str) else ""
                raise self.error(key_name(key), "unknown field" + hint)

    def error(self, key: str, reason: str) -> DefinitionError:
        return DefinitionError(self.name, f"{self.path}.{key}", reason)

    def _limited(self, key: str, value: _V) -> _V:
        """``value``, unless it is outside the limits of its field (when it has any)."""
        path = f"{self.limits_path}.{key}"
        if value is not None and path in limits.FIELDS:
            problem = limit_problem(path, value)
            if problem is not None:
                raise self.error(key, problem)
        return value

    def mapping(self, key: str, known: frozenset[str]) -> Fields | None:
        value = self.values.get(key)
        if value is None:
            return None
        path, limits_path = f"{self.path}.{key}", f"{self.limits_path}.{key}"
        return Fields(self.name, path, value, known, limits_path)

    def string(self, key: str) -> str | None:
        value = self.values.get(key)
        if value is None or isinstance(value, str):
            return self._limited(key, value)
        raise self.error(key, f"must be a string, not {type_name(value)}")

    def strings(self, key: str, most: int) -> tuple[str, ...]:
        """A list of at most ``most`` strings (absent: empty)."""
        value = self.values.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.error(key, f"must be a list of strings, not {type_name(value)}")
        if len(value) > most:
            raise self.error(key, f"has {len(value)} items, at most {most}")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"{key}[{index}]", f"must be a string, not {type_name(item)}")
        return tuple(value)

    def boolean(self, key: str) -> bool | None:
        value = self.values.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self.error(key, f"must be a boolean, not {type_name(value)}")

    def integer(self, key: str) -> int | None:
        value = self.values.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return self._limited(key, value)
        raise self.error(key, f"must be an integer, not {type_name(value)}")

    def number(self, key: str) -> float | None:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"must be a number, not {type_name(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(key, "must be a finite number")
        return self._limited(key, value)

    def choice(self, key: str, choices: type[_E]) -> _E | None:
        text = self.string(key)
        if text is None:
            return None
        try:
            return choices(text)
        except ValueError:
            allowed = ", ".join(member.value for member in choices)
            raise self.error(key, f"must be one of {allowed}, not {text!r}") from None

    def parse(self, key: str, parser: Callable[[str], _T]) -> _T | None:
        """A string field read by ``parser``, whose InvalidExpression names this field."""
        text = self.string(key)
        if text is None:
            return None
        try:
            return parser(text)
        except occurrences.InvalidExpression as error:
            raise self.error(key, str(error)) from None
