"""Flags generated from settings classes: one per field, in an argument group per settings
group, with ``--help`` text made of the field's documentation, its default and its
variable, so no default is typed twice."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from tickwork.settings.fields import env_name, flag_name, show, spec_of
from tickwork.settings.loader import Warn, deprecated

_METAVARS = {"int": "N", "float": "SECONDS", "tuple[str, ...]": "A,B"}
_OLD = "_deprecated_"


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """A flag for every field of ``cls`` that has one; absent from the parsed arguments
    unless given, so the loader can tell "not given" from a default."""
    groups: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        spec = spec_of(f)
        flag = flag_name(f)
        if not flag:
            continue
        if spec.group not in groups:
            groups[spec.group] = parser.add_argument_group(f"{spec.group} settings")
        options: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS}
        if str(f.type) == "bool":
            options["action"] = "store_true"
        else:
            options["metavar"] = spec.metavar or _METAVARS.get(
                str(f.type).removesuffix(" | None"), "VALUE"
            )
            if spec.repeatable:
                options["action"] = "append"
        groups[spec.group].add_argument(flag, help=help_text(cls, f), **options)
        if spec.old_flag:
            parser.add_argument(
                spec.old_flag, help=argparse.SUPPRESS, **{**options, "dest": _OLD + f.name}
            )


def help_text(cls: type, f: dataclasses.Field[Any]) -> str:
    spec = spec_of(f)
    variable = env_name(cls, f.name)
    if str(f.type) == "bool":
        variable += "=true"
    if spec.repeatable:
        variable += ", comma-separated"
    text = f"{spec.doc} (default: {default_text(f)}; env {variable})"
    return text.replace("%", "%%")


def default_text(f: dataclasses.Field[Any]) -> str:
    """The default as --help and the documented tables show it."""
    spec = spec_of(f)
    if spec.default_doc is not None:
        return spec.default_doc
    if f.default is dataclasses.MISSING or f.default is None or f.default in ("", ()):
        raise TypeError(f"{f.name}: a default of none needs default_doc")
    return show(f.default)


def flag_values(args: argparse.Namespace, cls: type, warn: Warn | None = None) -> dict[str, Any]:
    """What the command line gave for ``cls``'s fields (a renamed flag's old name with a
    ``warn``ing)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if hasattr(args, f.name):
            values[f.name] = getattr(args, f.name)
        elif hasattr(args, _OLD + f.name):
            old = str(spec_of(f).old_flag)
            if warn is not None:
                warn(deprecated(old, flag_name(f)))
            values[f.name] = getattr(args, _OLD + f.name)
    return values
