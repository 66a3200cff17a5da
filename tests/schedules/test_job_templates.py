"""``spec.jobTemplate``: a batch/v1 JobTemplateSpec, validated as Kubernetes validates a Job's
template (the shipped Kubernetes schema and the Job rules), refused with the field named by the
definition, ``tickwork sync``'s loader and the operator's translation alike; exactly one of
``spec.job.kind`` and ``spec.jobTemplate`` (the CRD's CEL rules, re-stated in
``tests/schedules/test_crd.py``, and the Python checks agree); hostile templates (huge, deep,
NUL, wrong types) are refused naming a field, never with a traceback. No Kubernetes API server
runs here: ``kubernetes-validate``'s own strict check of a Job made from an accepted template
stands in for it."""

from __future__ import annotations

import contextlib
import copy
import math
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.schedules.test_crd import EXAMPLES, openapi_schema, schema_errors, to_json_schema
from tickwork.operator.translate import translate
from tickwork.schedules import container_jobs, limits
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.manifests import ManifestError, load_documents, load_path
from tickwork.schedules.options import ContainerTemplate, JobTemplate
from tickwork.schedules.stored import TARGET_FIELD, stored_kind

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "data"}, "annotations": {"example.com/note": "x"}},
    "spec": {
        "backoffLimit": 2,
        "activeDeadlineSeconds": 600,
        "ttlSecondsAfterFinished": 3600,
        "template": {
            "metadata": {"labels": {"app": "backup"}},
            "spec": {
                "restartPolicy": "OnFailure",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox:1.36",
                        "command": ["sh", "-c", "date"],
                        "env": [{"name": "A", "value": "1"}],
                        "resources": {"limits": {"cpu": "100m", "memory": 64}},
                    }
                ],
            },
        },
    },
}


def manifest(spec: dict[str, Any], name: str = "backup") -> dict[str, Any]:
    return {
        "apiVersion": "tickwork.io/v1",
        "kind": "Schedule",
        "metadata": {"name": name, "namespace": "team-a", "uid": "0b8f-uid"},
        "spec": spec,
    }


def container_spec(template: Any = None, **fields: Any) -> dict[str, Any]:
    return {
        "schedule": "@daily",
        "jobTemplate": copy.deepcopy(TEMPLATE) if template is None else template,
        **fields,
    }


def with_change(path: str, value: Any) -> dict[str, Any]:
    """TEMPLATE with the field at ``path`` (dots; ``containers.0``) set, or removed (``...``)."""
    template = copy.deepcopy(TEMPLATE)
    *parents, last = path.split(".")
    node: Any = template
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    key: Any = int(last) if last.isdigit() else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return template


def refusal(spec: dict[str, Any]) -> str:
    """``field: reason`` as the definition, the loader and the operator all say it."""
    with pytest.raises(DefinitionError) as caught:
        ScheduleDefinition.from_spec("backup", spec).validate("team-a")
    said = f"{caught.value.field}: {caught.value.reason}"
    with pytest.raises(ManifestError) as loaded:
        load_documents(yaml.safe_dump(manifest(spec)), "bad.yaml")
    assert str(loaded.value).endswith(said)
    assert translate(manifest(spec)).error == said
    return said


def test_a_container_schedule_is_read_and_stored_canonically() -> None:
    definition = ScheduleDefinition.from_spec(
        "backup", container_spec(job={"queue": "containers", "maxAttempts": 3})
    )
    definition.validate("team-a")
    assert definition.job == JobTemplate(
        kind=container_jobs.KIND, queue="containers", max_attempts=3
    )
    assert definition.container == ContainerTemplate(TEMPLATE)
    spec = definition.to_spec()
    assert spec["jobTemplate"] == TEMPLATE
    assert spec["job"] == {"queue": "containers", "priority": 0, "maxAttempts": 3}
    assert TARGET_FIELD not in spec  # a file's schedule: the schedule namespace, no owner
    assert ScheduleDefinition.from_spec("backup", spec) == definition
    assert stored_kind(spec) == container_jobs.KIND
    assert stored_kind({"job": {"kind": "k"}}) == "k"


