"""The status a Schedule object should show, and the smallest merge patch that gets it there
(pure).

Facts come from the stored row (revision, next run and the occurrences after it as the
calendar keeps them, whether the calendar has ended, last occurrence, last success, skipped
occurrences, open jobs); the ``Ready`` condition says whether the object's current spec is
what PostgreSQL holds and fires: ``Synced`` (True), ``NamespaceNotAllowed``,
``PolicyViolation`` (tenant policy refuses it), ``NameConflict`` (another object supplies that
schedule), ``InvalidSpec``, ``NamespaceOwnedElsewhere``, ``DatabaseUnavailable``,
``Disabled`` (the stored row is disabled), ``FiringFailed`` (the stored row records a firing
error) (False), or ``Pending`` (Unknown: not synced yet). The ``Served`` condition beside it
(:mod:`tickwork.operator.served`) says whether live workers fire and run it; ``lastJob`` is the
last job's outcome and times, its result (cut short) or why it was not kept, and its progress.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tickwork.db.jobs import LAST_RESULT_CHARS, LastJob, OpenJob
from tickwork.db.results import Progress
from tickwork.db.schedules import ScheduleRow
from tickwork.model import JobStatus
from tickwork.operator.desired import NAME_CONFLICT, Entry
from tickwork.operator.events import Seen
from tickwork.operator.syncer import NamespaceState, Outcome
from tickwork.progress import MAX_MESSAGE_LENGTH
from tickwork.results import MAX_ERROR_LENGTH
from tickwork.schedules import container_jobs, occurrences
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.stored import TARGET_FIELD
from tickwork.schedules.sync import fixed_delay
from tickwork.schedules.tenancy import NAMESPACE_NOT_ALLOWED, POLICY_VIOLATION, Refusal

DISABLED = "Disabled"
FIRING_FAILED = "FiringFailed"
REFUSED = frozenset({NAMESPACE_NOT_ALLOWED, POLICY_VIOLATION, NAME_CONFLICT})
OBSERVED = frozenset({str(Outcome.SYNCED), "InvalidSpec", DISABLED, FIRING_FAILED, *REFUSED})
"""Ready reasons decided for the object's generation (``observedGeneration`` follows)."""
EVENT_REASONS = frozenset({"InvalidSpec", DISABLED, FIRING_FAILED, *REFUSED})
"""Ready reasons whose Warning Events carry the same reason (the others: ``SyncFailed``)."""

FACTS = (
    "revision",
    "nextRunAt",
    "lastScheduleTime",
    "lastSuccessfulTime",
    "skippedOccurrences",
    "active",
    "activeCount",
    "lastJob",
    "nextOccurrences",
    "ended",
)

NEXT_OCCURRENCES = 3
"""How many occurrences ``status.nextOccurrences`` lists (``nextRunAt`` first)."""


@dataclass(frozen=True)
class Ready:
    status: str
    """True, False or Unknown."""
    reason: str
    message: str

    @property
    def failed(self) -> bool:
        return self.status == "False"


def ready(
    entry: Entry,
    *,
    refusal: Refusal | None,
    state: NamespaceState | None,
    database_error: str | None,
    row: ScheduleRow | None = None,
) -> Ready:
    """The Ready condition of ``entry``, given the sync of its namespace and its stored row
    (None: not read yet). ``refusal``: why the desired state leaves it out, if it does."""
    translation = entry.translation
    if refusal is not None:
        return Ready("False", refusal.reason, refusal.message)
    if translation.error is not None:
        return Ready("False", "InvalidSpec", translation.error)
    definition, name = translation.definition, translation.name
    attempted = state is not None and state.attempted.definition(name) == definition
    if state is not None and attempted and state.outcome is not Outcome.SYNCED:
        return Ready("False", str(state.outcome), state.message)
    if database_error is not None:
        return Ready("False", str(Outcome.DATABASE_UNAVAILABLE), database_error)
    if (
        state is not None
        and state.synced is not None
        and state.synced.definition(name) == definition
    ):
        return _stored(row) or Ready(
            "True", str(Outcome.SYNCED), "the definition in PostgreSQL is current"
        )
    return Ready("Unknown", "Pending", "waiting for the sync")


