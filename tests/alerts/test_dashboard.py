"""The Grafana dashboard shipped in the chart (``helm/tickwork/files/dashboards/tickwork.json``):
valid JSON Grafana can import, every panel queries through the ``${datasource}`` variable,
every query parses (promtool) and names only series and labels tickwork exports, and every
metric tickwork exports is shown somewhere."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.alerts import metric_catalog
from tests.support import binaries

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "helm" / "tickwork" / "files" / "dashboards" / "tickwork.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# Grafana's variables, replaced by values Prometheus accepts before promtool parses a query.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "6h",
    "$queue": ".*",
    "$schedule_namespace": ".*",
}


def _dashboard() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return document


def _panels() -> list[dict[str, Any]]:
    return [panel for panel in _dashboard()["panels"] if panel["type"] != "row"]


def _targets() -> list[tuple[str, dict[str, Any]]]:
    return [(panel["title"], target) for panel in _panels() for target in panel["targets"]]


def _variable_queries() -> list[str]:
    variables = _dashboard()["templating"]["list"]
    return [v["query"]["query"] for v in variables if v["type"] == "query"]


def _concrete(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"a Grafana variable this test does not know: {expr}"
    return expr


def test_dashboard_is_valid_json_with_identity() -> None:
    dashboard = _dashboard()
    assert dashboard["uid"] == "tickwork"
    assert dashboard["title"]
    assert dashboard["schemaVersion"] >= 36
    assert "id" not in dashboard or dashboard["id"] is None, "no instance id in a shipped file"


def test_datasource_is_a_template_variable() -> None:
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]


def test_every_panel_queries_prometheus_through_the_variable() -> None:
    panels = _panels()
    assert len(panels) >= 20
    for panel in panels:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], f"{panel['title']}: no query"
        refs = [target["refId"] for target in panel["targets"]]
        assert len(set(refs)) == len(refs), f"{panel['title']}: duplicate refId"
        for target in panel["targets"]:
            assert target["expr"].strip(), f"{panel['title']}: empty query"
            assert target["datasource"] == DATASOURCE, panel["title"]


def test_panels_have_unique_ids_and_titles_and_do_not_overlap() -> None:
    panels = _dashboard()["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(set(ids)) == len(ids)
    titles = [panel["title"] for panel in _panels()]
    assert len(set(titles)) == len(titles)
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[x, y]}"
                cells[x, y] = panel["title"]


@pytest.mark.parametrize(("title", "target"), _targets(), ids=[t for t, _ in _targets()])
def test_query_uses_only_exported_series_and_labels(title: str, target: dict[str, Any]) -> None:
    # A legend's {{label}} must be a label of the result: checked like an alert's $labels.
    legend = re.sub(r"\{\{\s*(\w+)\s*\}\}", r"$labels.\1", target.get("legendFormat", ""))
    catalog = metric_catalog.exported()
    assert metric_catalog.problems(target["expr"], catalog, [legend]) == []


def test_variable_queries_use_exported_series_and_labels() -> None:
    catalog = metric_catalog.exported()
    queries = _variable_queries()
    assert queries
    for query in queries:
        match = re.fullmatch(r"label_values\((tickwork_\w+),\s*(\w+)\)", query)
        assert match, query
        name, label = match.groups()
        assert name in catalog, query
        assert label in catalog[name].labels, query


def test_every_exported_metric_is_on_the_dashboard() -> None:
    exprs = " ".join(target["expr"] for _, target in _targets())
    families = {series.family for series in metric_catalog.exported().values()}
    shown = {
        series.family
        for name, series in metric_catalog.exported().items()
        if re.search(rf"\b{name}\b", exprs)
    }
    assert families - shown == set(), "metrics tickwork exports that no panel shows"


def test_every_query_parses(tmp_path: Path) -> None:
    """promtool parses each query (Grafana variables replaced) as a recording rule."""
    rules = [
        {"record": f"dashboard:query_{n}", "expr": _concrete(target["expr"])}
        for n, (_, target) in enumerate(_targets())
    ]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run(
        [str(binaries.promtool()), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout
