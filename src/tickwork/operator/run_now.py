"""Run a Schedule now from kubectl: ``kubectl annotate schedule NAME tickwork.io/run-now=TOKEN``.

Each token is answered once, with a job or a refusal, recorded in ``status.lastRunNow``. The
job comes from :func:`tickwork.schedules.operations.trigger` (the path of ``tickwork trigger``
and the console) under the request id ``<object uid>/<token>``: decided under the schedule's
row lock against the audit log, so however often the annotation is seen (every watch event,
the status timer, an operator restart, a lost status) one token makes one job. A Schedule
deleted and created again is a new object (a new uid): its tokens are its own.

The audit record's actor is ``kubernetes:<field manager>`` (``kubectl-annotate``,
``kubectl-client-side-apply``, ...), from the ``metadata.managedFields`` entry that owns the
annotation, with the object's namespace, name and uid and the time that entry records. Which
user asked is in the API server's audit log, not in the object: a validating webhook sees the
user but may not write anything, so the operator records what the object tells.

Only the object that supplies the stored definition triggers it (never the loser of a
NameConflict, nor an object refused by tenant policy), and only once its current spec is
synced: a token seen while the definition is pending or the database unavailable waits (a
Warning Event ``RunNowFailed`` says why, except while merely Pending: the Ready condition
shows that) and is tried again at the next status round; a
Schedule that is invalid, refused, disabled or conflicting gets the refusal instead of a job.
A suspended Schedule runs (a trigger works while suspended).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import kopf

from tickwork.errors import InvalidInput, InvalidTransition, ScheduleNotFound
from tickwork.logs import fields
from tickwork.model import Actor
from tickwork.operator.database import Database, DatabaseError
from tickwork.operator.desired import Entry, ObjectKey, entry_of
from tickwork.operator.status import FIRING_FAILED, Ready, timestamp
from tickwork.operator.syncer import Outcome

log = logging.getLogger(__name__)

ANNOTATION = "tickwork.io/run-now"
MAX_TOKEN = 253
"""Longest token accepted: a Kubernetes object name's limit (DNS subdomain), room for any
timestamp, UUID or name a person or a tool would choose, and it keeps the audit log's request
id (``<uid>/<token>``) bounded."""
REASON = "RunNowFailed"
"""The reason of the Warning Events of a token that got no job (yet)."""
PENDING = "Pending"
WAITING = frozenset({PENDING, str(Outcome.DATABASE_UNAVAILABLE)})
"""Ready reasons that pass: the token waits for the next round rather than being refused."""


@dataclass(frozen=True)
class Request:
    """One token, as the object carries it."""

    token: str
    manager: str | None
    """The field manager owning the annotation (None: the object records none)."""
    operation: str | None
    time: str | None
    """When that manager last wrote the object's fields it owns (RFC 3339)."""


def request_of(body: Mapping[str, Any]) -> Request | None:
    """The token the object carries, if any, and who set it per ``managedFields``."""
    metadata = body.get("metadata") or {}
    token = (metadata.get("annotations") or {}).get(ANNOTATION)
    if token is None:
        return None
    owners = [
        entry
        for entry in metadata.get("managedFields") or ()
        if isinstance(entry, Mapping) and f"f:{ANNOTATION}" in _annotations(entry)
    ]
    owner = max(owners, key=lambda entry: str(entry.get("time") or ""), default={})
    return Request(
        str(token),
        _text(owner.get("manager")),
        _text(owner.get("operation")),
        _text(owner.get("time")),
    )


