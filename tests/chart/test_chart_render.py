"""The chart rendered for a matrix of values (defaults; HPA; KEDA; monitoring on; an existing
Secret; the webhook on; an operator restricted to namespaces with NetworkPolicies): every
object validated offline and checked, then what each case is for."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart import chart_checks, chart_render
from tests.chart.chart_render import (
    CHART,
    MATRIX,
    NAMESPACE,
    SECRET_MARKERS,
    Helm,
    Rendering,
    component_of,
)
from tests.support import binaries

CHECKS = {check.__name__: check for check in chart_checks.ALL_CHECKS}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_every_rendering_passes(rendering: Rendering, check: str) -> None:
    CHECKS[check](rendering)


def test_no_secret_in_plain_text(rendering: Rendering) -> None:
    chart_checks.check_no_plaintext_secret(rendering, SECRET_MARKERS)


def test_the_matrix_is_what_the_issue_asks_for() -> None:
    assert {"defaults", "hpa", "keda", "monitoring", "existing-secret", "webhook"} <= set(MATRIX)


# --- defaults ------------------------------------------------------------------------------


def test_defaults_run_an_operator_and_two_workers(rendered: dict[str, Rendering]) -> None:
    r = rendered["defaults"]
    kinds = sorted(d.kind for d in r.documents)
    assert kinds.count("Deployment") == 2
    worker = r.one("Deployment", "worker")
    assert worker["spec"]["replicas"] == 2
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert container["image"] == f"ghcr.io/tickwork/tickwork:{app_version}", "appVersion is the tag"
    assert container["args"] == ["worker"]
    env = chart_checks.env_of(container)
    assert env["TICKWORK_APP"]["value"] == "tickwork.examples:app"
    assert env["TICKWORK_NAMESPACES"]["value"] == "default"
    assert env["TICKWORK_CONCURRENCY"]["value"] == "10"
    assert "TICKWORK_QUEUES" not in env, "no queues given: the worker's own default"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    spread = worker["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    }
    assert r.one("PodDisruptionBudget", "worker")["spec"]["maxUnavailable"] == 1
    assert not r.of_kind("HorizontalPodAutoscaler") and not r.of_kind("ScaledObject")
    assert not r.of_kind("ServiceMonitor") and not r.of_kind("PrometheusRule")
    assert not r.of_kind("NetworkPolicy") and not r.of_kind("ValidatingWebhookConfiguration")


def test_the_quick_start_secret_is_a_hook_that_precedes_the_migration(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["defaults"]
    secret = r.one("Secret")
    assert base64.b64decode(secret["data"]["url"]).decode() == chart_render.QUICK_URL
    annotations = secret["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    job = r.one("Job")
    assert int(annotations["helm.sh/hook-weight"]) < int(
        job["metadata"]["annotations"]["helm.sh/hook-weight"]
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod, "hooks run before the chart's ServiceAccounts exist"
    ref = pod["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": secret["metadata"]["name"], "key": "url"}


def test_the_operator_is_one_recreated_replica_in_a_peering(rendered: dict[str, Rendering]) -> None:
    r = rendered["defaults"]
    operator = r.one("Deployment", "operator")
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["operator", "--cluster-name=default", "--peering=tickwork"]
    assert not any(a.startswith("--namespace") for a in args), "all namespaces by default"
    assert r.one("ClusterKopfPeering")["metadata"]["name"] == "tickwork"
    (role,) = r.of_kind("ClusterRole")
    rules = {
        (g, res): set(rule["verbs"])
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for res in rule["resources"]
    }
    assert rules == {
        ("tickwork.io", "schedules"): {"get", "list", "watch", "patch", "update"},
        ("tickwork.io", "schedules/status"): {"get", "patch", "update"},
        ("", "events"): {"create", "patch"},
        ("events.k8s.io", "events"): {"create", "patch"},
        ("", "namespaces"): {"get", "list", "watch"},
        ("tickwork.io", "tenantpolicies"): {"get", "list", "watch"},
        ("apiextensions.k8s.io", "customresourcedefinitions"): {"get", "list", "watch"},
        ("kopf.dev", "clusterkopfpeerings"): {"get", "list", "watch", "patch"},
    }, "exactly the operator's RBAC, nothing for webhooks while the webhook is off"


def test_own_topology_spread_constraints_select_the_workers(helm: Helm) -> None:
    constraint = {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}
    values = {**chart_render.QUICK_START, "worker": {"topologySpreadConstraints": [constraint]}}
    r = helm.render("spread", values)
    (rendered,) = r.one("Deployment", "worker")["spec"]["template"]["spec"][
        "topologySpreadConstraints"
    ]
    selector = rendered.pop("labelSelector")["matchLabels"]
    assert rendered == constraint
    assert selector["app.kubernetes.io/component"] == "worker"
    chart_checks.validate_offline(r)


def test_standalone_operator_needs_no_peering(helm: Helm) -> None:
    standalone = {"replicas": 1, "peering": {"enabled": False}}
    r = helm.render("standalone", {**chart_render.QUICK_START, "operator": standalone})
    operator = r.one("Deployment", "operator")
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--standalone" in args and not any(a.startswith("--peering") for a in args)
    assert operator["spec"]["replicas"] == 1
    assert operator["spec"]["strategy"] == {"type": "Recreate"}
    assert not r.of_kind("ClusterKopfPeering") and not r.of_kind("KopfPeering")
    assert not [b for b in r.of_kind("PodDisruptionBudget") if component_of(b) == "operator"]
    role = r.one("ClusterRole")
    assert not any("kopf.dev" in rule["apiGroups"] for rule in role["rules"])
    chart_checks.check_operator(r)


def test_standalone_operators_cannot_be_replicated(helm: Helm, tmp_path: Path) -> None:
    values = {**chart_render.QUICK_START, "operator": {"peering": {"enabled": False}}}
    result = helm.template(values, tmp_path)
    assert result.returncode != 0
    assert "operator.replicas: 1 with operator.peering.enabled: false" in result.stderr


def test_two_operator_replicas_fail_over(rendered: dict[str, Rendering]) -> None:
    """The default: two replicas of one peering (one active, one standby), rolled one pod at a
    time with the new one first, at most one evicted at a time, preferably on two nodes, the
    webhook served by both (the Service selects every operator pod, ready or not)."""
    r = rendered["defaults"]
    operator = r.one("Deployment", "operator")
    assert operator["spec"]["replicas"] == 2
    assert operator["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    pod = operator["spec"]["template"]
    args = pod["spec"]["containers"][0]["args"]
    assert "--peering=tickwork" in args and "--peering-lifetime=10" in args
    assert not any(a.startswith("--identity") for a in args), "the pod's name is the identity"
    budget = r.one("PodDisruptionBudget", "operator")
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": operator["spec"]["selector"],
    }
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    selected = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
    assert selected == operator["spec"]["selector"]["matchLabels"]
    chart_checks.check_operator(r)


def test_an_operator_affinity_replaces_the_spread(helm: Helm) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}
                ]
            }
        }
    }
    values = {**chart_render.QUICK_START, "operator": {"affinity": affinity}}
    r = helm.render("operator-affinity", values)
    assert r.one("Deployment", "operator")["spec"]["template"]["spec"]["affinity"] == affinity
    one = {**chart_render.QUICK_START, "operator": {"replicas": 1}}
    r = helm.render("one-operator", one)
    assert "affinity" not in r.one("Deployment", "operator")["spec"]["template"]["spec"]
    assert not [b for b in r.of_kind("PodDisruptionBudget") if component_of(b) == "operator"]


# --- existing Secret ------------------------------------------------------------------------


def test_an_existing_secret_is_referenced_and_none_is_created(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["existing-secret"]
    assert not r.of_kind("Secret")
    for where, _, pod in chart_checks.pod_specs(r):
        for container in chart_checks.containers(pod):
            ref = chart_checks.env_of(container)["TICKWORK_DATABASE_URL"]["valueFrom"]
            assert ref["secretKeyRef"] == {"name": "app-db", "key": "uri"}, where


# --- HPA -------------------------------------------------------------------------------------


def test_hpa_scales_on_cpu_and_queue_backlog(rendered: dict[str, Rendering]) -> None:
    r = rendered["hpa"]
    hpa = r.one("HorizontalPodAutoscaler")
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 10
    metrics = {m["type"]: m for m in hpa["spec"]["metrics"]}
    assert metrics["Resource"]["resource"]["target"]["averageUtilization"] == 80
    external = metrics["External"]["external"]
    assert external["metric"]["name"] == "tickwork_fleet_oldest_due_job_age_seconds"
    assert external["metric"]["selector"]["matchExpressions"] == [
        {"key": "queue", "operator": "In", "values": ["default", "mail"]}
    ]
    assert not r.of_kind("ScaledObject")


# --- KEDA ------------------------------------------------------------------------------------


def test_keda_counts_due_jobs_and_due_schedules(rendered: dict[str, Rendering]) -> None:
    r = rendered["keda"]
    scaled = r.one("ScaledObject")
    assert scaled["spec"]["minReplicaCount"] == 0
    (trigger,) = scaled["spec"]["triggers"]
    query = trigger["metadata"]["query"]
    # What the function counts is proven against a migrated database: test_chart_keda_query.py.
    assert query == (
        "SELECT tickwork.keda_due_work(ARRAY['default','o''neil']::text[],"
        " ARRAY['billing','default']::text[], 90)"
    ), "the pool's queues and namespaces, quoted as SQL"
    assert trigger["metadata"]["targetQueryValue"] == "20"
    auth = r.one("TriggerAuthentication")
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    assert auth["spec"]["secretTargetRef"] == [
        {"parameter": "connection", "name": r.one("Secret")["metadata"]["name"], "key": "url"}
    ]
    assert not r.of_kind("HorizontalPodAutoscaler")


# --- monitoring ------------------------------------------------------------------------------


ALERT_FILES = sorted((CHART / "files" / "alerts").glob("*.yaml"))


def alert_names(rule: dict[str, Any]) -> list[str]:
    return [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]


def test_monitoring_scrapes_both_components(rendered: dict[str, Rendering]) -> None:
    r = rendered["monitoring"]
    monitor = r.one("ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [
        {
            "port": "http",
            "path": "/metrics",
            # no honorLabels: the scrape's namespace label is the pod's, ours is
            # schedule_namespace (CHANGELOG.md)
            "interval": "30s",
            "scrapeTimeout": "10s",
        }
    ]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}


def test_the_prometheus_rule_carries_every_alert_file(
    rendered: dict[str, Rendering], tmp_path: Path
) -> None:
    rule = rendered["monitoring"].one("PrometheusRule")
    expected = [
        r["alert"]
        for path in ALERT_FILES
        for g in yaml.safe_load(path.read_text())["groups"]
        for r in g["rules"]
    ]
    assert sorted(alert_names(rule)) == sorted(expected)
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    result = subprocess.run(
        [str(binaries.promtool()), "check", "rules", str(rules_file)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_disabled_alerts_are_left_out(helm: Helm) -> None:
    dropped = ALERT_FILES[0].stem
    values = {
        **chart_render.QUICK_START,
        "metrics": {"prometheusRule": {"enabled": True, "disabledAlerts": [dropped]}},
    }
    names = alert_names(helm.render("disabled-alert", values).one("PrometheusRule"))
    assert dropped not in names and len(names) == len(ALERT_FILES) - 1


def test_without_the_operator_its_absence_does_not_alert(helm: Helm) -> None:
    monitoring = {"prometheusRule": {"enabled": True, "disabledAlerts": ["TickworkNoWorkers"]}}
    values = {**chart_render.QUICK_START, "metrics": monitoring, "operator": {"enabled": False}}
    names = alert_names(helm.render("no-operator", values).one("PrometheusRule"))
    operator_alerts = {"TickworkOperatorDown", "TickworkNoActiveOperator"}
    assert not (operator_alerts | {"TickworkNoWorkers"}) & set(names)
    assert len(names) == len(ALERT_FILES) - 3
    with_operator = helm.render("operator", {**values, "operator": {"enabled": True}})
    assert operator_alerts <= set(alert_names(with_operator.one("PrometheusRule")))


def copy_chart(tmp_path: Path) -> Path:
    copy = tmp_path / "tickwork"
    shutil.copytree(CHART, copy)
    return copy


def render_chart(helm: Helm, chart: Path, values: dict[str, Any], tmp: Path) -> Rendering:
    values_file = tmp / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    result = subprocess.run(
        [str(helm.binary), "template", "tw", str(chart), "-f", str(values_file)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return chart_render.parse("copy", values, result.stdout)


def test_monitoring_renders_without_alert_or_dashboard_files(helm: Helm, tmp_path: Path) -> None:
    chart = copy_chart(tmp_path)
    shutil.rmtree(chart / "files")
    r = render_chart(helm, chart, MATRIX["monitoring"], tmp_path)
    assert not r.of_kind("PrometheusRule") and not r.of_kind("ConfigMap")
    assert r.of_kind("ServiceMonitor")


def test_the_dashboard_config_map_carries_the_json(helm: Helm, tmp_path: Path) -> None:
    chart = copy_chart(tmp_path)
    dashboards = chart / "files" / "dashboards"
    r = render_chart(helm, chart, MATRIX["monitoring"], tmp_path)
    config_map = r.one("ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    loaded = json.loads(config_map["data"]["tickwork.json"])
    assert loaded == json.loads((dashboards / "tickwork.json").read_text())
    chart_checks.validate_offline(r)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("groups: [unclosed\n", "files/alerts/Broken.yaml is not valid YAML"),
        ("rule_files: [x.yaml]\n", "files/alerts/Broken.yaml is not a Prometheus rules file"),
    ],
)
def test_a_broken_alert_file_fails_the_render_readably(
    helm: Helm, tmp_path: Path, content: str, message: str
) -> None:
    chart = copy_chart(tmp_path)
    (chart / "files" / "alerts").mkdir(parents=True, exist_ok=True)
    (chart / "files" / "alerts" / "Broken.yaml").write_text(content)
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(MATRIX["monitoring"]))
    result = subprocess.run(
        [str(helm.binary), "template", "tw", str(chart), "-f", str(values_file)],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert message in result.stderr


# --- webhook ---------------------------------------------------------------------------------


CERT_FLAGS = (("cert", "tls.crt"), ("key", "tls.key"))


def test_the_webhook_needs_a_tls_secret_and_its_ca(helm: Helm, tmp_path: Path) -> None:
    values = {**chart_render.EXISTING_SECRET, "webhook": {"enabled": True}}
    result = helm.template(values, tmp_path)
    assert result.returncode != 0
    assert "webhook.tlsSecret: the webhook needs a TLS Secret" in result.stderr
    values["webhook"]["tlsSecret"] = "webhook-tls"
    result = helm.template(values, tmp_path)
    assert result.returncode != 0
    assert "webhook.caBundle: the webhook configuration needs the base64 PEM" in result.stderr


def test_the_webhook_is_served_behind_a_service_with_its_own_certificate(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["webhook"]
    operator = r.one("Deployment", "operator")
    (container,) = operator["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert "--webhook" in args and "--webhook-port=9443" in args
    (service,) = [s for s in r.of_kind("Service") if s["metadata"]["name"].endswith("-webhook")]
    assert service["spec"]["ports"] == [
        {"name": "webhook", "port": 9443, "targetPort": "webhook", "protocol": "TCP"}
    ]
    assert service["spec"]["publishNotReadyAddresses"] is True, (
        "the operator's readiness asks the database; the webhook must answer without it"
    )
    assert {"name": "webhook", "containerPort": 9443, "protocol": "TCP"} in container["ports"]
    # --webhook needs a certificate: a TLS Secret (cert-manager's layout) is mounted and named
    # by flags.
    mount = "/etc/tickwork/webhook-tls"
    assert {f"--webhook-{f}-file={mount}/{k}" for f, k in CERT_FLAGS} <= set(args)
    assert {"name": "webhook-tls", "mountPath": mount, "readOnly": True} in container[
        "volumeMounts"
    ]
    volumes = operator["spec"]["template"]["spec"]["volumes"]
    assert {"name": "webhook-tls", "secret": {"secretName": "webhook-tls"}} in volumes
    assert not r.of_kind("Certificate") and not r.of_kind("Issuer")


# --- namespaced operator, NetworkPolicies --------------------------------------------------


def test_a_namespaced_operator_gets_roles_in_its_namespaces_only(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["namespaced"]
    args = r.one("Deployment", "operator")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args
    assert "--status-interval=30" in args
    roles = r.of_kind("Role")
    assert sorted(role["metadata"]["namespace"] for role in roles) == ["team-a", "team-b"]
    for role in roles:
        resources = {res for rule in role["rules"] for res in rule["resources"]}
        assert {"schedules", "schedules/status", "events", "kopfpeerings"} <= resources
    bindings = r.of_kind("RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    cluster_resources = {
        res
        for role in r.of_kind("ClusterRole")
        for rule in role["rules"]
        for res in rule["resources"]
    }
    assert "schedules" not in cluster_resources and "clusterkopfpeerings" not in cluster_resources
    assert "tenantpolicies" in cluster_resources, "TenantPolicies are cluster-scoped"
    peerings = r.of_kind("KopfPeering")
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["team-a", "team-b"]
    assert not r.of_kind("ClusterKopfPeering")
    worker = r.one("Deployment", "worker")
    assert worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 136


def test_network_policies_open_only_the_http_and_webhook_ports(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["namespaced"]
    policies = {chart_render.component_of(p): p for p in r.of_kind("NetworkPolicy")}
    assert set(policies) == {"operator", "worker", "migrate"}
    worker = policies["worker"]["spec"]
    assert worker["ingress"] == [
        {
            "ports": [{"port": "http", "protocol": "TCP"}],
            "from": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
        }
    ]
    assert worker["policyTypes"] == ["Ingress", "Egress"]
    assert {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 5432}]} in worker[
        "egress"
    ]
    operator_ports = [
        p["port"] for rule in policies["operator"]["spec"]["ingress"] for p in rule["ports"]
    ]
    assert operator_ports == ["http", "webhook"]
    assert policies["migrate"]["spec"]["ingress"] == []


# --- the CRDs --------------------------------------------------------------------------------


def test_the_chart_crds_are_the_top_level_crds() -> None:
    """One source: the chart's files/crds/ (tickwork's, templated) and crds/ (kopf's, Helm's
    install-only directory) hold together exactly the files of crds/, byte for byte."""
    top = chart_render.ROOT / "crds"
    templated, helms = CHART / "files" / "crds", CHART / "crds"
    names = sorted(p.name for p in top.iterdir() if p.is_file())
    ours = {p.name: p for d in (templated, helms) for p in d.iterdir() if p.is_file()}
    assert names == sorted(ours), "the chart's CRD files must be exactly those of crds/"
    assert sorted(p.name for p in templated.iterdir()) == [
        "schedules.tickwork.io.yaml",
        "tenantpolicies.tickwork.io.yaml",
    ]
    for name in names:
        assert ours[name].read_bytes() == (top / name).read_bytes(), f"{name} differs"


def test_the_crds_validate_offline(helm: Helm) -> None:
    r = helm.render("crds", chart_render.QUICK_START, "--include-crds")
    crds = r.of_kind("CustomResourceDefinition")
    assert "schedules.tickwork.io" in {c["metadata"]["name"] for c in crds}
    chart_checks.validate_offline(r)


def test_the_schedule_in_the_notes_is_valid(helm: Helm, tmp_path: Path) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(chart_render.QUICK_START))
    result = subprocess.run(
        [
            str(helm.binary),
            "install",
            "tw",
            str(CHART),
            "--dry-run=client",
            "--namespace",
            NAMESPACE,
            "-f",
            str(values_file),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    manifest = notes.split("<<'YAML'\n", 1)[1].split("YAML\n", 1)[0]
    schedule = yaml.safe_load("\n".join(line[3:] for line in manifest.splitlines()))
    assert schedule["kind"] == "Schedule"
    assert chart_checks.schedule_errors(schedule) == []
    assert "fire the schedules of these namespaces: default" in notes