def test_without_job_the_defaults_apply() -> None:
    definition = ScheduleDefinition.from_spec("backup", container_spec())
    assert definition.job == JobTemplate(kind=container_jobs.KIND)


def test_the_operator_sets_the_objects_namespace_and_uid_which_are_stored() -> None:
    document = manifest(container_spec(scheduleNamespace="shared"))
    translation = translate(document)
    assert translation.error is None and translation.definition is not None
    assert translation.namespace == "shared"
    container = translation.definition.container
    assert container is not None
    assert (container.namespace, container.owner_uid) == ("team-a", "0b8f-uid")
    stored = translation.definition.to_spec()
    assert stored[TARGET_FIELD] == {"namespace": "team-a", "ownerUid": "0b8f-uid"}
    assert ScheduleDefinition.from_spec("backup", stored) == translation.definition
    # A new object of the same name (another uid) is a change: a new revision, a new owner.
    other = translate({**document, "metadata": {**document["metadata"], "uid": "other"}})
    assert other.definition != translation.definition


def test_a_manifest_cannot_set_the_stored_target() -> None:
    """Only stored specs carry it (``from_spec`` reads them); manifests are refused."""
    spec = container_spec(**{TARGET_FIELD: {"namespace": "kube-system"}})
    with pytest.raises(ManifestError, match=f"spec.{TARGET_FIELD}: unknown field"):
        load_documents(yaml.safe_dump(manifest(spec)), "bad.yaml")
    error = translate(manifest(spec)).error
    assert error is not None and error.startswith(f"spec.{TARGET_FIELD}: unknown field")
    assert schema_errors(manifest(spec)) != []


def test_a_task_schedule_has_no_container() -> None:
    assert translate(manifest({"every": "1m", "job": {"kind": "k"}})).definition is not None
    spec = {"every": "1m", "job": {"kind": "k"}, TARGET_FIELD: {"namespace": "n"}}
    with pytest.raises(DefinitionError, match=r"only valid with spec\.jobTemplate"):
        ScheduleDefinition.from_spec("a", spec)


# --- exactly one of spec.job.kind and spec.jobTemplate: CEL and Python agree -----------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"schedule": "@daily"}, "spec.job: is required"),
        ({"schedule": "@daily", "job": {"queue": "q"}}, "spec.job.kind: is required"),
        (container_spec(job={"kind": "k"}), "spec.job.kind: set exactly one of"),
        (container_spec(job={"payload": {"a": 1}}), "spec.job.payload: is not used"),
        (container_spec(job={"payload": None}), "spec.job.payload: is not used"),
    ],
)
def test_exactly_one_of_job_kind_and_job_template(spec: dict[str, Any], expected: str) -> None:
    assert refusal(spec).startswith(expected)
    assert schema_errors(manifest(spec)) != []


@pytest.mark.parametrize(
    "spec",
    [
        container_spec(),
        container_spec(job={"queue": "q", "priority": 5, "timeoutSeconds": 60}),
        container_spec(job=None),
        container_spec(job={"kind": None, "queue": "q"}),  # null: not set, pruned by the API
        {"schedule": "@daily", "job": {"kind": "k", "payload": 1}},
    ],
)
def test_what_the_rules_allow_python_allows(spec: dict[str, Any]) -> None:
    document = manifest(without_nulls(spec))
    assert schema_errors(document) == []
    assert translate(manifest(spec)).error is None


def test_the_cel_rules_are_in_the_crd() -> None:
    """CEL cannot run here: the rules' text is checked, and re-stated in Python by
    tests/schedules/test_crd.py (CEL_RULES), which the tests above run."""
    rules = {
        rule["rule"]: rule["message"]
        for rule in openapi_schema()["properties"]["spec"]["x-kubernetes-validations"]
    }
    exactly_one = (
        "has(self.steps) || has(self.jobTemplate) != (has(self.job) && has(self.job.kind))"
    )
    assert rules[exactly_one] == (
        "set exactly one of spec.job.kind, spec.jobTemplate or spec.steps"
    )
    assert rules["!has(self.jobTemplate) || !has(self.job) || !has(self.job.payload)"] == (
        "spec.job.payload is not used with spec.jobTemplate"
    )


