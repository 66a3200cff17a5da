"""What a TenantPolicy lets a container Schedule run (src/tickwork/schedules/container_policy.py
and images.py), pure: image references in full form and prefixes at a boundary, and pod specs
over a large space (hypothesis): every container of every group, the service account, privileged
containers, host namespaces and hostPath volumes; each refusal names a field that holds what it
refuses; the section is read as the CRD's schema reads it."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.schedules.test_crd import CRDS, to_json_schema
from tickwork.schedules import images
from tickwork.schedules.container_policy import ContainerRules, parse, problem
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.tenancy import POLICY_VIOLATION, PolicyError, TenantPolicy, check
from tickwork.schedules.tenancy import parse as parse_policy

CRD = yaml.safe_load((CRDS / "tenantpolicies.tickwork.io.yaml").read_text())
SCHEMA = to_json_schema(CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
CONTAINERS_SCHEMA = SCHEMA["properties"]["spec"]["properties"]["containers"]

hosts = st.sampled_from(["registry.example.com", "localhost:5000", "r.io", "docker.io", "ghcr.io"])
components = st.text("abz09-_.", min_size=1, max_size=6).filter(lambda c: c[0].isalnum())
paths = st.lists(components, min_size=1, max_size=3).map("/".join)
tags = st.sampled_from(["", ":1", ":latest", "@sha256:0123abcd"])


# --- image references -----------------------------------------------------------------------


@given(host=hosts, path=paths, tag=tags)
def test_a_reference_naming_its_registry_is_its_own_full_form(
    host: str, path: str, tag: str
) -> None:
    image = f"{host}/{path}{tag}"
    full = images.normalized(image)
    assert images.normalized(full) == full
    if host != "docker.io":
        assert full == image
    else:
        assert full.startswith("docker.io/") and full.endswith(path.split("/")[-1] + tag)


short_names = st.lists(
    st.text("abz09-_", min_size=1, max_size=6).filter(lambda c: c[0].isalnum()),
    min_size=1,
    max_size=3,
).map("/".join)


@given(path=short_names, tag=tags)
def test_a_short_name_is_pulled_from_docker_hub(path: str, tag: str) -> None:
    """``busybox`` is ``docker.io/library/busybox``; ``team/app`` is ``docker.io/team/app``:
    a first component without '.' or ':' is no host (``localhost`` aside)."""
    full = images.normalized(path + tag)
    expected = f"docker.io/{path}{tag}" if "/" in path else f"docker.io/library/{path}{tag}"
    assert full == expected
    assert images.under(path + tag, "docker.io/")
    assert not images.under(path + tag, f"{path.split('/')[0]}.io/")


@given(
    host=hosts.filter(lambda h: h != "docker.io"),
    path=paths,
    tail=st.text("abz09", min_size=1, max_size=4),
    tag=tags,
)
def test_a_prefix_ends_at_a_boundary(host: str, path: str, tail: str, tag: str) -> None:
    """``registry.example.com/team-a`` allows ``.../team-a/app`` and ``.../team-a:1``, never
    ``.../team-a-evil/app`` nor ``.../team-ab``: a prefix is whole path components unless it
    ends with '/', ':' or '@'."""
    prefix = f"{host}/{path}"
    assert images.under(f"{prefix}/{tail}{tag}", prefix)
    assert images.under(f"{prefix}{tag}", prefix)
    assert not images.under(f"{prefix}{tail}{tag}", prefix)
    assert not images.under(f"{prefix}-{tail}/x{tag}", prefix)
    assert not images.under(f"{prefix}-{tail}/x{tag}", prefix + "-")
    assert images.under(f"{prefix}/{tail}{tag}", prefix + "/")


@given(host=hosts, other=hosts, path=paths, tag=tags)
def test_no_image_of_another_registry_is_under_a_prefix(
    host: str, other: str, path: str, tag: str
) -> None:
    if other != host:
        assert not images.under(f"{other}/{path}{tag}", f"{host}/")


@given(prefix=st.text("abz.:/ -\t", max_size=12))
def test_a_prefix_must_name_a_registry_host(prefix: str) -> None:
    """A prefix compared with full forms must start with a host, or it would look as though
    ``myregistry/`` allowed a private registry while ``myregistry/app`` comes from Docker Hub."""
    host, slash, _ = prefix.partition("/")
    valid = (
        bool(slash)
        and ("." in host or ":" in host or host == "localhost")
        and not any(c in " \t" for c in prefix)
    )
    assert (images.prefix_problem(prefix) is None) == valid
    assert images.prefix_problem("myregistry/") is not None
    assert images.prefix_problem("docker.io/library/busybox") is None


def test_the_crd_and_the_reader_share_the_prefix_pattern() -> None:
    items = CONTAINERS_SCHEMA["properties"]["allowedImagePrefixes"]["items"]
    assert items["pattern"] == f"^{images.PREFIX_PATTERN}$"


# --- pod specs ------------------------------------------------------------------------------

PREFIXES = ("registry.example.com/team-a/", "docker.io/library/busybox")
ALLOWED_IMAGES = [
    "registry.example.com/team-a/app:1",
    "registry.example.com/team-a/tools/x@sha256:0a",
    "busybox",
    "busybox:1.36",
    "docker.io/library/busybox:1.36",
]
REFUSED_IMAGES = [
    "evil.io/x",
    "registry.example.com/team-a-evil/app",
    "registry.example.com/team-b/app",
    "busyboxx:1",
    "library/busybox2",
    "team-a/app",
]
ACCOUNTS = ("default", "batch-*")
ALLOWED_ACCOUNTS = [None, "default", "batch-runner", "batch-"]
REFUSED_ACCOUNTS = ["admin", "kube-system", "batch", "defaults"]

contexts = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {}, optional={"privileged": st.booleans(), "runAsNonRoot": st.booleans()}
    ),
)
containers = st.fixed_dictionaries(
    {"name": st.just("c"), "image": st.sampled_from(ALLOWED_IMAGES + REFUSED_IMAGES)},
    optional={"securityContext": contexts},
)
volumes = st.one_of(
    st.just({"name": "v", "emptyDir": {}}),
    st.just({"name": "h", "hostPath": {"path": "/"}}),
    st.just({"name": "s", "secret": {"secretName": "x"}}),
)
pods = st.fixed_dictionaries(
    {"restartPolicy": st.just("Never"), "containers": st.lists(containers, min_size=1, max_size=3)},
    optional={
        "initContainers": st.lists(containers, max_size=2),
        "ephemeralContainers": st.lists(containers, max_size=1),
        "serviceAccountName": st.sampled_from(
            [a for a in ALLOWED_ACCOUNTS if a] + REFUSED_ACCOUNTS
        ),
        "serviceAccount": st.sampled_from(["batch-x", "admin"]),
        "hostNetwork": st.booleans(),
        "hostPID": st.booleans(),
        "hostIPC": st.booleans(),
        "volumes": st.lists(volumes, max_size=3),
    },
)
rules = st.builds(
    ContainerRules,
    image_prefixes=st.sampled_from([None, PREFIXES, ()]),
    service_accounts=st.sampled_from([None, ACCOUNTS, ()]),
    allow_privileged=st.booleans(),
    allow_host_namespaces=st.booleans(),
    allow_host_path=st.booleans(),
)


def template(pod: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": pod}}}


def every_container(pod: dict[str, Any]) -> list[dict[str, Any]]:
    groups = ("initContainers", "containers", "ephemeralContainers")
    return [c for group in groups for c in pod.get(group, [])]


def allowed_by(pod: dict[str, Any], rules: ContainerRules) -> bool:
    """The rules, said again from the lists above."""
    account = pod.get("serviceAccountName") or pod.get("serviceAccount") or "default"
    if rules.service_accounts is not None and not (
        rules.service_accounts == ACCOUNTS and account not in [*REFUSED_ACCOUNTS, "admin"]
    ):
        return False
    for container in every_container(pod):
        if rules.image_prefixes is not None and not (
            rules.image_prefixes == PREFIXES and container["image"] in ALLOWED_IMAGES
        ):
            return False
        if not rules.allow_privileged and (container.get("securityContext") or {}).get(
            "privileged"
        ):
            return False
    if not rules.allow_host_namespaces and any(
        pod.get(key) for key in ("hostNetwork", "hostPID", "hostIPC")
    ):
        return False
    return rules.allow_host_path or not any("hostPath" in v for v in pod.get("volumes", []))


def resolve(document: Any, path: str) -> Any:
    """The value at a refusal's field (``spec.jobTemplate.spec...containers[0].image``)."""
    value = document
    for name, index in re.findall(r"\.?([A-Za-z]+)|\[(\d+)\]", path):
        value = value[name] if name else value[int(index)]
    return value


