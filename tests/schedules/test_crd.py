"""The CRDs: the Schedule schema (structure, enums, defaults, CEL rules re-stated in Python),
the examples against it, broken manifests refused by the schema, by ``tickwork sync``'s loader
and by the operator's translation alike, and kopf's peering CRDs."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.schedules import limit_helpers
from tests.support.schedule_helpers import NIGHTLY_DEFINITION
from tickwork.cli import main
from tickwork.db.jobs import LastJob
from tickwork.model import Backoff, JobId, JobStatus
from tickwork.operator import status as operator_status
from tickwork.operator.translate import translate
from tickwork.schedules import limits
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.limits import MAX_INT
from tickwork.schedules.manifests import ManifestError, load_documents, load_path
from tickwork.schedules.options import (
    ConcurrencyPolicy,
    ContainerTemplate,
    IntervalMode,
    JobTemplate,
    MisfirePolicy,
)

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
CRD_PATH = CRDS / "schedules.tickwork.io.yaml"
LIMITS_DOC = ROOT / "docs" / "limits.md"
EXAMPLES = ROOT / "examples" / "schedules"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))


# --- the CRD and the examples ------------------------------------------------------------


def crd() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return document


def crd_version() -> dict[str, Any]:
    [version] = crd()["spec"]["versions"]
    return version  # type: ignore[no-any-return]


def openapi_schema() -> dict[str, Any]:
    return crd_version()["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def to_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """The CRD's OpenAPI v3 schema as JSON Schema, strict about unknown fields like the API server.

    ``x-kubernetes-*`` keys are dropped (CEL rules are checked by ``cel_rules`` below).
    """
    out = {
        key: value
        for key, value in node.items()
        if not key.startswith("x-kubernetes-") and key not in ("nullable", "properties", "items")
    }
    if "properties" in node:
        out["properties"] = {k: to_json_schema(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if "items" in node:
        out["items"] = to_json_schema(node["items"])
    if node.get("nullable") and "type" in node:
        out["type"] = [node["type"], "null"]
    if node.get("exclusiveMinimum") is True:
        out["exclusiveMinimum"] = out.pop("minimum")
    return out


# The CEL rules of the CRD, re-stated in Python so that examples and bad manifests can be checked
# against them; a rule changed in the CRD must be changed here too (test_cel_rules_are_known).
CEL_RULES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "has(self.schedule) != has(self.every)": lambda s: ("schedule" in s) != ("every" in s),
    "!has(self.intervalMode) || has(self.every)": lambda s: "intervalMode" not in s or "every" in s,
    "!has(self.catchUpLimit) || (has(self.misfirePolicy) && self.misfirePolicy == 'CatchUp')": (
        lambda s: "catchUpLimit" not in s or s.get("misfirePolicy") == "CatchUp"
    ),
    "has(self.steps) || has(self.jobTemplate) != (has(self.job) && has(self.job.kind))": lambda s: (
        "steps" in s or ("jobTemplate" in s) != ("kind" in (s.get("job") or {}))
    ),
    "!has(self.steps) || (!has(self.job) && !has(self.jobTemplate))": lambda s: (
        "steps" not in s or ("job" not in s and "jobTemplate" not in s)
    ),
    "!has(self.jobTemplate) || !has(self.job) || !has(self.job.payload)": lambda s: (
        "jobTemplate" not in s or "payload" not in (s.get("job") or {})
    ),
    "!has(self.job) || !has(self.job.concurrencyLimit) || has(self.job.concurrencyKey)": lambda s: (
        "concurrencyLimit" not in (s.get("job") or {}) or "concurrencyKey" in s["job"]
    ),
    (
        "!has(self.job) || !has(self.job.concurrencyLimit) || self.job.concurrencyLimit == 1 || "
        "!has(self.concurrencyPolicy) || self.concurrencyPolicy != 'BufferOne'"
    ): lambda s: (
        (s.get("job") or {}).get("concurrencyLimit", 1) == 1
        or s.get("concurrencyPolicy") != "BufferOne"
    ),
    "!has(self.startTime) || !has(self.endTime) || self.endTime > self.startTime": lambda s: (
        "startTime" not in s
        or "endTime" not in s
        or datetime.fromisoformat(s["endTime"]) > datetime.fromisoformat(s["startTime"])
    ),
    (
        "!has(self.exclude) || "
        "self.exclude.filter(e, !e.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}$')).size() <= 16"
    ): lambda s: (
        sum(not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", e) for e in s.get("exclude", [])) <= 16
    ),
    "self.maxDelaySeconds >= self.baseDelaySeconds": lambda r: (
        r.get("maxDelaySeconds", 3600) >= r.get("baseDelaySeconds", 30)
    ),
    "has(self.succeedWithinSeconds) != has(self.by)": lambda d: (
        ("succeedWithinSeconds" in d) != ("by" in d)
    ),
}


def cel_rules(document: dict[str, Any]) -> list[str]:
    """The messages of the CRD's CEL rules that ``document`` breaks."""
    schema = openapi_schema()["properties"]["spec"]
    spec = document.get("spec", {})
    retry_schema = schema["properties"]["job"]["properties"]["retryPolicy"]
    deadline_schema = schema["properties"]["deadline"]
    targets = [
        (schema, spec),
        (retry_schema, spec.get("job", {}).get("retryPolicy")),
        (deadline_schema, spec.get("deadline")),
    ]
    return [
        rule["message"]
        for node, value in targets
        if value is not None
        for rule in node.get("x-kubernetes-validations", [])
        if not CEL_RULES[rule["rule"]](value)
    ]


