"""The console's HTML handlers: one per page, the login and logout forms, and the action
forms, which answer with a redirect (303) back to the page they came from."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from aiohttp import web

from tickwork.admin import actions, inputs, pages, reads, security
from tickwork.admin.console import CONSOLE, FORM, IDENTITY, SESSION_COOKIE, Console, Throttled
from tickwork.admin.html import Html, link, path
from tickwork.db import admin as admin_db
from tickwork.db import audit as audit_db
from tickwork.errors import InvalidInput
from tickwork.flow.limits import Scope as LimitScope
from tickwork.flow.pauses import Scope as PauseScope

LOGIN_COOKIE = "tickwork_login"
"""Double-submit token of the login form (a forged login from another site lacks it)."""


def page(body: Html, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        text=body, status=status, content_type="text/html", charset="utf-8", headers=headers
    )


def _console(request: web.Request) -> Console:
    return request.app[CONSOLE]


def _scope(request: web.Request) -> admin_db.Scope:
    return request[IDENTITY].namespaces


def _context(request: web.Request) -> pages.layout.Context:
    flash = pages.layout.FLASH.get(request.query.get("flash", ""))
    return _console(request).context(request[IDENTITY], flash)


async def overview(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    queue, namespace = inputs.text(request.query, "queue"), inputs.text(request.query, "namespace")
    data = await console.run(
        lambda conn, now: reads.overview(
            conn, console.settings, now, scope, queue=queue, namespace=namespace
        )
    )
    return page(pages.overview.overview(_context(request), data))


async def schedules(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    namespace = inputs.text(request.query, "namespace")
    after = inputs.schedule_key(request.query)
    data = await console.run(
        lambda conn, now: reads.schedules(
            conn, console.settings, now, namespace=namespace, after=after, scope=scope
        )
    )
    return page(pages.schedules.schedules(_context(request), data))


async def schedule(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    namespace, name = inputs.schedule_ref(request.match_info)
    data = await console.run(
        lambda conn, now: reads.schedule(conn, console.settings, now, namespace, name, scope)
    )
    return page(pages.schedules.schedule(_context(request), data))


async def jobs(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    where = inputs.job_filter(request.query)
    before = inputs.number(request.query, "before")
    data = await console.run(
        lambda conn, now: reads.jobs(
            conn, console.settings, now, where=where, before=before, scope=scope
        )
    )
    return page(pages.jobs.jobs(_context(request), data))


async def job(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    job_id = int(request.match_info["id"])
    data = await console.run(
        lambda conn, now: reads.job(conn, console.settings, now, job_id, scope)
    )
    return page(pages.jobs.job(_context(request), data))


async def audit(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    before = inputs.number(request.query, "before")
    data = await console.run(
        lambda conn, now: reads.audit(conn, console.settings, before=before, scope=scope)
    )
    return page(pages.audit.audit(_context(request), data))


# --- actions ----------------------------------------------------------------------------------

JOB_ACTIONS = {
    "run-now": actions.JobAction.RUN_NOW,
    "cancel": actions.JobAction.CANCEL,
    "retry": actions.JobAction.RETRY,
}


async def _actor(request: web.Request) -> audit_db.Actor:
    form = await security.form(request)
    return audit_db.Actor(
        request[IDENTITY].name,
        inputs.reason(form.get("reason")),
        inputs.request_id(form.get("request_id")),
    )


def _flash(outcome: actions.Outcome) -> str:
    if outcome.changed:
        return "changed"
    return "replayed" if outcome.audit_id is not None else "unchanged"


async def job_action(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    job_id = int(request.match_info["id"])
    action = JOB_ACTIONS[request.match_info["action"]]
    actor = await _actor(request)
    outcome = await console.run(
        lambda conn, now: actions.act_on_job(conn, action, job_id, actor, now, scope)
    )
    raise web.HTTPSeeOther(link(path("jobs", job_id), {"flash": _flash(outcome)}))


async def trigger(request: web.Request) -> web.Response:
    console, scope = _console(request), _scope(request)
    namespace, name = inputs.schedule_ref(request.match_info)
    actor = await _actor(request)
    outcome = await console.run(
        lambda conn, now: actions.trigger(conn, namespace, name, actor, now, scope)
    )
    raise web.HTTPSeeOther(link(path("schedules", namespace, name), {"flash": _flash(outcome)}))


async def resume_schedule(request: web.Request) -> web.Response:
    """The schedule page's Resume (a schedule suspended after consecutive dead occurrences)."""
    console, scope = _console(request), _scope(request)
    namespace, name = inputs.schedule_ref(request.match_info)
    actor = await _actor(request)
    outcome = await console.run(
        lambda conn, now: actions.resume_schedule(conn, namespace, name, actor, now, scope)
    )
    raise web.HTTPSeeOther(link(path("schedules", namespace, name), {"flash": _flash(outcome)}))


