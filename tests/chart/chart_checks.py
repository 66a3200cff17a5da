"""Checks on a rendered chart. Each raises ``AssertionError`` naming the object at fault, so
the same function serves the matrix tests and the tests proving that a broken rendering is
caught."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from tests.chart.chart_render import CHART, Rendering, component_of

KUBERNETES_VERSION = "1.33.0"

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
HOOK = "helm.sh/hook"
HOOK_WEIGHT = "helm.sh/hook-weight"
HOOK_DELETE = "helm.sh/hook-delete-policy"
# user:password@ in a URL, or password=... in a keyword/value connection string.
CREDENTIALS = re.compile(r"://[^/\s:@\"']+:[^@\s\"']+@|\bpassword\s*=", re.IGNORECASE)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


# --- offline schema validation --------------------------------------------------------------


def openapi_to_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """A CRD's OpenAPI v3 schema as JSON Schema, as strict about unknown fields as the API
    server (``x-kubernetes-*`` extensions dropped; CEL rules are checked separately)."""
    out = {
        key: value
        for key, value in node.items()
        if not key.startswith("x-kubernetes-") and key not in ("nullable", "properties", "items")
    }
    if "properties" in node:
        out["properties"] = {k: openapi_to_json_schema(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            out.setdefault("additionalProperties", False)
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = openapi_to_json_schema(node["additionalProperties"])
    if "items" in node:
        out["items"] = openapi_to_json_schema(node["items"])
    if node.get("nullable") and "type" in node:
        out["type"] = [node["type"], "null"]
    if node.get("exclusiveMinimum") is True:
        out["exclusiveMinimum"] = out.pop("minimum")
    return out


CRD_DIRS = (CHART / "crds", CHART / "files" / "crds")
"""Helm's crds/ (kopf's peering CRDs) and the CRDs templates/crds.yaml renders."""


def chart_crds(crd_dirs: tuple[Path, ...] = CRD_DIRS) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> JSON Schema of every CRD version the chart installs."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(p for crd_dir in crd_dirs for p in crd_dir.glob("*.y*ml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                schema = version.get("schema", {}).get("openAPIV3Schema", {"type": "object"})
                root = openapi_to_json_schema(schema)
                # The API server accepts these on every object, listed or not.
                root.setdefault("properties", {}).update(
                    {"apiVersion": {"type": "string"}, "kind": {"type": "string"}}
                )
                root["properties"].setdefault("metadata", _METADATA)
                schemas[(f"{group}/{version['name']}", kind)] = root
    return schemas


_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string"}, "labels": _STRING_MAP, "annotations": _STRING_MAP},
}


def _resource(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": _METADATA,
            "spec": spec,
        },
    }


_DURATION = {"type": "string", "pattern": "^([0-9]+(ms|s|m|h|d|w|y))+$"}
_LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"matchLabels": _STRING_MAP, "matchExpressions": {"type": "array"}},
}

# Minimal, hand-written schemas of the third-party custom resources the chart renders
# (Prometheus Operator, cert-manager, KEDA): the fields the chart uses, their types, nothing
# unknown.
THIRD_PARTY_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _resource(
        {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": _LABEL_SELECTOR,
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "honorLabels": {"type": "boolean"},
                            "interval": _DURATION,
                            "scrapeTimeout": _DURATION,
                        },
                        "required": ["port"],
                    },
                },
            },
        }
    ),
    ("monitoring.coreos.com/v1", "PrometheusRule"): _resource(
        {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": _DURATION,
                            "rules": {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "additionalProperties": False,
                                    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"type": "string", "minLength": 1},
                                        "for": _DURATION,
                                        "keep_firing_for": _DURATION,
                                        "labels": _STRING_MAP,
                                        "annotations": _STRING_MAP,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        }
    ),
    ("cert-manager.io/v1", "Issuer"): _resource(
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {"selfSigned": {"type": "object", "additionalProperties": False}},
            "required": ["selfSigned"],
        }
    ),
    ("cert-manager.io/v1", "Certificate"): _resource(
        {
            "type": "object",
            "required": ["secretName", "dnsNames", "issuerRef"],
            "additionalProperties": False,
            "properties": {
                "secretName": {"type": "string", "minLength": 1},
                "dnsNames": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "duration": _DURATION,
                "renewBefore": _DURATION,
                "issuerRef": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "kind": {"enum": ["Issuer", "ClusterIssuer"]},
                        "group": {"type": "string"},
                    },
                },
            },
        }
    ),
    ("keda.sh/v1alpha1", "ScaledObject"): _resource(
        {
            "type": "object",
            "required": ["scaleTargetRef", "triggers"],
            "additionalProperties": False,
            "properties": {
                "scaleTargetRef": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "name": {"type": "string"},
                    },
                },
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": {"type": "integer", "minimum": 0},
                "triggers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["type", "metadata"],
                        "additionalProperties": False,
                        "properties": {
                            "type": {"type": "string"},
                            "name": {"type": "string"},
                            "metadata": _STRING_MAP,
                            "authenticationRef": {
                                "type": "object",
                                "required": ["name"],
                                "additionalProperties": False,
                                "properties": {
                                    "name": {"type": "string"},
                                    "kind": {"type": "string"},
                                },
                            },
                        },
                    },
                },
            },
        }
    ),
    ("keda.sh/v1alpha1", "TriggerAuthentication"): _resource(
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "secretTargetRef": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["parameter", "name", "key"],
                        "additionalProperties": False,
                        "properties": {
                            "parameter": {"type": "string"},
                            "name": {"type": "string"},
                            "key": {"type": "string"},
                        },
                    },
                }
            },
        }
    ),
}


def kubernetes_validate_errors(obj: dict[str, Any]) -> list[str]:
    """Errors of a built-in object against the Kubernetes API schemas (strict: unknown
    fields are errors); a kind without a schema is an error too."""
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return [
            f"no schema for {obj['apiVersion']} {obj['kind']}: a custom resource the chart "
            "renders needs its CRD in the chart or a schema in THIRD_PARTY_SCHEMAS"
        ]
    except kubernetes_validate.ValidationError as exc:
        return [str(exc)]
    return []


def validate_offline(rendering: Rendering) -> None:
    """Every object against the Kubernetes API schemas (kubernetes-validate, strict), the
    chart's own CRDs, or the third-party schemas above. A kind none of them knows fails."""
    crds = chart_crds()
    for document in rendering.documents:
        obj, where = document.obj, f"{rendering.case}: {document.kind}/{document.name}"
        key = (obj["apiVersion"], obj["kind"])
        schema = crds.get(key) or THIRD_PARTY_SCHEMAS.get(key)
        if schema is None:
            errors = kubernetes_validate_errors(obj)
            assert not errors, f"{where}: {errors}"
        else:
            errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(obj)]
            assert not errors, f"{where}: {errors}"
        name = document.name
        assert len(name) <= 63 and DNS_SUBDOMAIN.match(name), f"{where}: bad name {name!r}"
        if document.kind in ("Service", "Deployment", "Job"):
            assert DNS_LABEL.match(name), f"{where}: {name!r} is not a DNS label"


