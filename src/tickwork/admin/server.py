"""The admin server: the console's pages, its JSON API, and ``/metrics``, ``/healthz`` and
``/readyz`` (public, like every tickwork process's probes), on one port.

Middlewares, outermost first: security headers on every answer; errors mapped to status codes
(never a stack trace, a connection string or a driver message; anything unforeseen is a 500
with a generic message, logged); then authentication, the body read within
``read_seconds``, the CSRF check and the operator role for anything that is not a GET. A
connection idle (or sending its request headers) for longer than ``read_seconds`` is closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from importlib import resources

from aiohttp import web

from tickwork import http
from tickwork.admin import api, pages, reads, security, views
from tickwork.admin.auth import Role
from tickwork.admin.console import CONSOLE, IDENTITY, Console, Throttled
from tickwork.db import connections
from tickwork.errors import (
    InvalidInput,
    InvalidTransition,
    JobNotFound,
    ScheduleNotFound,
    SchemaMissing,
)
from tickwork.logs import fields

log = logging.getLogger(__name__)

PUBLIC = frozenset(
    {"/login", "/healthz", "/readyz", "/metrics", "/static/admin.css", "/favicon.ico"}
)
MAX_BODY = 64 * 1024
_CSS = resources.files("tickwork.admin").joinpath("static", "admin.css").read_bytes()


def _api(request: web.Request) -> bool:
    return request.path.startswith("/api/")


def problem(
    request: web.Request, status: int, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    """An error as JSON (API) or as a page (console)."""
    if _api(request):
        return web.json_response({"error": message}, status=status, headers=headers)
    identity = request.get(IDENTITY)
    ctx = request.app[CONSOLE].context(identity) if identity else None
    return views.page(pages.layout.error(ctx, status, message), status, headers)


@web.middleware
async def errors(request: web.Request, handler: security.Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except (JobNotFound, ScheduleNotFound) as exc:
        return problem(request, 404, str(exc))
    except InvalidTransition as exc:
        return problem(request, 409, str(exc))
    except InvalidInput as exc:
        return problem(request, 400, str(exc))
    except reads.OutOfScope as exc:
        log.info(
            "admin: %s refused %s %s: %s",
            request[IDENTITY].name,
            request.method,
            request.path,
            exc,
            extra=fields(action="admin_out_of_scope"),
        )
        return problem(request, 403, str(exc))
    except (connections.DatabaseError, SchemaMissing):
        log.exception("admin: database error", extra=fields(action="admin_database_error"))
        return problem(request, 503, "database error (details are in the server's log)")
    except Exception:
        log.exception("admin: internal error", extra=fields(action="admin_internal_error"))
        return problem(request, 500, "internal error (details are in the server's log)")


@web.middleware
async def authenticate(request: web.Request, handler: security.Handler) -> web.StreamResponse:
    if request.path in PUBLIC:
        return await handler(request)
    console = request.app[CONSOLE]
    try:
        identity = await console.identify(request)
    except Throttled as exc:
        wait = {"Retry-After": str(int(exc.retry_after) + 1)}
        return problem(request, 429, "too many failed logins: try again later", wait)
    if identity is None:
        if _api(request) or request.method != "GET":
            return problem(
                request,
                401,
                "authentication required",
                {"WWW-Authenticate": 'Bearer realm="tickwork admin"'},
            )
        raise web.HTTPSeeOther(f"/login?next={request.rel_url.path_qs}")
    request[IDENTITY] = identity
    if request.method not in ("GET", "HEAD"):
        try:
            await asyncio.wait_for(request.read(), console.settings.read_seconds)
        except TimeoutError:
            return problem(request, 408, "the request's body was not sent in time")
        forged = await security.csrf_problem(request, identity.via, console.csrf_checker(identity))
        if forged:
            return problem(request, 403, forged)
        if request.path != "/logout" and not identity.role.allows(Role.OPERATOR):
            return problem(request, 403, "this needs the operator role")
    return await handler(request)


async def _css(request: web.Request) -> web.Response:
    return web.Response(body=_CSS, content_type="text/css")


async def _no_icon(request: web.Request) -> web.Response:
    return web.Response(status=204)


def build(console: Console) -> web.Application:
    """The aiohttp application of ``console``."""
    app = web.Application(
        middlewares=[security.headers, errors, authenticate], client_max_size=MAX_BODY
    )
    app[CONSOLE] = console
    job_id = r"{id:[0-9]{1,18}}"
    action = r"{action:run-now|cancel|retry}"
    schedule = "{namespace}/{name}"
    pause = "{scope:queue|namespace}/{action:pause|resume}"
    limit = "{scope:queue|kind|namespace}/{action:limit|unlimit}"
    app.add_routes(
        [
            *http.probe_routes(readiness=http.database_readiness(console.app.database_url)),
            web.get("/static/admin.css", _css),
            web.get("/favicon.ico", _no_icon),
            web.get("/login", views.login_form),
            web.post("/login", views.login),
            web.post("/logout", views.logout),
            web.get("/", views.overview),
            web.get("/schedules", views.schedules),
            web.get(f"/schedules/{schedule}", views.schedule),
            web.post(f"/schedules/{schedule}/trigger", views.trigger),
            web.post(f"/schedules/{schedule}/resume", views.resume_schedule),
            web.get("/jobs", views.jobs),
            web.get(f"/jobs/{job_id}", views.job),
            web.post(f"/jobs/{job_id}/{action}", views.job_action),
            web.post(f"/pauses/{pause}", views.pause_action),
            web.post(f"/limits/{limit}", views.limit_action),
            web.get("/audit", views.audit),
            web.get("/api/whoami", api.whoami),
            web.get("/api/overview", api.overview),
            web.get("/api/schedules", api.schedules),
            web.get(f"/api/schedules/{schedule}", api.schedule),
            web.post(f"/api/schedules/{schedule}/trigger", api.trigger),
            web.post(f"/api/schedules/{schedule}/resume", api.resume_schedule),
            web.get("/api/jobs", api.jobs),
            web.get(f"/api/jobs/{job_id}", api.job),
            web.post(f"/api/jobs/{job_id}/{action}", api.job_action),
            web.post(f"/api/pauses/{pause}", api.pause_action),
            web.post(f"/api/limits/{limit}", api.limit_action),
            web.get("/api/audit", api.audit),
        ]
    )
    return app


def runner(console: Console) -> web.AppRunner:
    """The server of ``console``'s application: a connection idle (or slow to send its
    request's headers, or the rest of a body refused) for ``read_seconds`` is closed."""
    limit = console.settings.read_seconds
    return web.AppRunner(
        build(console), access_log=None, keepalive_timeout=limit, lingering_time=limit
    )


async def serve(console: Console, stop: asyncio.Event, fallbacks: Sequence[int] = ()) -> None:
    """Serve on the configured host and port (when it is in use, on the first free one of
    ``fallbacks``) until ``stop`` is set."""
    runner_ = runner(console)
    await runner_.setup()
    try:
        host, requested = console.settings.host, console.settings.port
        port = await http.listen_first_free(runner_, host, requested, fallbacks)
        log.info(
            "admin console listening on http://%s:%d/%s",
            host,
            port,
            f" ({requested} in use)" if requested and port != requested else "",
            extra=fields(action="admin_started"),
        )
        await stop.wait()
    finally:
        await runner_.cleanup()
