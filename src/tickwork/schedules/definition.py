"""Schedule definitions: the validated, pure form of a ``Schedule`` spec.

A :class:`ScheduleDefinition` is what ``sync_schedules`` stores. :meth:`~ScheduleDefinition.to_spec`
and :meth:`~ScheduleDefinition.from_spec` translate it to and from the camelCase ``spec`` of a
``Schedule`` manifest (the same shape the CRD accepts and the database keeps as jsonb).

``from_spec`` checks the shape (known fields, types, enum values, ranges); ``validate`` checks
the values (name format, cron, zone, ranges, the payload) and the rules across fields. Both
raise :class:`~tickwork.schedules.checks.DefinitionError`. This module owns the definition and
its cross-field rules; the rest is split by concern:

- :mod:`~tickwork.schedules.spec_fields`: reading a manifest's fields, with their types;
- :mod:`~tickwork.schedules.checks`: single values against the limits of
  :mod:`tickwork.schedules.limits` (docs/limits.md), payloads, and how messages quote values;
- :mod:`~tickwork.schedules.options`: the job templates, the policies and their defaults;
- :mod:`~tickwork.schedules.stored`: the stored form (the canonical spec) and what is read
  straight from it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn

from tickwork.schedules import calendars, container_jobs, deadlines, limits, occurrences, steps
from tickwork.schedules.checks import (
    DefinitionError,
    check_container_template,
    check_payload,
    limit_problem,
    text_problem,
    type_name,
)
from tickwork.schedules.limits import MAX_NAME_LENGTH
from tickwork.schedules.options import (
    DEFAULT_FAILED_JOBS_HISTORY_LIMIT,
    DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT,
    ConcurrencyPolicy,
    ContainerTemplate,
    IntervalMode,
    JobTemplate,
    MisfirePolicy,
    PendingJobsOnDelete,
)
from tickwork.schedules.spec_fields import (
    JOB_FIELDS,
    SPEC_FIELDS,
    Fields,
    container_from_spec,
    job_from_spec,
    or_default,
)
from tickwork.schedules.stored import (
    TARGET_FIELD,
    TARGET_LENGTHS,
    copy_json,
    format_duration,
    job_to_spec,
    retry_to_spec,
    target_to_spec,
)

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


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
    exclude: tuple[str, ...] = ()
    """ISO dates and cron expressions whose occurrences do not fire (:mod:`.calendars`)."""
    start_time: datetime | None = None
    """No occurrence before this instant."""
    end_time: datetime | None = None
    """No occurrence after this instant: the schedule then has ended."""
    deadline: deadlines.Deadline | None = None
    """By when each occurrence must have succeeded (None: no deadline)."""
    suspend_after_failures: int | None = None
    """Suspend the schedule after this many consecutive occurrences ended dead (None: never)."""
    steps: tuple[steps.Step, ...] = ()
    """With ``spec.steps``: ``job`` is :func:`steps.occurrence_job`, which spawns them."""

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
            self.grid(namespace)
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
        if self.deadline is not None:
            deadlines.check_deadline(self.deadline, self._error)
        if self.suspend_after_failures is not None:
            deadlines.check_suspend_after_failures(self.suspend_after_failures, self._error)
        self._validate_job()
        self._validate_container()
        try:
            self.timetable(namespace).check(occurrences.load_zone(self.time_zone))
        except calendars.CalendarError as error:
            fail(error.field, str(error))
        if self.steps:
            steps.check_graph(self.name, self.steps)

    def owned_by(self, namespace: str, uid: str | None) -> ScheduleDefinition:
        """This definition as the Schedule object of Kubernetes ``namespace`` with ``uid``
        asks for it: its Jobs go to that namespace and are owned by the object."""
        if self.container is None:
            return self
        target = dataclasses.replace(self.container, namespace=namespace, owner_uid=uid)
        return dataclasses.replace(self, container=target)

    def timetable(self, namespace: str) -> calendars.Calendared:
        """The occurrence calculator, its calendar applied; hashed ``H`` cron fields (also
        those of ``spec.exclude``) are seeded by namespace/name."""
        return calendars.Calendared(self.grid(namespace), self.calendar(namespace))

    def grid(self, namespace: str) -> occurrences.Timetable:
        """The occurrences of ``spec.schedule`` or ``spec.every`` alone, without the calendar."""
        if self.schedule is not None:
            return occurrences.CronTimetable.parse(self.schedule, seed=f"{namespace}/{self.name}")
        if self.every is None:
            raise self._error("spec", "set exactly one of spec.schedule or spec.every")
        return occurrences.FixedRate(self.every)

    def calendar(self, namespace: str) -> calendars.Calendar:
        """``spec.exclude``, ``spec.startTime`` and ``spec.endTime`` (CalendarError if bad)."""
        return calendars.Calendar.parse(
            self.exclude, self.start_time, self.end_time, seed=f"{namespace}/{self.name}"
        )

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
        if self.exclude:
            spec["exclude"] = list(self.exclude)
        if self.start_time is not None:
            spec["startTime"] = self.start_time.isoformat()
        if self.end_time is not None:
            spec["endTime"] = self.end_time.isoformat()
        if self.deadline is not None:
            spec["deadline"] = self.deadline.to_spec()
        if self.suspend_after_failures is not None:
            spec["suspendAfterFailures"] = self.suspend_after_failures
        if self.steps:
            spec["steps"] = steps.steps_to_spec(self.steps)
        else:
            spec["job"] = job_to_spec(self.job, container=self.container is not None)
        if self.container is not None:
            spec["jobTemplate"] = copy_json(self.container.template)
            target = target_to_spec(self.container)
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
        fields = Fields(name, "spec", spec, SPEC_FIELDS)
        target = fields.string("scheduleNamespace")
        if target is not None and any(c.isspace() for c in target):
            raise fields.error("scheduleNamespace", "must be a name without spaces")
        every = fields.parse("every", occurrences.parse_duration)
        interval_mode = fields.choice("intervalMode", IntervalMode)
        if interval_mode is not None and every is None:
            raise fields.error("intervalMode", "is only valid with spec.every")
        job = fields.mapping("job", JOB_FIELDS)
        container = container_from_spec(fields)
        pipeline = steps.steps_from_spec(name, fields.values.get("steps"))
        if pipeline and (job is not None or container is not None):
            reason = "set exactly one of spec.job.kind, spec.jobTemplate or spec.steps"
            raise fields.error("steps", reason)
        if job is None and container is None and not pipeline:
            raise fields.error(
                "job", "is required (spec.job.kind, or spec.jobTemplate, or spec.steps)"
            )
        return cls(
            name=name,
            job=steps.occurrence_job(pipeline)
            if pipeline
            else job_from_spec(job, container=container is not None),
            container=container,
            steps=pipeline,
            schedule=fields.string("schedule"),
            every=every,
            interval_mode=interval_mode or IntervalMode.FIXED_RATE,
            time_zone=or_default(fields.string("timeZone"), "UTC"),
            suspend=or_default(fields.boolean("suspend"), False),
            concurrency_policy=fields.choice("concurrencyPolicy", ConcurrencyPolicy)
            or ConcurrencyPolicy.ALLOW,
            starting_deadline_seconds=fields.integer("startingDeadlineSeconds"),
            misfire_policy=fields.choice("misfirePolicy", MisfirePolicy) or MisfirePolicy.LATEST,
            catch_up_limit=or_default(fields.integer("catchUpLimit"), 10),
            jitter_seconds=or_default(fields.integer("jitterSeconds"), 0),
            pending_jobs_on_delete=fields.choice("pendingJobsOnDelete", PendingJobsOnDelete)
            or PendingJobsOnDelete.CANCEL,
            successful_jobs_history_limit=or_default(
                fields.integer("successfulJobsHistoryLimit"), DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT
            ),
            failed_jobs_history_limit=or_default(
                fields.integer("failedJobsHistoryLimit"), DEFAULT_FAILED_JOBS_HISTORY_LIMIT
            ),
            exclude=fields.strings("exclude", limits.MAX_EXCLUSIONS),
            start_time=fields.parse("startTime", calendars.parse_instant),
            end_time=fields.parse("endTime", calendars.parse_instant),
            deadline=deadlines.deadline_from_spec(fields),
            suspend_after_failures=fields.integer("suspendAfterFailures"),
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
            for key, value in retry_to_spec(job.retry).items():
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
            self._fail(path, f"must be an integer, not {type_name(limit)}")
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
        for key, value in target_to_spec(container).items():
            problem = text_problem(value, 1, TARGET_LENGTHS[key])
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


def validate_all(namespace: str, definitions: Sequence[ScheduleDefinition]) -> None:
    """Validate each definition, and that no two share a name."""
    seen: set[str] = set()
    for definition in definitions:
        definition.validate(namespace)
        if definition.name in seen:
            raise DefinitionError(definition.name, "metadata.name", "is defined more than once")
        seen.add(definition.name)


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