def schedule_errors(document: dict[str, Any]) -> list[str]:
    """A Schedule object's errors against the CRD's schema and its CEL rules."""
    schema = chart_crds()[("tickwork.io/v1", "Schedule")]
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(document)]
    spec = document.get("spec") or {}
    if ("schedule" in spec) == ("every" in spec):
        errors.append("set exactly one of spec.schedule or spec.every")
    return errors


# --- the rendered objects ------------------------------------------------------------------


def pod_specs(rendering: Rendering) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, workload object, pod spec) of every workload."""
    for obj in rendering.documents:
        if obj.kind in WORKLOAD_KINDS:
            yield (
                f"{rendering.case}: {obj.kind}/{obj.name}",
                obj.obj,
                obj.obj["spec"]["template"]["spec"],
            )


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def workloads(rendering: Rendering, component: str) -> list[dict[str, Any]]:
    """The component's workloads: one operator, a worker Deployment per worker pool."""
    return [
        d.obj
        for d in rendering.documents
        if d.kind in WORKLOAD_KINDS and component_of(d.obj) == component
    ]


def workload(rendering: Rendering, component: str) -> dict[str, Any] | None:
    found = workloads(rendering, component)
    assert len(found) <= 1, f"{rendering.case}: several {component} workloads"
    return found[0] if found else None


