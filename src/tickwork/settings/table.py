"""The settings of a command as a Markdown table (docs/settings.md holds them, and a test
checks that they match these dataclasses)."""

from __future__ import annotations

import dataclasses

from tickwork.settings.arguments import default_text
from tickwork.settings.fields import env_name, flag_name, spec_of


def markdown(*classes: type) -> str:
    """One row per field, grouped as ``--help`` groups them (each group where it first
    appears)."""
    rows = ["| Group | Flag | Variable | Default | Meaning |", "|---|---|---|---|---|"]
    fields = [(cls, f) for cls in classes for f in dataclasses.fields(cls)]
    groups = list(dict.fromkeys(spec_of(f).group for _, f in fields))
    for cls, f in sorted(fields, key=lambda item: groups.index(spec_of(item[1]).group)):
        spec = spec_of(f)
        flag = f"`{flag_name(f)}`" if flag_name(f) else "—"
        default, doc = (text.replace("|", "\\|") for text in (default_text(f), spec.doc))
        rows.append(f"| {spec.group} | {flag} | `{env_name(cls, f.name)}` | {default} | {doc} |")
    return "\n".join(rows) + "\n"
