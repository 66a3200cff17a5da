"""What every subcommand shares: the argument parser class, the database URL, ``-o``, the
actor of audited actions, and reading times from the command line.

A command module exposes ``register(subcommands)``, adding its parsers and setting
``handler`` on each: ``handler(args, env) -> exit status``, where ``env`` is the process
environment as read once by :func:`tickwork.cli.main`.
"""

from __future__ import annotations

import argparse
import os
import pwd
import socket
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import NoReturn, TypeAlias, TypeVar

from tickwork import logs, ports, settings
from tickwork.app import App
from tickwork.db import connections
from tickwork.errors import ConfigurationError, did_you_mean

Env = Mapping[str, str]
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
T = TypeVar("T")


class UsageError(ConfigurationError):
    """The command line itself is wrong (exit status 2); ``usage``, when given, is printed on
    a line of its own after the error."""

    def __init__(self, message: str, usage: str | None = None) -> None:
        super().__init__(message)
        self.usage = usage


_UNRECOGNIZED_BY = "_unrecognized_by"


class Parser(argparse.ArgumentParser):
    """An argument parser that raises instead of printing usage and exiting, so that every
    mistake ends as one line on stderr (an unknown option: with the closest known one and
    the subcommand's usage)."""

    def error(self, message: str) -> NoReturn:
        subcommand = self.prog.partition(" ")[2]
        raise UsageError(f"{subcommand}: {message}" if subcommand else message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        args = sys.argv[1:] if args is None else list(args)
        if unknown := self._unknown_before_action(args):
            self.unrecognized(unknown)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(parsed, _UNRECOGNIZED_BY):
            setattr(parsed, _UNRECOGNIZED_BY, self)  # the innermost: the subcommand's parser
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        parser = vars(parsed).pop(_UNRECOGNIZED_BY, self)
        if extras:
            parser.unrecognized(extras)
        return parsed

    def _unknown_before_action(self, args: list[str]) -> list[str]:
        """The unknown options before the action of a command that has actions (``tickwork
        jobs --limt 3``): argparse would take the value ``3`` for an action and complain of it
        instead of the misspelt option."""
        actions = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions:
            return []
        known = [flag for action in self._actions for flag in action.option_strings]
        unknown = []
        for arg in args:
            if arg in actions[0].choices or arg == "--":
                break
            option = arg.partition("=")[0]
            if arg.startswith("-") and not any(flag.startswith(option) for flag in known):
                unknown.append(arg)
        return unknown

    def unrecognized(self, extras: list[str]) -> NoReturn:
        """``worker: unrecognized argument --concurency (did you mean `--concurrency`?)``,
        with this parser's usage."""
        options = [extra.partition("=")[0] for extra in extras if extra.startswith("-")]
        known = [
            flag
            for action in self._actions
            if action.help != argparse.SUPPRESS
            for flag in action.option_strings
        ]
        if options:
            noun = "argument" if len(options) == 1 else "arguments"
            listed = ", ".join(option + did_you_mean(option, known) for option in options)
            problem = f"unrecognized {noun} {listed}"
        else:
            problem = f"unexpected argument {' '.join(extras)}"
        subcommand = self.prog.partition(" ")[2]
        prefix = f"{subcommand}: " if subcommand else ""
        raise UsageError(prefix + problem, usage=self.short_usage())

    def short_usage(self) -> str:
        """``usage: tickwork enqueue [OPTIONS] KIND (tickwork enqueue --help lists them)``"""
        positionals = [
            action.metavar if isinstance(action.metavar, str) else action.dest.upper()
            for action in self._actions
            if not action.option_strings and action.help != argparse.SUPPRESS
            if action.required  # not an optional action (``tickwork jobs [get]``)
        ]
        words = " ".join([self.prog, "[OPTIONS]", *positionals])
        return f"usage: {words} ({self.prog} --help lists them)"


def add_database_url(parser: argparse.ArgumentParser) -> None:
    """``--database-url``; given before or after the subcommand name."""
    settings.add_arguments(parser, settings.DatabaseSettings)


def load(cls: type[T], args: argparse.Namespace, env: Env) -> T:
    """The settings ``cls`` from this command line and environment (see
    :func:`tickwork.settings.load`); a renamed flag or variable given by its old name is a
    warning on stderr."""
    return settings.load(cls, settings.flag_values(args, cls, warn), env, warn)


def warn(message: str) -> None:
    print(f"tickwork: warning: {message}", file=sys.stderr)


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="table for people (default), json for programs",
    )