def schema_errors(document: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(to_json_schema(openapi_schema()))
    found = [error.message for error in validator.iter_errors(document)]
    return found + cel_rules(document)


def test_the_examples_exist() -> None:
    assert 3 <= len(EXAMPLE_FILES) <= 10


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_each_example_loads_and_matches_the_crd(path: Path) -> None:
    [definition] = load_path(path)
    definition.validate("examples")
    [document] = yaml.safe_load_all(path.read_text())
    assert schema_errors(document) == []
    assert path.read_text().startswith("#"), "each example explains itself"


def test_the_examples_directory_loads() -> None:
    definitions = load_path(EXAMPLES)
    kinds = {d.job.kind for d in definitions}
    assert kinds == {
        "examples.hello",
        "examples.flaky",
        "examples.report",
        "examples.slow",
        "tickwork.kubernetes-job",
        "tickwork.steps",
    }


@pytest.mark.parametrize(
    "definition",
    [
        NIGHTLY_DEFINITION,
        ScheduleDefinition(name="p", job=JobTemplate(kind="k", payload=None), every=timedelta(90)),
        ScheduleDefinition(
            name="p",
            job=JobTemplate(kind="k", payload=[1, "a"], timeout_seconds=0.25),
            every=timedelta(seconds=1.5),
            interval_mode=IntervalMode.FIXED_DELAY,
        ),
        ScheduleDefinition(
            name="c",
            job=JobTemplate(kind="tickwork.kubernetes-job", queue="q", max_attempts=2),
            container=ContainerTemplate(
                {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "c", "image": "busybox"}],
                            }
                        }
                    }
                }
            ),
            schedule="@daily",
        ),
    ],
)
def test_every_canonical_spec_matches_the_crd(definition: ScheduleDefinition) -> None:
    """The stored (canonical) spec is a valid manifest once ``catchUpLimit`` is left out where
    it does not apply (canonical specs always write it out)."""
    spec = definition.to_spec()
    if spec["misfirePolicy"] != "CatchUp":
        del spec["catchUpLimit"]
    document = {
        "apiVersion": "tickwork.io/v1",
        "kind": "Schedule",
        "metadata": {"name": definition.name},
        "spec": spec,
    }
    assert schema_errors(document) == []
    # A jobTemplate's Jobs go to the object's namespace ("default": it names none).
    assert translate(document).definition == definition.owned_by("default", None)


