"""Schedule definitions: the validated, pure form of a ``Schedule`` spec.

A :class:`ScheduleDefinition` is what ``sync_schedules`` stores. :meth:`~ScheduleDefinition.to_spec`
and :meth:`~ScheduleDefinition.from_spec` translate it to and from the camelCase ``spec`` of a
``Schedule`` manifest (the same shape the CRD accepts and the database keeps as jsonb).

``from_spec`` checks the shape (known fields, types, enum values); ``validate`` checks the values
(name format, cron, zone, ranges). Both raise :class:`DefinitionError`.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NoReturn, TypeVar

from tickwork.errors import InvalidInput
from tickwork.model import DEFAULT_QUEUE, Backoff
from tickwork.schedules import occurrences

MAX_NAME_LENGTH = 253
"""Longest schedule name: a Kubernetes object name (DNS-1123 subdomain)."""

MAX_INT = 2**31 - 1
MAX_CATCH_UP = 1000
"""CatchUp fires at most this many missed occurrences (firing sizes its look-ahead by it)."""
"""Upper bound of every integer field: they are stored as PostgreSQL ``integer``."""

_T = TypeVar("_T")
_E = TypeVar("_E", bound=enum.StrEnum)

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class ConcurrencyPolicy(enum.StrEnum):
    """What an occurrence does while the schedule's previous job is pending or running."""

    ALLOW = "Allow"
    FORBID = "Forbid"
    BUFFER_ONE = "BufferOne"
    REPLACE = "Replace"


class MisfirePolicy(enum.StrEnum):
    """Which missed occurrences still fire: none, the most recent one, or the last few."""

    SKIP = "Skip"
    LATEST = "Latest"
    CATCH_UP = "CatchUp"


class IntervalMode(enum.StrEnum):
    """``every`` counted from a fixed anchor, or from the end of the previous job."""

    FIXED_RATE = "FixedRate"
    FIXED_DELAY = "FixedDelay"


class DefinitionError(InvalidInput):
    """A schedule definition is invalid; names the definition, the spec field and the reason."""

    def __init__(self, name: str, field: str, reason: str) -> None:
        super().__init__(field, reason, where=f"schedule {name!r}")
        self.name = name


@dataclass(frozen=True)
class JobTemplate:
    """The job every occurrence of a schedule enqueues."""

    kind: str
    queue: str = DEFAULT_QUEUE
    payload: Any = field(default_factory=dict)
    """Any JSON value: dicts with string keys, lists, strings, finite numbers, booleans, None."""
    priority: int = 0
    max_attempts: int | None = None
    """None: the task's own, applied by the worker that claims the job."""
    retry: Backoff | None = None
    """None: the task's own retry policy applies."""
    timeout_seconds: float | None = None
    concurrency_key: str | None = None


