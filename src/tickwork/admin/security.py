"""Response headers that keep the console's pages inert and unframeable, and the checks that
keep another site from acting through a logged-in browser (CSRF).

The pages use no script at all: the Content-Security-Policy allows none, styles only from
the console itself, and forms only to it. A state-changing request must be a POST and pass
:func:`csrf_problem`: from a browser session it carries the session's CSRF token (a form
field or the ``X-CSRF-Token`` header); with an ``Authorization`` header (bearer or basic)
it must be JSON, which a cross-site form cannot send. In both cases an ``Origin`` (or
``Referer``) naming another host is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

from aiohttp import web
from multidict import MultiDictProxy

from tickwork.admin.auth import Via
from tickwork.errors import InvalidInput
from tickwork.http import SERVER

HEADERS: Mapping[str, str] = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
}
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _secure(response: web.StreamResponse, cacheable: bool) -> None:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers["Server"] = SERVER
    if not cacheable:
        response.headers["Cache-Control"] = "no-store"


@web.middleware
async def headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security headers on every answer, errors included; nothing but static files may be
    cached (pages show live, per-user data)."""
    cacheable = request.path.startswith("/static/")
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        _secure(exc, cacheable)
        raise
    _secure(response, cacheable)
    return response


def foreign_origin(request: web.Request) -> bool:
    """The request says it comes from a page of another host."""
    source = request.headers.get("Origin") or request.headers.get("Referer")
    if not source:
        return False
    if source == "null":
        return True
    return urlsplit(source).netloc.lower() != request.host.lower()


def is_json(request: web.Request) -> bool:
    return request.content_type == "application/json"


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


async def form(request: web.Request) -> MultiDictProxy[str | bytes | bytearray | web.FileField]:
    """The request's form fields; a malformed body is an InvalidInput (400)."""
    try:
        return await request.post()
    except (ValueError, AssertionError, RuntimeError) as exc:
        raise InvalidInput("body", f"not a readable form ({type(exc).__name__})") from None


async def csrf_problem(
    request: web.Request, via: Via, check_token: Callable[[str], bool]
) -> str | None:
    """Why this state-changing request may be forged (None: it may not)."""
    if foreign_origin(request):
        return "cross-origin request refused"
    if via is not Via.SESSION:
        return None if is_json(request) else "send actions as application/json"
    token = request.headers.get(CSRF_HEADER)
    if token is None and request.content_type in FORM_TYPES:
        field = (await form(request)).get(CSRF_FIELD)
        token = field if isinstance(field, str) else None
    if not token or not check_token(token):
        return "missing or invalid CSRF token"
    return None
