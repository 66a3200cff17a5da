"""Reading what a request asks for — filters, page keys, an action's reason and request id —
into typed values; anything malformed is an InvalidInput (400)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping

from tickwork.db import admin as admin_db
from tickwork.errors import InvalidInput
from tickwork.flow import limits
from tickwork.model import JobStatus

FAILING = "failing"
"""The jobs page's pseudo-status: available again after a failed attempt."""
STATUSES = (*(s.value for s in JobStatus), FAILING)
MAX_TEXT = 253
MAX_REASON = 500
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NUMBER = re.compile(r"[0-9]{1,18}")
_WHOLE = re.compile(r"[+-]?[0-9]{1,18}")


def text(query: Mapping[str, str], name: str) -> str | None:
    value = query.get(name, "").strip()
    if len(value) > MAX_TEXT:
        raise InvalidInput(name, f"at most {MAX_TEXT} characters")
    if _CONTROL.search(value):
        raise InvalidInput(name, "contains a control character")
    return value or None


def number(query: Mapping[str, str], name: str) -> int | None:
    value = query.get(name, "").strip()
    if not value:
        return None
    if not _NUMBER.fullmatch(value):
        raise InvalidInput(name, "must be a positive whole number (digits 0-9, at most 18)")
    return int(value)


def job_filter(query: Mapping[str, str]) -> admin_db.JobFilter:
    status = text(query, "status")
    if status is not None and status not in STATUSES:
        raise InvalidInput("status", f"must be one of {', '.join(STATUSES)}")
    return admin_db.JobFilter(
        status=JobStatus(status) if status and status != FAILING else None,
        failing=status == FAILING,
        kind=text(query, "kind"),
        queue=text(query, "queue"),
        namespace=text(query, "namespace"),
        schedule=text(query, "schedule"),
    )


def schedule_ref(match: Mapping[str, str]) -> tuple[str, str]:
    """The (namespace, name) of a schedule's path."""
    namespace, name = match["namespace"], match["name"]
    for field, value in (("namespace", namespace), ("name", name)):
        if len(value) > MAX_TEXT or _CONTROL.search(value):
            raise InvalidInput(field, f"at most {MAX_TEXT} characters, no control character")
    return namespace, name


def schedule_key(query: Mapping[str, str]) -> tuple[str, str] | None:
    """The key of the last schedule of the previous page (``after_namespace``/``after_name``)."""
    namespace, name = text(query, "after_namespace"), text(query, "after_name")
    if (namespace is None) != (name is None):
        raise InvalidInput("after_namespace", "comes with after_name")
    return None if namespace is None or name is None else (namespace, name)


def reason(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_REASON or "\x00" in value:
        raise InvalidInput("reason", f"must be text of at most {MAX_REASON} characters, no NUL")
    return value.strip() or None


def request_id(value: object) -> str:
    """The caller's request id (makes a repeated action change nothing), or a new one."""
    if value is None or value == "":
        return new_request_id()
    if not isinstance(value, str) or not _REQUEST_ID.fullmatch(value):
        raise InvalidInput("request_id", "1-128 characters of A-Z a-z 0-9 . _ : -")
    return value


def new_request_id() -> str:
    return secrets.token_urlsafe(18)


def _optional(fields: Mapping[str, object], name: str) -> object:
    """A rule's field: absent, null or a blank form field are None."""
    value = fields.get(name)
    return None if value is None or (isinstance(value, str) and not value.strip()) else value


def _whole(fields: Mapping[str, object], name: str, most: int) -> int | None:
    """A count from a form (text) or a JSON body (a number); anything else names ``name``."""
    value = _optional(fields, name)
    if value is None:
        return None
    if isinstance(value, str):
        if not _WHOLE.fullmatch(value.strip()):
            raise InvalidInput(name, f"must be a whole number from 1 to {most:,}, got {value!r}")
        value = int(value)
    return limits.check_count(value, name, most)


def limit_rule(scope: limits.Scope, fields: Mapping[str, object]) -> limits.Rule:
    """The rule a limit form or a ``POST /api/limits/…`` body sets: ``name``, and any of
    ``max_running``, ``rate`` (``"100/min"``), ``rate_key``, ``weight`` (a namespace's)."""
    name = fields.get("name")
    if not isinstance(name, str):
        raise InvalidInput(scope.value, "the name, as text")
    rate, rate_key = _optional(fields, "rate"), _optional(fields, "rate_key")
    if rate_key is not None and not isinstance(rate_key, str):
        raise InvalidInput("rate_key", "must be a payload field name, as text")
    return limits.Rule(
        scope,
        name,
        _whole(fields, "max_running", limits.MAX_RUNNING),
        None if rate is None else limits.Rate.parse(rate),
        rate_key.strip() if isinstance(rate_key, str) else None,
        _whole(fields, "weight", limits.MAX_WEIGHT),
    )
