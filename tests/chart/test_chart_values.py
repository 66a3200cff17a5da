"""``helm lint`` passes; values.schema.json rejects wrong values with a readable message;
every value in values.yaml is documented where it is set and known to the schema."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart import chart_render
from tests.chart.chart_render import CHART, Helm


def test_helm_lint_passes(helm: Helm, tmp_path: Path) -> None:
    result = helm.lint(chart_render.QUICK_START, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"worker": {"replicas": "two"}},
            "at '/worker/replicas': got string, want integer",
            id="string-replicas",
        ),
        pytest.param(
            {"workers": {"replicas": 2}},
            "additional properties 'workers' not allowed",
            id="unknown-top-level-key",
        ),
        pytest.param(
            {"worker": {"replica": 2}},
            "additional properties 'replica' not allowed",
            id="unknown-worker-key",
        ),
        pytest.param(
            {"autoscaling": {"enabled": True, "minReplicas": 0}},
            "at '/autoscaling/minReplicas': minimum: got 0, want 1",
            id="hpa-to-zero",
        ),
        pytest.param(
            {"worker": {"concurrency": 0}},
            "at '/worker/concurrency': minimum: got 0, want 1",
            id="no-concurrency",
        ),
        pytest.param(
            {"worker": {"queues": "default,mail"}},
            "at '/worker/queues': got string, want array",
            id="queues-as-a-string",
        ),
        pytest.param(
            {"log": {"level": "verbose"}},
            "at '/log/level': value must be one of",
            id="unknown-log-level",
        ),
        pytest.param(
            {"workerPools": [{"name": "Billing"}]},
            "at '/workerPools/0/name': 'Billing' does not match pattern",
            id="pool-name-not-a-dns-label",
        ),
        pytest.param(
            {"workerPools": [{"name": "billing", "replica": 2}]},
            "additional properties 'replica' not allowed",
            id="unknown-pool-key",
        ),
        pytest.param(
            {"workerPools": [{"name": "billing", "keda": {"minReplicaCount": "0"}}]},
            "at '/workerPools/0/keda/minReplicaCount': got string, want integer",
            id="pool-keda-checked-like-keda",
        ),
        pytest.param(
            {"workerPools": [{"name": "jobs", "containerJobs": "yes"}]},
            "at '/workerPools/0/containerJobs': got string, want boolean",
            id="pool-container-jobs-not-a-boolean",
        ),
        pytest.param(
            {"worker": {"containerJobs": 1}},
            "at '/worker/containerJobs': got number, want boolean",
            id="container-jobs-not-a-boolean",
        ),
        pytest.param(
            {"image": {"tag": 1.2}},
            "at '/image/tag': got number, want string",
            id="numeric-tag",
        ),
    ],
)
@pytest.mark.parametrize("command", ["template", "lint"])
def test_wrong_values_are_rejected_readably(
    helm: Helm, tmp_path: Path, command: str, values: dict[str, Any], message: str
) -> None:
    merged = {**chart_render.QUICK_START, **values}
    if command == "template":
        result = helm.template(merged, tmp_path)
        output = result.stderr
    else:
        result = helm.lint(merged, tmp_path)
        output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in output
    assert message in output, output


def test_a_missing_database_is_named(helm: Helm, tmp_path: Path) -> None:
    result = helm.template(None, tmp_path)
    assert result.returncode != 0
    assert "tickwork needs a database: set database.existingSecret" in result.stderr


def test_hpa_with_keda_is_refused_with_a_sentence(helm: Helm, tmp_path: Path) -> None:
    """The template says it (the schema's own error for this was only "at '': 'allOf'
    failed", so the schema leaves the rule to the template)."""
    values = {
        **chart_render.QUICK_START,
        "autoscaling": {"enabled": True},
        "keda": {"enabled": True},
    }
    result = helm.template(values, tmp_path)
    assert result.returncode != 0
    assert "autoscaling.enabled and keda.enabled are mutually exclusive" in result.stderr
    assert "allOf" not in result.stderr


# --- values.yaml documents itself; the schema knows every value -----------------------------

VALUES_TEXT = (CHART / "values.yaml").read_text()
VALUES = yaml.safe_load(VALUES_TEXT)
SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def leaf_paths(node: Any, schema: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(path, schema node) of every key of values.yaml, descending into objects the schema
    describes property by property."""
    found = []
    for key, value in node.items():
        path = f"{prefix}{key}"
        assert key in schema.get("properties", {}), f"{path} is in values.yaml, not in the schema"
        child = schema["properties"][key]
        found.append((path, child))
        if isinstance(value, dict) and "properties" in child:
            found += leaf_paths(value, child, path + ".")
    return found


def test_every_value_is_in_the_schema_and_every_section_is_closed() -> None:
    paths = leaf_paths(VALUES, SCHEMA)
    assert SCHEMA["additionalProperties"] is False
    for path, node in paths:
        if "properties" in node:
            assert node.get("additionalProperties") is False, f"{path} accepts unknown keys"
    for name in (
        "worker.replicas",
        "worker.namespaces",
        "worker.queues",
        "worker.concurrency",
        "operator.clusterName",
        "database.existingSecret",
        "autoscaling.enabled",
        "keda.enabled",
        "metrics.serviceMonitor.enabled",
        "metrics.prometheusRule.enabled",
        "webhook.enabled",
        "image.repository",
        "image.tag",
    ):
        assert name in dict(paths), f"the issue's value {name} is missing"


def test_every_value_is_documented_where_it_is_set() -> None:
    """Every key the schema describes has a comment right above it in values.yaml (keys
    inside free-form defaults such as resources are Kubernetes' own)."""
    described = {path for path, _ in leaf_paths(VALUES, SCHEMA)}
    key = re.compile(r"^( *)([A-Za-z_][\w-]*):")
    stack: list[tuple[int, str]] = []
    lines = VALUES_TEXT.splitlines()
    checked = set()
    for number, line in enumerate(lines):
        match = key.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group(2)))
        path = ".".join(name for _, name in stack)
        if path in described:
            checked.add(path)
            above = lines[number - 1].strip()
            assert above.startswith("#"), f"values.yaml:{number + 1}: {path} is not documented"
    assert checked == described
