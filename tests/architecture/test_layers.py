"""The architecture, checked: only the database layer imports the driver, only the operator
imports kopf, pure modules reach no database (directly or through another tickwork module),
and nothing below the command line imports it."""

from __future__ import annotations

import ast
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tickwork"

PURE = [
    "tickwork.model",
    "tickwork.errors",
    "tickwork.clock",
    "tickwork.tasks",
    "tickwork.progress",
    "tickwork.results",
    "tickwork.settings",
    "tickwork.logs",
    "tickwork.tracing",
    "tickwork.schedules.occurrences",
    "tickwork.schedules.cron_days",
    "tickwork.schedules.definition",
    "tickwork.schedules.checks",
    "tickwork.schedules.options",
    "tickwork.schedules.stored",
    "tickwork.schedules.spec_fields",
    "tickwork.schedules.manifests",
    "tickwork.schedules.policies",
    "tickwork.schedules.container_jobs",
    "tickwork.schedules.job_templates",
    "tickwork.schedules.tenancy",
    "tickwork.schedules.images",
    "tickwork.schedules.steps",
    "tickwork.workflows.graph",
    "tickwork.schedules.container_policy",
    "tickwork.worker.retry",
    "tickwork.flow.pauses",
    "tickwork.flow.limits",
    "tickwork.flow.look",
    "tickwork.containers.manifests",
    "tickwork.maintenance.firing.planner",
    "tickwork.operator.translate",
    "tickwork.operator.desired",
    "tickwork.operator.events",
    "tickwork.db.budget",
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


PACKAGES = (
    "tickwork.worker",
    "tickwork.flow",
    "tickwork.containers",
    "tickwork.maintenance",
    "tickwork.db",
    "tickwork.schedules",
    "tickwork.operator",
    "tickwork.admin",
    "tickwork.cli",
)
"""Sub-packages taken as one unit each by the package checks; every other module (``app``,
``clock``, ..., and ``tickwork`` itself, the public face) is a unit of its own."""

LAYERS: tuple[tuple[str, ...], ...] = (
    ("tickwork.errors",),
    (
        "tickwork.model",
        "tickwork.progress",
        "tickwork.ports",
        "tickwork.clock",
        "tickwork.settings",
        "tickwork.logs",
        "tickwork.tracing",
    ),
    ("tickwork.metrics", "tickwork.db"),
    ("tickwork.transitions", "tickwork.workflows", "tickwork.job_controls"),
    ("tickwork.flow",),
    ("tickwork.schedules",),
    ("tickwork.tasks", "tickwork.results"),
    ("tickwork.app", "tickwork.http"),
    ("tickwork.maintenance",),
    ("tickwork.containers",),
    ("tickwork.worker",),
    ("tickwork.operator", "tickwork.admin"),
    ("tickwork",),
    ("tickwork.examples", "tickwork.devmode"),
    ("tickwork.cli",),
)
"""Ground floor first: a unit imports only units of its own layer or below it."""


def _unit(module: str) -> str:
    if module == "tickwork.__init__":
        return "tickwork"
    for package in PACKAGES:
        if module == package or module.startswith(package + "."):
            return package
    return ".".join(module.split(".")[:2])


@cache
def _unit_imports(module: str) -> frozenset[tuple[str, str]]:
    """(unit imported, import as written) for ``module``'s imports of other units; ``from
    tickwork import x`` imports module ``tickwork.x`` when there is one, else the package."""
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(_path(module).read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "tickwork":
            names = [
                f"tickwork.{a.name}" if _exists(f"tickwork.{a.name}") else "tickwork"
                for a in node.names
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        found.update(
            (_unit(name), name)
            for name in names
            if name.split(".")[0] == "tickwork" and _unit(name) != _unit(module)
        )
    return frozenset(found)


def _unit_graph() -> dict[str, dict[str, str]]:
    """unit → {unit it imports: one import that does it, as ``module imports name``}."""
    graph: dict[str, dict[str, str]] = {}
    for module in _modules():
        edges = graph.setdefault(_unit(module), {})
        for unit, name in sorted(_unit_imports(module)):
            edges.setdefault(unit, f"{module} imports {name}")
    return graph


def _layer(unit: str) -> int:
    for level, units in enumerate(LAYERS):
        if unit in units:
            return level
    raise AssertionError(f"{unit} has no place in LAYERS: add it")


def test_packages_import_one_another_in_no_cycle() -> None:
    graph = _unit_graph()
    cycles = []
    for start in sorted(graph):
        path = [start]
        todo = [(start, iter(sorted(graph[start])))]
        on_path = {start}
        while todo:  # depth first; a unit met again on the current path closes a cycle
            _, children = todo[-1]
            child = next(children, None)
            if child is None:
                on_path.discard(path.pop())
                todo.pop()
            elif child == start:
                steps = [*path, start]
                cycles.append(
                    " -> ".join(steps)
                    + " ("
                    + "; ".join(graph[a][b] for a, b in pairwise(steps))
                    + ")"
                )
            elif child not in on_path and child > start:  # each cycle once, from its least unit
                path.append(child)
                on_path.add(child)
                todo.append((child, iter(sorted(graph.get(child, {})))))
    assert not cycles, "package import cycles:\n" + "\n".join(cycles)


def test_every_unit_has_a_layer() -> None:
    for unit in _unit_graph():
        _layer(unit)


def test_no_unit_imports_a_layer_above_its_own() -> None:
    graph = _unit_graph()
    upward = [
        f"{unit} (layer {_layer(unit)}) -> {imported} (layer {_layer(imported)}): {why}"
        for unit, edges in sorted(graph.items())
        for imported, why in sorted(edges.items())
        if _layer(imported) > _layer(unit)
    ]
    assert not upward, "upward imports:\n" + "\n".join(upward)
