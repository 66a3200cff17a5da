"""The alert rules shipped in the chart (``helm/tickwork/files/alerts``, one alert per file),
their promtool unit tests (``tests/alerts/<Alert>.test.yaml``) and their runbooks
(``docs/runbooks/<Alert>.md``): promtool accepts every rule file, every unit test passes and
would catch a broken rule, every rule names only series tickwork exports, and rules, tests
and runbooks come in matching sets."""

from __future__ import annotations

import copy
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.alerts import metric_catalog
from tests.support import binaries
from tickwork.cli import build_parser

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ALERTS = ROOT / "helm" / "tickwork" / "files" / "alerts"
RUNBOOKS = ROOT / "docs" / "runbooks"
RUNBOOK_URL = "https://github.com/tickwork/tickwork/blob/main/docs/runbooks/{}.md"
SEVERITIES = {"critical", "warning"}
RUNBOOK_SECTIONS = ("## Meaning", "## Impact", "## Diagnosis", "## Mitigation")

NAMES = sorted(path.stem for path in ALERTS.glob("*.yaml"))


def _rule_file(name: str) -> Path:
    return ALERTS / f"{name}.yaml"


def _test_file(name: str) -> Path:
    return HERE / f"{name}.test.yaml"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _rule(name: str) -> dict[str, Any]:
    rule: dict[str, Any] = _load(_rule_file(name))["groups"][0]["rules"][0]
    return rule


@pytest.fixture(scope="session")
def promtool() -> Path:
    return binaries.promtool()


def _promtool(promtool: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_rules_tests_and_runbooks_come_in_matching_sets() -> None:
    assert len(NAMES) >= 10, NAMES
    tests = sorted(p.name.removesuffix(".test.yaml") for p in HERE.glob("*.test.yaml"))
    runbooks = sorted(p.stem for p in RUNBOOKS.glob("*.md") if p.name != "README.md")
    assert tests == NAMES, "every rule file needs a unit test file, and no test without rule"
    assert runbooks == NAMES, "every rule file needs a runbook page, and no page without rule"
    assert not [p.name for p in ALERTS.iterdir() if p.suffix != ".yaml"], "only *.yaml here"


def test_runbook_index_lists_every_runbook() -> None:
    index = (RUNBOOKS / "README.md").read_text()
    linked = sorted(set(re.findall(r"\]\((?:\./)?([A-Za-z]+)\.md\)", index)))
    assert linked == NAMES


def test_group_names_are_unique_across_files() -> None:
    # The chart emits every file's group into one PrometheusRule: names must not collide.
    groups = [_load(_rule_file(name))["groups"][0]["name"] for name in NAMES]
    assert len(set(groups)) == len(groups), groups


@pytest.mark.parametrize("name", NAMES)
def test_promtool_checks_the_rule_file(promtool: Path, name: str) -> None:
    result = _promtool(promtool, "check", "rules", _rule_file(name))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rules found" in result.stdout


@pytest.mark.parametrize("name", NAMES)
def test_rule_file_holds_one_group_with_one_alert(name: str) -> None:
    document = _load(_rule_file(name))
    assert list(document) == ["groups"]
    (group,) = document["groups"]
    assert group["name"] == f"tickwork.{name}"
    (rule,) = group["rules"]
    assert rule["alert"] == name
    assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}
    assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["for"]
    assert set(rule["labels"]) == {"severity"}
    assert rule["labels"]["severity"] in SEVERITIES
    annotations = rule["annotations"]
    assert set(annotations) == {"summary", "description", "runbook_url"}
    assert annotations["runbook_url"] == RUNBOOK_URL.format(name)
    assert "{{" not in rule["expr"], "no templating in expressions: the chart does not tpl"


@pytest.mark.parametrize("name", NAMES)
def test_rule_uses_only_exported_series_and_labels(name: str) -> None:
    rule = _rule(name)
    annotations = [rule["annotations"]["summary"], rule["annotations"]["description"]]
    catalog = metric_catalog.exported()
    assert metric_catalog.problems(rule["expr"], catalog, annotations) == []