@dataclass(frozen=True)
class ScheduleDefinition:
    """One named schedule: when it fires (cron or interval), how, and the job it enqueues."""

    name: str
    job: JobTemplate
    schedule: str | None = None
    """Cron expression; exactly one of ``schedule`` and ``every`` is set."""
    every: timedelta | None = None
    interval_mode: IntervalMode = IntervalMode.FIXED_RATE
    """Only meaningful with ``every``."""
    time_zone: str = "UTC"
    suspend: bool = False
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    starting_deadline_seconds: int | None = None
    """None: no deadline; a late occurrence is never a miss (catch-up proceeds in chunks)."""
    misfire_policy: MisfirePolicy = MisfirePolicy.LATEST
    catch_up_limit: int = 10
    """How many of the most recent missed occurrences ``CatchUp`` fires."""
    jitter_seconds: int = 0

    def validate(self, namespace: str) -> None:
        """Raise :class:`DefinitionError` for the first invalid value."""
        _validate_name(self.name)
        fail = self._fail
        if (self.schedule is None) == (self.every is None):
            which = "both are" if self.schedule is not None else "neither is"
            fail("spec", f"set exactly one of spec.schedule or spec.every ({which} set)")
        try:
            self.timetable(namespace)
        except occurrences.InvalidExpression as error:
            fail("spec.schedule" if self.schedule is not None else "spec.every", str(error))
        if self.schedule is not None and self.interval_mode is not IntervalMode.FIXED_RATE:
            fail("spec.intervalMode", "is only valid with spec.every")
        try:
            occurrences.load_zone(self.time_zone)
        except occurrences.InvalidExpression as error:
            fail("spec.timeZone", str(error))
        if self.starting_deadline_seconds is not None:
            self._check_int("spec.startingDeadlineSeconds", self.starting_deadline_seconds, 1)
        self._check_int("spec.catchUpLimit", self.catch_up_limit, 1)
        if self.catch_up_limit > MAX_CATCH_UP:
            self._fail("spec.catchUpLimit", f"must be <= {MAX_CATCH_UP}, not {self.catch_up_limit}")
        self._check_int("spec.jitterSeconds", self.jitter_seconds, 0)
        if self.every is not None and self.jitter_seconds >= self.every.total_seconds():
            every = format_duration(self.every)
            fail("spec.jitterSeconds", f"must be less than spec.every ({every})")
        self._validate_job()

    def timetable(self, namespace: str) -> occurrences.Timetable:
        """The occurrence calculator; hashed ``H`` cron fields are seeded by namespace/name."""
        if self.schedule is not None:
            return occurrences.CronTimetable.parse(self.schedule, seed=f"{namespace}/{self.name}")
        if self.every is None:
            raise self._error("spec", "set exactly one of spec.schedule or spec.every")
        return occurrences.FixedRate(self.every)

    def to_spec(self) -> dict[str, Any]:
        """The canonical manifest ``spec``: every set field, defaults included, None omitted.

        Two equal definitions give equal dicts. Defaults are written out so the stored spec
        records the behaviour it was synced with; to tell whether a stored spec really changed,
        compare ``from_spec(name, stored)`` with the new definition, so that a field added to a
        later version (absent from old rows, filled with its default) is not a change.
        """
        spec: dict[str, Any] = {}
        if self.schedule is not None:
            spec["schedule"] = self.schedule
        if self.every is not None:
            spec["every"] = format_duration(self.every)
            spec["intervalMode"] = str(self.interval_mode)
        spec["timeZone"] = self.time_zone
        spec["suspend"] = self.suspend
        spec["concurrencyPolicy"] = str(self.concurrency_policy)
        if self.starting_deadline_seconds is not None:
            spec["startingDeadlineSeconds"] = self.starting_deadline_seconds
        spec["misfirePolicy"] = str(self.misfire_policy)
        spec["catchUpLimit"] = self.catch_up_limit
        spec["jitterSeconds"] = self.jitter_seconds
        spec["job"] = _job_to_spec(self.job)
        return spec

    @classmethod
    def from_spec(cls, name: str, spec: Mapping[str, Any]) -> ScheduleDefinition:
        """Read a manifest ``spec``; unknown fields, wrong types and bad enum values raise.

        ``null`` means "not set" (as the Kubernetes API server prunes it), except for
        ``job.payload``, where it is a JSON value. ``scheduleNamespace`` is accepted and left
        out: the namespace is an argument of sync, not part of the definition. Values are
        checked by :meth:`validate`.
        """
        fields = _Fields(name, "spec", spec, _SPEC_FIELDS)
        if fields.string("scheduleNamespace") == "":
            raise fields.error("scheduleNamespace", "must not be empty")
        every = fields.parse("every", occurrences.parse_duration)
        interval_mode = fields.choice("intervalMode", IntervalMode)
        if interval_mode is not None and every is None:
            raise fields.error("intervalMode", "is only valid with spec.every")
        job = fields.mapping("job", _JOB_FIELDS)
        if job is None:
            raise fields.error("job", "is required")
        return cls(
            name=name,
            job=_job_from_spec(job),
            schedule=fields.string("schedule"),
            every=every,
            interval_mode=interval_mode or IntervalMode.FIXED_RATE,
            time_zone=_or(fields.string("timeZone"), "UTC"),
            suspend=_or(fields.boolean("suspend"), False),
            concurrency_policy=fields.choice("concurrencyPolicy", ConcurrencyPolicy)
            or ConcurrencyPolicy.ALLOW,
            starting_deadline_seconds=fields.integer("startingDeadlineSeconds"),
            misfire_policy=fields.choice("misfirePolicy", MisfirePolicy) or MisfirePolicy.LATEST,
            catch_up_limit=_or(fields.integer("catchUpLimit"), 10),
            jitter_seconds=_or(fields.integer("jitterSeconds"), 0),
        )

    def _validate_job(self) -> None:
        job = self.job
        if not job.kind.strip():
            self._fail("spec.job.kind", "must not be empty")
        if not job.queue.strip():
            self._fail("spec.job.queue", "must not be empty")
        _check_json(self._error, "spec.job.payload", job.payload)
        self._check_int("spec.job.priority", job.priority, 0)
        if job.max_attempts is not None:
            self._check_int("spec.job.maxAttempts", job.max_attempts, 1)
        if job.retry is not None:
            for key, value in _retry_to_spec(job.retry).items():
                if not math.isfinite(value):
                    self._fail(f"spec.job.retryPolicy.{key}", "must be a finite number")
        timeout = job.timeout_seconds
        if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
            self._fail("spec.job.timeoutSeconds", "must be a positive number of seconds")
        if job.concurrency_key is not None and not job.concurrency_key.strip():
            self._fail("spec.job.concurrencyKey", "must not be empty (omit it instead)")

    def _check_int(self, path: str, value: int, minimum: int) -> None:
        if value < minimum:
            self._fail(path, f"must be >= {minimum}, not {value}")
        if value > MAX_INT:
            self._fail(path, f"must be <= {MAX_INT}, not {value}")

    def _error(self, path: str, reason: str) -> DefinitionError:
        return DefinitionError(self.name, path, reason)

    def _fail(self, path: str, reason: str) -> NoReturn:
        raise self._error(path, reason)