def test_reserved_kinds_are_refused_as_a_task_kind_in_manifests() -> None:
    """Manifests (files, objects, the webhook) reach the reserved kind only through a
    jobTemplate; the Python API may sync such a definition, building the payload itself."""
    spec = {"schedule": "@daily", "job": {"kind": container_jobs.KIND}}
    expected = "spec.job.kind: kinds starting 'tickwork.' are tickwork's own"
    with pytest.raises(ManifestError, match=expected):
        load_documents(yaml.safe_dump(manifest(spec)), "bad.yaml")
    error = translate(manifest(spec)).error
    assert error is not None and error.startswith(expected)
    ScheduleDefinition.from_spec("backup", spec).validate("team-a")


# --- the template, validated as a batch/v1 JobTemplateSpec --------------------------------


C0 = "spec.template.spec.containers.0"
POD = "spec.jobTemplate.spec.template.spec"


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (f"{C0}.image", ..., f"{POD}.containers[0].image: is required"),
        (f"{C0}.image", " ", f"{POD}.containers[0].image: is required"),
        (f"{C0}.name", ..., f"{POD}.containers[0].name: is required"),
        (f"{C0}.name", "Main", f"{POD}.containers[0].name: must be a DNS label"),
        (f"{C0}.name", "m" * 64, f"{POD}.containers[0].name: must be a DNS label"),
        (f"{C0}.command", "date", f"{POD}.containers[0].command: must be a list, not a string"),
        (f"{C0}.resources.limits.cpu", [1], f"{POD}.containers[0].resources.limits.cpu: must be"),
        (f"{C0}.imagePullPolicy", 1, f"{POD}.containers[0].imagePullPolicy: must be a string"),
        (f"{C0}.bogus", 1, f"{POD}.containers[0].bogus: unknown field"),
        ("spec.template.spec.restartPolicy", "Always", f"{POD}.restartPolicy: must not be"),
        ("spec.template.spec.restartPolicy", ..., f"{POD}.restartPolicy: is required"),
        ("spec.template.spec.containers", [], f"{POD}.containers: is required"),
        ("spec.template.spec.containers", ..., f"{POD}.containers: is required"),
        ("spec.template.spec.hostNetwork", "yes", f"{POD}.hostNetwork: must be a boolean"),
        ("spec.template.spec", ..., "spec.jobTemplate.spec.template.spec: is required"),
        ("spec.template", ..., "spec.jobTemplate.spec.template: is required"),
        ("spec", ..., "spec.jobTemplate.spec: is required"),
        ("spec.backoffLimit", -1, "spec.jobTemplate.spec.backoffLimit: must be >= 0"),
        ("spec.backoffLimit", 2**31, "spec.jobTemplate.spec.backoffLimit: must fit in int32"),
        ("spec.backoffLimit", "6", "spec.jobTemplate.spec.backoffLimit: must be an integer"),
        ("spec.backoffLimit", True, "spec.jobTemplate.spec.backoffLimit: must be an integer"),
        ("spec.backoffLimit", 1.5, "spec.jobTemplate.spec.backoffLimit: must be an integer"),
        ("spec.activeDeadlineSeconds", 0, "spec.jobTemplate.spec.activeDeadlineSeconds: must be"),
        ("spec.parallelism", -2, "spec.jobTemplate.spec.parallelism: must be >= 0"),
        ("spec.ttlSecondsAfterFinished", -1, "spec.jobTemplate.spec.ttlSecondsAfterFinished: must"),
        ("spec.bogus", 1, "spec.jobTemplate.spec.bogus: unknown field"),
        ("kind", "Job", "spec.jobTemplate.kind: unknown field"),
        ("apiVersion", "batch/v1", "spec.jobTemplate.apiVersion: unknown field"),
        ("metadata.name", "x", "spec.jobTemplate.metadata.name: is set by tickwork"),
        ("metadata.namespace", "x", "spec.jobTemplate.metadata.namespace: is set by tickwork"),
        ("metadata.ownerReferences", [], "spec.jobTemplate.metadata.ownerReferences: is set"),
        ("metadata.labels", {"a b": "x"}, 'spec.jobTemplate.metadata.labels["a b"]: key name'),
        ("metadata.labels", {"a": "x y"}, 'spec.jobTemplate.metadata.labels["a"]: value must'),
        ("metadata.labels", {"a": 1}, "spec.jobTemplate.metadata.labels.a: must be a string"),
        ("metadata.labels", {"A.b/c": "x"}, 'spec.jobTemplate.metadata.labels["A.b/c"]: key pre'),
        ("metadata", [], "spec.jobTemplate.metadata: must be an object, not a list"),
        ("spec.template.spec.containers", [None], f"{POD}.containers[0]: must not be null"),
        (f"{C0}.name", None, f"{POD}.containers[0].name: is required"),
        (f"{C0}.command", ["a", None], f"{POD}.containers[0].command[1]: must not be null"),
    ],
)
def test_invalid_templates_are_refused_naming_the_field(
    path: str, value: Any, expected: str
) -> None:
    spec = container_spec(with_change(path, value))
    assert refusal(spec).startswith(expected)


