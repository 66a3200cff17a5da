"""The console's state, shared by its handlers: the App (database and clock), the settings,
who may log in, and the limiter of failed logins. Database work runs in a worker thread on
the App's pool, one transaction per request, every statement bounded by a timeout."""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from aiohttp import web

from tickwork.admin import inputs, pages
from tickwork.admin.auth import (
    Credential,
    Credentials,
    FailureLimiter,
    Role,
    Session,
    Sessions,
    Via,
)
from tickwork.admin.settings import AdminSettings
from tickwork.app import App
from tickwork.db import admin as admin_db
from tickwork.db import store
from tickwork.db.connections import Connection

T = TypeVar("T")

SESSION_COOKIE = "tickwork_session"


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
    session: Session | None = None


class Console:
    def __init__(
        self,
        app: App,
        settings: AdminSettings,
        credentials: Credentials,
        *,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.settings = settings
        self.credentials = credentials
        self.sessions = Sessions(credentials, settings.session_seconds, wall_clock)
        self.limiter = FailureLimiter(
            max_failures=settings.max_login_failures,
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

    def check_login(self, address: str, name: str, secret: str) -> Credential | None:
        """A login attempt (form or HTTP Basic), counted against the address and the name."""
        keys = (f"address:{address}", f"name:{name}")
        if wait := self.limiter.retry_after(keys):
            raise Throttled(wait)
        credential = self.credentials.check_password(name, secret)
        if credential is None:
            self.limiter.failed(keys)
        else:
            self.limiter.succeeded(keys)
        return credential

    def _check_token(self, address: str, token: str) -> Credential | None:
        keys = (f"address:{address}",)
        if wait := self.limiter.retry_after(keys):
            raise Throttled(wait)
        credential = self.credentials.check_token(token)
        if credential is None:
            self.limiter.failed(keys)
        return credential

    def identify(self, request: web.Request) -> Identity | None:
        """The caller, from ``Authorization`` (bearer or basic) or the session cookie.
        Raises :class:`Throttled` while the address (or name) is locked out."""
        address = request.remote or "?"
        header = request.headers.get("Authorization")
        if header:
            scheme, _, value = header.strip().partition(" ")
            if scheme.lower() == "bearer":
                credential = self._check_token(address, value.strip())
                via = Via.BEARER
            elif scheme.lower() == "basic":
                name, secret = _basic(value.strip())
                credential = self.check_login(address, name, secret)
                via = Via.BASIC
            else:
                return None
            return None if credential is None else Identity(credential.name, credential.role, via)
        cookie = request.cookies.get(SESSION_COOKIE)
        session = self.sessions.verify(cookie) if cookie else None
        if session is None:
            return None
        role = session.credential.role
        return Identity(session.credential.name, role, Via.SESSION, session)

    def csrf_checker(self, identity: Identity) -> Callable[[str], bool]:
        session = identity.session
        if session is None:
            return lambda token: False
        return lambda token: self.sessions.check_csrf(session, token)

    def context(self, identity: Identity, flash: str | None = None) -> pages.Context:
        token = self.sessions.csrf_token(identity.session) if identity.session else ""
        return pages.Context(identity.name, identity.role, token, inputs.new_request_id(), flash)


def _basic(value: str) -> tuple[str, str]:
    try:
        decoded = base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return "", ""
    name, _, secret = decoded.partition(":")
    return name, secret


CONSOLE = web.AppKey("console", Console)
IDENTITY = web.RequestKey("identity", Identity)