def manifest(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tickwork.io/v1",
        "kind": "Schedule",
        "metadata": {"name": "a"},
        "spec": {"every": "30s", "job": {"kind": "k"}, **spec},
    }


@pytest.mark.parametrize(
    "document",
    [
        manifest(suspend="no"),
        manifest(concurrencyPolicy="forbid"),
        manifest(misfirePolicy="Sometimes"),
        manifest(intervalMode="Fixed"),
        manifest(every="30"),
        manifest(every="1 minute"),
        manifest(startingDeadlineSeconds=0),
        manifest(misfirePolicy="CatchUp", catchUpLimit=0),
        manifest(catchUpLimit=5),
        manifest(misfirePolicy="Latest", catchUpLimit=5),
        manifest(jitterSeconds=-1),
        manifest(jitterSeconds=MAX_INT + 1),
        manifest(every="0" * 64 + "1s"),
        {**manifest(), "spec": {"schedule": "0" * 1020 + " 3 * * *", "job": {"kind": "k"}}},
        manifest(timeZone="x" * 65),
        manifest(scheduleNamespace="n" * 254),
        manifest(job={"kind": "k" * 256}),
        manifest(job={"kind": "k", "queue": "q" * 256}),
        manifest(job={"kind": "k", "priority": 32768}),
        manifest(job={"kind": "k", "priority": 40000}),
        manifest(job={"kind": "k", "maxAttempts": MAX_INT + 1}),
        manifest(job={"kind": "k", "timeoutSeconds": 31622401}),
        manifest(job={"kind": "k", "retryPolicy": {"backoffRate": 101}}),
        manifest(
            job={"kind": "k", "retryPolicy": {"baseDelaySeconds": 4e7, "maxDelaySeconds": 4e7}}
        ),
        manifest(job={"kind": "k", "concurrencyKey": "c" * 513}),
        manifest(job={"kind": "k", "concurrencyKey": "c", "concurrencyLimit": 0}),
        manifest(job={"kind": "k", "concurrencyKey": "c", "concurrencyLimit": -1}),
        manifest(job={"kind": "k", "concurrencyKey": "c", "concurrencyLimit": 10001}),
        manifest(job={"kind": "k", "concurrencyKey": "c", "concurrencyLimit": 10**12}),
        manifest(job={"kind": "k", "concurrencyKey": "c", "concurrencyLimit": 2.5}),
        manifest(job={"kind": "k", "concurrencyKey": "c", "concurrencyLimit": "3"}),
        manifest(job={"kind": "k", "concurrencyLimit": 3}),
        manifest(
            concurrencyPolicy="BufferOne",
            job={"kind": "k", "concurrencyKey": "c", "concurrencyLimit": 2},
        ),
        manifest(exclude="* * * * 0,6"),
        manifest(exclude=["@daily"]),
        manifest(exclude=["* * * *"]),
        manifest(exclude=[""]),
        manifest(exclude=["2030-12-25"] * 101),
        manifest(exclude=[f"{n} 3 * * *" for n in range(17)]),
        manifest(startTime="2030-02-01T00:00:00Z", endTime="2030-02-01T01:00:00+02:00"),
        manifest(startTime="2030-02-01T00:00:00Z", endTime="2030-02-01T00:00:00Z"),
        manifest(timeZone=""),
        manifest(scheduleNamespace=""),
        manifest(unknown=1),
        manifest(job={"queue": "q"}),
        manifest(job={"kind": ""}),
        manifest(job={"kind": "k", "priority": -1}),
        manifest(job={"kind": "k", "priority": 1.5}),
        manifest(job={"kind": "k", "maxAttempts": 0}),
        manifest(job={"kind": "k", "timeoutSeconds": 0}),
        manifest(job={"kind": "k", "retryPolicy": {"backoffRate": 0.5}}),
        manifest(job={"kind": "k", "retryPolicy": {"baseDelaySeconds": 10, "maxDelaySeconds": 5}}),
        manifest(job={"kind": "k", "attempts": 3}),
        manifest(deadline={}),
        manifest(deadline={"by": "06:00", "succeedWithinSeconds": 60}),
        manifest(deadline={"by": "24:00"}),
        manifest(deadline={"by": "6:00"}),
        manifest(deadline={"by": "06:00:00"}),
        manifest(deadline={"succeedWithinSeconds": 0}),
        manifest(deadline={"succeedWithinSeconds": 1.5}),
        manifest(deadline={"succeedWithinSeconds": "60"}),
        manifest(suspendAfterFailures=0),
        manifest(suspendAfterFailures=1001),
        manifest(suspendAfterFailures=True),
        manifest(schedule="@daily"),
        {**manifest(), "spec": {"job": {"kind": "k"}}},
        {
            **manifest(),
            "spec": {"schedule": "@daily", "intervalMode": "FixedRate", "job": {"kind": "k"}},
        },
        {k: v for k, v in manifest().items() if k != "spec"},
    ],
)
def test_invalid_manifests_are_rejected_by_the_crd_the_loader_and_the_operator(
    document: dict[str, Any],
) -> None:
    assert schema_errors(document) != []
    with pytest.raises(ManifestError):
        load_documents(yaml.safe_dump(document), "bad.yaml")
    if "spec" in document:
        assert translate(document).error is not None


