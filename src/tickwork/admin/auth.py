"""Who may use the console: credentials, roles, sessions, CSRF tokens and the limit on
failed logins. Pure (no HTTP, no database), so each rule is tested directly.

Credentials come from a Secret (a mounted file or an environment variable), one per entry:
``NAME:ROLE:SECRET``. A person logs in with NAME and SECRET (form or HTTP Basic); a program
sends ``Authorization: Bearer SECRET``. Secrets are compared in constant time as SHA-256
digests; the console never shows them. Sessions are signed cookies: stateless, so every
replica that mounts the same Secret accepts them, and changing a secret ends its sessions.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from tickwork.errors import ConfigurationError

MIN_SECRET_LENGTH = 16
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


class Role(enum.StrEnum):
    VIEWER = "viewer"
    """Sees every page and API answer."""
    OPERATOR = "operator"
    """Also acts: run now, trigger, cancel, retry."""

    def allows(self, needed: Role) -> bool:
        return self is Role.OPERATOR or needed is Role.VIEWER


class Via(enum.StrEnum):
    SESSION = "session"
    BEARER = "bearer"
    BASIC = "basic"


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


@dataclass(frozen=True)
class Credential:
    name: str
    role: Role
    digest: bytes = field(repr=False)
    """SHA-256 of the secret; the secret itself is not kept."""


def parse_credentials(text: str, source: str) -> list[Credential]:
    """Entries ``NAME:ROLE:SECRET`` separated by whitespace or newlines; ``#`` starts a
    comment line. Raises ConfigurationError naming ``source`` (never a secret)."""
    found: list[Credential] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("#"):
            continue
        for entry in line.split():
            name, _, rest = entry.partition(":")
            role, _, secret = rest.partition(":")
            where = f"{source}, line {number}"
            if not _NAME.fullmatch(name):
                raise ConfigurationError(
                    f"{where}: expected NAME:ROLE:SECRET with NAME made of letters, digits "
                    "and . _ @ - (at most 64)"
                )
            if role not in {r.value for r in Role}:
                raise ConfigurationError(f"{where}: {name}: role must be viewer or operator")
            if len(secret) < MIN_SECRET_LENGTH:
                raise ConfigurationError(
                    f"{where}: {name}: the secret must have at least {MIN_SECRET_LENGTH} characters"
                )
            if any(c.name == name for c in found):
                raise ConfigurationError(f"{where}: {name} is listed twice")
            found.append(Credential(name, Role(role), _digest(secret)))
    return found


class Credentials:
    """The accepted credentials; lookups take the same time whatever matches."""

    def __init__(self, credentials: Sequence[Credential]) -> None:
        if not credentials:
            raise ConfigurationError("no admin credentials configured")
        self._all = tuple(credentials)
        self._by_name = {c.name: c for c in credentials}
        self._unknown = _digest(secrets.token_hex(32))

    def by_name(self, name: str) -> Credential | None:
        return self._by_name.get(name)

    def check_password(self, name: str, secret: str) -> Credential | None:
        known = self._by_name.get(name)
        matches = hmac.compare_digest(_digest(secret), known.digest if known else self._unknown)
        return known if known and matches else None

    def check_token(self, token: str) -> Credential | None:
        digest = _digest(token)
        found = None
        for credential in self._all:  # no early exit: every token costs the same
            if hmac.compare_digest(digest, credential.digest):
                found = credential
        return found

    def session_key(self) -> bytes:
        """A key every replica with the same credentials derives alike."""
        material = b"".join(c.name.encode() + b"\0" + c.digest for c in self._all)
        return hmac.new(b"tickwork-admin-session-v1", material, hashlib.sha256).digest()


@dataclass(frozen=True)
class Session:
    credential: Credential
    nonce: str
    expires: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Sessions:
    """Signed session cookies ``name.expires.nonce.signature`` and their CSRF tokens."""

    def __init__(
        self,
        credentials: Credentials,
        ttl_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._credentials = credentials
        self._key = credentials.session_key()
        self._ttl = ttl_seconds
        self._clock = clock

    def _sign(self, credential: Credential, expires: int, nonce: str) -> str:
        message = f"{credential.name}|{expires}|{nonce}|".encode() + credential.digest
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())

    def issue(self, credential: Credential) -> str:
        expires = int(self._clock() + self._ttl)
        nonce = secrets.token_urlsafe(16)
        name = _b64(credential.name.encode())
        return f"{name}.{expires}.{nonce}.{self._sign(credential, expires, nonce)}"

    def verify(self, cookie: str) -> Session | None:
        parts = cookie.split(".")
        if len(parts) != 4 or not parts[1].isdigit():
            return None
        try:
            name = _unb64(parts[0]).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        credential = self._credentials.by_name(name)
        expires, nonce = int(parts[1]), parts[2]
        if credential is None or expires < self._clock():
            return None
        if not hmac.compare_digest(parts[3], self._sign(credential, expires, nonce)):
            return None
        return Session(credential, nonce, expires)

    def csrf_token(self, session: Session) -> str:
        return _b64(hmac.new(self._key, f"csrf|{session.nonce}".encode(), "sha256").digest())

    def check_csrf(self, session: Session, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self.csrf_token(session).encode())


class FailureLimiter:
    """Refuse a key (a client address, a user name) for ``lockout_seconds`` after
    ``max_failures`` failures within ``window_seconds``. Kept in memory, per process; at
    most ``max_keys`` keys are tracked (the oldest are forgotten first)."""

    def __init__(
        self,
        *,
        max_failures: int,
        window_seconds: float,
        lockout_seconds: float,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max = max_failures
        self._window = window_seconds
        self._lockout = lockout_seconds
        self._max_keys = max_keys
        self._clock = clock
        self._failures: OrderedDict[str, list[float]] = OrderedDict()
        self._locked_until: dict[str, float] = {}

    def retry_after(self, keys: Iterable[str]) -> float:
        """Seconds until every key is allowed again (0: allowed now)."""
        now = self._clock()
        return max([0.0, *(self._locked_until.get(k, 0.0) - now for k in keys)])

    def failed(self, keys: Iterable[str]) -> None:
        now = self._clock()
        for key in keys:
            recent = [t for t in self._failures.pop(key, []) if now - t < self._window]
            recent.append(now)
            self._failures[key] = recent
            if len(recent) >= self._max:
                self._locked_until[key] = now + self._lockout
                self._failures[key] = []
        while len(self._failures) > self._max_keys:
            oldest, _ = self._failures.popitem(last=False)
            self._locked_until.pop(oldest, None)

    def succeeded(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._failures.pop(key, None)
