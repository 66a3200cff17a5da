"""The trimmed Kubernetes schema shipped in the package (``job_template_schema.json``): it is
exactly the closure of ``io.k8s.api.batch.v1.JobTemplateSpec`` in the Kubernetes OpenAPI schema
that ``kubernetes-validate`` bundles (strict: unknown fields refused), with descriptions and
``x-kubernetes-*`` annotations left out. Regenerate it with
``python tests/schedules/test_job_template_schema.py`` after changing
``job_templates.KUBERNETES_VERSION``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from tickwork.schedules import job_templates

ROOT_DEFINITION = "io.k8s.api.batch.v1.JobTemplateSpec"
KEPT = frozenset(
    {
        "$ref",
        "type",
        "properties",
        "additionalProperties",
        "items",
        "required",
        "oneOf",
        "format",
        "enum",
    }
)
"""The JSON Schema keywords the Kubernetes definitions of this closure use to validate."""
SHIPPED = Path(job_templates.__file__).with_name(job_templates.SCHEMA_FILE)


def bundled_definitions() -> dict[str, Any]:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    folder = resources.files(kubernetes_validate) / "kubernetes-json-schema"
    path = folder / f"v{job_templates.KUBERNETES_VERSION}-local-strict" / "_definitions.json"
    if not path.is_file():
        pytest.skip(f"kubernetes-validate does not bundle {job_templates.KUBERNETES_VERSION}")
    definitions: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return definitions


def trimmed(node: Any) -> Any:
    """``node`` with only the validating keywords; ``$ref`` as the bare definition name."""
    if isinstance(node, list):
        return [trimmed(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            out[key] = value.rsplit("/", 1)[-1]
        elif key == "properties":
            out[key] = {name: trimmed(child) for name, child in value.items()}
        elif key in KEPT:
            out[key] = trimmed(value)
        elif not (key == "description" or key.startswith("x-kubernetes-") or key == "default"):
            raise AssertionError(f"unexpected schema keyword {key!r}: teach the validator")
    return out


def extract() -> dict[str, Any]:
    """The shipped document: the root's name, the Kubernetes version and each definition."""
    definitions = bundled_definitions()
    closure: dict[str, Any] = {}
    todo = [ROOT_DEFINITION]
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure[name] = trimmed(definitions[name])
        text = json.dumps(closure[name])
        todo.extend(part.split('"')[0] for part in text.split('"$ref": "')[1:])
    return {
        "kubernetesVersion": job_templates.KUBERNETES_VERSION,
        "root": ROOT_DEFINITION,
        "definitions": dict(sorted(closure.items())),
    }


def rendered() -> str:
    return json.dumps(extract(), indent=None, separators=(",", ":"), sort_keys=True) + "\n"


def test_the_shipped_schema_is_the_kubernetes_one() -> None:
    assert SHIPPED.read_text() == rendered(), (
        "src/tickwork/schedules/job_template_schema.json differs from the Kubernetes schema "
        "bundled by kubernetes-validate; regenerate it with "
        "`python tests/schedules/test_job_template_schema.py`"
    )


def test_the_shipped_schema_is_small() -> None:
    """What the package carries instead of kubernetes-validate's 108 MB of schemas."""
    assert SHIPPED.stat().st_size < 100_000


if __name__ == "__main__":
    SHIPPED.write_text(rendered())
