"""The checks can fail: each one, given a good rendering broken in the way it guards
against, raises. (A check that passes everything would make the matrix tests worthless.)"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.chart import chart_checks, chart_render
from tests.chart.chart_render import Document, Rendering, component_of

Break = Callable[[Rendering], None]


def worker_pod(r: Rendering) -> dict[str, Any]:
    return r.one("Deployment", "worker")["spec"]["template"]["spec"]


def worker_container(r: Rendering) -> dict[str, Any]:
    return worker_pod(r)["containers"][0]


def set_env(r: Rendering, name: str, value: str) -> None:
    for variable in worker_container(r)["env"]:
        if variable["name"] == name:
            variable.clear()
            variable.update({"name": name, "value": value})


def add(r: Rendering, obj: dict[str, Any]) -> None:
    r.documents.append(Document("test", "", obj))


def writable_root(r: Rendering) -> None:
    worker_container(r)["securityContext"]["readOnlyRootFilesystem"] = False


def root_user(r: Rendering) -> None:
    r.one("Job")["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 0


def capabilities_kept(r: Rendering) -> None:
    del r.one("Deployment", "operator")["spec"]["template"]["spec"]["containers"][0][
        "securityContext"
    ]["capabilities"]


def url_in_env(r: Rendering) -> None:
    set_env(r, "TICKWORK_DATABASE_URL", chart_render.QUICK_URL)


def url_in_config_map(r: Rendering) -> None:
    add(
        r,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings"},
            "data": {"url": "postgresql://app:hunter2@db/app"},
        },
    )


def readiness_on_healthz(r: Rendering) -> None:
    worker_container(r)["readinessProbe"]["httpGet"]["path"] = "/healthz"


def probes_on_another_port(r: Rendering) -> None:
    set_env(r, "TICKWORK_HTTP_PORT", "8080")


def short_grace(r: Rendering) -> None:
    worker_pod(r)["terminationGracePeriodSeconds"] = 30


def secret_not_a_hook(r: Rendering) -> None:
    del r.one("Secret")["metadata"]["annotations"]


def migration_not_a_hook(r: Rendering) -> None:
    r.one("Job")["metadata"]["annotations"]["helm.sh/hook"] = "post-install"


def unknown_field(r: Rendering) -> None:
    worker_pod(r)["containers"][0]["livenessProbe"]["httpGet"]["paht"] = "/healthz"


def wrong_type(r: Rendering) -> None:
    r.one("Deployment", "worker")["spec"]["replicas"] = "2"


def both_scalers(r: Rendering) -> None:
    add(
        r,
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {"name": "w"},
            "spec": {"scaleTargetRef": {"name": "w"}, "triggers": []},
        },
    )
    add(
        r,
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "w"},
            "spec": {"scaleTargetRef": {"name": "w"}, "minReplicas": 1, "maxReplicas": 2},
        },
    )


def worker_bound(r: Rendering) -> None:
    add(
        r,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "w"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "x",
            },
            "subjects": [
                {
                    "kind": "ServiceAccount",
                    "name": worker_pod(r)["serviceAccountName"],
                    "namespace": "n",
                }
            ],
        },
    )


def recreated_operator(r: Rendering) -> None:
    r.one("Deployment", "operator")["spec"]["strategy"] = {"type": "Recreate"}


def operator_unbudgeted(r: Rendering) -> None:
    r.documents = [
        d
        for d in r.documents
        if d.kind != "PodDisruptionBudget" or component_of(d.obj) != "operator"
    ]


def operators_on_one_node(r: Rendering) -> None:
    del r.one("Deployment", "operator")["spec"]["template"]["spec"]["affinity"]


def peering_missing(r: Rendering) -> None:
    r.documents = [d for d in r.documents if d.kind != "ClusterKopfPeering"]


def selector_mismatch(r: Rendering) -> None:
    r.one("Service", "worker")["spec"]["selector"]["app.kubernetes.io/component"] = "workers"


CASES: list[tuple[str, Break, Callable[..., None]]] = [
    ("defaults", writable_root, chart_checks.check_security_contexts),
    ("defaults", root_user, chart_checks.check_security_contexts),
    ("defaults", capabilities_kept, chart_checks.check_security_contexts),
    ("defaults", url_in_env, chart_checks.check_no_plaintext_secret),
    ("existing-secret", url_in_config_map, chart_checks.check_no_plaintext_secret),
    ("defaults", readiness_on_healthz, chart_checks.check_probes),
    ("defaults", probes_on_another_port, chart_checks.check_probes),
    ("defaults", short_grace, chart_checks.check_termination_grace),
    ("defaults", secret_not_a_hook, chart_checks.check_migration_hook),
    ("defaults", migration_not_a_hook, chart_checks.check_migration_hook),
    ("defaults", unknown_field, chart_checks.validate_offline),
    ("defaults", wrong_type, chart_checks.validate_offline),
    ("hpa", both_scalers, chart_checks.check_autoscaling),
    ("defaults", worker_bound, chart_checks.check_worker_has_no_api_access),
    ("defaults", recreated_operator, chart_checks.check_operator),
    ("defaults", operator_unbudgeted, chart_checks.check_operator),
    ("defaults", operators_on_one_node, chart_checks.check_operator),
    ("defaults", peering_missing, chart_checks.check_operator),
    ("defaults", selector_mismatch, chart_checks.check_selectors),
]


@pytest.mark.parametrize(
    ("case", "breaking", "check"), CASES, ids=[f"{c[2].__name__}-{c[1].__name__}" for c in CASES]
)
def test_a_broken_rendering_is_caught(
    rendered: dict[str, Rendering], case: str, breaking: Break, check: Callable[..., None]
) -> None:
    good = rendered[case]
    args = (chart_render.SECRET_MARKERS,) if check is chart_checks.check_no_plaintext_secret else ()
    if check is not chart_checks.validate_offline:
        check(good, *args)
    broken = copy.deepcopy(good)
    breaking(broken)
    for document in broken.documents:
        document.text = yaml.safe_dump(document.obj)
    # validate_offline names the object at fault: the broken worker, nothing else.
    match = "Deployment/tw-tickwork-worker" if check is chart_checks.validate_offline else None
    with pytest.raises(AssertionError, match=match):
        check(broken, *args)


def test_keda_scaling_to_zero_must_count_schedules(rendered: dict[str, Rendering]) -> None:
    broken = copy.deepcopy(rendered["keda"])
    (trigger,) = broken.one("ScaledObject")["spec"]["triggers"]
    trigger["metadata"]["query"] = "SELECT count(*) FROM tickwork.jobs WHERE status = 'available'"
    with pytest.raises(AssertionError, match="does not count due schedules"):
        chart_checks.check_autoscaling(broken)