@settings(max_examples=400)
@given(pod=pods, rules=rules)
def test_a_pod_spec_is_refused_exactly_when_a_rule_says_so(
    pod: dict[str, Any], rules: ContainerRules
) -> None:
    found = problem(template(pod), rules)
    assert (found is None) == allowed_by(pod, rules), (pod, found)
    if found is not None:
        field, value, allowed = found
        schedule = {"spec": {"jobTemplate": template(pod)}}
        if field.endswith(".serviceAccountName") and "serviceAccountName" not in pod:
            assert "(unset)" in value and "serviceAccount" not in pod
            return
        held = resolve(schedule, field)
        assert held is not None and held is not False, (field, pod)
        if field.endswith(".image"):
            assert value == f"image {held!r}" and allowed.startswith(("images under", "none"))


@given(pod=pods)
def test_without_rules_nothing_is_refused_and_the_defaults_refuse_only_escapes(
    pod: dict[str, Any],
) -> None:
    escapes = any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")) or any(
        "hostPath" in v for v in pod.get("volumes", [])
    )
    privileged = any(
        (c.get("securityContext") or {}).get("privileged") for c in every_container(pod)
    )
    assert (problem(template(pod), ContainerRules()) is None) == (not escapes and not privileged)
    everything = ContainerRules(None, None, True, True, True)
    assert problem(template(pod), everything) is None


