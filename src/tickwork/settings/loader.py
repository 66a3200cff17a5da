"""The one loader of settings: flags over ``TICKWORK_*`` variables over defaults, for every
command. Values arrive as text (or already typed, from Python) and are converted by the
field's type; a value that does not convert is one error naming where it came from."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tickwork.errors import ConfigurationError
from tickwork.settings.fields import FALSE, TRUE, InvalidSetting, env_name, flag_name, spec_of

T = TypeVar("T")
Warn = Callable[[str], None]


def load(
    cls: type[T],
    flags: Mapping[str, Any],
    env: Mapping[str, str],
    warn: Warn | None = None,
) -> T:
    """``cls`` built from ``flags`` (field name → value; None or absent: not given), then
    ``env``, then the defaults; a renamed variable's old name is read with a ``warn``ing. A
    value that fails its checks is named by where it came from (flag or variable)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        spec = spec_of(f)
        given = _given(cls, f, flags, env, warn)
        if given is not None:
            raw, sources[f.name] = given
            values[f.name] = convert(cls, f, sources[f.name], raw)
        elif spec.computed_default is not None:
            values[f.name] = spec.computed_default()
        if spec.required and not values.get(f.name):
            raise ConfigurationError(f"{flag_name(f)} (or {env_name(cls, f.name)}) is required")
    try:
        return cls(**values)
    except InvalidSetting as exc:
        source = sources.get(exc.name)
        f = next(f for f in dataclasses.fields(cls) if f.name == exc.name)  # type: ignore[arg-type]
        if source is None or source == flag_name(f):
            raise
        raise ConfigurationError(f"{source}: {exc.problem} ({_other(cls, f, source)})") from None


def origin(cls: type, name: str, flags: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Where setting ``name`` of ``cls`` is given: its flag or its variable (the first that
    :func:`load` reads), or None when it keeps its default."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    given = _given(cls, f, flags, env, None)
    return None if given is None else given[1]


def _given(
    cls: type,
    f: dataclasses.Field[Any],
    flags: Mapping[str, Any],
    env: Mapping[str, str],
    warn: Warn | None,
) -> tuple[Any, str] | None:
    """The raw value given for ``f`` and its source (flag or variable name), or None."""
    spec = spec_of(f)
    variable = env_name(cls, f.name)
    if flags.get(f.name) is not None:
        return flags[f.name], flag_name(f)
    if variable in env:
        return env[variable], variable
    if spec.old_env and spec.old_env in env:
        if warn is not None:
            warn(deprecated(spec.old_env, variable))
        return env[spec.old_env], spec.old_env
    return None


def deprecated(old: str, new: str) -> str:
    return f"{old} is deprecated (read until the next release): use {new}"


def convert(cls: type, f: dataclasses.Field[Any], source: str, raw: Any) -> Any:
    kind = str(f.type).removesuffix(" | None")
    if kind == "tuple[str, ...]":
        if isinstance(raw, str):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        return tuple(raw)
    if not isinstance(raw, str):
        return raw
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError(raw)
            return value
    except ValueError:
        raise ConfigurationError(
            f"{source}: {raw!r} is not a valid {kind} ({_other(cls, f, source)})"
        ) from None
    if kind == "bool":
        if raw.strip().lower() in TRUE:
            return True
        if raw.strip().lower() in FALSE:
            return False
        raise ConfigurationError(
            f"{source}: {raw!r} is not true or false ({_other(cls, f, source)})"
        )
    return raw


def _other(cls: type, f: dataclasses.Field[Any], source: str) -> str:
    """The setting's other name, for an error that starts with the one the value came from."""
    if source == flag_name(f):
        return f"variable {env_name(cls, f.name)}"
    return f"flag {flag_name(f)}" if flag_name(f) else "a variable only"