def _annotations(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    found: Any = entry.get("fieldsV1")
    for step in ("f:metadata", "f:annotations"):
        found = found.get(step) if isinstance(found, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def token_error(token: str) -> str | None:
    """Why the token is refused, naming the annotation (None: accepted)."""
    where = f"metadata.annotations[{ANNOTATION}]"
    if not token.strip():
        return f"{where}: the token is empty; annotate a value (a timestamp, say)"
    if len(token) > MAX_TOKEN:
        return f"{where}: the token has {len(token)} characters, at most {MAX_TOKEN} are allowed"
    return None


def answered(current: Mapping[str, Any], token: str) -> bool:
    last = current.get("lastRunNow")
    return isinstance(last, Mapping) and last.get("token") == token


class _Waiting(Exception):
    """The token cannot be answered yet: try again at the next round."""

    def __init__(self, message: str, *, quiet: bool = False) -> None:
        super().__init__(message)
        self.quiet = quiet
        """No Event: the definition is pending its first sync (a moment, after any start; the
        Ready condition shows it)."""


class RunNow:
    """Answers the tokens of the objects it is shown, each once."""

    def __init__(
        self,
        database: Database,
        ready: Callable[[Entry], Ready],
        supplies: Callable[[Entry], bool],
        wall: Callable[[], datetime],
    ) -> None:
        self.database = database
        self.ready = ready
        self.supplies = supplies
        self.wall = wall
        self._answers: dict[ObjectKey, tuple[str | None, str, dict[str, Any]]] = {}
        """Per object: (uid, token, status patch) of the last answer, until status shows it."""
        self._warned: dict[ObjectKey, str] = {}
        self._busy: set[ObjectKey] = set()

    def forget(self, key: ObjectKey) -> None:
        """The object is gone."""
        self._answers.pop(key, None)
        self._warned.pop(key, None)

    async def handle(self, body: kopf.Body, current: Mapping[str, Any]) -> dict[str, Any]:
        """The status patch answering the object's token (empty: nothing to answer yet)."""
        request = request_of(body)
        if request is None or answered(current, request.token):
            return {}
        entry = entry_of(body)
        if entry.deleting or entry.key in self._busy:
            return {}
        known = self._answers.get(entry.key)
        if known is not None and known[:2] == (entry.uid, request.token):
            return known[2]  # answered a moment ago; the status patch is on its way
        self._busy.add(entry.key)
        try:
            answer = await self._answer(body, entry, request)
        except _Waiting as waiting:
            if not waiting.quiet:
                self._warn(body, entry.key, f"run-now token {request.token!r} waits: {waiting}")
            return {}
        finally:
            self._busy.discard(entry.key)
        self._answers[entry.key] = (entry.uid, request.token, answer)
        self._warned.pop(entry.key, None)
        return answer

    async def _answer(self, body: kopf.Body, entry: Entry, request: Request) -> dict[str, Any]:
        answer: dict[str, Any] = {"token": request.token, "time": timestamp(self.wall())}
        refused = token_error(request.token) or self._refusal(entry)
        if refused is None:
            try:
                answer["jobId"] = await self._trigger(entry, request)
            except (InvalidTransition, InvalidInput) as error:
                refused = str(error)
        if refused is not None:
            answer["message"] = refused
            kopf.event(body, type="Warning", reason=REASON, message=refused)
        return {"lastRunNow": answer}

    def _refusal(self, entry: Entry) -> str | None:
        """Why the object may not trigger its schedule (raises _Waiting: not yet)."""
        condition = self.ready(entry)
        if condition.reason in WAITING:
            quiet = condition.reason == PENDING
            raise _Waiting(f"{condition.reason}: {condition.message}", quiet=quiet)
        if condition.status != "True" and condition.reason != FIRING_FAILED:
            return f"the Schedule is not Ready ({condition.reason}): {condition.message}"
        if not self.supplies(entry):
            return "another Schedule supplies this schedule's definition (NameConflict)"
        return None

    async def _trigger(self, entry: Entry, request: Request) -> int:
        translation = entry.translation
        actor = Actor(
            f"kubernetes:{request.manager or 'unknown'}",
            reason=f"annotation {ANNOTATION}",
            request_id=f"{entry.uid}/{request.token}",
        )
        kubernetes = {
            "namespace": entry.key[0],
            "name": entry.key[1],
            "uid": entry.uid,
            "token": request.token,
            "manager": request.manager,
            "operation": request.operation,
            "time": request.time,
        }
        try:
            outcome = await self.database.trigger(
                translation.namespace, translation.name, actor, {"kubernetes": kubernetes}
            )
        except ScheduleNotFound as error:
            raise _Waiting(str(error)) from None
        except DatabaseError as error:
            raise _Waiting(f"database unavailable: {' '.join(str(error).split())}") from None
        assert outcome.job_id is not None  # a trigger, replayed or not, names its job
        log.info(
            "run-now token %r of %s/%s: job %d%s",
            request.token,
            entry.key[0],
            entry.key[1],
            outcome.job_id,
            " (created before)" if outcome.replayed else "",
            extra=fields(action="run_now"),
        )
        return outcome.job_id

    def _warn(self, body: kopf.Body, key: ObjectKey, message: str) -> None:
        if self._warned.get(key) != message:
            self._warned[key] = message
            kopf.event(body, type="Warning", reason=REASON, message=message)