def check_security_contexts(rendering: Rendering) -> None:
    """Non-root, seccomp, no privilege escalation, read-only root filesystem, no
    capabilities, a writable /tmp, no host namespaces: every pod, every container."""
    seen = 0
    for where, _, pod in pod_specs(rendering):
        seen += 1
        psc = pod.get("securityContext") or {}
        assert psc.get("runAsNonRoot") is True, f"{where}: pod runAsNonRoot"
        assert (psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault", (
            f"{where}: seccomp"
        )
        assert psc.get("runAsUser") != 0, f"{where}: runs as root"
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            assert not pod.get(flag), f"{where}: {flag}"
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for container in containers(pod):
            at = f"{where} container {container['name']}"
            sc = container.get("securityContext") or {}
            assert sc.get("allowPrivilegeEscalation") is False, f"{at}: allowPrivilegeEscalation"
            assert sc.get("readOnlyRootFilesystem") is True, f"{at}: readOnlyRootFilesystem"
            assert not sc.get("privileged"), f"{at}: privileged"
            capabilities = sc.get("capabilities") or {}
            assert "ALL" in (capabilities.get("drop") or []), f"{at}: capabilities not dropped"
            assert not capabilities.get("add"), f"{at}: capabilities added"
            assert sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, f"{at}: runAsNonRoot"
            assert sc.get("runAsUser", psc.get("runAsUser")) != 0, f"{at}: runs as root"
            tmp = [m for m in container.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
            assert tmp and "emptyDir" in volumes[tmp[0]["name"]], f"{at}: no writable /tmp"
            assert container.get("resources", {}).get("requests"), f"{at}: no resource requests"
    assert seen, f"{rendering.case}: no workload rendered"


def http_port_setting(rendering: Rendering, component: str, container: dict[str, Any]) -> int:
    """The port the process is told to serve /metrics /healthz /readyz on."""
    if component == "operator":
        flags = [a for a in container.get("args", []) if a.startswith("--http-port=")]
        return int(flags[0].split("=", 1)[1]) if flags else 9090
    variable = env_of(container).get("TICKWORK_HTTP_PORT")
    return int(variable["value"]) if variable else 9090


def check_probes(rendering: Rendering) -> None:
    """Liveness on /healthz and readiness on /readyz, both on the port the process serves."""
    for component in ("operator", "worker"):
        for obj in workloads(rendering, component):
            where = f"{rendering.case}: {obj['metadata']['name']}"
            (container,) = obj["spec"]["template"]["spec"]["containers"]
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            served = http_port_setting(rendering, component, container)
            for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
                get = (container.get(probe) or {}).get("httpGet")
                assert get, f"{where}: no {probe}"
                assert get["path"] == path, f"{where}: {probe} asks {get['path']}, not {path}"
                port = ports.get(get["port"], get["port"])
                assert port == served, f"{where}: {probe} on port {port}, process serves {served}"


def check_migration_hook(rendering: Rendering) -> None:
    """`tickwork migrate` is a pre-install,pre-upgrade hook, and everything it needs that the
    chart renders is a hook of a lower weight (ordinary objects do not exist yet then)."""
    job = workload(rendering, "migrate")
    if not rendering.values.get("migrations", {}).get("enabled", True):
        assert job is None, f"{rendering.case}: migration Job rendered while disabled"
        return
    assert job is not None and job["kind"] == "Job", f"{rendering.case}: no migration Job"
    where = f"{rendering.case}: Job/{job['metadata']['name']}"
    annotations = job["metadata"].get("annotations") or {}
    assert set(annotations.get(HOOK, "").split(",")) == {"pre-install", "pre-upgrade"}, where
    weight = int(annotations[HOOK_WEIGHT])
    assert "before-hook-creation" in annotations.get(HOOK_DELETE, ""), f"{where}: delete policy"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["migrate"], f"{where}: runs {container['args']}"
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] >= 0, where
    needed = {("ServiceAccount", pod.get("serviceAccountName", "default"))}
    for variable in container.get("env", []):
        ref = (variable.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            needed.add(("Secret", ref["name"]))
    for document in rendering.documents:
        if (document.kind, document.name) in needed:
            dependency = document.obj["metadata"].get("annotations") or {}
            assert "pre-install" in dependency.get(HOOK, "") and "pre-upgrade" in dependency.get(
                HOOK, ""
            ), f"{where} needs {document.kind}/{document.name}, which is not a hook"
            assert int(dependency.get(HOOK_WEIGHT, "0")) < weight, (
                f"{where} needs {document.kind}/{document.name}, a hook of no lower weight"
            )
    for document in rendering.documents:
        if document.kind in ("Deployment", "StatefulSet", "DaemonSet"):
            assert HOOK not in (document.obj["metadata"].get("annotations") or {}), document.name


def check_no_plaintext_secret(rendering: Rendering, markers: tuple[str, ...]) -> None:
    """No credential anywhere but base64-encoded in the data of the chart's own Secret; the
    database URL reaches every container through a secretKeyRef only."""
    for document in rendering.documents:
        where = f"{rendering.case}: {document.kind}/{document.name}"
        if document.kind == "Secret":
            assert "stringData" not in document.obj, f"{where}: stringData is plain text"
            data = document.obj.get("data") or {}
            for value in data.values():
                base64.b64decode(value, validate=True)
            text = yaml.safe_dump({k: v for k, v in document.obj.items() if k != "data"})
        else:
            text = document.text
        for marker in markers:
            assert marker not in text, f"{where}: a secret value in plain text"
        assert not CREDENTIALS.search(text), f"{where}: credentials in plain text"
    for where, _, pod in pod_specs(rendering):
        for container in containers(pod):
            variable = env_of(container).get("TICKWORK_DATABASE_URL")
            assert variable is not None, f"{where}: no TICKWORK_DATABASE_URL"
            assert "value" not in variable, f"{where}: TICKWORK_DATABASE_URL given as a value"
            assert "secretKeyRef" in (variable.get("valueFrom") or {}), f"{where}: not a Secret"
            assert not any("database-url" in a for a in container.get("args", [])), where


def check_termination_grace(rendering: Rendering) -> None:
    """Kubernetes waits longer than the worker's own shutdown grace before killing it."""
    for obj in workloads(rendering, "worker"):
        pod = obj["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        variable = env_of(container).get("TICKWORK_SHUTDOWN_GRACE_SECONDS")
        grace = float(variable["value"]) if variable else 30.0
        pod_grace = pod.get("terminationGracePeriodSeconds", 30)
        where = f"{rendering.case}: {obj['metadata']['name']}"
        assert pod_grace > grace, f"{where}: pod grace {pod_grace}s <= worker grace {grace}s"


def check_autoscaling(rendering: Rendering) -> None:
    """Per worker Deployment (one per pool): HPA and KEDA never both; whichever runs owns the
    replica count; neither can leave the pool's schedules without a worker. Every scaler
    targets a worker Deployment."""
    hpas = rendering.of_kind("HorizontalPodAutoscaler")
    scaled = rendering.of_kind("ScaledObject")
    workers = {w["metadata"]["name"]: w for w in workloads(rendering, "worker")}
    for target in [*hpas, *scaled]:
        assert target["spec"]["scaleTargetRef"]["name"] in workers, rendering.case
    for name, worker in workers.items():
        where = f"{rendering.case}: {name}"
        mine = [t for t in [*hpas, *scaled] if t["spec"]["scaleTargetRef"]["name"] == name]
        assert len(mine) <= 1, f"{where}: several scalers (an HPA and a KEDA ScaledObject?)"
        if mine:
            assert "replicas" not in worker["spec"], f"{where}: replicas fights the scaler"
        for hpa in [t for t in mine if t["kind"] == "HorizontalPodAutoscaler"]:
            assert hpa["spec"]["minReplicas"] >= 1, f"{where}: HPA may leave no worker"
        for obj in [t for t in mine if t["kind"] == "ScaledObject"]:
            (trigger,) = obj["spec"]["triggers"]
            assert trigger["type"] == "postgresql"
            # tickwork.keda_due_work(queues, namespaces, lead seconds): see its migration.
            call = re.fullmatch(
                r"SELECT tickwork\.keda_due_work\((.+), (.+), (\d+)\)",
                trigger["metadata"]["query"],
            )
            (container,) = worker["spec"]["template"]["spec"]["containers"]
            namespaces = env_of(container)["TICKWORK_NAMESPACES"]["value"]
            if obj["spec"].get("minReplicaCount", 0) == 0 and namespaces:
                assert call and call.group(2) != "NULL", (
                    f"{where}: KEDA may scale to zero but does not count due schedules"
                )
            assert call, f"{where}: the KEDA query does not call tickwork.keda_due_work"


CONTAINER_JOB_RULES = [
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["create", "get", "list", "watch", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
]
"""All a pool running container jobs may do: the least the built-in task needs."""


def runs_container_jobs(worker: dict[str, Any]) -> bool:
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    return env_of(container).get("TICKWORK_CONTAINER_JOBS", {}).get("value") == "true"


def check_worker_has_no_api_access(rendering: Rendering) -> None:
    """Workers (of every pool) need no Kubernetes API: no token, no binding. A pool running
    container jobs: its token, and only namespaced Roles of exactly CONTAINER_JOB_RULES, one
    in each namespace it fires."""
    for worker in workloads(rendering, "worker"):
        pod = worker["spec"]["template"]["spec"]
        where = f"{rendering.case}: {worker['metadata']['name']}"
        containers_ = runs_container_jobs(worker)
        assert pod.get("automountServiceAccountToken") is containers_, f"{where}: worker token"
        account = pod["serviceAccountName"]
        bound = [
            binding
            for kind in ("RoleBinding", "ClusterRoleBinding")
            for binding in rendering.of_kind(kind)
            if any(subject["name"] == account for subject in binding.get("subjects", []))
        ]
        if not containers_:
            assert not bound, f"{where}: a binding gives the workers API access"
            continue
        (container,) = pod["containers"]
        served = set(env_of(container)["TICKWORK_NAMESPACES"]["value"].split(","))
        assert {b["kind"] for b in bound} == {"RoleBinding"}, f"{where}: {bound}"
        assert {b["metadata"]["namespace"] for b in bound} == served, where
        assert len(bound) == len(served), where
        roles = {
            (r["metadata"]["namespace"], r["metadata"]["name"]): r
            for r in rendering.of_kind("Role")
        }
        for binding in bound:
            assert binding["roleRef"]["kind"] == "Role", where
            role = roles[binding["metadata"]["namespace"], binding["roleRef"]["name"]]
            assert role["rules"] == CONTAINER_JOB_RULES, f"{where}: {role['rules']}"


def check_operator(rendering: Rendering) -> None:
    """The operator bound to its RBAC, joined to a peering that the chart creates, with a short
    peering lifetime, rolled one pod at a time (the new one first, as a standby), its replicas
    under a PodDisruptionBudget that lets one go; or standalone: one replica, replaced with
    Recreate."""
    obj = workload(rendering, "operator")
    if obj is None:
        return
    where = f"{rendering.case}: operator"
    pod = obj["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    replicas = obj["spec"]["replicas"]
    strategy = obj["spec"]["strategy"]
    if "--standalone" in args:
        assert replicas == 1, f"{where}: standalone operators cannot tell which one is active"
        assert strategy["type"] == "Recreate", where
    else:
        assert strategy["type"] == "RollingUpdate", f"{where}: {strategy}"
        assert strategy["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}, where
        lifetime = [int(a.split("=", 1)[1]) for a in args if a.startswith("--peering-lifetime=")]
        assert lifetime and lifetime[0] <= 10, f"{where}: takeover needs a short peering lifetime"
    if replicas > 1:
        labels = obj["spec"]["template"]["metadata"]["labels"]
        budgets = [
            b
            for b in rendering.of_kind("PodDisruptionBudget")
            if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
        ]
        assert len(budgets) == 1, f"{where}: {replicas} replicas and no PodDisruptionBudget"
        assert budgets[0]["spec"].get("maxUnavailable", 0) >= 1, f"{where}: {budgets[0]}"
        spread = pod.get("affinity", {}).get("podAntiAffinity", {})
        assert spread, f"{where}: {replicas} replicas may land on one node"
    pod = obj["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "operator", where
    bound = [
        b
        for kind in ("RoleBinding", "ClusterRoleBinding")
        for b in rendering.of_kind(kind)
        if any(s["name"] == pod["serviceAccountName"] for s in b["subjects"])
    ]
    assert bound, f"{where}: its ServiceAccount is bound to nothing"
    rules = [
        rule
        for kind in ("Role", "ClusterRole")
        for role in rendering.of_kind(kind)
        for rule in role["rules"]
    ]
    assert any("schedules" in r["resources"] and "watch" in r["verbs"] for r in rules), where
    peering = [a.split("=", 1)[1] for a in args if a.startswith("--peering=")]
    if peering:
        kinds = ("ClusterKopfPeering", "KopfPeering")
        objects = [o for kind in kinds for o in rendering.of_kind(kind)]
        assert objects and {o["metadata"]["name"] for o in objects} == set(peering), (
            f"{where}: --peering={peering[0]} but the chart creates no such peering object"
        )
    else:
        assert "--standalone" in args, f"{where}: neither --peering nor --standalone"


def check_selectors(rendering: Rendering) -> None:
    """Workloads select their own pods; Services, PDBs and the ServiceMonitor select
    something the chart renders, by ports that exist."""
    pods = []
    for where, obj, pod in pod_specs(rendering):
        labels = obj["spec"]["template"]["metadata"]["labels"]
        if obj["kind"] != "Job":
            selector = obj["spec"]["selector"]["matchLabels"]
            assert selector.items() <= labels.items(), f"{where}: selector misses its pods"
        pods.append((labels, pod))
    for service in rendering.of_kind("Service"):
        matching = [
            p for labels, p in pods if service["spec"]["selector"].items() <= labels.items()
        ]
        assert matching, f"{rendering.case}: Service {service['metadata']['name']} selects no pod"
        names = {port["name"] for p in matching for c in p["containers"] for port in c["ports"]}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in names, f"{rendering.case}: {port} has no container port"
    for pdb in rendering.of_kind("PodDisruptionBudget"):
        selector = pdb["spec"]["selector"]["matchLabels"]
        assert any(selector.items() <= labels.items() for labels, _ in pods), rendering.case
    for monitor in rendering.of_kind("ServiceMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        selected = [
            s
            for s in rendering.of_kind("Service")
            if selector.items() <= s["metadata"]["labels"].items()
        ]
        assert {component_of(s) for s in selected} >= {"worker", "operator"}, rendering.case
        ports = {p["name"] for s in selected for p in s["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports, rendering.case


def check_labels(rendering: Rendering) -> None:
    """Every object carries the chart's standard labels."""
    for document in rendering.documents:
        labels = document.obj["metadata"].get("labels") or {}
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "helm.sh/chart"):
            assert key in labels, f"{rendering.case}: {document.kind}/{document.name} lacks {key}"


ALL_CHECKS = (
    validate_offline,
    check_security_contexts,
    check_probes,
    check_migration_hook,
    check_termination_grace,
    check_autoscaling,
    check_worker_has_no_api_access,
    check_operator,
    check_selectors,
    check_labels,
)
