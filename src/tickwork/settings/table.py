"""The settings of a command as a Markdown table (docs/settings.md holds them, and a test
checks that they match these dataclasses)."""

from __future__ import annotations

import dataclasses

from tickwork.settings.arguments import default_text
from tickwork.settings.fields import env_name, flag_name, spec_of


def markdown(*classes: type) -> str:
    rows = ["| Group | Flag | Variable | Default | Meaning |", "|---|---|---|---|---|"]
    for cls in classes:
        for f in dataclasses.fields(cls):
            spec = spec_of(f)
            flag = f"`{flag_name(f)}`" if flag_name(f) else "—"
            default, doc = (text.replace("|", "\\|") for text in (default_text(f), spec.doc))
            rows.append(
                f"| {spec.group} | {flag} | `{env_name(cls, f.name)}` | {default} | {doc} |"
            )
    return "\n".join(rows) + "\n"
