"""Schedule definitions: the validated, pure form of a ``Schedule`` spec.

A :class:`ScheduleDefinition` is what ``sync_schedules`` stores. :meth:`~ScheduleDefinition.to_spec`
and :meth:`~ScheduleDefinition.from_spec` translate it to and from the camelCase ``spec`` of a
``Schedule`` manifest (the same shape the CRD accepts and the database keeps as jsonb).

``from_spec`` checks the shape (known fields, types, enum values, ranges); ``validate`` checks
the values (name format, cron, zone, ranges, the payload). Both raise :class:`DefinitionError`.
The ranges are those of :mod:`tickwork.schedules.limits` (docs/limits.md). Nothing here recurses
over a user's value (a payload nested a thousand levels is refused, not a RecursionError), and
values quoted in messages are cut short.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any, NoReturn, TypeVar

from tickwork.errors import InvalidInput, did_you_mean
from tickwork.model import DEFAULT_QUEUE, Backoff
from tickwork.schedules import container_jobs, job_templates, limits, occurrences
from tickwork.schedules.limits import MAX_CATCH_UP as MAX_CATCH_UP
from tickwork.schedules.limits import MAX_INT as MAX_INT
from tickwork.schedules.limits import MAX_NAME_LENGTH as MAX_NAME_LENGTH

SHOWN_LENGTH = 60
"""Values quoted in an error message are cut to about this many characters."""
MAX_REASON_LENGTH = 300

_T = TypeVar("_T")
_V = TypeVar("_V", str | None, int | None, float | None)
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


class PendingJobsOnDelete(enum.StrEnum):
    """What disabling the schedule by pruning (its Schedule deleted, or left out of a pruning
    sync) does with its pending jobs: cancel them (running ones finish), or keep them."""

    CANCEL = "Cancel"
    KEEP = "Keep"


def stored_pending_jobs_on_delete(spec: Mapping[str, Any]) -> PendingJobsOnDelete:
    """The behaviour a stored spec asks for when it is pruned: Cancel unless it says Keep
    (a spec stored before the field existed has none, and gets the default)."""
    if spec.get("pendingJobsOnDelete") == PendingJobsOnDelete.KEEP:
        return PendingJobsOnDelete.KEEP
    return PendingJobsOnDelete.CANCEL


DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT = 3
"""batch/v1 CronJob's default: the finished jobs of a schedule retention keeps that succeeded."""
DEFAULT_FAILED_JOBS_HISTORY_LIMIT = 1
"""batch/v1 CronJob's default: the finished jobs kept that did not succeed (dead or
cancelled)."""


@dataclass(frozen=True)
class HistoryLimits:
    """How many of a schedule's newest finished jobs retention keeps, per outcome."""

    succeeded: int = DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT
    failed: int = DEFAULT_FAILED_JOBS_HISTORY_LIMIT
    """Dead and cancelled jobs together (neither succeeded)."""


def stored_history_limits(spec: Mapping[str, Any]) -> HistoryLimits:
    """The history limits of a stored spec; one stored before the fields existed has none
    and gets CronJob's defaults."""
    succeeded = spec.get("successfulJobsHistoryLimit")
    failed = spec.get("failedJobsHistoryLimit")
    return HistoryLimits(
        DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT if succeeded is None else succeeded,
        DEFAULT_FAILED_JOBS_HISTORY_LIMIT if failed is None else failed,
    )


class IntervalMode(enum.StrEnum):
    """``every`` counted from a fixed anchor, or from the end of the previous job."""

    FIXED_RATE = "FixedRate"
    FIXED_DELAY = "FixedDelay"


class DefinitionError(InvalidInput):
    """A schedule definition is invalid; names the definition, the spec field and the reason
    (cut to :data:`MAX_REASON_LENGTH` characters: it may quote a long value)."""

    def __init__(self, name: str, field: str, reason: str) -> None:
        if len(reason) > MAX_REASON_LENGTH:
            reason = reason[: MAX_REASON_LENGTH - 3] + "..."
        super().__init__(field, reason, where=f"schedule {shown(name)}")
        self.name = name


@dataclass(frozen=True)
class JobTemplate:
    """The job every occurrence of a schedule enqueues."""

    kind: str
    queue: str = DEFAULT_QUEUE
    payload: Any = field(default_factory=dict)
    """Any JSON value: dicts with string keys, lists, strings, finite numbers, booleans, None,
    within the payload limits of :mod:`tickwork.schedules.limits`."""
    priority: int = 0
    max_attempts: int | None = None
    """None: the task's own, applied by the worker that claims the job."""
    retry: Backoff | None = None
    """None: the task's own retry policy applies."""
    timeout_seconds: float | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    """How many jobs of ``concurrency_key`` may run at once (None: 1); only with a key."""


