"""The deployment guide (docs/deployment.md) and the chart agree: its Schedules pass the
CRD's schema, every value it sets exists, every chart path it names is there, and the chart
deploys the version pyproject.toml builds."""

from __future__ import annotations

import json
import re
import tomllib

import yaml

from tests.chart import chart_checks, chart_render
from tests.chart.chart_render import CHART, ROOT

GUIDE = ROOT / "docs" / "deployment.md"
TEXT = GUIDE.read_text()
SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def yaml_blocks() -> list[dict]:
    blocks = re.findall(r"```yaml\n(.*?)```", TEXT, flags=re.DOTALL)
    return [doc for block in blocks for doc in yaml.safe_load_all(block) if doc]


def test_the_guides_schedules_are_valid() -> None:
    schedules = [doc for doc in yaml_blocks() if doc.get("kind") == "Schedule"]
    assert schedules, "the guide applies a Schedule"
    for schedule in schedules:
        assert chart_checks.schedule_errors(schedule) == [], schedule


def known(path: str) -> bool:
    node = SCHEMA
    for part in path.split("."):
        properties = node.get("properties", {})
        if part not in properties:
            return False
        node = properties[part]
    return True


def test_every_value_the_guide_sets_exists() -> None:
    keys = re.findall(r"--set '?([\w.]+)=", TEXT)
    assert len(keys) > 10
    for key in keys:
        assert known(key), f"the guide sets {key}, which the chart does not have"
    for key in re.findall(
        r"`((?:worker|operator|keda|autoscaling|metrics|database|migrations|"
        r"webhook|networkPolicy|image|crds)\.[\w.]+)`",
        TEXT,
    ):
        assert known(key), f"the guide names {key}, which the chart does not have"


def test_every_chart_path_the_guide_names_exists() -> None:
    for path in re.findall(r"(helm/tickwork/[\w./-]*)", TEXT):
        assert (ROOT / path.rstrip(".")).exists(), path


def test_the_chart_deploys_the_version_pyproject_builds() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]
    assert f"tickwork:{project['version']}" in (ROOT / "Dockerfile").read_text()


def test_the_guides_worker_pools_render_and_pass_every_check(helm: chart_render.Helm) -> None:
    (values,) = [doc for doc in yaml_blocks() if "workerPools" in doc]
    rendering = helm.render("guide-pools", values)
    for check in chart_checks.ALL_CHECKS:
        check(rendering)
    names = {d["metadata"]["name"] for d in chart_checks.workloads(rendering, "worker")}
    assert names == {
        f"{chart_render.RELEASE}-tickwork-worker-{p['name']}" for p in values["workerPools"]
    }


def test_the_guides_extra_volumes_and_sidecar_render_securely(
    helm: chart_render.Helm,
) -> None:
    (values,) = [doc for doc in yaml_blocks() if "extraContainers" in doc.get("worker", {})]
    rendering = helm.render("guide-extras", {**chart_render.QUICK_START, **values})
    # The other checks are about the chart's own container of each pod.
    chart_checks.check_security_contexts(rendering)
    chart_checks.validate_offline(rendering)
    (worker,) = [
        d for d in rendering.of_kind("Deployment") if d["metadata"]["name"].endswith("-worker")
    ]
    names = [c["name"] for c in worker["spec"]["template"]["spec"]["containers"]]
    assert names == ["worker", "sql-proxy"]
