"""The pure rules behind the console's door: parsing credentials, checking secrets and tokens,
signed sessions and their CSRF tokens, the lockout after failed logins, and the HTML builder
that escapes everything it is not told is markup. Also: the command refuses to run open."""

from __future__ import annotations

import pytest

from tickwork.admin import html
from tickwork.admin.auth import (
    Credentials,
    FailureLimiter,
    Lock,
    Role,
    Sessions,
    parse_credentials,
)
from tickwork.cli import main
from tickwork.errors import ConfigurationError

GOOD = "alice:operator:alice-secret-0123456789 bob:viewer:bob:with:colons-0123"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_parse_credentials() -> None:
    found = parse_credentials(
        f"# the team\n{GOOD}\nteam-a:operator@team-a,ops:team-a-secret-0123", "env"
    )
    assert [(c.name, c.role, c.namespaces) for c in found] == [
        ("alice", Role.OPERATOR, None),
        ("bob", Role.VIEWER, None),
        ("team-a", Role.OPERATOR, frozenset({"team-a", "ops"})),
    ]
    assert "secret" not in repr(found)
    assert Credentials(found).check_password("bob", "bob:with:colons-0123")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alice:admin:alice-secret-0123456789", "role must be viewer or operator"),
        ("alice:viewer@:alice-secret-0123456789", "schedule namespaces separated by commas"),
        ("alice:viewer@a,,b:alice-secret-0123456789", "schedule namespaces separated by commas"),
        ("alice:viewer:short", "at least 16 characters"),
        (":viewer:alice-secret-0123456789", "NAME:ROLE:SECRET"),
        ("a:viewer:alice-secret-0123456789 a:viewer:alice-secret-9876543210", "the same name"),
    ],
)
def test_bad_credentials_are_refused_without_showing_the_secret(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as error:
        Credentials(parse_credentials(text, "file.txt"))
    assert "alice-secret" not in str(error.value)


def test_secrets_and_tokens() -> None:
    accepted = Credentials(parse_credentials(GOOD, "env"))
    assert accepted.check_password("alice", "alice-secret-0123456789")
    assert accepted.check_password("alice", "alice-secret-012345678") is None
    assert accepted.check_password("nobody", "alice-secret-0123456789") is None
    token = accepted.check_token("bob:with:colons-0123")
    assert token is not None and token.name == "bob"
    assert accepted.check_token("") is None
    assert Role.OPERATOR.allows(Role.VIEWER) and not Role.VIEWER.allows(Role.OPERATOR)


def test_sessions_expire_and_resist_tampering() -> None:
    clock = Clock()
    accepted = Credentials(parse_credentials(GOOD, "env"))
    sessions = Sessions(accepted, 60, clock)
    alice = accepted.by_name("alice")
    assert alice is not None
    cookie = sessions.issue(alice)
    session = sessions.verify(cookie)
    assert session is not None and session.credential.name == "alice"
    token = sessions.csrf_token(session)
    assert sessions.check_csrf(session, token) and not sessions.check_csrf(session, token + "x")
    name, expires, nonce, signature = cookie.split(".")
    assert sessions.verify(f"Ym9i.{expires}.{nonce}.{signature}") is None  # "bob"
    assert sessions.verify(f"{name}.{int(expires) + 999}.{nonce}.{signature}") is None
    assert sessions.verify("garbage") is None
    other = Sessions(
        Credentials(parse_credentials("alice:operator:another-secret-0123456", "e")), 60
    )
    assert other.verify(cookie) is None  # a changed secret ends the session
    clock.now += 61
    assert sessions.verify(cookie) is None


def test_failed_logins_lock_out_then_expire() -> None:
    clock = Clock()
    limiter = FailureLimiter(
        max_failures=3, max_global_failures=100, window_seconds=60, lockout_seconds=30, clock=clock
    )
    for _ in range(2):
        assert limiter.failed("a", None) == []
    assert limiter.retry_after("a", None) == 0
    assert limiter.failed("a", None) == [Lock.ADDRESS]
    assert limiter.retry_after("a", "bob") == 30 and limiter.retry_after("b", None) == 0
    clock.now += 31
    assert limiter.retry_after("a", None) == 0
    clock.now += 100  # old failures leave the window
    limiter.failed("a", None)
    limiter.failed("a", None)
    assert limiter.retry_after("a", None) == 0


def test_html_escapes_all_but_markup() -> None:
    page = html.el("p", "<b>", html.el("i", "x"), 5, None, title='"><script>')
    assert page == '<p title="&quot;&gt;&lt;script&gt;">&lt;b&gt;<i>x</i>5</p>'
    assert html.el("input", disabled=True, value=None, class_="c") == '<input disabled class="c">'
    assert html.path("schedules", "a/b", "c d") == "/schedules/a%2Fb/c%20d"
    assert html.link("/jobs", {"kind": "a&b", "queue": None}) == "/jobs?kind=a%26b"


def test_the_command_refuses_to_run_without_credentials(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["admin", "--database-url", "postgresql://nowhere/x"], env={})
    assert status == 2
    assert "no admin credentials" in capsys.readouterr().err


def test_the_command_names_a_bad_credentials_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["admin", "--credentials-file", "/nonexistent/creds"], env={})
    assert status == 2
    assert "cannot read /nonexistent/creds" in capsys.readouterr().err