@dataclass(frozen=True)
class ContainerTemplate:
    """``spec.jobTemplate``: each occurrence's job runs one Kubernetes Job made from
    ``template`` (:mod:`tickwork.schedules.container_jobs`)."""

    template: Mapping[str, Any]
    """The batch/v1 ``JobTemplateSpec`` (checked by :mod:`tickwork.schedules.job_templates`)."""
    namespace: str | None = None
    """The Kubernetes namespace of the Jobs: the Schedule object's, set by the operator; None
    (``tickwork sync -f``): the schedule namespace."""
    owner_uid: str | None = None
    """The Schedule object's uid, for the Jobs' owner reference (set by the operator)."""


@dataclass(frozen=True)
class ScheduleDefinition:
    """One named schedule: when it fires (cron or interval), how, and the job it enqueues."""

    name: str
    job: JobTemplate
    container: ContainerTemplate | None = None
    """With ``spec.jobTemplate``: ``job.kind`` is :data:`container_jobs.KIND` and each job
    runs a Kubernetes Job; ``job``'s other fields (queue, priority, attempts, retries,
    timeout, concurrency key) apply as to any job."""
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
    pending_jobs_on_delete: PendingJobsOnDelete = PendingJobsOnDelete.CANCEL
    """When pruning disables the schedule: Cancel its pending jobs, or Keep them."""
    successful_jobs_history_limit: int = DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT
    """Retention keeps this many of the schedule's newest succeeded jobs, deletes older ones."""
    failed_jobs_history_limit: int = DEFAULT_FAILED_JOBS_HISTORY_LIMIT
    """Retention keeps this many of the newest jobs that ended dead or cancelled."""

    def validate(self, namespace: str) -> None:
        """Raise :class:`DefinitionError` for the first invalid value."""
        _validate_name(self.name)
        fail = self._fail
        if (self.schedule is None) == (self.every is None):
            which = "both are" if self.schedule is not None else "neither is"
            fail("spec", f"set exactly one of spec.schedule or spec.every ({which} set)")
        if self.schedule is not None:
            self._check("spec.schedule", self.schedule)
        if self.every is not None and self.every > limits.MAX_EVERY:
            fail("spec.every", f"must be at most {format_duration(limits.MAX_EVERY)}")
        if self.schedule is not None and (meant := occurrences.interval_in(self.schedule)):
            fail("spec.schedule", f"{self.schedule!r} is an interval: use `every: {meant}` instead")
        try:
            self.timetable(namespace)
        except occurrences.InvalidExpression as error:
            fail("spec.schedule" if self.schedule is not None else "spec.every", str(error))
        if self.schedule is not None and self.interval_mode is not IntervalMode.FIXED_RATE:
            fail("spec.intervalMode", "is only valid with spec.every")
        self._check("spec.timeZone", self.time_zone)
        try:
            occurrences.load_zone(self.time_zone)
        except occurrences.InvalidExpression as error:
            fail("spec.timeZone", str(error))
        if self.starting_deadline_seconds is not None:
            self._check("spec.startingDeadlineSeconds", self.starting_deadline_seconds)
        self._check("spec.catchUpLimit", self.catch_up_limit)
        self._check("spec.jitterSeconds", self.jitter_seconds)
        self._check("spec.successfulJobsHistoryLimit", self.successful_jobs_history_limit)
        self._check("spec.failedJobsHistoryLimit", self.failed_jobs_history_limit)
        if self.every is not None and self.jitter_seconds >= self.every.total_seconds():
            every = format_duration(self.every)
            fail("spec.jitterSeconds", f"must be less than spec.every ({every})")
        self._validate_job()
        self._validate_container()

    def owned_by(self, namespace: str, uid: str | None) -> ScheduleDefinition:
        """This definition as the Schedule object of Kubernetes ``namespace`` with ``uid``
        asks for it: its Jobs go to that namespace and are owned by the object."""
        if self.container is None:
            return self
        target = dataclasses.replace(self.container, namespace=namespace, owner_uid=uid)
        return dataclasses.replace(self, container=target)

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
        spec["pendingJobsOnDelete"] = str(self.pending_jobs_on_delete)
        spec["successfulJobsHistoryLimit"] = self.successful_jobs_history_limit
        spec["failedJobsHistoryLimit"] = self.failed_jobs_history_limit
        spec["job"] = _job_to_spec(self.job, container=self.container is not None)
        if self.container is not None:
            spec["jobTemplate"] = _copy_json(self.container.template)
            target = _target_to_spec(self.container)
            if target:
                spec[TARGET_FIELD] = target
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
        target = fields.string("scheduleNamespace")
        if target is not None and any(c.isspace() for c in target):
            raise fields.error("scheduleNamespace", "must be a name without spaces")
        every = fields.parse("every", occurrences.parse_duration)
        interval_mode = fields.choice("intervalMode", IntervalMode)
        if interval_mode is not None and every is None:
            raise fields.error("intervalMode", "is only valid with spec.every")
        job = fields.mapping("job", _JOB_FIELDS)
        container = _container_from_spec(fields)
        if job is None and container is None:
            raise fields.error("job", "is required (spec.job.kind, or spec.jobTemplate)")
        return cls(
            name=name,
            job=_job_from_spec(job, container=container is not None),
            container=container,
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
            pending_jobs_on_delete=fields.choice("pendingJobsOnDelete", PendingJobsOnDelete)
            or PendingJobsOnDelete.CANCEL,
            successful_jobs_history_limit=_or(
                fields.integer("successfulJobsHistoryLimit"), DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT
            ),
            failed_jobs_history_limit=_or(
                fields.integer("failedJobsHistoryLimit"), DEFAULT_FAILED_JOBS_HISTORY_LIMIT
            ),
        )

    def _validate_job(self) -> None:
        job = self.job
        self._check("spec.job.kind", job.kind)
        if self.container is not None and job.kind != container_jobs.KIND:
            self._fail("spec.job.kind", "set exactly one of spec.job.kind or spec.jobTemplate")
        self._check("spec.job.queue", job.queue)
        check_payload(self._error, "spec.job.payload", job.payload)
        self._check("spec.job.priority", job.priority)
        if job.max_attempts is not None:
            self._check("spec.job.maxAttempts", job.max_attempts)
        if job.retry is not None:
            for key, value in _retry_to_spec(job.retry).items():
                self._check(f"spec.job.retryPolicy.{key}", value)
        if job.timeout_seconds is not None:
            self._check("spec.job.timeoutSeconds", job.timeout_seconds)
        if job.concurrency_key is not None:
            self._check("spec.job.concurrencyKey", job.concurrency_key)
        if job.concurrency_limit is not None:
            self._check_concurrency_limit(job.concurrency_limit)

    def _check_concurrency_limit(self, limit: int) -> None:
        """``spec.job.concurrencyLimit``: the limit of the template's own key, so it needs one;
        above 1 not with BufferOne (its waiting job must not start beside the running one)."""
        path = "spec.job.concurrencyLimit"
        if isinstance(limit, bool) or not isinstance(limit, int):
            self._fail(path, f"must be an integer, not {_type_name(limit)}")
        self._check(path, limit)
        if self.job.concurrency_key is None:
            self._fail(
                path,
                "needs spec.job.concurrencyKey: it is how many jobs of that key run at once "
                "(without a key, each job runs regardless of the others)",
            )
        if limit > 1 and self.concurrency_policy is ConcurrencyPolicy.BUFFER_ONE:
            self._fail(
                path,
                "must be 1 with concurrencyPolicy BufferOne (its waiting job starts only after "
                "the running one, under the key)",
            )

    def _validate_container(self) -> None:
        container = self.container
        if container is None:
            return
        check_container_template(self._error, container.template)
        for key, value in _target_to_spec(container).items():
            problem = text_problem(value, 1, _TARGET_LENGTHS[key])
            if problem is not None:
                self._fail(f"spec.{TARGET_FIELD}.{key}", problem)

    def _check(self, path: str, value: str | float) -> None:
        """Refuse ``value`` unless it is within the limits of the field at ``path``."""
        problem = limit_problem(path, value)
        if problem is not None:
            self._fail(path, problem)

    def _error(self, path: str, reason: str) -> DefinitionError:
        return DefinitionError(self.name, path, reason)

    def _fail(self, path: str, reason: str) -> NoReturn:
        raise self._error(path, reason)