async def pause_action(request: web.Request) -> web.Response:
    """The overview's pause and resume forms; a form without its confirmation box ticked is
    refused (400) before anything changes."""
    console, scope = _console(request), _scope(request)
    action, target = request.match_info["action"], PauseScope(request.match_info["scope"])
    form = await security.form(request)
    if form.get("confirm") != "yes":
        raise InvalidInput("confirm", f"tick the box that confirms the {action}")
    name = form.get("name")
    actor = await _actor(request)
    outcome = await console.run(
        lambda conn, now: actions.pause_or_resume(
            conn, action, target, str(name or ""), actor, now, scope
        )
    )
    raise web.HTTPSeeOther(link("/", {"flash": _flash(outcome)}))


async def limit_action(request: web.Request) -> web.Response:
    """The overview's limit forms (set, remove); a form without its confirmation box ticked
    is refused (400) before anything changes, as is a wrong value (naming its field)."""
    console, scope = _console(request), _scope(request)
    action, target = request.match_info["action"], LimitScope(request.match_info["scope"])
    form = await security.form(request)
    if form.get("confirm") != "yes":
        raise InvalidInput("confirm", f"tick the box that confirms the {action}")
    actor = await _actor(request)
    if action == "limit":
        rule = inputs.limit_rule(target, form)
        outcome = await console.run(
            lambda conn, now: actions.set_limit(conn, rule, actor, now, scope)
        )
    else:
        name = str(form.get("name") or "")
        outcome = await console.run(
            lambda conn, now: actions.remove_limit(conn, target, name, actor, now, scope)
        )
    raise web.HTTPSeeOther(link("/", {"flash": _flash(outcome)}))


# --- logging in and out ---------------------------------------------------------------------


def _safe_next(value: object) -> str:
    """Only a path of this site (no scheme, no host, no ``//``) to go back to after login."""
    if not isinstance(value, str) or not value.startswith("/") or value.startswith("//"):
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or "\\" in value:
        return "/"
    return value


def _login_page(
    request: web.Request, next_path: str, error: str | None, status: int = 200
) -> web.Response:
    # One token per browser, kept across loads: two login pages open (or a favicon request
    # sent through the login) must not invalidate each other's form.
    token = request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(18)
    response = page(pages.login.login(error, next_path, token), status)
    response.set_cookie(
        LOGIN_COOKIE,
        token,
        httponly=True,
        samesite="Strict",
        secure=_console(request).settings.secure_cookies,
        path="/login",
    )
    return response


async def login_form(request: web.Request) -> web.Response:
    return _login_page(request, _safe_next(request.query.get("next")), None)


async def login(request: web.Request) -> web.Response:
    console = _console(request)
    form = await security.form(request)
    next_path = _safe_next(form.get("next"))
    token, cookie = form.get("login_token"), request.cookies.get(LOGIN_COOKIE)
    if not isinstance(token, str) or not cookie or not secrets.compare_digest(token, cookie):
        return _login_page(request, next_path, "The form expired: please log in again.", 400)
    name, secret = form.get("username"), form.get("password")
    if not isinstance(name, str) or not isinstance(secret, str):
        return _login_page(request, next_path, "Give a name and a secret.", 400)
    try:
        credential = console.check_login(request.remote or "?", name, secret, FORM)
    except Throttled as exc:
        response = _login_page(request, next_path, "Too many failed logins: try again later.", 429)
        response.headers["Retry-After"] = str(int(exc.retry_after) + 1)
        return response
    if credential is None:
        return _login_page(request, next_path, "Wrong name or secret.", 401)
    response = web.HTTPSeeOther(next_path)
    response.set_cookie(
        SESSION_COOKIE,
        console.sessions.issue(credential),
        httponly=True,
        samesite="Strict",
        secure=console.settings.secure_cookies,
        max_age=int(console.settings.session_seconds),
        path="/",
    )
    response.del_cookie(LOGIN_COOKIE, path="/login")
    raise response


async def logout(request: web.Request) -> web.Response:
    await _console(request).end_session(request[IDENTITY])
    response = web.HTTPSeeOther("/login")
    response.del_cookie(SESSION_COOKIE, path="/")
    raise response