@pytest.mark.parametrize(
    "change",
    [
        ("spec.template.spec.containers.0.image", "x" * 200),  # CRD: no length limit either
        ("spec.template.spec.restartPolicy", "Never"),
        ("spec.template.spec.containers.0.env", None),
        (
            "spec.podFailurePolicy",
            {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]},
        ),
        ("spec.template.spec.initContainers", [{"name": "init", "image": "busybox"}]),
        ("metadata", None),
    ],
)
def test_valid_variations_are_accepted(change: tuple[str, Any]) -> None:
    spec = container_spec(with_change(*change))
    assert translate(manifest(spec)).error is None
    assert schema_errors(manifest(without_nulls(spec))) == []


def without_nulls(value: Any) -> Any:
    """``value`` as the API server validates it: it drops the nulls of fields that are not
    nullable before validation (tickwork reads null as "not set" the same way)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def test_two_containers_may_not_share_a_name() -> None:
    template = with_change(
        "spec.template.spec.initContainers", [{"name": "main", "image": "busybox"}]
    )
    assert refusal(container_spec(template)).startswith(
        f"{POD}.containers[0].name: 'main' is the name of another container"
    )


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ([], "spec.jobTemplate: must be a mapping"),
        ("busybox", "spec.jobTemplate: must be a mapping"),
        (
            with_change("metadata.annotations", {"a": "x" * limits.PAYLOAD_MAX_BYTES}),
            "spec.jobTemplate: is larger than 65536 bytes",
        ),
        (with_change(f"{C0}.args", ["a\x00b"]), f"{POD}.containers[0].args[0]: must not contain"),
        (with_change(f"{C0}.args", [math.nan]), f"{POD}.containers[0].args[0]: nan is not a JSON"),
        (with_change(f"{C0}.args", [2**64]), f"{POD}.containers[0].args[0]: 18446744073709551616 "),
    ],
)
def test_hostile_templates_are_refused_within_the_payload_limits(
    template: Any, expected: str
) -> None:
    with pytest.raises(DefinitionError) as caught:
        ScheduleDefinition.from_spec("backup", container_spec(template))
    assert f"{caught.value.field}: {caught.value.reason}".startswith(expected)
    assert translate(manifest(container_spec(template))).error is not None


def test_a_deep_template_is_refused_without_recursion() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = {"a": deep}
    template = with_change("spec.template.spec.nodeSelector", deep)
    error = translate(manifest(container_spec(template))).error
    assert error is not None and "nests deeper than 64 levels" in error


def test_the_example_is_a_valid_kubernetes_job() -> None:
    """The example's template, made a Job as the worker makes it, passes Kubernetes' own
    strict schema (kubernetes-validate stands in for the API server)."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    [definition] = [d for d in load_path(EXAMPLES) if d.container is not None]
    assert definition.container is not None
    kubernetes_validate.validate(job_of(definition.container.template), "1.33.0", strict=True)