def check_manifest_rules(name: str, spec: Mapping[str, Any]) -> None:
    """The cross-field rules a *manifest* must follow beyond :meth:`ScheduleDefinition.from_spec`
    (the CRD's CEL rules say the same): ``catchUpLimit`` only with ``misfirePolicy: CatchUp``.
    Stored canonical specs always carry ``catchUpLimit``, so ``from_spec`` does not check this."""
    if spec.get("catchUpLimit") is not None and spec.get("misfirePolicy") != "CatchUp":
        raise DefinitionError(name, "spec.catchUpLimit", "is only valid with misfirePolicy CatchUp")


def validate_all(namespace: str, definitions: Sequence[ScheduleDefinition]) -> None:
    """Validate each definition, and that no two share a name."""
    seen: set[str] = set()
    for definition in definitions:
        definition.validate(namespace)
        if definition.name in seen:
            raise DefinitionError(definition.name, "metadata.name", "is defined more than once")
        seen.add(definition.name)


def format_duration(value: timedelta) -> str:
    """``value`` as ``occurrences.parse_duration`` reads it: ``1d12h``, ``1h30m``, ``1.5s``."""
    micros = value // timedelta(microseconds=1)
    text = ""
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000)):
        count, micros = divmod(micros, size)
        text += f"{count}{unit}" if count else ""
    seconds, fraction = divmod(micros, 1_000_000)
    if fraction:
        text += f"{seconds}.{fraction:06d}".rstrip("0") + "s"
    elif seconds or not text:
        text += f"{seconds}s"
    return text


