"""What a deployment adds to the chart's pods: extra environment, volumes, mounts and sidecar
containers for the operator, the workers and each worker pool; and a migration Job connecting
with a Secret of its own."""

from __future__ import annotations

from typing import Any

from tests.chart import chart_checks, chart_render
from tests.chart.chart_render import Helm

VOLUME = {"name": "db-ca", "secret": {"secretName": "db-ca"}}
MOUNT = {"name": "db-ca", "mountPath": "/etc/db-ca", "readOnly": True}
SIDECAR = {"name": "sql-proxy", "image": "proxy.example/proxy:1", "args": ["--port=5432"]}
ENV = {"name": "PGSSLROOTCERT", "value": "/etc/db-ca/ca.crt"}
EXTRAS = {
    "extraEnv": [ENV],
    "extraVolumes": [VOLUME],
    "extraVolumeMounts": [MOUNT],
    "extraContainers": [SIDECAR],
}


def pod(deployment: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def assert_extras(deployment: dict[str, Any], main: str) -> None:
    spec = pod(deployment)
    containers = {c["name"]: c for c in spec["containers"]}
    assert list(containers) == [main, "sql-proxy"]
    assert containers["sql-proxy"] == SIDECAR
    assert ENV in containers[main]["env"]
    assert containers[main]["volumeMounts"][-1] == MOUNT
    assert {"name": "tmp", "mountPath": "/tmp"} in containers[main]["volumeMounts"]
    assert spec["volumes"][-1] == VOLUME


def test_the_operator_and_the_workers_take_extra_volumes_mounts_and_sidecars(helm: Helm) -> None:
    values = {**chart_render.QUICK_START, "operator": EXTRAS, "worker": EXTRAS}
    r = helm.render("extras", values)
    assert_extras(r.one("Deployment", "operator"), "operator")
    assert_extras(r.one("Deployment", "worker"), "worker")
    chart_checks.validate_offline(r)


def test_each_worker_pool_takes_its_own_extras(helm: Helm) -> None:
    values = {
        **chart_render.QUICK_START,
        "worker": {"extraContainers": [SIDECAR]},
        "workerPools": [{"name": "billing", **EXTRAS}, {"name": "reports"}],
    }
    r = helm.render("pool-extras", values)
    by_name = {d["metadata"]["name"]: d for d in r.of_kind("Deployment")}
    assert_extras(by_name["tw-tickwork-worker-billing"], "worker")
    reports = pod(by_name["tw-tickwork-worker-reports"])
    assert [c["name"] for c in reports["containers"]] == ["worker", "sql-proxy"], "inherited"
    assert reports["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    chart_checks.validate_offline(r)


def database_secret(container: dict[str, Any]) -> dict[str, Any]:
    (env,) = [e for e in container["env"] if e["name"] == "TICKWORK_DATABASE_URL"]
    ref: dict[str, Any] = env["valueFrom"]["secretKeyRef"]
    return ref


def test_the_migration_may_connect_with_its_own_secret(helm: Helm) -> None:
    owner = {"existingSecret": "tickwork-owner", "existingSecretKey": "uri"}
    values = {**chart_render.EXISTING_SECRET, "migrations": {"database": owner}}
    r = helm.render("migration-secret", values)
    (migrate,) = r.one("Job", "migrate")["spec"]["template"]["spec"]["containers"]
    assert database_secret(migrate) == {"name": "tickwork-owner", "key": "uri"}
    for component in ("operator", "worker"):
        (container, *_) = pod(r.one("Deployment", component))["containers"]
        assert database_secret(container) == {"name": "app-db", "key": "uri"}


def test_by_default_the_migration_uses_the_database_secret(helm: Helm) -> None:
    r = helm.render("migration-default", chart_render.EXISTING_SECRET)
    (migrate,) = r.one("Job", "migrate")["spec"]["template"]["spec"]["containers"]
    assert database_secret(migrate) == {"name": "app-db", "key": "uri"}
