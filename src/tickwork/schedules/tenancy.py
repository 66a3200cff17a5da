"""Tenant policy (pure): a Kubernetes namespace is a tenant, and what its Schedules may use is
set by the platform admin in ``TenantPolicy`` objects (cluster-scoped, ``tickwork.io/v1``),
never by the tenant. The operator, its webhook and ``tickwork sync --policy`` apply the same
rules through :func:`check` (docs/tenancy.md).

* A Schedule may always sync into the schedule namespace named after its own Kubernetes
  namespace; any other target needs every policy covering its namespace to allow it (so with
  no policy, none is allowed).
* Queues, kinds (glob patterns), a priority ceiling and a concurrency-key prefix are
  unrestricted unless a covering policy restricts them; every covering policy must allow a
  value, so adding a policy never allows more.
* Container Schedules (``spec.jobTemplate``) are restricted by a covering policy's
  ``containers`` section (:mod:`tickwork.schedules.container_policy`: images, service
  accounts, privileged containers, host namespaces, ``hostPath``); without one, only ``kinds``
  applies to them.
* A policy that cannot be read refuses every Schedule of the namespaces it covers (all of them,
  when even its ``spec.namespaces`` cannot be read): a broken policy fails closed.
* A policy with ``spec.paused: true`` holds the schedule namespaces it governs (:func:`held`):
  the operator pauses them (docs/flow-control.md); ``tickwork sync --policy`` ignores it.
* ``spec.maxRunning`` and ``spec.weight`` become the flow rule of each schedule namespace a
  policy governs (:func:`limited`): at most that many of its jobs run at once, and its share in
  fair claiming; the smaller value wins when several policies govern one namespace. The
  operator writes them to ``tickwork.flow_rules``; ``tickwork sync --policy`` ignores them.

Every refusal names the field and the rule, e.g. ``spec.job.queue: queue 'payments' is not
allowed for namespace team-a by TenantPolicy 'team-a' (allowed: team-a-*)``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tickwork.errors import TickworkError, did_you_mean
from tickwork.flow import limits as flow_limits
from tickwork.schedules import container_policy, limits
from tickwork.schedules.checks import shown
from tickwork.schedules.container_policy import ContainerRules
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate

API_VERSION = "tickwork.io/v1"
KIND = "TenantPolicy"
NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
"""Reason of a refused ``spec.scheduleNamespace``."""
POLICY_VIOLATION = "PolicyViolation"
"""Reason of a refused queue, kind, priority or concurrency key (or a broken policy)."""

MAX_PATTERN_LENGTH = limits.MAX_NAME_LENGTH + 2
"""A pattern is a name of at most 255 characters (queue, kind) with a few glob characters."""
MAX_FILE_BYTES = 1024 * 1024
MAX_PAUSED_REASON = 1000
"""The longest ``spec.pausedReason`` (a pause's reason takes as many characters)."""

_SPEC_FIELDS = frozenset(
    {
        "namespaces",
        "scheduleNamespaces",
        "queues",
        "kinds",
        "maxPriority",
        "concurrencyKeyPrefix",
        "containers",
        "paused",
        "pausedReason",
        "maxRunning",
        "weight",
    }
)


class PolicyError(TickworkError):
    """A TenantPolicy document cannot be read; the message names the field."""


@dataclass(frozen=True)
class TenantPolicy:
    name: str
    namespaces: tuple[str, ...]
    """Glob patterns of the Kubernetes namespaces this policy covers."""
    schedule_namespaces: tuple[str, ...] = ()
    """Patterns of the schedule namespaces allowed besides the tenant's own."""
    queues: tuple[str, ...] | None = None
    """Patterns of the allowed ``job.queue`` values; None: any."""
    kinds: tuple[str, ...] | None = None
    max_priority: int | None = None
    """The highest ``job.priority`` allowed; None: any."""
    concurrency_key_prefix: str | None = None
    """Every ``job.concurrencyKey`` must start with it; None: any key."""
    containers: ContainerRules | None = None
    """What a ``spec.jobTemplate`` may run; None: no restriction beyond ``kinds``."""
    paused: bool = False
    """Whether the schedule namespaces it governs are paused (:func:`held`)."""
    paused_reason: str | None = None
    """Why, recorded as the pause's reason."""
    max_running: int | None = None
    """At most this many running jobs in each schedule namespace it governs (:func:`limited`)."""
    weight: int | None = None
    """The share in fair claiming of each schedule namespace it governs (1 when unset)."""
    error: str | None = None
    """Why the document is invalid (then it refuses everything it covers)."""

    def covers(self, namespace: str) -> bool:
        return _matches(namespace, self.namespaces)

    def governs(self, schedule_namespace: str) -> bool:
        """Whether the Schedules it covers may sync into ``schedule_namespace``: one named
        after a Kubernetes namespace it covers (their own), or one it allows besides."""
        return _matches(schedule_namespace, self.namespaces) or _matches(
            schedule_namespace, self.schedule_namespaces
        )


PAUSE_ACTOR = "/tenantpolicy/"
"""Between the operator's owner and the policy's name in the actor of a pause (or a flow rule)
a policy ordered: ``operator:<cluster>/tenantpolicy/<name>``."""


def pause_actor(owner: str, policy: str) -> str:
    """The actor of the pauses and flow rules ``policy`` orders through the operator of
    ``owner`` (a flow rule's ``set_by``)."""
    return f"{owner}{PAUSE_ACTOR}{policy}"


def pausing_policy(actor: str) -> str | None:
    """The TenantPolicy whose ``spec.paused`` made a pause of ``actor`` (None: a person's)."""
    owner, found, policy = actor.partition(PAUSE_ACTOR)
    return policy if found and owner.startswith("operator:") and policy else None


def held(
    policies: Iterable[TenantPolicy], schedule_namespaces: Iterable[str]
) -> dict[str, TenantPolicy]:
    """The schedule namespaces among ``schedule_namespaces`` that a paused policy governs, each
    with the first such policy by name. An invalid policy holds nothing: it refuses the
    Schedules it covers already, and an unreadable ``spec.paused`` is no order to pause."""
    paused = sorted((p for p in policies if p.paused and p.error is None), key=lambda p: p.name)
    found: dict[str, TenantPolicy] = {}
    for namespace in sorted(set(schedule_namespaces)):
        for policy in paused:
            if policy.governs(namespace):
                found[namespace] = policy
                break
    return found


@dataclass(frozen=True)
class Limit:
    """The flow rule the policies governing one schedule namespace order for it."""

    max_running: int | None
    weight: int | None
    policies: tuple[str, ...]
    """The policies whose values won, by name (the first one is the rule's actor)."""

    def reason(self) -> str:
        """Why the rule is so, for its audit record."""
        names = ", ".join(repr(name) for name in self.policies)
        if len(self.policies) == 1:
            return f"TenantPolicy {names} orders it"
        return f"TenantPolicies {names} order it"


def limited(
    policies: Iterable[TenantPolicy], schedule_namespaces: Iterable[str]
) -> dict[str, Limit]:
    """The schedule namespaces among ``schedule_namespaces`` that a policy with
    ``spec.maxRunning`` or ``spec.weight`` governs, each with what they order: of several
    policies, the smallest ``maxRunning`` and the smallest ``weight`` (so adding a policy never
    allows more), from the first policy by name that has it. An invalid policy orders nothing
    (it refuses the Schedules it covers already)."""
    limiting = sorted(
        (
            p
            for p in policies
            if p.error is None and (p.max_running is not None or p.weight is not None)
        ),
        key=lambda p: p.name,
    )
    found: dict[str, Limit] = {}
    for namespace in sorted(set(schedule_namespaces)):
        governing = [p for p in limiting if p.governs(namespace)]
        if not governing:
            continue
        running = _smallest((p.max_running, p.name) for p in governing)
        weight = _smallest((p.weight, p.name) for p in governing)
        names = tuple(dict.fromkeys(name for _, name in (running, weight) if name))
        found[namespace] = Limit(running[0], weight[0], names)
    return found


def _smallest(values: Iterable[tuple[int | None, str]]) -> tuple[int | None, str]:
    """The smallest set value with its policy's name (the first by name on a tie)."""
    best: tuple[int | None, str] = (None, "")
    for value, name in values:
        if value is not None and (best[0] is None or value < best[0]):
            best = (value, name)
    return best


@dataclass(frozen=True)
class Refusal:
    reason: str
    """NamespaceNotAllowed or PolicyViolation (a Ready condition reason)."""
    message: str
    """``field: rule``."""


def check(
    tenant: str,
    target: str,
    definition: ScheduleDefinition | None,
    policies: Iterable[TenantPolicy],
) -> Refusal | None:
    """Why the policies refuse a Schedule of Kubernetes namespace ``tenant`` that syncs into
    schedule namespace ``target`` (None: allowed). The target is checked even without a valid
    ``definition``; the job's fields only with one."""
    covering = sorted((p for p in policies if p.covers(tenant)), key=lambda p: p.name)
    for policy in covering:
        if policy.error is not None:
            return Refusal(
                POLICY_VIOLATION,
                f"spec: namespace {tenant} is covered by TenantPolicy {policy.name!r}, which is "
                f"invalid ({policy.error}): its Schedules are refused until it is fixed",
            )
    if target != tenant:
        if not covering:
            return Refusal(
                NAMESPACE_NOT_ALLOWED,
                f"spec.scheduleNamespace: schedule namespace {target!r} is not allowed for "
                f"namespace {tenant} by the default policy (a Schedule syncs into its own "
                "namespace only; a TenantPolicy may allow others)",
            )
        for policy in covering:
            if not _matches(target, policy.schedule_namespaces):
                allowed = ", ".join((tenant, *policy.schedule_namespaces))
                return Refusal(
                    NAMESPACE_NOT_ALLOWED,
                    _refused("spec.scheduleNamespace", f"schedule namespace {target!r}", tenant)
                    + f" by TenantPolicy {policy.name!r} (allowed: {allowed})",
                )
    if definition is None:
        return None
    for policy in covering:
        problem = _job_problem(definition, policy)
        if problem is not None:
            field, value, allowed = problem
            return Refusal(
                POLICY_VIOLATION,
                _refused(field, value, tenant)
                + f" by TenantPolicy {policy.name!r} (allowed: {allowed})",
            )
    return None


def _refused(field: str, value: str, tenant: str) -> str:
    return f"{field}: {value} is not allowed for namespace {tenant}"


def _job_problem(
    definition: ScheduleDefinition, policy: TenantPolicy
) -> tuple[str, str, str] | None:
    """(field, value, what is allowed) of the first job field ``policy`` refuses. A Schedule
    with steps is judged by each step's job (its occurrence's own job is tickwork's)."""
    if definition.steps:
        for i, step in enumerate(definition.steps):
            problem = _template_problem(step.job, f"spec.steps[{i}].job", policy, False)
            if problem is not None:
                return problem
        return None
    container = definition.container is not None
    problem = _template_problem(definition.job, "spec.job", policy, container)
    if problem is None and definition.container is not None and policy.containers is not None:
        return container_policy.problem(definition.container.template, policy.containers)
    return problem


def _template_problem(
    job: JobTemplate, path: str, policy: TenantPolicy, container: bool
) -> tuple[str, str, str] | None:
    if policy.queues is not None and not _matches(job.queue, policy.queues):
        return f"{path}.queue", f"queue {job.queue!r}", _listed(policy.queues)
    if policy.kinds is not None and not _matches(job.kind, policy.kinds):
        if container:  # allowing the reserved kind allows containers
            return "spec.jobTemplate", f"kind {job.kind!r} (a jobTemplate)", _listed(policy.kinds)
        return f"{path}.kind", f"kind {job.kind!r}", _listed(policy.kinds)
    if policy.max_priority is not None and job.priority > policy.max_priority:
        return f"{path}.priority", f"priority {job.priority}", f"at most {policy.max_priority}"
    prefix = policy.concurrency_key_prefix
    key = job.concurrency_key
    if prefix is not None and key is not None and not key.startswith(prefix):
        return (
            f"{path}.concurrencyKey",
            f"concurrency key {key!r}",
            f"keys starting with {prefix!r}",
        )
    return None


def _listed(patterns: Sequence[str]) -> str:
    return ", ".join(patterns) if patterns else "none"


def _matches(value: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


# --- documents ------------------------------------------------------------------------------


def parse(document: Any) -> TenantPolicy:
    """The policy of one ``TenantPolicy`` document; raises PolicyError ``field: reason``."""
    if not isinstance(document, Mapping):
        raise PolicyError(f"must be a mapping, not {type(document).__name__}")
    if document.get("apiVersion") != API_VERSION or document.get("kind") != KIND:
        raise PolicyError(
            f"not a {API_VERSION} {KIND} (apiVersion: {document.get('apiVersion')!r}, "
            f"kind: {document.get('kind')!r})"
        )
    name = _name(document)
    if not name:
        raise PolicyError("metadata.name: is required and must be a string")
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        raise PolicyError("spec: is required and must be a mapping")
    return _from_spec(name, spec)


def policy_of(body: Mapping[str, Any]) -> TenantPolicy:
    """The policy of an object as the operator sees it; never raises: an invalid one carries
    its error and covers the namespaces it names (every namespace when those are unreadable)."""
    try:
        return parse(body)
    except Exception as error:
        reason = str(error) if isinstance(error, PolicyError) else type(error).__name__
        spec = body.get("spec")
        try:
            namespaces = _patterns(
                "namespaces", spec.get("namespaces") if isinstance(spec, Mapping) else None
            )
        except Exception:
            namespaces = ("*",)
        return TenantPolicy(_name(body), namespaces or ("*",), error=reason)


def _name(document: Mapping[str, Any]) -> str:
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else ""


def _from_spec(name: str, spec: Mapping[str, Any]) -> TenantPolicy:
    for key in spec:
        if key not in _SPEC_FIELDS:
            hint = did_you_mean(key, _SPEC_FIELDS) if isinstance(key, str) else ""
            raise PolicyError(f"spec.{key}: unknown field{hint}")

    def patterns(field: str) -> tuple[str, ...] | None:
        return None if spec.get(field) is None else _patterns(field, spec[field])

    namespaces = patterns("namespaces")
    if not namespaces:
        raise PolicyError("spec.namespaces: is required: the namespaces this policy covers")
    ceiling = spec.get("maxPriority")
    if ceiling is not None and (
        not isinstance(ceiling, int)
        or isinstance(ceiling, bool)
        or not 0 <= ceiling <= limits.MAX_SMALLINT
    ):
        raise PolicyError(f"spec.maxPriority: must be an integer from 0 to {limits.MAX_SMALLINT}")
    prefix = spec.get("concurrencyKeyPrefix")
    if prefix is not None and (
        not isinstance(prefix, str)
        or not prefix
        or "\x00" in prefix
        or len(prefix) > limits.MAX_CONCURRENCY_KEY_LENGTH
    ):
        raise PolicyError(
            "spec.concurrencyKeyPrefix: must be a string of 1 to "
            f"{limits.MAX_CONCURRENCY_KEY_LENGTH} characters without NUL"
        )
    paused = spec.get("paused", False)
    if not isinstance(paused, bool):
        raise PolicyError("spec.paused: must be true or false")
    reason = spec.get("pausedReason")
    if reason is not None and (
        not isinstance(reason, str)
        or not reason
        or "\x00" in reason
        or len(reason) > MAX_PAUSED_REASON
    ):
        raise PolicyError(
            f"spec.pausedReason: must be a string of 1 to {MAX_PAUSED_REASON} characters "
            "without NUL"
        )
    max_running = _count(spec, "maxRunning", flow_limits.MAX_RUNNING)
    weight = _count(spec, "weight", flow_limits.MAX_WEIGHT)
    containers = None
    if spec.get("containers") is not None:
        try:
            containers = container_policy.parse(spec["containers"])
        except ValueError as error:
            raise PolicyError(f"spec.{error}") from None
    return TenantPolicy(
        name,
        namespaces,
        schedule_namespaces=patterns("scheduleNamespaces") or (),
        queues=patterns("queues"),
        kinds=patterns("kinds"),
        max_priority=ceiling,
        concurrency_key_prefix=prefix,
        containers=containers,
        paused=paused,
        paused_reason=reason,
        max_running=max_running,
        weight=weight,
    )


def _count(spec: Mapping[str, Any], field: str, most: int) -> int | None:
    """An integer field from 1 to ``most`` (absent: None); PolicyError naming it otherwise."""
    value = spec.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise PolicyError(f"spec.{field}: must be an integer from 1 to {most}, not {shown(value)}")
    return value


def _patterns(field: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(item, str) and item and "\x00" not in item and len(item) <= MAX_PATTERN_LENGTH
        for item in value
    ):
        raise PolicyError(
            f"spec.{field}: must be a list of names or glob patterns "
            f"(1 to {MAX_PATTERN_LENGTH} characters, no NUL)"
        )
    return tuple(value)


def load(path: str | Path) -> list[TenantPolicy]:
    """The TenantPolicy documents of a YAML file; raises PolicyError naming file and field."""
    source = str(path)
    try:
        file = Path(path)
        if file.stat().st_size > MAX_FILE_BYTES:
            raise PolicyError(f"{source}: larger than {MAX_FILE_BYTES} bytes")
        documents = list(yaml.safe_load_all(file.read_text(encoding="utf-8")))
    except PolicyError:
        raise
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(f"{source}: cannot read: {error}") from None
    except Exception as error:  # YAML errors, deep nesting: one line, never a traceback
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise PolicyError(f"{source}: invalid YAML: {reason}") from None
    policies: dict[str, TenantPolicy] = {}
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        try:
            policy = parse(document)
        except PolicyError as error:
            name = _name(document) if isinstance(document, Mapping) else ""
            label = f" {KIND} {name!r}:" if name else ""
            raise PolicyError(f"{source}: document {number}:{label} {error}") from None
        if policy.name in policies:
            raise PolicyError(
                f"{source}: document {number}: metadata.name: duplicate {policy.name!r}"
            )
        policies[policy.name] = policy
    if not policies:
        raise PolicyError(f"{source}: no {KIND} documents found")
    return list(policies.values())


def enforce(
    tenant: str, target: str, definitions: Iterable[ScheduleDefinition], path: str | Path
) -> None:
    """``tickwork sync --policy``: raise PolicyError for the first definition the policies of
    ``path`` refuse to ``tenant`` syncing into ``target``."""
    policies = load(path)
    for definition in definitions:
        refusal = check(tenant, target, definition, policies)
        if refusal is not None:
            raise PolicyError(f"Schedule {definition.name!r}: {refusal.message}")