def limit_problem(path: str, value: str | float) -> str | None:
    """Why ``value`` is outside the limits of the field at ``path``, or None when it is not."""
    limit = limits.FIELDS[path]
    if isinstance(value, str):
        return text_problem(value, limit.min_length or 0, limit.max_length)
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if limit.minimum is not None:
        if limit.exclusive_minimum and value <= limit.minimum:
            return f"must be > {_number(limit.minimum)}, not {shown(value)}"
        if value < limit.minimum:
            return f"must be >= {_number(limit.minimum)}, not {shown(value)}"
    if limit.maximum is not None and value > limit.maximum:
        return f"must be <= {_number(limit.maximum)}, not {shown(value)}"
    return None


def text_problem(value: str, min_length: int, max_length: int | None) -> str | None:
    """Why ``value`` cannot be stored as this text, or None: too long, NUL (PostgreSQL text
    and jsonb cannot hold U+0000), not UTF-8 (an unpaired surrogate), or blank."""
    if max_length is not None and len(value) > max_length:
        return f"must be at most {max_length} characters, not {len(value)}"
    if "\x00" in value:
        return "must not contain NUL (U+0000) characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (it contains an unpaired surrogate)"
    if min_length and not value.strip():
        return "must not be empty"
    return None


def check_payload(error: Callable[[str, str], Exception], path: str, payload: Any) -> None:
    """Raise ``error(where, reason)`` at the first value of ``payload`` that is not plain JSON
    within the payload limits (depth, encoded size, key length, numbers finite and within 64
    bits, text without NUL), so that it round-trips through jsonb and passes this check again
    when firing reads it back. Walks iteratively, so any depth (even a cycle) is safe, and
    stops once the size is exceeded, so any breadth (even a YAML alias bomb) is cheap."""
    budget = limits.PAYLOAD_MAX_BYTES
    todo: list[tuple[str, Any, int]] = [(path, payload, 0)]
    while todo:
        where, value, depth = todo.pop()
        size, children = _payload_node(error, where, value, depth)
        budget -= size
        if budget < 0:
            reason = f"is larger than {limits.PAYLOAD_MAX_BYTES} bytes encoded as JSON"
            raise error(path, reason)
        todo.extend(reversed(children))


