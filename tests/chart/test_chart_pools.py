"""Worker pools (``workerPools``): each pool is its own Deployment with its own namespaces,
queues, ServiceAccount, secrets, resources, probes, autoscaler and PodDisruptionBudget, and
selects only its own pods; a pool without a name or with a taken name is refused with a
sentence. Without ``workerPools``, ``worker:`` renders exactly what it rendered before pools
existed (``single_pool_golden.yaml``, rendered from the chart before the change)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart import chart_checks
from tests.chart.chart_render import (
    CHART,
    MATRIX,
    NAMESPACE,
    QUICK_START,
    RELEASE,
    Helm,
    Rendering,
    component_of,
)

GOLDEN = yaml.safe_load((Path(__file__).parent / "single_pool_golden.yaml").read_text())
BILLING = "tw-tickwork-worker-billing"
REPORTS = "tw-tickwork-worker-reports"
VARYING_LABELS = ("helm.sh/chart", "app.kubernetes.io/version")
"""Labels that follow the chart's version and appVersion, not the templates."""


def _steady(obj: Any) -> Any:
    """``obj`` without the labels that change with each chart version, and its image tag."""
    if isinstance(obj, dict):
        return {
            key: "<image>" if key == "image" else _steady(value)
            for key, value in obj.items()
            if key not in VARYING_LABELS
        }
    if isinstance(obj, list):
        return [_steady(item) for item in obj]
    return obj


def _worker_objects(rendering: Rendering) -> list[Any]:
    found = [d.obj for d in rendering.documents if (component_of(d.obj) or "").startswith("worker")]
    return sorted(map(_steady, found), key=lambda o: (o["kind"], o["metadata"]["name"]))


@pytest.mark.parametrize("case", sorted(GOLDEN["values"]))
def test_single_pool_values_render_exactly_as_before(helm: Helm, case: str) -> None:
    rendering = helm.render(case, GOLDEN["values"][case])
    before = sorted(
        map(_steady, GOLDEN["objects"][case]), key=lambda o: (o["kind"], o["metadata"]["name"])
    )
    assert _worker_objects(rendering) == before


