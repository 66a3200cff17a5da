"""Who may use the console: credentials, roles, sessions, CSRF tokens and the limit on
failed logins. Pure (no HTTP, no database), so each rule is tested directly.

Credentials come from a Secret (a mounted file or an environment variable), one per entry:
``NAME:ROLE:SECRET`` (every schedule namespace) or ``NAME:ROLE@NS1,NS2:SECRET`` (only those
namespaces). A person logs in with NAME and SECRET (form or HTTP Basic); a program sends
``Authorization: Bearer SECRET``. Secrets are compared in constant time as SHA-256 digests;
the console never shows them, nor any part of a malformed entry. Sessions are signed cookies:
every replica that mounts the same Secret accepts them, changing a secret ends its sessions,
and a logout ends one (the console records it; see :mod:`tickwork.admin.console`).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
import secrets
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tickwork.errors import ConfigurationError

MIN_SECRET_LENGTH = 16
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_EXPIRES = re.compile(r"[0-9]{1,12}")

Namespaces = frozenset[str] | None
"""The schedule namespaces a credential may see and act on; None: every one (and jobs
enqueued outside any schedule)."""


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
    namespaces: Namespaces = None
    where: str = ""
    """Where the entry was read (``source, line L, entry E``), for messages."""


def _role(text: str, where: str) -> tuple[Role, Namespaces]:
    role, scoped, listed = text.partition("@")
    if role not in {r.value for r in Role}:
        raise ConfigurationError(f"{where}: the role must be viewer or operator")
    if not scoped:
        return Role(role), None
    namespaces = listed.split(",")
    if not all(_NAMESPACE.fullmatch(n) for n in namespaces):
        raise ConfigurationError(
            f"{where}: after ROLE@ come schedule namespaces separated by commas "
            "(letters, digits and . _ -)"
        )
    return Role(role), frozenset(namespaces)


def parse_credentials(text: str, source: str) -> list[Credential]:
    """Entries ``NAME:ROLE:SECRET`` or ``NAME:ROLE@NS1,NS2:SECRET`` separated by whitespace or
    newlines; ``#`` starts a comment line. Raises ConfigurationError naming ``source``, the
    line and the entry's position, never any text of the entry (a misplaced space can turn a
    piece of a secret into an entry of its own)."""
    found: list[Credential] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("#"):
            continue
        for position, entry in enumerate(line.split(), 1):
            name, _, rest = entry.partition(":")
            role, _, secret = rest.partition(":")
            where = f"{source}, line {number}, entry {position}"
            if not _NAME.fullmatch(name):
                raise ConfigurationError(
                    f"{where}: expected NAME:ROLE:SECRET with NAME made of letters, digits "
                    "and . _ @ - (at most 64)"
                )
            role_, namespaces = _role(role, where)
            if len(secret) < MIN_SECRET_LENGTH:
                raise ConfigurationError(
                    f"{where}: the secret must have at least {MIN_SECRET_LENGTH} characters"
                )
            found.append(Credential(name, role_, _digest(secret), namespaces, where))
    return found


class Credentials:
    """The accepted credentials; lookups take the same time whatever matches."""

    def __init__(self, credentials: Sequence[Credential]) -> None:
        if not credentials:
            raise ConfigurationError("no admin credentials configured")
        seen: dict[object, Credential] = {}
        for credential in credentials:
            for key, what in ((credential.name, "the same name"), (credential.digest, "a secret")):
                if earlier := seen.get(key):
                    raise ConfigurationError(
                        f"{credential.where}: has {what} of {earlier.where}: "
                        "each entry needs its own name and its own secret"
                    )
                seen[key] = credential
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
        if len(parts) != 4 or not _EXPIRES.fullmatch(parts[1]):
            return None
        try:
            name = _unb64(parts[0]).decode()
        except ValueError:  # binascii.Error, UnicodeDecodeError, non-ASCII text
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

    @staticmethod
    def handle(session: Session) -> str:
        """The session's public name: what a logout records to end it everywhere (the nonce
        itself stays in the cookie)."""
        return hashlib.sha256(f"session|{session.nonce}".encode()).hexdigest()[:32]


class Lock(enum.StrEnum):
    """What a lockout of failed logins holds back."""

    ADDRESS = "address"
    """One client address: every attempt from it."""
    NAME = "name"
    """One user name: attempts for it from addresses it has not logged in from."""
    GLOBAL = "global"
    """Every attempt, but from addresses where the name (for a bearer token: any name) has
    logged in before."""


class FailureLimiter:
    """Failed logins counted per client address, per claimed name and over all, in memory:
    ``max_failures`` within ``window_seconds`` (``max_global_failures`` for the total) lock
    for ``lockout_seconds`` (see :class:`Lock`). A success resets nothing. Locks are kept
    until they expire, whatever the number of keys; only the failure counts of the keys
    unseen longest are forgotten past ``max_keys``."""

    def __init__(
        self,
        *,
        max_failures: int,
        max_global_failures: int,
        window_seconds: float,
        lockout_seconds: float,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max = {Lock.ADDRESS: max_failures, Lock.NAME: max_failures}
        self._max[Lock.GLOBAL] = max_global_failures
        self._window = window_seconds
        self._lockout = lockout_seconds
        self._max_keys = max_keys
        self._clock = clock
        self._failures: OrderedDict[tuple[Lock, str], deque[float]] = OrderedDict()
        self._locked_until: dict[tuple[Lock, str], float] = {}
        self._prune_at = 1024
        """Expired locks are dropped when this many are held (then twice the rest)."""
        self._known: OrderedDict[tuple[str, str], None] = OrderedDict()
        """(address, name) pairs that logged in: held back by no name or global lock."""
        self._known_addresses: Counter[str] = Counter()
        """How many of those pairs each address is in."""

    def _keys(self, address: str, name: str | None) -> list[tuple[Lock, str]]:
        keys = [(Lock.ADDRESS, address), (Lock.GLOBAL, "")]
        return keys if name is None else [*keys, (Lock.NAME, name)]

    def _exempt(self, lock: Lock, address: str, name: str | None) -> bool:
        if lock is Lock.ADDRESS:
            return False
        if name is not None:
            return (address, name) in self._known
        return lock is Lock.GLOBAL and address in self._known_addresses

    def retry_after(self, address: str, name: str | None) -> float:
        """Seconds until an attempt from ``address`` (for ``name``; None: a bearer token) is
        allowed again (0: allowed now)."""
        now = self._clock()
        waits = [
            until - now
            for key in self._keys(address, name)
            if (until := self._locked_until.get(key, now)) > now
            and not self._exempt(key[0], address, name)
        ]
        return max([0.0, *waits])

    def failed(self, address: str, name: str | None) -> list[Lock]:
        """Count a failure; returns the locks it started."""
        now = self._clock()
        started = []
        for key in self._keys(address, name):
            recent = self._failures.pop(key, deque())
            while recent and now - recent[0] >= self._window:
                recent.popleft()
            recent.append(now)
            if len(recent) >= self._max[key[0]]:
                self._locked_until[key] = now + self._lockout
                started.append(key[0])
                recent.clear()
            self._failures[key] = recent
        while len(self._failures) > self._max_keys:
            self._failures.popitem(last=False)
        if len(self._locked_until) >= self._prune_at:
            for key, until in list(self._locked_until.items()):
                if until <= now:
                    del self._locked_until[key]
            self._prune_at = max(1024, 2 * len(self._locked_until))
        return started

    def succeeded(self, address: str, name: str) -> None:
        """``name`` logged in from ``address``: name and global locks let it through."""
        pair = (address, name)
        if pair in self._known:
            self._known.move_to_end(pair)
            return
        self._known[pair] = None
        self._known_addresses[address] += 1
        while len(self._known) > self._max_keys:
            (forgotten, _), _ = self._known.popitem(last=False)
            self._known_addresses[forgotten] -= 1
            if not self._known_addresses[forgotten]:
                del self._known_addresses[forgotten]
