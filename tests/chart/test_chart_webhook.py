"""The admission webhook as the chart ships it: its own ValidatingWebhookConfiguration
(CREATE and UPDATE of schedules, at the path and name the operator serves), the CA from
cert-manager or from values, and an operator with no RBAC on webhook configurations at all;
with the container access review (on by default), create on subjectaccessreviews."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart import chart_render
from tests.chart.chart_render import NAMESPACE, Helm, Rendering
from tickwork.operator import webhook

OPERATOR_CLUSTER_RULES = [
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": ["tickwork.io"],
        "resources": ["tenantpolicies"],
        "verbs": ["get", "list", "watch"],
    },
]
ACCESS_REVIEW_RULE = {
    "apiGroups": ["authorization.k8s.io"],
    "resources": ["subjectaccessreviews"],
    "verbs": ["create"],
}
OPERATOR_NAMESPACED_RULES = [
    {
        "apiGroups": ["tickwork.io"],
        "resources": ["schedules"],
        "verbs": ["get", "list", "watch", "patch", "update"],
    },
    {
        "apiGroups": ["tickwork.io"],
        "resources": ["schedules/status"],
        "verbs": ["get", "patch", "update"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
]


def configuration(rendering: Rendering) -> dict[str, Any]:
    (found,) = rendering.of_kind("ValidatingWebhookConfiguration")
    return found


def test_the_operator_gets_exactly_its_rules_and_none_on_webhook_configurations(
    rendered: dict[str, Rendering],
) -> None:
    clusterwide = rendered["webhook"].one("ClusterRole")
    assert clusterwide["rules"] == [
        *OPERATOR_CLUSTER_RULES,
        ACCESS_REVIEW_RULE,
        *OPERATOR_NAMESPACED_RULES,
        {
            "apiGroups": ["kopf.dev"],
            "resources": ["clusterkopfpeerings"],
            "verbs": ["get", "list", "watch", "patch"],
        },
    ]
    namespaced = rendered["namespaced"]
    assert namespaced.one("ClusterRole")["rules"] == [*OPERATOR_CLUSTER_RULES, ACCESS_REVIEW_RULE]
    assert rendered["defaults"].one("ClusterRole")["rules"][: len(OPERATOR_CLUSTER_RULES) + 1] == [
        *OPERATOR_CLUSTER_RULES,
        OPERATOR_NAMESPACED_RULES[0],
    ], "no webhook, no access review"
    for role in namespaced.of_kind("Role"):
        assert role["rules"] == [
            *OPERATOR_NAMESPACED_RULES,
            {
                "apiGroups": ["kopf.dev"],
                "resources": ["kopfpeerings"],
                "verbs": ["get", "list", "watch", "patch"],
            },
        ]


def test_the_configuration_sends_only_create_and_update_to_the_operators_path(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["webhook"]
    (hook,) = configuration(r)["webhooks"]
    assert hook["name"] == webhook.WEBHOOK_NAME
    assert hook["rules"] == [
        {
            "apiGroups": ["tickwork.io"],
            "apiVersions": ["v1"],
            "resources": ["schedules"],
            "operations": list(webhook.OPERATIONS),
            "scope": "Namespaced",
        }
    ]
    assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"]) == (
        "Fail",
        "None",
        10,
    )
    (service,) = [s for s in r.of_kind("Service") if s["metadata"]["name"].endswith("-webhook")]
    assert hook["clientConfig"] == {
        "service": {
            "name": service["metadata"]["name"],
            "namespace": NAMESPACE,
            "port": 9443,
            "path": f"/{webhook.HANDLER_ID}",
        },
        "caBundle": chart_render.CA_BUNDLE,
    }
    assert "namespaceSelector" not in hook, "a clusterwide operator validates every namespace"
    assert "annotations" not in configuration(r)["metadata"]


def test_cert_manager_issues_the_certificate_and_injects_its_ca(
    rendered: dict[str, Rendering],
) -> None:
    r = rendered["namespaced"]
    certificate, issuer = r.one("Certificate"), r.one("Issuer")
    name = certificate["metadata"]["name"]
    config = configuration(r)
    assert config["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NAMESPACE}/{name}"
    }
    (hook,) = config["webhooks"]
    assert "caBundle" not in hook["clientConfig"]
    service = hook["clientConfig"]["service"]["name"]
    assert f"{service}.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": issuer["metadata"]["name"],
    }
    assert issuer["spec"] == {"selfSigned": {}}
    volumes = r.one("Deployment", "operator")["spec"]["template"]["spec"]["volumes"]
    secret = {"name": "webhook-tls", "secret": {"secretName": certificate["spec"]["secretName"]}}
    assert secret in volumes
    assert hook["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
        ]
    }, "only the namespaces the operator watches"


def test_a_given_issuer_signs_and_no_issuer_is_made(helm: Helm) -> None:
    issuer = {"kind": "ClusterIssuer", "name": "internal-ca"}
    values = {
        **chart_render.QUICK_START,
        "webhook": {
            "enabled": True,
            "failurePolicy": "Ignore",
            "certManager": {"enabled": True, "issuerRef": issuer},
        },
    }
    r = helm.render("issuer", values)
    assert r.one("Certificate")["spec"]["issuerRef"] == issuer
    assert not r.of_kind("Issuer")
    assert configuration(r)["webhooks"][0]["failurePolicy"] == "Ignore"


@pytest.mark.parametrize("case", ["defaults", "monitoring"])
def test_without_the_webhook_there_is_no_configuration(
    rendered: dict[str, Rendering], case: str
) -> None:
    assert not rendered[case].of_kind("ValidatingWebhookConfiguration")
    assert not rendered[case].of_kind("Certificate")


def operator_args(r: Rendering) -> list[str]:
    args: list[str] = r.one("Deployment", "operator")["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    return args


def test_the_container_access_review_is_on_by_default_and_can_be_turned_off(
    helm: Helm, rendered: dict[str, Rendering]
) -> None:
    """On: the operator asks (no skip flag) and may create SubjectAccessReviews. Off: it is told
    to skip the review and gets no right to ask."""
    assert "--webhook-skip-access-review" not in operator_args(rendered["webhook"])
    values = chart_render.MATRIX["webhook"]
    off = helm.render(
        "no-access-review",
        {**values, "webhook": {**values["webhook"], "containerAccessReview": False}},
    )
    assert "--webhook-skip-access-review" in operator_args(off)
    assert ACCESS_REVIEW_RULE not in off.one("ClusterRole")["rules"]
