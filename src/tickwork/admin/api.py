"""The JSON API under ``/api/``: the data behind every page, and the actions.

Reads answer the page objects of :mod:`reads` as JSON (timestamps ISO 8601 with offset,
absent values ``null``). Actions are POSTs of a JSON object ``{"reason": …, "request_id": …}``
(both optional; the request id may also come as the ``Idempotency-Key`` header) and answer
the outcome: ``changed`` false means nothing was done, ``audit_id`` names the record.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tickwork.admin import actions, inputs, reads
from tickwork.admin.console import CONSOLE, IDENTITY, Console
from tickwork.admin.views import JOB_ACTIONS
from tickwork.db import admin as admin_db
from tickwork.db import audit as audit_db
from tickwork.errors import InvalidInput
from tickwork.flow.limits import Scope as LimitScope
from tickwork.flow.pauses import Scope as PauseScope


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def answer(value: Any, status: int = 200) -> web.Response:
    return web.json_response(plain(value), status=status, dumps=_dumps)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _console(request: web.Request) -> Console:
    return request.app[CONSOLE]


def _scope(request: web.Request) -> admin_db.Scope:
    return request[IDENTITY].namespaces


async def whoami(request: web.Request) -> web.Response:
    identity = request[IDENTITY]
    namespaces = None if identity.namespaces is None else sorted(identity.namespaces)
    return answer(
        {
            "name": identity.name,
            "role": identity.role,
            "via": identity.via,
            "namespaces": namespaces,
        }
    )


async def overview(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    queue, namespace = inputs.text(request.query, "queue"), inputs.text(request.query, "namespace")
    return answer(
        await console.run(
            lambda conn, now: reads.overview(
                conn, console.settings, now, scope, queue=queue, namespace=namespace
            )
        )
    )


async def schedules(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    namespace = inputs.text(request.query, "namespace")
    after = inputs.schedule_key(request.query)
    return answer(
        await console.run(
            lambda conn, now: reads.schedules(
                conn, console.settings, now, namespace=namespace, after=after, scope=scope
            )
        )
    )


async def schedule(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    namespace, name = inputs.schedule_ref(request.match_info)
    return answer(
        await console.run(
            lambda conn, now: reads.schedule(conn, console.settings, now, namespace, name, scope)
        )
    )


async def jobs(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    where = inputs.job_filter(request.query)
    before = inputs.number(request.query, "before")
    return answer(
        await console.run(
            lambda conn, now: reads.jobs(
                conn, console.settings, now, where=where, before=before, scope=scope
            )
        )
    )


async def job(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    job_id = int(request.match_info["id"])
    return answer(
        await console.run(lambda conn, now: reads.job(conn, console.settings, now, job_id, scope))
    )


async def audit(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    before = inputs.number(request.query, "before")
    return answer(
        await console.run(
            lambda conn, now: reads.audit(conn, console.settings, before=before, scope=scope)
        )
    )


# --- actions ----------------------------------------------------------------------------------


async def _actor(request: web.Request) -> audit_db.Actor:
    body: Any = {}
    if request.body_exists:  # read already (within the time limit) by the server
        try:
            body = await request.json()
        except (ValueError, RecursionError):
            raise InvalidInput("body", "not valid JSON (or nested too deeply)") from None
    if not isinstance(body, dict):
        raise InvalidInput("body", "must be a JSON object")
    return audit_db.Actor(
        request[IDENTITY].name,
        inputs.reason(body.get("reason")),
        inputs.request_id(body.get("request_id") or request.headers.get("Idempotency-Key")),
    )


async def job_action(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    job_id = int(request.match_info["id"])
    action = JOB_ACTIONS[request.match_info["action"]]
    actor = await _actor(request)
    outcome = await console.run(
        lambda conn, now: actions.act_on_job(conn, action, job_id, actor, now, scope)
    )
    return answer({**plain(outcome), "request_id": actor.request_id})


async def trigger(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    namespace, name = inputs.schedule_ref(request.match_info)
    actor = await _actor(request)
    outcome = await console.run(
        lambda conn, now: actions.trigger(conn, namespace, name, actor, now, scope)
    )
    return answer({**plain(outcome), "request_id": actor.request_id})


async def resume_schedule(request: web.Request) -> web.Response:
    """``POST /api/schedules/{namespace}/{name}/resume``: resume a schedule suspended after
    consecutive dead occurrences (docs/deadlines.md)."""
    console, scope = _console(request), _scope(request)
    namespace, name = inputs.schedule_ref(request.match_info)
    actor = await _actor(request)
    outcome = await console.run(
        lambda conn, now: actions.resume_schedule(conn, namespace, name, actor, now, scope)
    )
    return answer({**plain(outcome), "request_id": actor.request_id})


async def pause_action(request: web.Request) -> web.Response:
    """``POST /api/pauses/{queue|namespace}/{pause|resume}`` with ``{"name": …}`` in the body
    (a queue's name may hold any character, a path segment could not carry every one)."""
    console, scope = _console(request), _scope(request)
    action, target = request.match_info["action"], PauseScope(request.match_info["scope"])
    actor = await _actor(request)
    body = await request.json() if request.body_exists else {}
    name = body.get("name") if isinstance(body, dict) else None
    if not isinstance(name, str):
        raise InvalidInput("name", "the queue's or namespace's name, as text")
    outcome = await console.run(
        lambda conn, now: actions.pause_or_resume(conn, action, target, name, actor, now, scope)
    )
    return answer({**plain(outcome), "request_id": actor.request_id})


async def limit_action(request: web.Request) -> web.Response:
    """``POST /api/limits/{queue|kind|namespace}/{limit|unlimit}`` with ``{"name": …}`` in the
    body, and for ``limit`` any of ``max_running`` (a number), ``rate`` (``"100/min"``),
    ``rate_key``, ``weight`` (a namespace's): the rule replaces the one the target had."""
    console, scope = _console(request), _scope(request)
    action, target = request.match_info["action"], LimitScope(request.match_info["scope"])
    actor = await _actor(request)
    body = await request.json() if request.body_exists else {}
    if not isinstance(body, dict):
        raise InvalidInput("body", "must be a JSON object")
    if action == "limit":
        rule = inputs.limit_rule(target, body)
        outcome = await console.run(
            lambda conn, now: actions.set_limit(conn, rule, actor, now, scope)
        )
    else:
        name = body.get("name")
        if not isinstance(name, str):
            raise InvalidInput("name", f"the {target.value}'s name, as text")
        outcome = await console.run(
            lambda conn, now: actions.remove_limit(conn, target, name, actor, now, scope)
        )
    return answer({**plain(outcome), "request_id": actor.request_id})
