"""The chart's containers set only settings their command reads: every ``TICKWORK_*``
variable and every flag the chart renders is one of the command's settings, and the
command's own loader accepts them (no value refused, no deprecated name)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.chart import chart_render
from tickwork.cli import build_parser
from tickwork.operator.config import OperatorConfig
from tickwork.settings import (
    DatabaseSettings,
    LogSettings,
    WorkerSettings,
    env_name,
    flag_values,
    load,
)

READS: dict[str, tuple[type, ...]] = {
    "worker": (WorkerSettings, LogSettings),
    "operator": (OperatorConfig, LogSettings),
    "migrate": (DatabaseSettings, LogSettings),
}


def _containers(rendering: chart_render.Rendering) -> list[dict[str, Any]]:
    found = []
    for kind in ("Deployment", "Job"):
        for obj in rendering.of_kind(kind):
            found += obj["spec"]["template"]["spec"]["containers"]
    return found


def test_the_chart_runs_every_command_it_configures(
    rendered: dict[str, chart_render.Rendering],
) -> None:
    commands = {c["args"][0] for r in rendered.values() for c in _containers(r)}
    assert commands == {"worker", "operator", "migrate"}


def test_every_variable_and_flag_the_chart_sets_is_a_setting_of_its_command(
    rendering: chart_render.Rendering,
) -> None:
    for container in _containers(rendering):
        command, classes = container["args"][0], READS[container["args"][0]]
        env = {item["name"]: str(item.get("value", "postgresql://from-secret/x")) for item in
               container.get("env", [])}  # fmt: skip
        known = {env_name(cls, f.name) for cls in classes for f in dataclasses.fields(cls)}
        assert {name for name in env if name.startswith("TICKWORK_")} <= known, rendering.case
        args = build_parser().parse_args(container["args"])  # an unknown flag raises
        warnings: list[str] = []
        for cls in classes:
            settings = load(cls, flag_values(args, cls, warnings.append), env, warnings.append)
            assert dataclasses.is_dataclass(settings)
        assert warnings == [], (rendering.case, command)


@pytest.mark.parametrize("case", ["defaults", "webhook"])
def test_the_operator_gets_the_chart_values_through_its_flags(
    rendered: dict[str, chart_render.Rendering], case: str
) -> None:
    container = rendered[case].one("Deployment", "operator")["spec"]["template"]["spec"]
    args = build_parser().parse_args(container["containers"][0]["args"])
    config = load(OperatorConfig, flag_values(args, OperatorConfig), {"TICKWORK_DATABASE_URL": "x"})
    values = rendered[case].values
    assert config.http_port == 9090, "operator.httpPort"
    assert config.webhook == bool(values.get("webhook", {}).get("enabled"))
    assert not config.webhook_skip_access_review, "webhook.containerAccessReview: true"
