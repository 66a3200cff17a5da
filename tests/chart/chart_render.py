"""Rendering ``helm/tickwork`` with a real ``helm`` binary, and the values matrix the chart
tests render: defaults, HPA, KEDA, monitoring on, an existing Secret, the webhook on, and an
operator restricted to namespaces with NetworkPolicies."""

from __future__ import annotations

import base64
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "tickwork"
RELEASE = "tw"
NAMESPACE = "tickwork-system"

# The quick-start connection string: its password must appear nowhere but base64-encoded in
# the data of the Secret the chart creates.
PASSWORD = "Qu1ck-S3cret-Pa55"
QUICK_URL = f"postgresql://tickwork:{PASSWORD}@db.example:5432/tickwork?sslmode=require"
SECRET_MARKERS = (PASSWORD, QUICK_URL, base64.b64encode(QUICK_URL.encode()).decode())

QUICK_START: dict[str, Any] = {"database": {"url": QUICK_URL}}
CA_BUNDLE = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n...").decode()
EXISTING_SECRET: dict[str, Any] = {
    "database": {"existingSecret": "app-db", "existingSecretKey": "uri"}
}

MATRIX: dict[str, dict[str, Any]] = {
    # The chart's defaults plus the one value it cannot guess: where the database is.
    "defaults": QUICK_START,
    "hpa": {
        **QUICK_START,
        "worker": {"queues": ["default", "mail"]},
        "autoscaling": {"enabled": True, "minReplicas": 2, "backlog": {"enabled": True}},
    },
    "keda": {
        **QUICK_START,
        "worker": {"queues": ["default", "o'neil"], "namespaces": ["billing", "default"]},
        "keda": {"enabled": True, "minReplicaCount": 0},
    },
    "monitoring": {
        **QUICK_START,
        "metrics": {
            "serviceMonitor": {"enabled": True, "additionalLabels": {"release": "prom"}},
            "prometheusRule": {"enabled": True},
            "grafanaDashboard": {"enabled": True},
        },
    },
    "existing-secret": EXISTING_SECRET,
    "webhook": {
        **EXISTING_SECRET,
        "webhook": {"enabled": True, "tlsSecret": "webhook-tls", "caBundle": CA_BUNDLE},
    },
    # Two teams' worker pools: billing scales with KEDA (to zero), reports with the HPA.
    "pools": {
        **QUICK_START,
        "autoscaling": {"enabled": True, "backlog": {"enabled": True}},
        "workerPools": [
            {
                "name": "billing",
                "app": "billing.tasks:app",
                "namespaces": ["billing"],
                "queues": ["billing", "invoices"],
                "serviceAccount": {"annotations": {"iam.example/role": "billing"}},
                "envFrom": [{"secretRef": {"name": "billing-secrets"}}],
                "extraEnv": [
                    {
                        "name": "STRIPE_KEY",
                        "valueFrom": {"secretKeyRef": {"name": "billing-stripe", "key": "key"}},
                    }
                ],
                "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}},
                "livenessProbe": {"periodSeconds": 30},
                "autoscaling": {"enabled": False},
                "keda": {"enabled": True, "minReplicaCount": 0, "maxReplicaCount": 4},
                "podDisruptionBudget": {"maxUnavailable": "50%"},
            },
            {
                "name": "reports",
                "namespaces": ["reports", "reports-eu"],
                "queues": ["reports"],
                "serviceAccount": {"name": "reports-tasks", "create": False},
                "envFrom": [{"secretRef": {"name": "reports-secrets"}}],
                "autoscaling": {"maxReplicas": 3},
                "podDisruptionBudget": {"enabled": False},
            },
        ],
    },
    # A pool running container jobs (its Roles on batch jobs) beside one that does not.
    "containers": {
        **QUICK_START,
        "workerPools": [
            {"name": "jobs", "namespaces": ["team-a", "team-b"], "containerJobs": True},
            {"name": "tasks", "namespaces": ["team-c"], "queues": ["default"]},
        ],
    },
    "namespaced": {
        **QUICK_START,
        "operator": {"namespaces": ["team-a", "team-b"], "statusIntervalSeconds": 30},
        "worker": {"namespaces": ["team-a", "team-b"], "shutdownGraceSeconds": 120.5},
        "webhook": {"enabled": True, "certManager": {"enabled": True}},
        "networkPolicy": {
            "enabled": True,
            "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
            "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 5432}]}],
        },
    },
}


@dataclass
class Document:
    """One rendered object, with the template it came from and its own text."""

    source: str
    text: str
    obj: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


@dataclass
class Rendering:
    case: str
    values: dict[str, Any]
    text: str
    documents: list[Document] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d.obj for d in self.documents if d.kind == kind]

    def one(self, kind: str, component: str | None = None) -> dict[str, Any]:
        found = [
            obj for obj in self.of_kind(kind) if component is None or component_of(obj) == component
        ]
        assert len(found) == 1, f"{self.case}: expected one {kind} {component or ''}: {found}"
        return found[0]


def component_of(obj: dict[str, Any]) -> str | None:
    labels = obj.get("metadata", {}).get("labels") or {}
    return labels.get("app.kubernetes.io/component")


def parse(case: str, values: dict[str, Any], text: str) -> Rendering:
    rendering = Rendering(case, values, text)
    for chunk in text.split("\n---\n"):
        source = next(
            (line.split(":", 1)[1].strip() for line in chunk.splitlines() if "# Source:" in line),
            "?",
        )
        obj = yaml.safe_load(chunk)
        if obj:
            rendering.documents.append(Document(source, chunk, obj))
    return rendering


class Helm:
    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def run(
        self, *args: str, values: dict[str, Any] | None, tmp: Path
    ) -> subprocess.CompletedProcess[str]:
        command = [str(self.binary), *args]
        if values is not None:
            values_file = tmp / "values.yaml"
            values_file.write_text(yaml.safe_dump(values))
            command += ["--values", str(values_file)]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    def template(
        self, values: dict[str, Any] | None, tmp: Path, *extra: str
    ) -> subprocess.CompletedProcess[str]:
        return self.run(
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            NAMESPACE,
            *extra,
            values=values,
            tmp=tmp,
        )

    def render(self, case: str, values: dict[str, Any], *extra: str) -> Rendering:
        with tempfile.TemporaryDirectory() as tmp:
            result = self.template(values, Path(tmp), *extra)
        assert result.returncode == 0, f"helm template ({case}) failed:\n{result.stderr}"
        return parse(case, values, result.stdout)

    def lint(self, values: dict[str, Any] | None, tmp: Path) -> subprocess.CompletedProcess[str]:
        return self.run("lint", str(CHART), "--strict", values=values, tmp=tmp)