def _validate_name(name: str) -> None:
    if not name:
        raise DefinitionError(name, "metadata.name", "must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        reason = f"must be at most {MAX_NAME_LENGTH} characters"
        raise DefinitionError(name, "metadata.name", reason)
    if not _NAME.fullmatch(name):
        raise DefinitionError(
            name,
            "metadata.name",
            "must be lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit",
        )


def _check_json(error: Callable[[str, str], Exception], path: str, value: Any) -> None:
    """Raise ``error(path, reason)`` unless ``value`` is plain JSON (round-trips unchanged)."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise error(path, f"{value} is not a JSON number")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(error, f"{path}[{index}]", item)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise error(path, f"key {key!r} is not a string")
            _check_json(error, f"{path}.{key}", item)
        return
    raise error(path, f"{value!r} is not a JSON value ({type(value).__name__}); quote it")


def _retry_to_spec(retry: Backoff) -> dict[str, float]:
    return {
        "baseDelaySeconds": _number(retry.base),
        "backoffRate": _number(retry.rate),
        "maxDelaySeconds": _number(retry.max),
    }


def _job_to_spec(job: JobTemplate) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "kind": job.kind,
        "queue": job.queue,
        "payload": _copy_json(job.payload),
        "priority": job.priority,
    }
    if job.max_attempts is not None:
        spec["maxAttempts"] = job.max_attempts
    if job.retry is not None:
        spec["retryPolicy"] = _retry_to_spec(job.retry)
    if job.timeout_seconds is not None:
        spec["timeoutSeconds"] = _number(job.timeout_seconds)
    if job.concurrency_key is not None:
        spec["concurrencyKey"] = job.concurrency_key
    return spec


def _job_from_spec(fields: _Fields) -> JobTemplate:
    kind = fields.string("kind")
    if kind is None:
        raise fields.error("kind", "is required")
    retry = fields.mapping("retryPolicy", _RETRY_FIELDS)
    return JobTemplate(
        kind=kind,
        queue=_or(fields.string("queue"), DEFAULT_QUEUE),
        payload=_copy_json(fields.values["payload"]) if "payload" in fields.values else {},
        priority=_or(fields.integer("priority"), 0),
        max_attempts=fields.integer("maxAttempts"),
        retry=None if retry is None else _retry_from_spec(retry),
        timeout_seconds=fields.number("timeoutSeconds"),
        concurrency_key=fields.string("concurrencyKey"),
    )


def _retry_from_spec(fields: _Fields) -> Backoff:
    default = Backoff()
    base = _or(fields.number("baseDelaySeconds"), default.base)
    rate = _or(fields.number("backoffRate"), default.rate)
    top = _or(fields.number("maxDelaySeconds"), default.max)
    if base < 0:
        raise fields.error("baseDelaySeconds", f"must be >= 0, not {_number(base)}")
    if rate < 1:
        raise fields.error("backoffRate", f"must be >= 1, not {_number(rate)}")
    if top < base:
        reason = f"must be >= baseDelaySeconds ({_number(base)}), not {_number(top)}"
        raise fields.error("maxDelaySeconds", reason)
    return Backoff(base=base, rate=rate, max=top)


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON-like value, so no caller shares a mutable payload."""
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value


def _number(value: float) -> float:
    """Whole floats as ints (``30`` rather than ``30.0``), for a tidy canonical spec."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _or(value: _T | None, default: _T) -> _T:
    return default if value is None else value


_SPEC_FIELDS = frozenset(
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
        "job",
        "scheduleNamespace",
    }
)
_JOB_FIELDS = frozenset(
    {
        "kind",
        "queue",
        "payload",
        "priority",
        "maxAttempts",
        "retryPolicy",
        "timeoutSeconds",
        "concurrencyKey",
    }
)
_RETRY_FIELDS = frozenset({"baseDelaySeconds", "backoffRate", "maxDelaySeconds"})


class _Fields:
    """The fields of one spec mapping, read with type checks; errors name the field's path."""

    def __init__(self, name: str, path: str, value: Any, known: frozenset[str]) -> None:
        self.name = name
        self.path = path
        if not isinstance(value, Mapping):
            raise DefinitionError(name, path, f"must be a mapping, not {_type_name(value)}")
        self.values: Mapping[str, Any] = value
        for key in value:
            if key not in known:
                raise self.error(key, "unknown field")

    def error(self, key: str, reason: str) -> DefinitionError:
        return DefinitionError(self.name, f"{self.path}.{key}", reason)

    def mapping(self, key: str, known: frozenset[str]) -> _Fields | None:
        value = self.values.get(key)
        return None if value is None else _Fields(self.name, f"{self.path}.{key}", value, known)

    def string(self, key: str) -> str | None:
        value = self.values.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self.error(key, f"must be a string, not {_type_name(value)}")

    def boolean(self, key: str) -> bool | None:
        value = self.values.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self.error(key, f"must be a boolean, not {_type_name(value)}")

    def integer(self, key: str) -> int | None:
        value = self.values.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise self.error(key, f"must be an integer, not {_type_name(value)}")

    def number(self, key: str) -> float | None:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"must be a number, not {_type_name(value)}")
        if not math.isfinite(value):
            raise self.error(key, "must be a finite number")
        return value

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


def _type_name(value: Any) -> str:
    """The JSON/YAML name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
