"""The ``tickwork`` command, and the only place that reads argv and the environment.

Each module of this package that defines ``register(subcommands)`` adds its subcommands
(see :mod:`tickwork.cli.common`), so a new command is a new module and no change here.
Every failure ends as one line on stderr: exit status 2 for a wrong command line or setting,
1 for anything else, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType

from tickwork import __version__
from tickwork.cli import common
from tickwork.db import connections
from tickwork.errors import ConfigurationError, InvalidInput, TickworkError


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args_given = sys.argv[1:] if argv is None else argv
    environment = os.environ if env is None else env
    try:
        args = build_parser().parse_args(args_given)
        return int(args.handler(args, environment))
    except common.UsageError as exc:
        return _fail(str(exc), 2, exc.usage)
    except (ConfigurationError, InvalidInput) as exc:
        return _fail(str(exc), 2)
    except TickworkError as exc:
        return _fail(str(exc), 1)
    except connections.DatabaseError as exc:
        missing = connections.schema_missing(exc)
        return _fail(str(missing) if missing else f"database error: {_first_line(exc)}", 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`tickwork jobs -o json | head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def build_parser() -> common.Parser:
    parser = common.Parser(
        prog="tickwork",
        description="Recurring and one-off jobs on PostgreSQL, with no leader.",
    )
    parser.add_argument("--version", action="version", version=__version__)
    common.add_database_url(parser)
    subcommands = parser.add_subparsers(metavar="COMMAND", required=True)
    for module in _command_modules():
        module.register(subcommands)
    return parser


def _command_modules() -> Iterator[ModuleType]:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "register"):
            yield module


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _fail(message: str, status: int, usage: str | None = None) -> int:
    print(f"tickwork: error: {' '.join(message.split())}", file=sys.stderr)
    if usage:
        print(usage, file=sys.stderr)
    return status