def add_audit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--actor", help="who acts, for the audit log (default: $USER or the OS user, @hostname)"
    )
    parser.add_argument("--reason", help="why, for the audit log")


def add_logging(
    parser: argparse.ArgumentParser, cls: type[settings.LogSettings] = settings.LogSettings
) -> None:
    settings.add_arguments(parser, cls)
    parser.set_defaults(log_settings=cls)


def configure_logging(args: argparse.Namespace, env: Env) -> settings.LogSettings:
    """Logging as chosen by ``--log-format``/``--log-level`` or their variables."""
    chosen: settings.LogSettings = load(args.log_settings, args, env)
    logs.configure(chosen.log_level, as_json=chosen.log_format == "json")
    return chosen


def actor(args: argparse.Namespace, env: Env) -> str:
    if args.actor:
        return str(args.actor)
    user = env.get("USER") or env.get("LOGNAME") or _os_user()
    return f"{user}@{socket.gethostname()}"


def _os_user() -> str:
    """The name of the process's user from the system's user database (containers often
    run without $USER), else its uid."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"uid-{os.getuid()}"


def source(cls: type, name: str, args: argparse.Namespace, env: Env) -> str | None:
    """Where this command line or environment gives setting ``name`` of ``cls``: its flag or
    its variable; None when it keeps its default."""
    return settings.origin(cls, name, settings.flag_values(args, cls), env)


def port_fallbacks(cls: type, name: str, args: argparse.Namespace, env: Env) -> tuple[int, ...]:
    """Where HTTP port setting ``name`` may move while it is in use: only a default port
    moves (a second worker on a laptop, :func:`tickwork.ports.fallback_ports`); a port given
    by flag or variable fails instead, for Kubernetes probes rely on it."""
    if source(cls, name, args, env) is not None:
        return ()
    default: int = getattr(cls, name)  # a dataclass field's default
    return ports.fallback_ports(default)


def database_url(args: argparse.Namespace, env: Env) -> str:
    """The database URL from ``--database-url`` or the environment, checked by connecting once
    so that an unreachable database is reported at once and with its reason."""
    url = load(settings.DatabaseSettings, args, env).database_url
    check_connection(url, source(settings.DatabaseSettings, "database_url", args, env))
    return url


@contextmanager
def app(args: argparse.Namespace, env: Env) -> Iterator[App]:
    """An App on the command's database, closed afterwards."""
    opened = App(database_url(args, env))
    try:
        yield opened
    finally:
        opened.close()


def check_connection(url: str, given_by: str | None = None) -> None:
    """Connect and disconnect first, so an unreachable database is one clear line; a
    malformed URL is named by where it was ``given_by`` (``TICKWORK_DATABASE_URL``)."""
    try:
        connections.check(url)
    except ConfigurationError as exc:
        raise UsageError(f"{given_by or '--database-url'}: {exc}") from None


def instant(flag: str, text: str) -> datetime:
    """An ISO 8601 time with its UTC offset (``Z`` allowed)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"{flag}: {text!r} is not an ISO 8601 time (e.g. 2026-12-01T09:00:00+01:00)"
        ) from None
    if value.tzinfo is None:
        raise UsageError(f"{flag}: {text!r} has no UTC offset (add one, e.g. Z or +01:00)")
    return value
