"""The architecture, checked: only the database layer imports the driver, only the operator
imports kopf, pure modules reach no database (directly or through another tickwork module),
and nothing below the command line imports it."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tickwork"

PURE = [
    "tickwork.model",
    "tickwork.errors",
    "tickwork.clock",
    "tickwork.tasks",
    "tickwork.settings",
    "tickwork.logs",
    "tickwork.schedules.occurrences",
    "tickwork.schedules.definition",
    "tickwork.schedules.manifests",
    "tickwork.schedules.policies",
    "tickwork.schedules.tenancy",
    "tickwork.worker.retry",
    "tickwork.operator.translate",
    "tickwork.operator.desired",
]
"""Logic that tests exhaustively without a database."""

TOP = ("tickwork.cli", "tickwork.devmode")
"""Entry points: only they (and each other) may import these."""


def _path(module: str) -> Path:
    parts = module.split(".")[1:]
    package = PACKAGE.joinpath(*parts)
    return package / "__init__.py" if package.is_dir() else package.with_suffix(".py")


@cache
def _imports(module: str) -> frozenset[str]:
    """Modules ``module`` imports directly (``from a import b`` counts as ``a`` and ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(_path(module).read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(name for name in found if not name.startswith("tickwork") or _exists(name))


def _exists(module: str) -> bool:
    return _path(module).exists()


def _reachable(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        for name in _imports(current):
            if name not in seen:
                seen.add(name)
                if name.startswith("tickwork"):
                    todo.append(name)
    return seen


def _modules() -> list[str]:
    return sorted(
        "tickwork."
        + ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        for p in PACKAGE.rglob("*.py")
    )


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_reach_no_database(module: str) -> None:
    reached = _reachable(module)
    assert not {n for n in reached if n.split(".")[0] in ("psycopg", "psycopg_pool")}
    assert not {n for n in reached if n.startswith("tickwork.db")}


@pytest.mark.parametrize("module", [m for m in _modules() if not m.startswith(TOP)])
def test_nothing_below_the_entry_points_imports_them(module: str) -> None:
    assert not {n for n in _imports(module) if n.startswith(TOP)}


@pytest.mark.parametrize("module", [m for m in _modules() if not m.startswith("tickwork.db")])
def test_only_the_database_layer_imports_the_driver(module: str) -> None:
    assert not {n for n in _imports(module) if n.split(".")[0] in ("psycopg", "psycopg_pool")}


@pytest.mark.parametrize("module", [m for m in _modules() if not m.startswith("tickwork.operator")])
def test_only_the_operator_imports_kopf(module: str) -> None:
    assert not {n for n in _imports(module) if n.split(".")[0] == "kopf"}


@pytest.mark.parametrize("module", ["tickwork.operator.translate", "tickwork.operator.desired"])
def test_the_operator_translation_reaches_no_kopf(module: str) -> None:
    assert not {n for n in _reachable(module) if n.split(".")[0] in ("kopf", "kubernetes")}