def _payload_node(
    error: Callable[[str, str], Exception], where: str, value: Any, depth: int
) -> tuple[int, list[tuple[str, Any, int]]]:
    """The bytes ``value`` adds to the compact JSON encoding (its own, not its children's)
    and its children; raises for a value that is not within the limits."""
    if value is None or isinstance(value, bool):
        return len(json.dumps(value)), []
    if isinstance(value, int):
        if not limits.PAYLOAD_MIN_INT <= value <= limits.PAYLOAD_MAX_INT:
            raise error(where, f"{shown(value)} is outside the signed 64-bit integer range")
        return len(str(value)), []
    if isinstance(value, float):
        if not math.isfinite(value):
            raise error(where, f"{value} is not a JSON number")
        if not -_FLOAT_BOUND <= value < _FLOAT_BOUND:
            raise error(where, f"{value!r} is outside the signed 64-bit integer range")
        # jsonb prints numbers in full (1e-300 as 302 characters; 1e16 as an integer).
        return len(format(Decimal(repr(value)), "f")), []
    if isinstance(value, str):
        problem = text_problem(value, 0, None)
        if problem is not None:
            raise error(where, problem)
        return len(json.dumps(value, ensure_ascii=False).encode()), []
    if isinstance(value, list | dict) and depth >= limits.PAYLOAD_MAX_DEPTH:
        raise error(where, f"nests deeper than {limits.PAYLOAD_MAX_DEPTH} levels")
    if isinstance(value, list):
        items = [(f"{where}[{index}]", item, depth + 1) for index, item in enumerate(value)]
        return 2 + max(len(value) - 1, 0), items
    if isinstance(value, dict):
        size = 2 + max(len(value) - 1, 0)
        children = []
        for key in value:
            if not isinstance(key, str):
                raise error(where, f"key {shown(key)} is not a string")
            problem = text_problem(key, 0, limits.PAYLOAD_MAX_KEY_LENGTH)
            if problem is not None:
                raise error(where, f"key {shown(key)}: {problem}")
            size += len(json.dumps(key, ensure_ascii=False).encode()) + 1
            children.append((f"{where}{_key_path(key)}", value[key], depth + 1))
        return size, children
    raise error(where, f"{shown(value)} is not a JSON value ({type(value).__name__}); quote it")


_FLOAT_BOUND = float(2**63)
"""A float outside ±2**63 would come back from jsonb as an integer beyond 64 bits."""