def bounded_fields() -> dict[str, dict[str, Any]]:
    """Every field of the CRD's spec with a range or a length, by path, with those bounds."""
    keys = ("minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength")
    found: dict[str, dict[str, Any]] = {}
    todo = [("spec", openapi_schema()["properties"]["spec"])]
    while todo:
        path, node = todo.pop()
        if path == "spec.jobTemplate":
            continue  # Kubernetes' own ranges: tests/schedules/test_job_templates.py
        todo.extend((f"{path}.{key}", child) for key, child in node.get("properties", {}).items())
        bounds = {key: node[key] for key in keys if key in node}
        if bounds:
            found[path] = bounds
    return found


def test_every_bounded_crd_field_has_its_python_limit() -> None:
    assert sorted(bounded_fields()) == sorted(limits.FIELDS)


@pytest.mark.parametrize("path", sorted(limits.FIELDS))
def test_the_crd_bounds_are_the_python_limits(path: str) -> None:
    limit = limits.FIELDS[path]
    expected = {
        "minimum": limit.minimum,
        "maximum": limit.maximum,
        "exclusiveMinimum": limit.exclusive_minimum or None,
        "minLength": limit.min_length,
        "maxLength": limit.max_length,
    }
    assert bounded_fields().get(path) == {k: v for k, v in expected.items() if v is not None}


def test_the_chart_crd_is_the_same_file() -> None:
    chart = ROOT / "helm" / "tickwork" / "files" / "crds" / "schedules.tickwork.io.yaml"
    assert chart.read_text() == CRD_PATH.read_text()


@pytest.mark.parametrize("path", sorted(limits.FIELDS))
def test_the_crd_and_the_loader_agree_at_each_limit(path: str) -> None:
    """At a field's largest (and smallest) accepted value, the schema and ``tickwork sync``'s
    loader both accept; one step beyond, both refuse (a NUL inside text: the loader, whatever
    the schema says)."""
    for value, accepted in limit_helpers.edges(path):
        spec = limit_helpers.spec_with(
            path, value, base={"schedule": "@daily", "job": {"kind": "k"}}
        )
        document = {**manifest(), "spec": spec}
        in_schema = schema_errors(document) == []
        try:
            load_documents(
                yaml.safe_dump(document), "edge.yaml", namespace=spec.get("scheduleNamespace")
            )
        except ManifestError as error:
            assert not accepted, str(error)
            assert f": {path}: " in str(error)
            if not (isinstance(value, str) and "\x00" in value):
                assert not in_schema, str(error)
        else:
            assert accepted and in_schema, (path, value)
        assert (translate(document).error is None) == accepted