def _by_name(rendering: Rendering, kind: str) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in rendering.of_kind(kind)}


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_each_pool_runs_its_own_namespaces_queues_account_and_secrets(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["pools"]
    workers = {
        name: obj
        for name, obj in _by_name(r, "Deployment").items()
        if component_of(obj) == "worker"
    }
    assert set(workers) == {BILLING, REPORTS}, "no default pool besides the listed ones"
    billing, reports = _container(workers[BILLING]), _container(workers[REPORTS])
    env = chart_checks.env_of(billing)
    assert env["TICKWORK_NAMESPACES"]["value"] == "billing"
    assert env["TICKWORK_QUEUES"]["value"] == "billing,invoices"
    assert env["TICKWORK_APP"]["value"] == "billing.tasks:app"
    assert env["STRIPE_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "billing-stripe",
        "key": "key",
    }
    assert billing["envFrom"] == [{"secretRef": {"name": "billing-secrets"}}]
    env = chart_checks.env_of(reports)
    assert env["TICKWORK_NAMESPACES"]["value"] == "reports,reports-eu"
    assert env["TICKWORK_QUEUES"]["value"] == "reports"
    assert env["TICKWORK_APP"]["value"] == "tickwork.examples:app", "inherited from worker"
    assert "STRIPE_KEY" not in env
    assert reports["envFrom"] == [{"secretRef": {"name": "reports-secrets"}}]
    # Maps merge over worker's: billing's own cpu request, worker's memory request.
    assert billing["resources"] == {
        "requests": {"cpu": "500m", "memory": "192Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert reports["resources"]["limits"] == {"memory": "512Mi"}
    assert billing["livenessProbe"]["periodSeconds"] == 30
    assert billing["livenessProbe"]["timeoutSeconds"] == 5
    assert reports["livenessProbe"]["periodSeconds"] == 20

    pod = {name: w["spec"]["template"]["spec"] for name, w in workers.items()}
    assert pod[BILLING]["serviceAccountName"] == BILLING
    assert pod[REPORTS]["serviceAccountName"] == "reports-tasks"
    accounts = _by_name(r, "ServiceAccount")
    assert accounts[BILLING]["metadata"]["annotations"] == {"iam.example/role": "billing"}
    assert "reports-tasks" not in accounts, "create: false — the team brings its own"
    assert "tw-tickwork-worker" not in accounts


def test_each_pool_selects_only_its_own_pods(rendered: dict[str, Rendering]) -> None:
    r = rendered["pools"]
    deployments = _by_name(r, "Deployment")
    labels = {
        n: deployments[n]["spec"]["template"]["metadata"]["labels"] for n in (BILLING, REPORTS)
    }
    for name, other in ((BILLING, REPORTS), (REPORTS, BILLING)):
        selector = deployments[name]["spec"]["selector"]["matchLabels"]
        assert selector["tickwork.io/worker-pool"] == name.rsplit("-", 1)[1]
        assert selector.items() <= labels[name].items()
        assert not selector.items() <= labels[other].items(), f"{name} selects {other}'s pods"
    # reports turned its own off
    (pdb,) = [b for b in r.of_kind("PodDisruptionBudget") if component_of(b) == "worker"]
    assert pdb["metadata"]["name"] == BILLING
    assert pdb["spec"]["maxUnavailable"] == "50%"
    assert pdb["spec"]["selector"] == deployments[BILLING]["spec"]["selector"]
    (service,) = [s for s in r.of_kind("Service") if component_of(s) == "worker"]
    for name in (BILLING, REPORTS):  # one metrics Service, both pools scraped
        assert service["spec"]["selector"].items() <= labels[name].items()


def test_each_pool_scales_its_own_way(rendered: dict[str, Rendering]) -> None:
    r = rendered["pools"]
    deployments = _by_name(r, "Deployment")
    (hpa,) = r.of_kind("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == REPORTS
    assert hpa["spec"]["maxReplicas"] == 3
    assert hpa["spec"]["minReplicas"] == 1, "from the top-level autoscaling"
    (external,) = [m for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    (selector,) = external["external"]["metric"]["selector"]["matchExpressions"]
    assert selector == {"key": "queue", "operator": "In", "values": ["reports"]}
    (scaled,) = r.of_kind("ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == BILLING
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (0, 4)
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["authenticationRef"]["name"] == BILLING
    assert [t["metadata"]["name"] for t in r.of_kind("TriggerAuthentication")] == [BILLING]
    for name in (BILLING, REPORTS):
        assert "replicas" not in deployments[name]["spec"], f"{name}: its scaler owns replicas"


@pytest.mark.parametrize(
    ("pools", "message"),
    [
        pytest.param(
            [{"name": "billing"}, {"queues": ["reports"]}],
            "workerPools[1] has no name: every worker pool needs a name",
            id="no-name",
        ),
        pytest.param(
            [{"name": "billing"}, {"name": "reports"}, {"name": "billing"}],
            'workerPools[2] is named "billing" like workerPools[0]: pool names must be unique',
            id="duplicate-name",
        ),
        pytest.param(
            [{"name": "billing", "keda": {"enabled": True}}],
            "tw-tickwork-worker-billing: autoscaling.enabled and keda.enabled are mutually "
            "exclusive",
            id="pool-with-hpa-and-keda",
        ),
    ],
)
def test_wrong_pools_are_refused_with_a_sentence(
    helm: Helm, tmp_path: Path, pools: list[dict[str, Any]], message: str
) -> None:
    values = {**QUICK_START, "workerPools": pools, "autoscaling": {"enabled": True}}
    result = helm.template(values, tmp_path)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_a_disabled_pool_and_disabled_workers_render_no_worker(helm: Helm) -> None:
    pools = [{"name": "billing", "enabled": False}, {"name": "reports"}]
    r = helm.render("one-pool-off", {**QUICK_START, "workerPools": pools})
    assert [d["metadata"]["name"] for d in chart_checks.workloads(r, "worker")] == [REPORTS]
    off = {**QUICK_START, "workerPools": pools, "worker": {"enabled": False}}
    r = helm.render("workers-off", off)
    assert not [d for d in r.documents if (component_of(d.obj) or "").startswith("worker")]


def test_the_notes_tell_each_pool(helm: Helm, tmp_path: Path) -> None:
    result = helm.run(
        "install",
        RELEASE,
        str(CHART),
        "--dry-run=client",
        "--namespace",
        NAMESPACE,
        values=MATRIX["pools"],
        tmp=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert (
        f"Pool {BILLING}: fires the schedules of billing; claims queues billing, invoices;"
        " KEDA, 0 to 4 replicas." in notes
    )
    assert (
        f"Pool {REPORTS}: fires the schedules of reports, reports-eu; claims queues reports;"
        " HPA, 1 to 3 replicas." in notes
    )
    assert f"logs deploy/{BILLING} --follow" in notes