def test_an_ephemeral_or_init_container_counts_like_any_other() -> None:
    strict = ContainerRules(image_prefixes=PREFIXES)
    good = {"name": "c", "image": "busybox"}
    bad = {"name": "i", "image": "evil.io/x"}
    for group in ("initContainers", "ephemeralContainers"):
        pod = {"containers": [good], group: [good, bad]}
        field, value, _ = problem(template(pod), strict) or ("", "", "")
        assert field == f"spec.jobTemplate.spec.template.spec.{group}[1].image"
        assert value == "image 'evil.io/x'"


# --- in a TenantPolicy ----------------------------------------------------------------------


def container_schedule(pod: dict[str, Any]) -> ScheduleDefinition:
    spec = {"schedule": "0 3 * * *", "jobTemplate": template({"restartPolicy": "Never", **pod})}
    return ScheduleDefinition.from_spec("nightly", spec)


def policy(containers: Any, name: str = "team-a") -> TenantPolicy:
    spec = {"namespaces": ["team-a"], "containers": containers}  # None: absent
    return parse_policy({"apiVersion": "tickwork.io/v1", "kind": "TenantPolicy",
                         "metadata": {"name": name}, "spec": spec})  # fmt: skip


def test_a_refusal_names_the_field_the_value_and_the_policy() -> None:
    evil = container_schedule({"containers": [{"name": "c", "image": "evil.io/x"}]})
    restricting = policy({"allowedImagePrefixes": ["registry.example.com/team-a/"]})
    refusal = check("team-a", "team-a", evil, [restricting])
    assert refusal is not None and refusal.reason == POLICY_VIOLATION
    assert refusal.message == (
        "spec.jobTemplate.spec.template.spec.containers[0].image: image 'evil.io/x' is not "
        "allowed for namespace team-a by TenantPolicy 'team-a' (allowed: images under "
        "registry.example.com/team-a/)"
    )
    assert check("team-b", "team-b", evil, [restricting]) is None, "it covers team-a only"
    host = container_schedule({"hostPID": True, "containers": [{"name": "c", "image": "x.io/a"}]})
    refusal = check("team-a", "team-a", host, [policy({})])
    assert refusal is not None and refusal.message.startswith(
        "spec.jobTemplate.spec.template.spec.hostPID: hostPID: true is not allowed for namespace "
        "team-a by TenantPolicy 'team-a' (allowed: no host namespaces)"
    )