def test_the_limits_page_gives_every_limit() -> None:
    """docs/limits.md names each field with its bounds (so the page cannot drift)."""
    page = LIMITS_DOC.read_text()
    rows = {
        line.split("|")[1].strip(" `"): line
        for line in page.splitlines()
        if line.startswith("| `spec.")
    }
    for path, limit in limits.FIELDS.items():
        assert path in rows, f"docs/limits.md has no row for {path}"
        for bound in (limit.minimum, limit.maximum, limit.min_length, limit.max_length):
            if bound is not None:
                assert f"{bound:,}" in rows[path] or str(bound) in rows[path], (path, bound)


def test_cel_rules_are_known() -> None:
    spec = openapi_schema()["properties"]["spec"]
    retry = spec["properties"]["job"]["properties"]["retryPolicy"]
    deadline = spec["properties"]["deadline"]
    rules = {
        rule["rule"]
        for node in (spec, retry, deadline)
        for rule in node["x-kubernetes-validations"]
    }
    assert rules == set(CEL_RULES)


def test_crd_identity() -> None:
    document = crd()
    assert document["apiVersion"] == "apiextensions.k8s.io/v1"
    assert document["metadata"]["name"] == "schedules.tickwork.io"
    spec = document["spec"]
    assert spec["group"] == "tickwork.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "Schedule"
    assert spec["names"]["listKind"] == "ScheduleList"
    assert spec["names"]["plural"] == "schedules"
    assert "tws" in spec["names"]["shortNames"]
    version = crd_version()
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}


def test_the_crd_is_a_valid_kubernetes_object() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    kubernetes_validate.validate(crd(), "1.33.0", strict=True)


def test_printer_columns() -> None:
    """Like a CronJob's, plus the next run and why it is (not) ready; how kubectl renders
    them: tests/schedules/test_crd_columns.py."""
    columns = {c["name"]: c for c in crd_version()["additionalPrinterColumns"]}
    main = [name for name, c in columns.items() if not c.get("priority")]
    assert main == [
        "Schedule",
        "Time Zone",
        "Suspend",
        "Active",
        "Last Schedule",
        "Next Run",
        "Ready",
        "Reason",
        "Age",
    ]
    assert columns["Schedule"]["jsonPath"] == ".spec['schedule','every']"
    assert (columns["Next Run"]["jsonPath"], columns["Next Run"]["type"]) == (
        ".status.nextRunAt",
        "string",
    )
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Age"]["jsonPath"] == ".metadata.creationTimestamp"


def test_the_crds_are_found_by_short_name_and_category() -> None:
    """``kubectl get tws`` / ``kubectl get tickwork`` (``schedules`` alone may mean Velero's)."""
    policies = yaml.safe_load((CRDS / "tenantpolicies.tickwork.io.yaml").read_text())
    assert crd()["spec"]["names"]["shortNames"] == ["tws"]
    assert policies["spec"]["names"]["shortNames"] == ["twtp"]
    for document in (crd(), policies):
        assert document["spec"]["names"]["categories"] == ["tickwork"]


def undescribed(node: dict[str, Any], path: str) -> list[str]:
    """The paths under ``node`` (its properties and items) without a description."""
    missing = [] if str(node.get("description") or "").strip() else [path or "<root>"]
    for key, child in node.get("properties", {}).items():
        missing += undescribed(child, f"{path}.{key}")
    if "items" in node:
        missing += undescribed(node["items"], f"{path}[]")
    return missing


@pytest.mark.parametrize("name", ["schedules.tickwork.io", "tenantpolicies.tickwork.io"])
def test_every_crd_field_has_a_description(name: str) -> None:
    """What ``kubectl explain schedule.spec.job`` and the like show."""
    document = yaml.safe_load((CRDS / f"{name}.yaml").read_text())
    (version,) = document["spec"]["versions"]
    assert undescribed(version["schema"]["openAPIV3Schema"], "") == []


