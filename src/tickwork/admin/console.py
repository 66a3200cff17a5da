"""The console's state, shared by its handlers: the App (database and clock), the settings,
who may log in, and the limiter of failed logins. Database work runs in a worker thread on
the App's pool, one transaction per request, every statement bounded by a timeout.

A logout ends its session everywhere: it writes an audit record (action ``logout``, target
``session:HANDLE``) that every replica finds when the cookie comes back."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from aiohttp import web

from tickwork import metrics
from tickwork.admin import inputs, pages
from tickwork.admin.auth import (
    Credential,
    Credentials,
    FailureLimiter,
    Namespaces,
    Role,
    Session,
    Sessions,
    Via,
)
from tickwork.admin.settings import AdminSettings
from tickwork.app import App
from tickwork.db import admin as admin_db
from tickwork.db import audit as audit_db
from tickwork.db import store
from tickwork.db.connections import Connection
from tickwork.logs import fields

T = TypeVar("T")

log = logging.getLogger(__name__)

SESSION_COOKIE = "tickwork_session"
LOGOUT = "logout"
FORM = "form"
"""How a login through the login page is counted (the other ways are :class:`Via`)."""


class Throttled(Exception):
    """Too many failed logins from this address or for this name."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"retry after {retry_after:.0f}s")
        self.retry_after = retry_after


@dataclass(frozen=True)
class Identity:
    name: str
    role: Role
    via: Via
    namespaces: Namespaces = None
    """The schedule namespaces this caller sees and acts on (None: all)."""
    session: Session | None = None

    @staticmethod
    def of(credential: Credential, via: Via, session: Session | None = None) -> Identity:
        return Identity(credential.name, credential.role, via, credential.namespaces, session)


class Console:
    def __init__(
        self,
        app: App,
        settings: AdminSettings,
        credentials: Credentials,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.settings = settings
        self.credentials = credentials
        # Sessions expire on the App's clock (its wall time), the one that dates every write.
        self.sessions = Sessions(
            credentials, settings.session_seconds, lambda: app.clock.wall().timestamp()
        )
        self.limiter = FailureLimiter(
            max_failures=settings.max_login_failures,
            max_global_failures=settings.max_global_login_failures,
            window_seconds=settings.login_window_seconds,
            lockout_seconds=settings.lockout_seconds,
            clock=monotonic,
        )

    # --- database ---------------------------------------------------------------------

    def _transaction(self, work: Callable[[Connection, datetime | None], T]) -> T:
        with self.app.connection() as conn:
            store.run(conn, admin_db.read_limit(self.settings.statement_timeout_ms))
            return work(conn, self.app.clock.now())

    async def run(self, work: Callable[[Connection, datetime | None], T]) -> T:
        """``work(conn, now)`` in one transaction, off the event loop."""
        return await asyncio.to_thread(self._transaction, work)

    # --- who is asking ------------------------------------------------------------------

    def _attempt(
        self, address: str, name: str | None, via: str, check: Callable[[], Credential | None]
    ) -> Credential | None:
        """A login attempt, counted and logged; raises :class:`Throttled` while locked."""
        if wait := self.limiter.retry_after(address, name):
            raise Throttled(wait)
        credential = check()
        if credential is not None:
            self.limiter.succeeded(address, credential.name)
            return credential
        shown = name if name is not None and self.credentials.by_name(name) else "-"
        metrics.ADMIN_LOGIN_FAILURES.labels(via).inc()
        log.warning(
            "admin: failed login from %s (name %s)",
            address,
            shown,
            extra=fields(action="admin_login_failed", reason=via),
        )
        for lock in self.limiter.failed(address, name):
            metrics.ADMIN_LOGIN_LOCKOUTS.labels(lock.value).inc()
            log.warning(
                "admin: logins locked for %gs by %s after failures from %s (name %s)",
                self.settings.lockout_seconds,
                lock.value,
                address,
                shown,
                extra=fields(action="admin_login_lockout", reason=lock.value),
            )
        return None

    def check_login(self, address: str, name: str, secret: str, via: str) -> Credential | None:
        """A login with a name and a secret (the form, HTTP Basic)."""
        return self._attempt(
            address, name, via, lambda: self.credentials.check_password(name, secret)
        )

    async def identify(self, request: web.Request) -> Identity | None:
        """The caller, from ``Authorization`` (bearer or basic) or the session cookie (unless
        logged out). Raises :class:`Throttled` while the address (or name) is locked out."""
        address = request.remote or "?"
        header = request.headers.get("Authorization")
        if header:
            scheme, _, value = header.strip().partition(" ")
            if scheme.lower() == "bearer":
                token = value.strip()
                credential = self._attempt(
                    address, None, Via.BEARER, lambda: self.credentials.check_token(token)
                )
                via = Via.BEARER
            elif scheme.lower() == "basic":
                name, secret = _basic(value.strip())
                credential = self.check_login(address, name, secret, Via.BASIC)
                via = Via.BASIC
            else:
                return None
            return None if credential is None else Identity.of(credential, via)
        cookie = request.cookies.get(SESSION_COOKIE)
        session = self.sessions.verify(cookie) if cookie else None
        if session is None or await self.run(
            lambda conn, now: store.run(conn, audit_db.session_ended(_session_target(session)))
        ):
            return None
        return Identity.of(session.credential, Via.SESSION, session)

    async def end_session(self, identity: Identity) -> None:
        """Log out: the session's cookie is refused from now on, by every replica."""
        if identity.session is None:
            return
        target = _session_target(identity.session)
        actor = audit_db.Actor(identity.name, None, inputs.new_request_id())
        await self.run(lambda conn, now: store.run(conn, audit_db.end_session(target, actor, now)))

    def csrf_checker(self, identity: Identity) -> Callable[[str], bool]:
        session = identity.session
        if session is None:
            return lambda token: False
        return lambda token: self.sessions.check_csrf(session, token)

    def context(self, identity: Identity, flash: str | None = None) -> pages.layout.Context:
        token = self.sessions.csrf_token(identity.session) if identity.session else ""
        return pages.layout.Context(
            identity.name, identity.role, token, inputs.new_request_id(), flash, identity.namespaces
        )


def _session_target(session: Session) -> str:
    return f"session:{Sessions.handle(session)}"


def _basic(value: str) -> tuple[str, str]:
    try:
        decoded = base64.b64decode(value, validate=True).decode()
    except ValueError:  # binascii.Error, UnicodeDecodeError, non-ASCII text
        return "", ""
    name, _, secret = decoded.partition(":")
    return name, secret


CONSOLE = web.AppKey("console", Console)
IDENTITY = web.RequestKey("identity", Identity)
