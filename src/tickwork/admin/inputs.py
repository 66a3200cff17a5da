"""Reading what a request asks for — filters, page keys, an action's reason and request id —
into typed values; anything malformed is an InvalidInput (400)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping

from tickwork.db import admin as admin_db
from tickwork.errors import InvalidInput
from tickwork.model import JobStatus

FAILING = "failing"
"""The jobs page's pseudo-status: available again after a failed attempt."""
STATUSES = (*(s.value for s in JobStatus), FAILING)
MAX_TEXT = 253
MAX_REASON = 500
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def text(query: Mapping[str, str], name: str) -> str | None:
    value = query.get(name, "").strip()
    if len(value) > MAX_TEXT:
        raise InvalidInput(name, f"at most {MAX_TEXT} characters")
    return value or None


def number(query: Mapping[str, str], name: str) -> int | None:
    value = query.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit() or len(value) > 18:
        raise InvalidInput(name, "must be a positive whole number")
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


def schedule_key(query: Mapping[str, str]) -> tuple[str, str] | None:
    """The key of the last schedule of the previous page (``after_namespace``/``after_name``)."""
    namespace, name = text(query, "after_namespace"), text(query, "after_name")
    if (namespace is None) != (name is None):
        raise InvalidInput("after_namespace", "comes with after_name")
    return None if namespace is None or name is None else (namespace, name)


def reason(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_REASON:
        raise InvalidInput("reason", f"must be text of at most {MAX_REASON} characters")
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