def test_crd_fields_are_the_spec_fields() -> None:
    spec = openapi_schema()["properties"]["spec"]
    nightly = NIGHTLY_DEFINITION.to_spec()
    job_spec = {**nightly["job"], "concurrencyLimit": 2}  # needs the key NIGHTLY has
    calendar = {
        "exclude": ["2030-12-25"],
        "startTime": "2030-01-01T00:00:00Z",
        "endTime": "2031-01-01T00:00:00Z",
    }
    full = ScheduleDefinition.from_spec(
        "a",
        {
            **nightly,
            "schedule": None,
            "every": "1m",
            "job": job_spec,
            "deadline": {"by": "06:00"},
            "suspendAfterFailures": 3,
            **calendar,
        },
    ).to_spec()
    assert set(spec["properties"]) == {
        *full,
        "schedule",
        "scheduleNamespace",
        "jobTemplate",
        "steps",
    }
    job = spec["properties"]["job"]
    assert set(job["properties"]) == set(full["job"])
    assert set(job["properties"]["retryPolicy"]["properties"]) == set(full["job"]["retryPolicy"])
    # spec.job or spec.jobTemplate, spec.job.kind unless spec.jobTemplate: CEL rules.
    assert "required" not in spec
    assert "required" not in job
    assert job["properties"]["payload"]["x-kubernetes-preserve-unknown-fields"] is True


def test_crd_enums_and_defaults_are_the_definition_ones() -> None:
    spec = openapi_schema()["properties"]["spec"]["properties"]
    assert spec["concurrencyPolicy"]["enum"] == [p.value for p in ConcurrencyPolicy]
    assert spec["misfirePolicy"]["enum"] == [p.value for p in MisfirePolicy]
    assert spec["intervalMode"]["enum"] == [p.value for p in IntervalMode]
    defaults = ScheduleDefinition(name="a", job=JobTemplate(kind="k"), schedule="@daily").to_spec()
    crd_defaults = {key: node["default"] for key, node in spec.items() if "default" in node}
    # catchUpLimit has no CRD default: its presence is only valid with misfirePolicy CatchUp.
    skipped = ("schedule", "job", "catchUpLimit")
    assert crd_defaults == {k: v for k, v in defaults.items() if k not in skipped}
    job = spec["job"]["properties"]
    job_defaults = {key: node["default"] for key, node in job.items() if "default" in node}
    assert job_defaults == {
        k: v for k, v in defaults["job"].items() if k not in ("kind", "payload")
    }
    retry = job["retryPolicy"]["properties"]
    assert {key: node["default"] for key, node in retry.items()} == {
        "baseDelaySeconds": Backoff().base,
        "backoffRate": Backoff().rate,
        "maxDelaySeconds": Backoff().max,
    }


def test_crd_status_fields() -> None:
    status = openapi_schema()["properties"]["status"]["properties"]
    assert set(status) == {
        "observedGeneration",
        "revision",
        "nextRunAt",
        "nextOccurrences",
        "ended",
        "lastScheduleTime",
        "lastSuccessfulTime",
        "active",
        "activeCount",
        "skippedOccurrences",
        "lastJob",
        "lastRunNow",
        "conditions",
        "deadlinesMissed",
        "consecutiveFailures",
    }
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


def test_crd_last_job_fields_are_those_the_operator_writes() -> None:
    last_job = openapi_schema()["properties"]["status"]["properties"]["lastJob"]
    at = datetime(2026, 12, 1, 3, tzinfo=UTC)
    ended = LastJob(
        "ns", "a", JobId(1), JobStatus.DEAD, at, at, at + timedelta(seconds=1.5), 3, "x",
        result_head='{"rows": 10}',
        result_error="not kept: result: nan is not a JSON number",
        progress={"fraction": 0.5, "message": "m", "attempt": 3, "at": at.isoformat()},
    )  # fmt: skip
    written = operator_status.last_job(ended)
    assert set(last_job["properties"]) == set(written)
    assert None not in written.values()
    assert last_job["required"] == ["id"]
    jsonschema.validate(written, last_job)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**written, "durationSeconds": "1.5s"}, last_job)


