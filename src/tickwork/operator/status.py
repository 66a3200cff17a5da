"""The status a Schedule object should show, and the smallest merge patch that gets it there
(pure).

Facts come from the stored row (revision, next run, last occurrence, last success, skipped
occurrences, open jobs); the ``Ready`` condition says whether the object's current spec is
what PostgreSQL holds and fires: ``Synced`` (True), ``NamespaceNotAllowed``,
``PolicyViolation`` (tenant policy refuses it), ``NameConflict`` (another object supplies that
schedule), ``InvalidSpec``, ``NamespaceOwnedElsewhere``, ``DatabaseUnavailable``,
``Disabled`` (the stored row is disabled), ``FiringFailed`` (the stored row records a firing
error) (False), or ``Pending`` (Unknown: not synced yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tickwork.db.jobs import OpenJob
from tickwork.db.schedules import ScheduleRow
from tickwork.operator.desired import NAME_CONFLICT, Entry
from tickwork.operator.syncer import NamespaceState, Outcome
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
)


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


def facts(row: ScheduleRow | None, active: Sequence[OpenJob]) -> dict[str, Any]:
    """The stored row's fields as status fields (None: absent)."""
    if row is None:
        return dict.fromkeys(FACTS)
    return {
        "revision": row.revision,
        "nextRunAt": timestamp(row.next_run_at),
        "lastScheduleTime": timestamp(row.last_occurrence_at),
        "lastSuccessfulTime": timestamp(row.last_success_at),
        "skippedOccurrences": row.skipped_occurrences,
        "active": [
            {"id": job.id, "status": str(job.status), "occurrenceAt": timestamp(job.occurrence_at)}
            for job in active
        ]
        or None,
        "activeCount": active[0].open_count if active else 0,
    }


def patch(
    current: Mapping[str, Any],
    entry: Entry,
    condition: Ready,
    found: Mapping[str, Any],
    now: datetime,
) -> dict[str, Any]:
    """The merge patch of ``status`` (empty when nothing changed). ``observedGeneration`` moves
    only when the outcome is decided for this generation (a reason in ``OBSERVED``)."""
    wanted = dict(found)
    if condition.reason in OBSERVED and entry.generation is not None:
        wanted["observedGeneration"] = entry.generation
    old = _ready_condition(current)
    same = old is not None and old.get("status") == condition.status
    transition = old.get("lastTransitionTime") if same and old is not None else None
    wanted["conditions"] = [
        {
            "type": "Ready",
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": transition or timestamp(now),
        }
    ]
    return {key: value for key, value in wanted.items() if current.get(key) != value}


def previous(current: Mapping[str, Any]) -> Ready | None:
    """The Ready condition the object shows now, if any."""
    old = _ready_condition(current)
    if old is None:
        return None
    return Ready(str(old.get("status")), str(old.get("reason")), str(old.get("message")))


def _ready_condition(current: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in current.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition
    return None


def timestamp(value: datetime | None) -> str | None:
    """RFC 3339 in UTC, whole seconds (as Kubernetes writes times)."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