def test_the_series_check_catches_what_tickwork_does_not_export() -> None:
    catalog = metric_catalog.exported()
    assert metric_catalog.problems("rate(tickwork_jobs_completed_total[5m])", catalog) == []
    assert metric_catalog.problems("tickwork_fleet_workers", catalog) == []
    quantile = (
        "histogram_quantile(0.9, sum by (le) (rate(tickwork_job_duration_seconds_bucket[5m])))"
    )
    assert metric_catalog.problems(quantile, catalog) == []
    for wrong in (
        "rate(tickwork_jobs_completed[5m])",  # a counter without _total
        "tickwork_fleet_workers_total",  # a gauge is no counter
        "tickwork_job_duration_seconds",  # a histogram has no bare series
        "rate(tickwork_jobs_finished_total[5m])",  # not a metric at all
        'tickwork_jobs_completed_total{status="dead"}',  # a label it does not have
        "sum by (worker) (tickwork_jobs_completed_total)",  # grouping by one either
        "sum(rate(tickwork_job_duration_seconds_sum{le='1'}[5m]))",  # le only on _bucket
        "up",  # no tickwork series at all
    ):
        assert metric_catalog.problems(wrong, catalog), wrong
    assert metric_catalog.problems("tickwork_fleet_workers", catalog, ["{{ $labels.queue }}"])


@pytest.mark.parametrize("name", NAMES)
def test_promtool_unit_test_passes(promtool: Path, name: str) -> None:
    result = _promtool(promtool, "test", "rules", _test_file(name))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", NAMES)
def test_unit_test_covers_firing_and_quiet_with_labels_in_the_text(name: str) -> None:
    document = _load(_test_file(name))
    assert document["rule_files"] == [f"../../helm/tickwork/files/alerts/{name}.yaml"]
    cases = [case for test in document["tests"] for case in test["alert_rule_test"]]
    assert {case["alertname"] for case in cases} == {name}
    firing = [alert for case in cases for alert in case["exp_alerts"]]
    assert firing, "no case where the alert fires"
    assert any(not case["exp_alerts"] for case in cases), "no case where it stays quiet"
    for alert in firing:
        text = " ".join(alert["exp_annotations"].get(key, "") for key in ("summary", "description"))
        for label, value in alert["exp_labels"].items():
            if label not in {"severity", "job", "namespace"}:  # namespace: the pod's
                assert value in text, f"{label}={value} not told in summary or description"


def _keep_cases(document: dict[str, Any], firing: bool) -> dict[str, Any]:
    """The unit test with only its firing (or only its quiet) evaluations."""
    kept = copy.deepcopy(document)
    for test in kept["tests"]:
        test["alert_rule_test"] = [
            case for case in test["alert_rule_test"] if bool(case["exp_alerts"]) == firing
        ]
    kept["tests"] = [test for test in kept["tests"] if test["alert_rule_test"]]
    return kept


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("firing", "expr"),
    [(True, "vector(1) == 0"), (False, "vector(1)")],
    ids=["never-firing-rule", "always-firing-rule"],
)
def test_unit_test_catches_a_broken_rule(
    promtool: Path, tmp_path: Path, name: str, firing: bool, expr: str
) -> None:
    """Replace the rule's expression by one that never fires (the firing cases must then
    fail) or always fires (the quiet cases must then fail): each half of the unit test
    asserts something."""
    rules = _load(_rule_file(name))
    rules["groups"][0]["rules"][0].update(expr=expr, **{"for": "0m"})
    broken = tmp_path / f"{name}.yaml"
    broken.write_text(yaml.safe_dump(rules))
    test = _keep_cases(_load(_test_file(name)), firing)
    test["rule_files"] = [str(broken)]
    path = tmp_path / f"{name}.test.yaml"
    path.write_text(yaml.safe_dump(test))

    result = _promtool(promtool, "test", "rules", path)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED" in result.stdout + result.stderr