def test_sync_dry_run_accepts_the_examples(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tickwork sync -f examples/schedules --dry-run`` takes the files ``kubectl apply`` takes."""
    argv = ["sync", "examples", "-f", str(EXAMPLES), "--dry-run", "--database-url", database_url]
    assert main(argv, env={}) == 0, capsys.readouterr().err


def test_a_schedule_namespace_with_spaces_is_refused_by_the_crd_and_the_operator() -> None:
    document = manifest(scheduleNamespace="a b")
    assert schema_errors(document) != []
    error = translate({**document, "metadata": {"name": "a", "namespace": "ns"}}).error
    assert error is not None and error.startswith("spec.scheduleNamespace:")


@pytest.mark.parametrize(
    ("path", "kind", "scope"),
    [
        ("clusterkopfpeerings.kopf.dev.yaml", "ClusterKopfPeering", "Cluster"),
        ("kopfpeerings.kopf.dev.yaml", "KopfPeering", "Namespaced"),
    ],
)
def test_kopf_peering_crds(path: str, kind: str, scope: str) -> None:
    document = yaml.safe_load((CRDS / path).read_text())
    assert document["spec"]["group"] == "kopf.dev"
    assert document["spec"]["names"]["kind"] == kind
    assert document["spec"]["scope"] == scope
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    kubernetes_validate.validate(document, "1.33.0", strict=True)


# --- hostile objects: the operator's translation and the webhook never raise --------------


class Exploding(dict[str, Any]):
    """A spec whose reading fails in a way no check foresaw."""

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"every": "1m", "job": {"kind": "k", "payload": limit_helpers.nested(5000)}},
            "spec.job.payload" + ".a" * 64 + ": nests deeper than 64 levels",
        ),
        ({"every": "1m", "job": {"kind": "k", "priority": 40000}}, "spec.job.priority: must be"),
        ({"every": "1m", "job": {"kind": "k\x00"}}, "spec.job.kind: must not contain NUL"),
        ({"every": "1m", "job": {"kind": "k", "payload": [2**64]}}, "spec.job.payload[0]: "),
        ({"every": "1m", "scheduleNamespace": "n\x00", "job": {"kind": "k"}}, "spec.scheduleNa"),
        (Exploding(), "spec: cannot be read: RuntimeError"),
        *(
            (
                {"every": "1m", "job": {"kind": "k", "concurrencyKey": "c", "concurrencyLimit": v}},
                "spec.job.concurrencyLimit: must be",
            )
            for v in (0, -1, 10**12, float("nan"), "3")
        ),
        (
            {"every": "1m", "job": {"kind": "k", "concurrencyLimit": 3}},
            "spec.job.concurrencyLimit: needs spec.job.concurrencyKey",
        ),
    ],
    ids=[
        "deep",
        "priority",
        "nul",
        "int64",
        "namespace-nul",
        "exploding",
        *(f"limit-{v}" for v in ("0", "-1", "1e12", "nan", "text")),
        "limit-without-key",
    ],
)
def test_the_operator_and_the_webhook_refuse_hostile_specs_naming_the_field(
    spec: Any, message: str
) -> None:
    pytest.importorskip("kopf")
    from tickwork.operator import webhook
    from tickwork.operator.desired import entry_of

    body = {**manifest(), "metadata": {"name": "a", "namespace": "ns"}, "spec": spec}
    entry = entry_of(body)
    assert entry.translation.error is not None
    assert entry.translation.error.startswith(message)
    assert entry.translation.namespace == "ns"  # excluded where the object lives
    refused = webhook.refused(body)
    assert refused is not None and refused.startswith(message)


def test_an_entry_of_a_body_with_strange_metadata_is_still_an_entry() -> None:
    from tickwork.operator.desired import entry_of

    entry = entry_of({"metadata": {"name": 5, "namespace": ["x"], "uid": {}}, "spec": None})
    assert entry.key == ("", "") and entry.uid is None
    assert entry.translation.error == "spec: is required and must be a mapping"
