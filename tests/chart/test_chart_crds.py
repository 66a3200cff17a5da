"""The CRDs as the chart renders them: tickwork's are templates (so ``helm upgrade`` updates
them), kept by ``helm uninstall`` unless crds.keep is off, left out with crds.enabled off, and
otherwise exactly the repository's crds/ files (with the chart's labels)."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.chart import chart_render
from tests.chart.chart_render import Helm, Rendering

TICKWORK_CRDS = ("schedules.tickwork.io", "tenantpolicies.tickwork.io")
KEEP = {"helm.sh/resource-policy": "keep"}


def crds(rendering: Rendering) -> dict[str, dict[str, Any]]:
    """The rendered CRDs by name (copies: the session's renderings are shared)."""
    found = rendering.of_kind("CustomResourceDefinition")
    return {c["metadata"]["name"]: copy.deepcopy(c) for c in found}


def source(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(
        (chart_render.ROOT / "crds" / f"{name}.yaml").read_text()
    )
    return document


def without_labels(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD without its labels, after checking they extend the source's."""
    labels = crd["metadata"].pop("labels")
    source_labels = source(crd["metadata"]["name"])["metadata"]["labels"]
    assert labels.items() >= source_labels.items()
    assert labels["app.kubernetes.io/instance"] == chart_render.RELEASE
    return {**crd, "metadata": {**crd["metadata"], "labels": source_labels}}


def test_the_tickwork_crds_are_rendered_kept_and_equal_to_their_source(
    rendered: dict[str, Rendering],
) -> None:
    found = crds(rendered["defaults"])
    assert sorted(found) == sorted(TICKWORK_CRDS), "kopf's peering CRDs stay in Helm's crds/"
    for name in TICKWORK_CRDS:
        crd = found[name]
        assert crd["metadata"].pop("annotations") == KEEP
        assert without_labels(crd) == source(name)


def test_crds_keep_off_lets_helm_delete_them(helm: Helm) -> None:
    r = helm.render("no-keep", {**chart_render.QUICK_START, "crds": {"keep": False}})
    for name, crd in crds(r).items():
        assert "annotations" not in crd["metadata"], name
        assert without_labels(crd) == source(name)


def test_crds_enabled_off_renders_none(helm: Helm) -> None:
    r = helm.render("no-crds", {**chart_render.QUICK_START, "crds": {"enabled": False}})
    assert crds(r) == {}
    assert r.of_kind("Deployment"), "everything else is still there"


def test_helms_crds_directory_holds_only_kopfs_peering_crds(helm: Helm) -> None:
    r = helm.render("include-crds", chart_render.QUICK_START, "--include-crds")
    assert sorted(crds(r)) == sorted(
        [*TICKWORK_CRDS, "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"]
    )
