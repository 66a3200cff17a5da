"""What a TenantPolicy lets a container Schedule run (pure): the ``spec.containers`` section of a
``TenantPolicy`` (:class:`ContainerRules`, read by :func:`parse`) and the check of a
``spec.jobTemplate`` against it (:func:`problem`), which :mod:`tickwork.schedules.tenancy`
applies for the operator, its webhook and ``tickwork sync --policy`` alike.

A policy without the section restricts nothing here (as before it existed); with it,
privileged containers, host namespaces (``hostNetwork``, ``hostPID``, ``hostIPC``) and
``hostPath`` volumes are refused unless allowed, and images and the pod's service account are
restricted when ``allowedImagePrefixes`` / ``allowedServiceAccounts`` are given. Every container
of the pod counts: ``initContainers``, ``containers`` and ``ephemeralContainers``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tickwork.errors import did_you_mean
from tickwork.schedules import images, limits

POD = "spec.jobTemplate.spec.template.spec"
"""Where the pod spec sits in a Schedule, for the fields a refusal names."""
CONTAINER_GROUPS = ("initContainers", "containers", "ephemeralContainers")
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
DEFAULT_SERVICE_ACCOUNT = "default"
MAX_ITEM_LENGTH = limits.MAX_NAME_LENGTH

_LISTS = {"allowedImagePrefixes": "image_prefixes", "allowedServiceAccounts": "service_accounts"}
_SWITCHES = {
    "allowPrivileged": "allow_privileged",
    "allowHostNamespaces": "allow_host_namespaces",
    "allowHostPath": "allow_host_path",
}

Problem = tuple[str, str, str]
"""(field, the value refused, what is allowed)."""


@dataclass(frozen=True)
class ContainerRules:
    image_prefixes: tuple[str, ...] | None = None
    """Every image must lie under one (:func:`tickwork.schedules.images.under`); None: any."""
    service_accounts: tuple[str, ...] | None = None
    """Names or globs of the service accounts the pod may run as; None: any."""
    allow_privileged: bool = False
    """Containers with ``securityContext.privileged: true``."""
    allow_host_namespaces: bool = False
    """``hostNetwork``, ``hostPID``, ``hostIPC``."""
    allow_host_path: bool = False
    """``hostPath`` volumes."""


def parse(value: Any) -> ContainerRules:
    """The rules of a ``spec.containers`` value; ValueError ``containers.FIELD: reason``."""
    if not isinstance(value, Mapping):
        raise ValueError("containers: must be a mapping")
    found: dict[str, Any] = {}
    for key, item in value.items():
        if key in _LISTS:
            if item is not None:
                found[_LISTS[key]] = _names(key, item)
        elif key in _SWITCHES:
            if item is not None and not isinstance(item, bool):
                raise ValueError(f"containers.{key}: must be true or false")
            found[_SWITCHES[key]] = bool(item)
        else:
            hint = did_you_mean(key, [*_LISTS, *_SWITCHES]) if isinstance(key, str) else ""
            raise ValueError(f"containers.{key}: unknown field{hint}")
    for index, prefix in enumerate(found.get("image_prefixes", ())):
        reason = images.prefix_problem(prefix)
        if reason is not None:
            raise ValueError(f"containers.allowedImagePrefixes[{index}]: {reason}")
    return ContainerRules(**found)


def _names(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(item, str) and item and "\x00" not in item and len(item) <= MAX_ITEM_LENGTH
        for item in value
    ):
        raise ValueError(
            f"containers.{key}: must be a list of texts of 1 to {MAX_ITEM_LENGTH} characters "
            "without NUL"
        )
    return tuple(value)


def problem(template: Mapping[str, Any], rules: ContainerRules) -> Problem | None:
    """The first thing in a ``JobTemplateSpec`` the rules refuse, or None."""
    pod = _mapping(_mapping(_mapping(template.get("spec")).get("template")).get("spec"))
    if not rules.allow_host_namespaces:
        for key in HOST_NAMESPACES:
            if pod.get(key) is True:
                return f"{POD}.{key}", f"{key}: true", "no host namespaces"
    found = _service_account_problem(pod, rules.service_accounts)
    if found is not None:
        return found
    if not rules.allow_host_path:
        for index, volume in enumerate(_list(pod.get("volumes"))):
            if _mapping(volume).get("hostPath") is not None:
                field = f"{POD}.volumes[{index}].hostPath"
                return field, "a hostPath volume", "no hostPath volumes"
    for at, container in _containers(pod):
        image = container.get("image")
        prefixes = rules.image_prefixes
        if (
            prefixes is not None
            and isinstance(image, str)
            and not any(images.under(image, prefix) for prefix in prefixes)
        ):
            allowed = f"images under {', '.join(prefixes)}" if prefixes else "none"
            return f"{at}.image", f"image {image!r}", allowed
        context = _mapping(container.get("securityContext"))
        if not rules.allow_privileged and context.get("privileged") is True:
            field = f"{at}.securityContext.privileged"
            return field, "a privileged container", "no privileged containers"
    return None


def _service_account_problem(
    pod: Mapping[str, Any], allowed: tuple[str, ...] | None
) -> Problem | None:
    """The pod runs as ``serviceAccountName``, else the deprecated ``serviceAccount``, else
    ``default``."""
    if allowed is None:
        return None
    name, field, value = DEFAULT_SERVICE_ACCOUNT, f"{POD}.serviceAccountName", " (unset)"
    for key in ("serviceAccountName", "serviceAccount"):
        given = pod.get(key)
        if isinstance(given, str) and given:
            name, field, value = given, f"{POD}.{key}", ""
            break
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed):
        return None
    return field, f"service account {name!r}{value}", ", ".join(allowed) or "none"


def _containers(pod: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for group in CONTAINER_GROUPS:
        for index, container in enumerate(_list(pod.get(group))):
            yield f"{POD}.{group}[{index}]", _mapping(container)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
