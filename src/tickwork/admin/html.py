"""A small HTML builder that escapes by construction.

Text, numbers and attribute values are always escaped; only :class:`Html` values, which this
module builds, are emitted as they are. Payloads, errors, names and reasons are user data,
so pages are assembled from :func:`el` and never from string formatting.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TypeAlias
from urllib.parse import quote, urlencode

VOID = frozenset({"br", "input", "link", "meta"})


class Html(str):
    """Markup safe to emit as is (built by :func:`el` and :func:`join`)."""

    __slots__ = ()


Child: TypeAlias = "Html | str | int | float | Sequence[Child] | None"
AttrValue: TypeAlias = str | int | float | bool | None


def render(child: Child) -> Html:
    """``child`` as markup: :class:`Html` as is, everything else escaped."""
    if isinstance(child, Html):
        return child
    if child is None:
        return Html("")
    if isinstance(child, str | int | float):
        return Html(html.escape(str(child), quote=True))
    return Html("".join(render(c) for c in child))


def join(*children: Child) -> Html:
    return render(children)


def _attribute(name: str, value: AttrValue) -> str:
    key = name.rstrip("_").replace("_", "-")
    if value is True:
        return f" {key}"
    return f' {key}="{html.escape(str(value), quote=True)}"'


def el(tag: str, *children: Child, **attrs: AttrValue) -> Html:
    """``<tag attrs>children</tag>``; attribute ``class_`` is ``class``, ``data_x`` is
    ``data-x``; ``None`` and ``False`` attributes are left out."""
    opening = "".join(
        _attribute(name, value)
        for name, value in attrs.items()
        if value is not None and value is not False  # 0 is a value (`0 in (False,)` holds)
    )
    if tag in VOID:
        return Html(f"<{tag}{opening}>")
    return Html(f"<{tag}{opening}>{render(children)}</{tag}>")


def path(*segments: str | int) -> str:
    """An absolute path from segments, each percent-encoded (a ``/`` in a name stays in it)."""
    return "/" + "/".join(quote(str(s), safe="") for s in segments)


def link(path_: str, query: Mapping[str, str | int | None] | None = None) -> str:
    """``path_`` with the query parameters that are not ``None``."""
    params = {k: str(v) for k, v in (query or {}).items() if v is not None and v != ""}
    return f"{path_}?{urlencode(params)}" if params else path_
