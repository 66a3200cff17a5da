"""How a setting is declared: a dataclass field made by :func:`setting`, carrying its
documentation, its group, its flag and ``TICKWORK_*`` variable, and the checks its value must
pass. The loader (:mod:`tickwork.settings.loader`), ``--help``
(:mod:`tickwork.settings.arguments`) and the documented tables (:mod:`tickwork.settings.table`)
all read these declarations, so a default is written once: in the dataclass."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tickwork.errors import ConfigurationError

Check = Callable[[Any], "str | None"]
"""A value's problem (``"must be ≥ 1, not 0"``), or None when it is fine."""

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class Spec:
    doc: str
    group: str
    flag: str | None
    """``--name``; None: the field's name with dashes; empty: no flag (a variable only)."""
    env: str | None
    """None: the class's ``ENV_PREFIX`` and the field's name in capitals."""
    metavar: str | None
    default_doc: str | None
    """How a default computed at start (or none at all) is described in --help."""
    choices: tuple[str, ...]
    checks: tuple[Check, ...]
    required: bool
    repeatable: bool
    """The flag may be given several times (and the variable holds a comma-separated list)."""
    old_env: str | None
    old_flag: str | None
    """Names before a rename, still read (with a warning) for one release."""
    computed_default: Callable[[], Any] | None
    """The value the loader uses when neither flag nor variable is given."""


def setting(
    doc: str,
    *,
    group: str,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    flag: str | None = None,
    env: str | None = None,
    metavar: str | None = None,
    default_doc: str | None = None,
    choices: Sequence[str] = (),
    checks: Sequence[Check] = (),
    required: bool = False,
    repeatable: bool = False,
    old_env: str | None = None,
    old_flag: str | None = None,
    computed_default: Callable[[], Any] | None = None,
) -> Any:
    spec = Spec(
        doc=doc,
        group=group,
        flag=flag,
        env=env,
        metavar=metavar,
        default_doc=default_doc,
        choices=tuple(choices),
        checks=tuple(checks),
        required=required,
        repeatable=repeatable,
        old_env=old_env,
        old_flag=old_flag,
        computed_default=computed_default,
    )
    return dataclasses.field(
        default=default, default_factory=default_factory, metadata={"setting": spec}
    )


def spec_of(f: dataclasses.Field[Any]) -> Spec:
    spec = f.metadata.get("setting")
    if not isinstance(spec, Spec):
        raise TypeError(f"{f.name} is not declared with tickwork.settings.setting()")
    return spec


def flag_name(f: dataclasses.Field[Any]) -> str:
    """The field's flag; empty when it is set by its variable only."""
    spec = spec_of(f)
    return spec.flag if spec.flag is not None else "--" + f.name.replace("_", "-")


def env_name(cls: type, name: str) -> str:
    spec = spec_of(_field(cls, name))
    return spec.env or str(getattr(cls, "ENV_PREFIX", "TICKWORK_")) + name.upper()


def label(cls: type, name: str) -> str:
    """``--flag (TICKWORK_VARIABLE)``: how an error names the setting."""
    flag = flag_name(_field(cls, name))
    variable = env_name(cls, name)
    return f"{flag} ({variable})" if flag else variable


def _field(cls: type, name: str) -> dataclasses.Field[Any]:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def show(value: Any) -> str:
    """A value as --help and error messages print it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


class InvalidSetting(ConfigurationError):
    """A setting's value fails its choices or checks; the message names the setting by its
    flag and variable (:func:`tickwork.settings.load` names where the value came from)."""

    def __init__(self, cls: type, name: str, problem: str) -> None:
        super().__init__(f"{label(cls, name)}: {problem}")
        self.name = name
        self.problem = problem


def validate(settings: Any) -> None:
    """Every field's choices and checks; the first problem is raised naming flag and variable.
    Called by the settings classes' ``__post_init__``."""
    cls = type(settings)
    for f in dataclasses.fields(cls):
        spec = spec_of(f)
        value = getattr(settings, f.name)
        if value is None:
            continue
        problem = None
        if spec.choices and value not in spec.choices:
            problem = f"must be one of {', '.join(spec.choices)}, not {value!r}"
        for check in spec.checks:
            problem = problem or check(value)
        if problem:
            raise InvalidSetting(cls, f.name, problem)


def at_least(minimum: float) -> Check:
    return lambda value: (
        None if value >= minimum else f"must be ≥ {show(minimum)}, not {show(value)}"
    )


def between(low: int, high: int) -> Check:
    return lambda value: (
        None if low <= value <= high else f"must be between {low} and {high}, not {show(value)}"
    )


def positive(value: float) -> str | None:
    return None if value > 0 else f"must be > 0, not {show(value)}"


def port(value: int) -> str | None:
    return None if 0 <= value <= 65535 else f"must be a TCP port (0 to 65535), not {value}"


def not_blank(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def no_blank_item(values: tuple[str, ...]) -> str | None:
    return "must not be empty" if any(not value.strip() for value in values) else None