# Each design decision of a rule, undone: the rule's unit test must then fail.
MUTATIONS = [
    ("TickworkScheduleOccurrencesSkipped", "unless\n", "and\n", "first skip of a new series"),
    (
        "TickworkScheduleOccurrencesSkipped",
        "increase(tickwork_schedule_skipped_occurrences_total[15m])",
        "increase(tickwork_nothing_total[15m])",
        "skips on a series that was already there",
    ),
    ("TickworkScheduleOccurrencesSkipped", "> 0", "> 1", "one skip is enough"),
    ("TickworkScheduleFiringFailed", "unless\n", "and\n", "first failure of a new series"),
    (
        "TickworkScheduleFiringFailed",
        "increase(tickwork_schedule_firing_failures_total[15m])",
        "increase(tickwork_nothing_total[15m])",
        "failures on a series that was already there",
    ),
    ("TickworkScheduleFiringFailed", "> 0", "> 1", "one failure is enough"),
    (
        "TickworkNamespaceWithoutWorkers",
        "max_over_time(tickwork_fleet_namespace_workers[2m])",
        "tickwork_fleet_namespace_workers",
        "gaps of the fleet gauges must not reset the hold",
    ),
    ("TickworkNamespaceWithoutWorkers", "max without", "min without", "max across pods"),
    ("TickworkNamespaceWithoutWorkers", "for: 5m", "for: 10m", "the hold"),
    (
        "TickworkSchedulesOverdue",
        "max_over_time(tickwork_fleet_overdue_schedules[2m])",
        "tickwork_fleet_overdue_schedules",
        "gaps of the fleet gauges must not reset the hold",
    ),
    ("TickworkSchedulesOverdue", "unless on", "or on", "namespaces without workers left out"),
    ("TickworkSchedulesOverdue", "for: 10m", "for: 3m", "a slow firing pass does not page"),
    ("TickworkFiringLagHigh", "for: 15m", "for: 5m", "a catch-up burst does not page"),
    ("TickworkFiringLagHigh", "> 30", "> 300", "the threshold"),
    ("TickworkJobsDead", "unless\n", "and\n", "first dead job of a new series"),
    (
        "TickworkJobsDead",
        'increase(tickwork_jobs_completed_total{outcome="dead"}[15m])',
        'increase(tickwork_jobs_completed_total{outcome=~"dead|retried"}[15m])',
        "only dead outcomes count",
    ),
    (
        "TickworkQueueBacklogTooOld",
        "max_over_time(tickwork_fleet_oldest_due_job_age_seconds[2m])",
        "tickwork_fleet_oldest_due_job_age_seconds",
        "gaps of the fleet gauges must not reset the hold",
    ),
    ("TickworkQueueBacklogTooOld", "> 600", "> 300", "the threshold"),
    ("TickworkQueueBacklogTooOld", "unless on", "or on", "paused queues left out"),
    ("TickworkQueueBacklogTooOld", "for: 10m", "for: 5m", "a short spike does not page"),
    (
        "TickworkQueuePausedTooLong",
        "max_over_time(tickwork_fleet_queue_paused_seconds[2m])",
        "tickwork_fleet_queue_paused_seconds",
        "gaps of the fleet gauges must not reset the hold",
    ),
    ("TickworkQueuePausedTooLong", "> 3600", "> 7200", "the threshold"),
    ("TickworkLeaseRecoveriesHigh", "unless\n", "and\n", "first recoveries of a new series"),
    (
        "TickworkLeaseRecoveriesHigh",
        "increase(tickwork_lease_recoveries_total[15m])",
        "increase(tickwork_nothing_total[15m])",
        "recoveries on a series that was already there",
    ),
    ("TickworkLeaseRecoveriesHigh", "> 5", "> 10", "the threshold"),
    ("TickworkOperatorSyncFailures", "for: 10m", "for: 5m", "a healed blip does not page"),
    (
        "TickworkOperatorSyncFailures",
        'result!="success"}[5m]',
        'result!=""}[5m]',
        "successes do not count",
    ),
    ("TickworkSchedulesNotReady", "for: 15m", "for: 5m", "a short Unknown does not page"),
    ("TickworkSchedulesNotReady", 'ready!="True"', 'ready="Unknown"', "False counts"),
    (
        "TickworkNoWorkers",
        "absent_over_time(tickwork_fleet_sample_timestamp_seconds[5m])",
        "absent(tickwork_fleet_sample_timestamp_seconds)",
        "gaps between samples are not an absence",
    ),
    (
        "TickworkNoWorkers",
        "absent_over_time(tickwork_fleet_sample_timestamp_seconds[5m])\n          or\n",
        "",
        "nobody exporting at all",
    ),
    ("TickworkNoWorkers", "> 300", "> 3000", "an exporter stuck on an old sample"),
    ("TickworkNoWorkers", "for: 2m", "for: 0m", "the hold"),
    (
        "TickworkOperatorDown",
        '{job=~".+-operator-metrics"}',
        "",
        "the workers' copy of the operator's metrics does not count",
    ),
    ("TickworkOperatorDown", "[3m]", "[30m]", "the window"),
    ("TickworkOperatorDown", "for: 2m", "for: 0m", "the hold"),
    (
        "TickworkNoActiveOperator",
        '{job=~".+-operator-metrics"}',
        "",
        "the workers' copy of the family does not count",
    ),
    ("TickworkNoActiveOperator", "for: 5m", "for: 0m", "a takeover does not page"),
]


