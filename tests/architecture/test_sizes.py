"""Sizes a newcomer can read: no class in src/ over 400 lines, no function over 100, no module
over 800 (docstrings and comments count: they are read too)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tickwork"
LONGEST_CLASS = 400
LONGEST_FUNCTION = 100
LARGEST_MODULE = 800


def _lines(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return (node.end_lineno or node.lineno) - start + 1


def _over() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(PACKAGE.parent)
        if (lines := len(text.splitlines())) > LARGEST_MODULE:
            found.append(f"{where}: module of {lines} lines (at most {LARGEST_MODULE})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and _lines(node) > LONGEST_CLASS:
                found.append(f"{where}:{node.lineno} class {node.name}: {_lines(node)} lines")
            elif (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and _lines(node) > LONGEST_FUNCTION
            ):
                found.append(f"{where}:{node.lineno} {node.name}(): {_lines(node)} lines")
    return found


def test_no_class_function_or_module_is_too_long_to_read() -> None:
    assert _over() == []