def _key_path(key: str) -> str:
    """``.key``, or ``["a key"]`` for a key that is not a plain word."""
    return f".{key}" if _PLAIN_KEY.fullmatch(key) else f"[{shown(key)}]"


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,60}")


def shown(value: Any) -> str:
    """``value`` for a message: a repr cut to about :data:`SHOWN_LENGTH` characters, and a
    huge integer as its size (its digits would not even convert to text)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        return f"an integer of about {int(value.bit_length() * math.log10(2))} digits"
    if isinstance(value, str):
        text = repr(value[:SHOWN_LENGTH])
        return text + "..." if len(value) > SHOWN_LENGTH else text
    if isinstance(value, list | dict | Mapping):
        return f"a {type(value).__name__}"
    text = repr(value)
    return text if len(text) <= SHOWN_LENGTH else text[:SHOWN_LENGTH] + "..."


def key_name(key: Any) -> str:
    """A mapping key as a field name in a message: itself when it is a short string."""
    return key if isinstance(key, str) and len(key) <= SHOWN_LENGTH else shown(key)


def check_manifest_rules(name: str, spec: Mapping[str, Any]) -> None:
    """The cross-field rules a *manifest* must follow beyond :meth:`ScheduleDefinition.from_spec`
    (the CRD's CEL rules say the same): ``catchUpLimit`` only with ``misfirePolicy: CatchUp``.
    Stored canonical specs always carry ``catchUpLimit``, so ``from_spec`` does not check this.
    Nor does it refuse :data:`TARGET_FIELD`, which stored specs carry and manifests cannot, or a
    reserved ``job.kind`` (``tickwork.``), which a manifest reaches through ``jobTemplate``
    only (the Python API may build a container job's payload itself)."""
    if spec.get("catchUpLimit") is not None and spec.get("misfirePolicy") != "CatchUp":
        raise DefinitionError(name, "spec.catchUpLimit", "is only valid with misfirePolicy CatchUp")
    if TARGET_FIELD in spec:
        reason = "unknown field (the operator sets it from the Schedule's metadata)"
        raise DefinitionError(name, f"spec.{TARGET_FIELD}", reason)
    job = spec.get("job")
    kind = job.get("kind") if isinstance(job, Mapping) else None
    if isinstance(kind, str) and kind.startswith(container_jobs.RESERVED_PREFIX):
        raise DefinitionError(
            name,
            "spec.job.kind",
            f"kinds starting {container_jobs.RESERVED_PREFIX!r} are tickwork's own "
            "(to run a container, set spec.jobTemplate instead of spec.job.kind)",
        )


def check_container_template(error: Callable[[str, str], Exception], template: Any) -> None:
    """Raise ``error(field, reason)`` unless ``template`` is a valid batch/v1 JobTemplateSpec
    within the payload limits (it travels in each job's payload)."""
    if not isinstance(template, Mapping):
        raise error(job_templates.PATH, f"must be a mapping, not {_type_name(template)}")
    check_payload(error, job_templates.PATH, template)
    job_templates.check(error, template)


def stored_kind(spec: Mapping[str, Any]) -> str | None:
    """The kind of the jobs a stored spec fires (None when it says none)."""
    if spec.get("jobTemplate") is not None:
        return container_jobs.KIND
    job = spec.get("job")
    kind = job.get("kind") if isinstance(job, Mapping) else None
    return kind if isinstance(kind, str) else None


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


def _retry_to_spec(retry: Backoff) -> dict[str, float]:
    return {
        "baseDelaySeconds": _number(retry.base),
        "backoffRate": _number(retry.rate),
        "maxDelaySeconds": _number(retry.max),
    }


def _job_to_spec(job: JobTemplate, *, container: bool) -> dict[str, Any]:
    """``spec.job``; with a ``jobTemplate``, without the kind and payload it implies."""
    spec: dict[str, Any] = {} if container else {"kind": job.kind}
    spec["queue"] = job.queue
    if not container:
        spec["payload"] = _copy_json(job.payload)
    spec["priority"] = job.priority
    if job.max_attempts is not None:
        spec["maxAttempts"] = job.max_attempts
    if job.retry is not None:
        spec["retryPolicy"] = _retry_to_spec(job.retry)
    if job.timeout_seconds is not None:
        spec["timeoutSeconds"] = _number(job.timeout_seconds)
    if job.concurrency_key is not None:
        spec["concurrencyKey"] = job.concurrency_key
    if job.concurrency_limit is not None:
        spec["concurrencyLimit"] = job.concurrency_limit
    return spec


def _job_from_spec(fields: _Fields | None, *, container: bool) -> JobTemplate:
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
        queue=_or(fields.string("queue"), DEFAULT_QUEUE),
        payload=_copy_json(payload),
        priority=_or(fields.integer("priority"), 0),
        max_attempts=fields.integer("maxAttempts"),
        retry=None if retry is None else _retry_from_spec(retry),
        timeout_seconds=fields.number("timeoutSeconds"),
        concurrency_key=fields.string("concurrencyKey"),
        concurrency_limit=fields.integer("concurrencyLimit"),
    )


def _container_from_spec(fields: _Fields) -> ContainerTemplate | None:
    """``spec.jobTemplate`` and, in a stored spec, :data:`TARGET_FIELD`."""
    template = fields.values.get("jobTemplate")
    target = fields.mapping(TARGET_FIELD, frozenset(_TARGET_LENGTHS))
    if template is None:
        if target is not None:
            raise fields.error(TARGET_FIELD, "is only valid with spec.jobTemplate")
        return None
    check_container_template(
        lambda path, reason: DefinitionError(fields.name, path, reason), template
    )
    return ContainerTemplate(
        template=_copy_json(template),
        namespace=None if target is None else target.string("namespace"),
        owner_uid=None if target is None else target.string("ownerUid"),
    )


def _target_to_spec(container: ContainerTemplate) -> dict[str, str]:
    target = {"namespace": container.namespace, "ownerUid": container.owner_uid}
    return {key: value for key, value in target.items() if value is not None}


def _retry_from_spec(fields: _Fields) -> Backoff:
    default = Backoff()
    base = _or(fields.number("baseDelaySeconds"), default.base)
    rate = _or(fields.number("backoffRate"), default.rate)
    top = _or(fields.number("maxDelaySeconds"), default.max)
    if top < base:
        reason = f"must be >= baseDelaySeconds ({_number(base)}), not {_number(top)}"
        raise fields.error("maxDelaySeconds", reason)
    return Backoff(base=base, rate=rate, max=top)


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON-like value, so no caller shares a mutable payload (checked by
    :func:`check_payload` first: it nests at most ``PAYLOAD_MAX_DEPTH`` levels)."""
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


TARGET_FIELD = "jobTemplateTarget"
"""Where a stored spec keeps a :class:`ContainerTemplate`'s namespace and owner uid (a manifest
cannot set it: :func:`check_manifest_rules`)."""
_TARGET_LENGTHS = {"namespace": 63, "ownerUid": 128}
"""A Kubernetes namespace is a DNS label; a uid is a UUID (36 characters), with room."""

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
        "pendingJobsOnDelete",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
        "job",
        "jobTemplate",
        TARGET_FIELD,
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
        "concurrencyLimit",
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
                hint = did_you_mean(key, known) if isinstance(key, str) else ""
                raise self.error(key_name(key), "unknown field" + hint)

    def error(self, key: str, reason: str) -> DefinitionError:
        return DefinitionError(self.name, f"{self.path}.{key}", reason)

    def _limited(self, key: str, value: _V) -> _V:
        """``value``, unless it is outside the limits of its field (when it has any)."""
        path = f"{self.path}.{key}"
        if value is not None and path in limits.FIELDS:
            problem = limit_problem(path, value)
            if problem is not None:
                raise self.error(key, problem)
        return value

    def mapping(self, key: str, known: frozenset[str]) -> _Fields | None:
        value = self.values.get(key)
        return None if value is None else _Fields(self.name, f"{self.path}.{key}", value, known)

    def string(self, key: str) -> str | None:
        value = self.values.get(key)
        if value is None or isinstance(value, str):
            return self._limited(key, value)
        raise self.error(key, f"must be a string, not {_type_name(value)}")

    def boolean(self, key: str) -> bool | None:
        value = self.values.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self.error(key, f"must be a boolean, not {_type_name(value)}")

    def integer(self, key: str) -> int | None:
        value = self.values.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return self._limited(key, value)
        raise self.error(key, f"must be an integer, not {_type_name(value)}")

    def number(self, key: str) -> float | None:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"must be a number, not {_type_name(value)}")
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


def _type_name(value: Any) -> str:
    """The JSON/YAML name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({shown(value)})"
    if isinstance(value, str):
        return f"a string ({shown(value)})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