@pytest.mark.parametrize(
    ("name", "old", "new", "why"), MUTATIONS, ids=[f"{m[0]}: {m[3]}" for m in MUTATIONS]
)
def test_unit_test_catches_undoing_a_design_decision(
    promtool: Path, tmp_path: Path, name: str, old: str, new: str, why: str
) -> None:
    source = _rule_file(name).read_text()
    assert source.count(old) == 1, f"mutation target {old!r} not found once: update MUTATIONS"
    broken = tmp_path / f"{name}.yaml"
    broken.write_text(source.replace(old, new))
    assert _promtool(promtool, "check", "rules", broken).returncode == 0, "mutant must parse"
    test = _load(_test_file(name))
    test["rule_files"] = [str(broken)]
    path = tmp_path / f"{name}.test.yaml"
    path.write_text(yaml.safe_dump(test))

    result = _promtool(promtool, "test", "rules", path)

    assert result.returncode == 1, f"the unit test does not notice: {why}"


@pytest.mark.parametrize("name", NAMES)
def test_runbook_page_has_the_sections(name: str) -> None:
    page = (RUNBOOKS / f"{name}.md").read_text()
    assert page.startswith(f"# {name}\n")
    for section in RUNBOOK_SECTIONS:
        assert f"\n{section}\n" in page, section
    rule = _rule(name)
    assert rule["labels"]["severity"] in page, "the page tells the severity"


def _tickwork_commands() -> list[tuple[str, str]]:
    commands = []
    for page in sorted(RUNBOOKS.glob("*.md")):
        for block in re.findall(r"```(?:sh|bash|console)\n(.*?)```", page.read_text(), re.S):
            for line in block.splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("tickwork "):
                    commands.append((page.name, line.split("|")[0].strip()))
    return commands


COMMANDS = _tickwork_commands()


def test_runbooks_show_tickwork_commands() -> None:
    assert len(COMMANDS) >= len(NAMES)


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_runbook_command_is_a_valid_tickwork_command_line(page: str, command: str) -> None:
    """Every ``tickwork …`` line of a runbook parses with the real command-line parser
    (placeholders such as ``<job-id>`` stand for a value: ``1`` fits every argument type)."""
    argv = shlex.split(re.sub(r"<[^>]+>", "1", command))[1:]
    if "--help" in argv:
        return
    build_parser().parse_args(argv)  # raises UsageError on an unknown command or flag
