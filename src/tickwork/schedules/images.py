"""Container image references, as a TenantPolicy compares them (pure): the full form a
container runtime pulls (:func:`normalized`) and whether it lies under an allowed prefix
(:func:`under`).

A reference names its registry only when its first path component looks like a host (holds a
``.`` or a ``:``, or is ``localhost``); otherwise the runtime pulls it from Docker Hub:
``busybox:1.36`` is ``docker.io/library/busybox:1.36``, ``team/app`` is
``docker.io/team/app`` (the rules of the ``distribution/reference`` package that containerd and
CRI-O follow). Prefixes are compared with the full form only, so a prefix has to name a
registry host (:func:`prefix_problem`): ``myregistry/`` would otherwise look as if it allowed a
private registry while ``myregistry/app`` is pulled from Docker Hub.
"""

from __future__ import annotations

import re

DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = ("index.docker.io", "registry-1.docker.io")
OFFICIAL = "library/"
"""Docker Hub's namespace of official images (``busybox`` is ``library/busybox``)."""
BOUNDARIES = "/:@"
"""What may follow a prefix that does not end with one: a path, a tag, a digest."""
PREFIX_PATTERN = r"([^/\t\n\f\r ]*[.:][^/\t\n\f\r ]*|localhost)/[^\t\n\f\r ]*"
"""An allowed prefix: a registry host, ``/``, anything without spaces. The TenantPolicy CRD
carries the same pattern (anchored), so the API server and this module agree."""


def _is_host(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost"


def normalized(image: str) -> str:
    """The reference with its registry and Docker Hub's ``library/`` spelled out."""
    host, slash, rest = image.partition("/")
    if not slash or not _is_host(host):
        rest = image
    elif host not in (DOCKER_HUB, *_DOCKER_HUB_ALIASES):
        return image
    if "/" not in rest.split("@", 1)[0].split(":", 1)[0]:
        rest = OFFICIAL + rest
    return f"{DOCKER_HUB}/{rest}"


def under(image: str, prefix: str) -> bool:
    """Whether the full form of ``image`` is ``prefix`` or continues it at a boundary: with
    ``registry.example.com/team-a``, ``registry.example.com/team-a/app`` and
    ``registry.example.com/team-a:1`` are under it, ``registry.example.com/team-a-evil/app`` is
    not. A prefix ending with ``/``, ``:`` or ``@`` is a plain prefix."""
    full = normalized(image)
    if not full.startswith(prefix):
        return False
    rest = full[len(prefix) :]
    return not rest or prefix[-1] in BOUNDARIES or rest[0] in BOUNDARIES


def prefix_problem(prefix: str) -> str | None:
    """Why ``prefix`` cannot be an allowed image prefix (:data:`PREFIX_PATTERN`), or None."""
    if re.fullmatch(PREFIX_PATTERN, prefix):
        return None
    return (
        f"{prefix!r} must be a registry host (holding '.' or ':', or localhost), '/' and the "
        f"rest without spaces (images are compared in full: busybox is "
        f"{DOCKER_HUB}/{OFFICIAL}busybox)"
    )