def test_without_a_containers_section_a_policy_restricts_only_the_kind() -> None:
    """Existing policies keep working: no section, no new refusal."""
    pod = {"hostNetwork": True, "containers": [{"name": "c", "image": "evil.io/x"}]}
    loose = policy(None)
    assert loose.containers is None
    assert check("team-a", "team-a", container_schedule(pod), [loose]) is None


def test_every_covering_policy_must_allow_the_pod() -> None:
    pod = {"containers": [{"name": "c", "image": "registry.example.com/team-a/app"}]}
    a = policy({"allowedImagePrefixes": ["registry.example.com/team-a/"]}, "a")
    b = policy({"allowedImagePrefixes": ["registry.example.com/shared/"]}, "b")
    assert check("team-a", "team-a", container_schedule(pod), [a]) is None
    refusal = check("team-a", "team-a", container_schedule(pod), [a, b])
    assert refusal is not None and "TenantPolicy 'b'" in refusal.message


@pytest.mark.parametrize(
    ("containers", "message"),
    [
        ("all", "spec.containers: must be a mapping"),
        ({"allowedImagePrefixes": "r.io/"}, "spec.containers.allowedImagePrefixes: must be a list"),
        (
            {"allowedImagePrefixes": ["busybox"]},
            "spec.containers.allowedImagePrefixes[0]: 'busybox'",
        ),
        (
            {"allowedServiceAccounts": [""]},
            "spec.containers.allowedServiceAccounts: must be a list",
        ),
        ({"allowPrivileged": "yes"}, "spec.containers.allowPrivileged: must be true or false"),
        ({"allowHostPID": True}, "spec.containers.allowHostPID: unknown field"),
        (
            {"allowedImagePrefix": ["r.io/"]},
            "spec.containers.allowedImagePrefix: unknown field"
            " (did you mean `allowedImagePrefixes`?)",
        ),
    ],
)
def test_a_bad_containers_section_names_the_field(containers: Any, message: str) -> None:
    with pytest.raises(PolicyError, match="^" + re.escape(message)):
        policy(containers)


def test_a_full_section_reads_as_written() -> None:
    assert parse(
        {
            "allowedImagePrefixes": ["registry.example.com/team-a/"],
            "allowedServiceAccounts": ["default", "batch-runner"],
            "allowPrivileged": True,
            "allowHostNamespaces": False,
            "allowHostPath": True,
        }
    ) == ContainerRules(
        ("registry.example.com/team-a/",), ("default", "batch-runner"), True, False, True
    )


section_values = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(["r.io/", "busybox", "x", ""]),
    st.lists(st.sampled_from(["r.io/a", "localhost/x", "busybox", "", "a b.io/", "default"])),
)


@settings(max_examples=300)
@given(
    section=st.dictionaries(
        st.sampled_from(
            [
                "allowedImagePrefixes",
                "allowedServiceAccounts",
                "allowPrivileged",
                "allowHostNamespaces",
                "allowHostPath",
                "other",
            ]
        ),
        section_values,
    )
)
def test_the_crd_schema_and_the_reader_accept_the_same_sections(section: dict[str, Any]) -> None:
    section = {key: value for key, value in section.items() if value is not None}
    spec = {"namespaces": ["a"], "containers": section}
    try:
        jsonschema.validate({"spec": spec}, SCHEMA)
        valid_for_crd = True
    except jsonschema.ValidationError:
        valid_for_crd = False
    try:
        policy(section)
        valid_for_reader = True
    except PolicyError:
        valid_for_reader = False
    assert valid_for_crd == valid_for_reader, section
