"""The shipped migrations as text and statements, for the lints of tests/db that read them
(test_migration_locks.py, test_migration_contracts.py): a reviewer's checklist, not a parser.

Import as ``from tests.support import migration_sql``.
"""

from __future__ import annotations

import re
from importlib import resources


def shipped() -> list[tuple[str, str]]:
    """(file name, text) of every migration the head ships, in order."""
    folder = resources.files("tickwork.db").joinpath("migrations")
    return sorted(
        (entry.name, entry.read_text()) for entry in folder.iterdir() if entry.name.endswith(".sql")
    )


def statements(text: str) -> list[str]:
    """The statements of a migration, comments removed, split outside dollar quotes, each on
    one line with its whitespace collapsed."""
    text = re.sub(r"--[^\n]*", "", text)
    parts, current, quoted = [], [], False
    for token in re.split(r"(\$\$|;)", text):
        if token == "$$":
            quoted = not quoted
            current.append(token)
        elif token == ";" and not quoted:
            parts.append(" ".join("".join(current).split()))
            current = []
        else:
            current.append(token)
    parts.append(" ".join("".join(current).split()))
    return [p for p in parts if p]