def _stored(row: ScheduleRow | None) -> Ready | None:
    """A synced definition whose stored row does not fire: disabled, or set aside."""
    if row is None:
        return None
    if not row.enabled:
        return Ready(
            "False",
            DISABLED,
            f"schedule {row.namespace}/{row.name} is disabled in PostgreSQL (enabled = false), "
            "so it fires nothing: a sync of that namespace that did not list it pruned it "
            "(another operator or a `tickwork sync` of the same schedule namespace, or the "
            "namespace taken over); a sync listing it enables it again",
        )
    if row.firing_error is not None:
        # Without the failure count or retry time: the message (and so the Event) stays put
        # while the same error repeats.
        return Ready(
            "False", FIRING_FAILED, f"firing failed, retried with backoff: {row.firing_error}"
        )
    return None


def facts(
    row: ScheduleRow | None,
    active: Sequence[OpenJob],
    last: LastJob | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The stored row's fields, its open jobs and its last job as status fields (None:
    absent); ``ended`` needs ``now``."""
    if row is None:
        return dict.fromkeys(FACTS)
    jobs_namespace = container_namespace(row)
    return {
        **calendar_facts(row, now),
        "revision": row.revision,
        "nextRunAt": timestamp(row.next_run_at),
        "lastScheduleTime": timestamp(row.last_occurrence_at),
        "lastSuccessfulTime": timestamp(row.last_success_at),
        "skippedOccurrences": row.skipped_occurrences,
        "active": [active_job(row, job, jobs_namespace) for job in active] or None,
        "activeCount": active[0].open_count if active else 0,
        "lastJob": None if last is None else last_job(last),
    }


def calendar_facts(row: ScheduleRow, now: datetime | None) -> dict[str, Any]:
    """``nextOccurrences``: ``nextRunAt`` and the occurrences after it as the schedule's
    calendar keeps them (what ``kubectl describe`` shows); ``ended``: true once ``endTime``
    has passed with no next run (absent otherwise)."""
    try:
        definition = ScheduleDefinition.from_spec(row.name, row.spec)
    except DefinitionError:
        return {"nextOccurrences": None, "ended": None}
    ended = (
        now is not None
        and row.next_run_at is None
        and definition.end_time is not None
        and definition.end_time < now
    )
    if row.next_run_at is None:
        return {"nextOccurrences": None, "ended": True if ended else None}
    found = [row.next_run_at]
    if fixed_delay(definition) is None:
        zone = occurrences.load_zone(definition.time_zone)
        timetable = definition.timetable(row.namespace)
        try:
            while len(found) < NEXT_OCCURRENCES:
                following = timetable.next_after(found[-1], zone)
                if following is None:
                    break
                found.append(following)
        except occurrences.InvalidExpression:
            pass  # nextRunAt alone; the firing pass reports the error
    return {"nextOccurrences": [timestamp(t) for t in found], "ended": None}


def container_namespace(row: ScheduleRow) -> str | None:
    """The Kubernetes namespace of a container schedule's Jobs, as its stored spec says (the
    Schedule object's; the schedule namespace for a file's schedule); None for a task one."""
    if row.spec.get("jobTemplate") is None:
        return None
    target = row.spec.get(TARGET_FIELD)
    namespace = target.get("namespace") if isinstance(target, Mapping) else None
    return namespace if isinstance(namespace, str) else row.namespace


def active_job(row: ScheduleRow, job: OpenJob, jobs_namespace: str | None) -> dict[str, Any]:
    """One ``status.active`` entry. A running job of a container schedule also names its
    Kubernetes Job as a CronJob's ``active`` does (an object reference: the Job of its current
    attempt, named by :func:`container_jobs.job_name`); a pending one has no Job yet."""
    entry: dict[str, Any] = {
        "id": job.id,
        "status": str(job.status),
        "occurrenceAt": timestamp(job.occurrence_at),
    }
    if jobs_namespace is not None and job.status is JobStatus.RUNNING:
        entry |= {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": container_jobs.job_name(row.name, job.occurrence_at, job.id, job.attempt),
            "namespace": jobs_namespace,
        }
    return entry


def last_job(last: LastJob) -> dict[str, Any]:
    """``status.lastJob``; a field not known is None (the merge patch removes it): retention
    deleted the job row, or the job has not started or finished, returned or reported nothing.
    Flat, so that a field gone from a later report is removed too."""
    progress = Progress.from_json(last.progress)
    return {
        "id": last.id,
        "outcome": None if last.status is None else str(last.status),
        "occurrenceAt": timestamp(last.occurrence_at),
        "startedAt": timestamp(last.started_at),
        "finishedAt": timestamp(last.finished_at),
        "durationSeconds": duration(last),
        "result": cut(last.result_head, LAST_RESULT_CHARS),
        "resultError": cut(last.result_error, MAX_ERROR_LENGTH),
        "progress": None if progress is None else _fraction(progress.fraction),
        "progressMessage": None if progress is None else cut(progress.message, MAX_MESSAGE_LENGTH),
        "progressTime": None if progress is None else timestamp(progress.at),
    }


def cut(text: str | None, most: int) -> str | None:
    """``text`` cut to ``most`` characters (the last an ellipsis) when it is longer: the CRD's
    ``maxLength`` of the field, whatever a row holds."""
    if text is None or len(text) <= most:
        return text
    return text[: most - 1] + "…"


def _fraction(value: float | None) -> float | None:
    return None if value is None else min(max(value, 0.0), 1.0)


def duration(last: LastJob) -> float | None:
    """Seconds from the last attempt's start to the job's end, to the millisecond."""
    if last.started_at is None or last.finished_at is None:
        return None
    return round((last.finished_at - last.started_at).total_seconds(), 3)


def seen(row: ScheduleRow, last: LastJob | None) -> Seen:
    """What the events of :mod:`tickwork.operator.events` compare between rounds."""
    if last is None:
        return Seen(skipped=row.skipped_occurrences)
    return Seen(
        skipped=row.skipped_occurrences,
        job_id=last.id,
        job_status=None if last.status is None else str(last.status),
        occurrence_at=last.occurrence_at,
        duration_seconds=duration(last),
        attempt=last.attempt,
        error=last.last_error,
    )


def patch(
    current: Mapping[str, Any],
    entry: Entry,
    condition: Ready,
    found: Mapping[str, Any],
    now: datetime,
    *,
    served: Ready | None = None,
    extra: Sequence[tuple[str, Ready]] = (),
) -> dict[str, Any]:
    """The merge patch of ``status`` (empty when nothing changed). ``observedGeneration`` moves
    only when the outcome is decided for this generation (a reason in ``OBSERVED``). The
    conditions: Ready, Served when given, then ``extra`` (type, condition) in order."""
    wanted = dict(found)
    if condition.reason in OBSERVED and entry.generation is not None:
        wanted["observedGeneration"] = entry.generation
    shown = [("Ready", condition)] + ([("Served", served)] if served is not None else [])
    shown += extra
    wanted["conditions"] = [_condition(current, kind, value, now) for kind, value in shown]
    return {key: value for key, value in wanted.items() if current.get(key) != present(value)}


def _condition(
    current: Mapping[str, Any], kind: str, value: Ready, now: datetime
) -> dict[str, Any]:
    old = _find_condition(current, kind)
    same = old is not None and old.get("status") == value.status
    transition = old.get("lastTransitionTime") if same and old is not None else None
    return {
        "type": kind,
        "status": value.status,
        "reason": value.reason,
        "message": value.message,
        "lastTransitionTime": transition or timestamp(now),
    }


def present(value: Any) -> Any:
    """A value as the object keeps it once patched: a merge patch's None inside an object
    removes that field."""
    if isinstance(value, Mapping):
        return {key: item for key, item in value.items() if item is not None}
    return value


def previous(current: Mapping[str, Any], kind: str = "Ready") -> Ready | None:
    """The condition of type ``kind`` the object shows now, if any."""
    old = _find_condition(current, kind)
    if old is None:
        return None
    return Ready(str(old.get("status")), str(old.get("reason")), str(old.get("message")))


def _find_condition(current: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in current.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def timestamp(value: datetime | None) -> str | None:
    """RFC 3339 in UTC, whole seconds (as Kubernetes writes times)."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
