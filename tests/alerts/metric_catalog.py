"""What ``tickwork.metrics`` exports, and a check that a PromQL expression only uses that.

Shared by the alert rule tests and the dashboard test: a rule or panel that names a series
tickwork does not export (a typo, a counter without ``_total``, a renamed metric) would
never fire or stay empty, and nothing else would notice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import tickwork.metrics

TARGET_LABELS = frozenset({"instance", "pod", "job"})
"""Labels Prometheus adds to every scraped series (the ServiceMonitor's target labels) that
queries may group or match by. ``namespace`` (the pod's Kubernetes namespace, also added by
the scrape) is left out on purpose: a query naming it is one written for the label tickwork
called ``namespace`` before it became ``schedule_namespace`` (CHANGELOG.md)."""

RESERVED_LABELS = frozenset({"namespace", "pod", "instance", "job", "service", "container"})
"""Labels the scrape of a Kubernetes target sets: no tickwork metric may have one of its own
(the scrape would rename it ``exported_<name>`` unless ``honorLabels`` is set)."""

_NAME = re.compile(r"\btickwork_[A-Za-z0-9_]*")
_SELECTOR = re.compile(r"\b(tickwork_[A-Za-z0-9_]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_TEMPLATE_LABEL = re.compile(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Series:
    """One series name as Prometheus stores it, and the family it belongs to."""

    family: str
    type: str
    labels: frozenset[str]


def _series_of(name: str, type_: str, labels: frozenset[str]) -> dict[str, Series]:
    if type_ == "counter":
        return {f"{name}_total": Series(name, type_, labels)}
    if type_ == "gauge":
        return {name: Series(name, type_, labels)}
    if type_ == "histogram":
        return {
            f"{name}_bucket": Series(name, type_, labels | {"le"}),
            f"{name}_sum": Series(name, type_, labels),
            f"{name}_count": Series(name, type_, labels),
        }
    raise AssertionError(f"{name}: metric type {type_} not handled here")


def _label_names(collector: Any) -> frozenset[str] | None:
    """prometheus_client's metrics keep their label names in ``_labelnames`` (no public
    accessor); tickwork's own collectors (``FastHistogram``) in ``labelnames``."""
    for attribute in ("_labelnames", "labelnames"):
        names = getattr(collector, attribute, None)
        if names is not None:
            return frozenset(names)
    return None


def exported() -> dict[str, Series]:
    """Every ``tickwork_*`` series name tickwork exports (``_created`` series left out: a
    query has no business with them), read from the collectors of ``tickwork.metrics``:
    prometheus_client metrics, tickwork's own collectors, and those exported through a
    wrapping collector (the fleet gauges, whose own objects are module attributes too)."""
    names: dict[str, Series] = {}
    unlabelled: set[str] = set()
    for value in vars(tickwork.metrics).values():
        describe = getattr(value, "describe", None)
        if isinstance(value, type) or not callable(describe):
            continue
        families = list(describe())
        labels = _label_names(value)
        for family in families:
            if not family.name.startswith("tickwork_"):
                continue
            if len(families) > 1 or labels is None:
                unlabelled.add(family.name)  # a wrapper of several: labels come from each
                continue
            names.update(_series_of(family.name, family.type, labels))
    known = {series.family for series in names.values()}
    assert unlabelled <= known, f"label names unknown for {sorted(unlabelled - known)}"
    return names


def problems(
    expr: str, catalog: Mapping[str, Series], annotations: Iterable[str] = ()
) -> list[str]:
    """What in ``expr`` (and in the ``$labels.x`` of ``annotations``) is not exported: series
    names, matcher labels per series, grouping labels, template labels. Empty when fine."""
    found: list[str] = []
    names = set(_NAME.findall(expr))
    if not names:
        found.append(f"no tickwork_* series in {expr!r}")
    for name in sorted(names - catalog.keys()):
        found.append(f"{name} is not exported by tickwork.metrics")
    known = [catalog[name] for name in names if name in catalog]
    labels = TARGET_LABELS.union(*(series.labels for series in known))
    for name, matchers in _SELECTOR.findall(expr):
        if name in catalog:
            for label in _MATCHER.findall(matchers):
                if label not in catalog[name].labels | TARGET_LABELS:
                    found.append(f"{name} has no label {label!r}")
    for group in _GROUPING.findall(expr):
        for label in filter(None, (part.strip() for part in group.split(","))):
            if label not in labels:
                found.append(f"grouping by {label!r}, a label none of {sorted(names)} has")
    for text in annotations:
        for label in _TEMPLATE_LABEL.findall(text):
            if label not in labels:
                found.append(f"annotation uses $labels.{label}, a label none of the series has")
    return found