def job_of(template: Any) -> dict[str, Any]:
    metadata = {**(template.get("metadata") or {}), "name": "x", "namespace": "n"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": template["spec"]}


# --- hostile templates, generated ---------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
FIELDS = [
    "metadata",
    "metadata.labels",
    "spec",
    "spec.template",
    "spec.template.metadata",
    "spec.template.spec",
    "spec.backoffLimit",
    "spec.completions",
    "spec.suspend",
    "spec.podFailurePolicy",
    "spec.template.spec.restartPolicy",
    "spec.template.spec.containers",
    f"{C0}",
    f"{C0}.name",
    f"{C0}.image",
    f"{C0}.ports",
    f"{C0}.env",
    f"{C0}.resources",
    "spec.template.spec.volumes",
    "spec.template.spec.tolerations",
    "spec.template.spec.securityContext",
    "spec.template.spec.affinity",
    "anything",
]


@st.composite
def hostile_templates(draw: st.DrawFn) -> Any:
    template: Any = copy.deepcopy(TEMPLATE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(FIELDS))
        value = draw(
            JSON
            | st.sampled_from([..., "\x00", "x" * 70_000, 2**31, -1, [None], [{}], {"a": None}])
        )
        with contextlib.suppress(KeyError, IndexError, TypeError):  # a parent was removed
            template = _set(template, path, value)
    return template


def _set(template: Any, path: str, value: Any) -> Any:
    *parents, last = path.split(".")
    node = template
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    key: Any = int(last) if last.isdigit() else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return template


SPEC_VALIDATOR = jsonschema.Draft202012Validator(
    to_json_schema(openapi_schema()["properties"]["spec"]["properties"]["jobTemplate"])
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_templates())
def test_hostile_templates_are_refused_naming_a_field_or_accepted(template: Any) -> None:
    """Never an exception other than DefinitionError; a refusal names a field of the
    template; what Python accepts the CRD accepts too, and it round-trips unchanged."""
    spec = container_spec(template)
    try:
        definition = ScheduleDefinition.from_spec("backup", spec)
        definition.validate("team-a")
    except DefinitionError as error:
        assert error.field.startswith("spec.jobTemplate"), error
        assert translate(manifest(spec)).error == f"{error.field}: {error.reason}"
        return
    assert list(SPEC_VALIDATOR.iter_errors(without_nulls(template))) == []
    assert ScheduleDefinition.from_spec("backup", definition.to_spec()) == definition


def test_the_containers_page_shows_a_valid_schedule() -> None:
    """docs/containers.md's manifest passes the CRD's schema and tickwork's checks."""
    page = (EXAMPLES.parents[1] / "docs" / "containers.md").read_text()
    block = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    document = yaml.safe_load(block)
    assert document["kind"] == "Schedule"
    assert schema_errors(document) == []
    translation = translate({**document, "metadata": {**document["metadata"], "uid": "u"}})
    assert translation.error is None and translation.definition is not None
    assert translation.definition.job.kind == container_jobs.KIND


def test_a_tenant_policy_refusing_the_reserved_kind_refuses_container_schedules() -> None:
    from tickwork.schedules import tenancy

    policy = tenancy.TenantPolicy("team-a", ("team-a",), kinds=("team-a.*",))
    definition = ScheduleDefinition.from_spec("backup", container_spec())
    refused = tenancy.check("team-a", "team-a", definition, [policy])
    assert refused is not None and refused.reason == tenancy.POLICY_VIOLATION
    assert refused.message.startswith(
        "spec.jobTemplate: kind 'tickwork.kubernetes-job' (a jobTemplate) is not allowed"
    )
    allowing = tenancy.TenantPolicy("team-a", ("team-a",), kinds=("tickwork.kubernetes-job",))
    assert tenancy.check("team-a", "team-a", definition, [allowing]) is None
