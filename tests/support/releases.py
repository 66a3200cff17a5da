"""Tagged releases of tickwork, for the tests that run one next to the head (docs/releases.md).

A release is a tag ``vX.Y.Z`` on the commit whose pyproject.toml says ``version = "X.Y.Z"``.
The *previous release* of a checkout is the highest such tag reachable from HEAD whose version
differs from the head's own (on the release commit itself, the one before it); without tags
(a clone of the branch alone), the same release found by its recorded commit (``RECORDED``).

``install`` puts a release into a virtualenv of its own: the tag's tree (``git archive``) is
installed with pip, offline (``--no-index --no-deps --no-build-isolation``), into a virtualenv
made with ``--system-site-packages`` so that the dependencies come from the running
interpreter's; the release's own files shadow the head's. Its build backend (hatchling, in the
test extras) must be importable.

Import as ``from tests.support import releases``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[2]

RECORDED = {"0.1.0": "4debebf36391dc06f7a7098c3b835efbcc949329"}
"""Each release's commit, recorded when it is cut (docs/releases.md): a checkout without the
tags (a CI clone of the branch alone) still finds the previous release in its history. Where
a tag is present, it must be on the recorded commit."""

FETCH_TAGS = (
    "no release older than the head's version is reachable from HEAD: no v* tag (a tag-less "
    "clone) and no commit of RECORDED in the history (a shallow clone). Fetch them: "
    "git fetch --tags (and git fetch --unshallow for a shallow clone)"
)


@dataclass(frozen=True)
class Release:
    tag: str
    """``vX.Y.Z``."""
    version: str
    ref: str
    """What git reads it by: the tag, or without the tags its recorded commit."""


@dataclass(frozen=True)
class Installed:
    """A release installed in a virtualenv: its interpreter and ``tickwork`` command."""

    release: Release
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def tickwork(self) -> Path:
        return self.venv / "bin" / "tickwork"

    def env(self, **variables: str) -> dict[str, str]:
        """An environment for the release's processes: this one's, less PYTHONPATH (which
        would put the head's code first) and every TICKWORK_ variable, plus ``variables``."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("TICKWORK_")
        }
        env.update(variables)
        return env


def _git(*args: str, root: Path = ROOT) -> str:
    result = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def head_version(root: Path = ROOT) -> str:
    """The version pyproject.toml of the checkout says."""
    version: str = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    return version


def tag_version(tag: str, root: Path = ROOT) -> str:
    """The version pyproject.toml says at ``tag``."""
    text = _git("show", f"{tag}:pyproject.toml", root=root)
    version: str = tomllib.loads(text)["project"]["version"]
    return version


def releases(root: Path = ROOT) -> list[Release]:
    """The release tags reachable from HEAD, oldest first. A tag whose name disagrees with the
    version its pyproject.toml says is an error, not a release."""
    found = []
    for tag in _git("tag", "--list", "v*", "--merged", "HEAD", root=root).split():
        try:
            Version(tag[1:])
        except InvalidVersion:
            continue
        version = tag_version(tag, root)
        if Version(version) != Version(tag[1:]):
            raise AssertionError(f"tag {tag} is on a commit whose pyproject.toml says {version}")
        found.append(Release(tag, version, tag))
    return sorted(found, key=lambda r: Version(r.version))


def previous(root: Path = ROOT) -> Release:
    """The previous release (see the module's docstring): its tag, or without the tags its
    recorded commit (:data:`RECORDED`, when HEAD descends from it); AssertionError naming the
    fix when neither is there."""
    head = Version(head_version(root))
    tagged = [r for r in releases(root) if Version(r.version) < head]
    for release in tagged:
        recorded = RECORDED.get(release.version)
        commit = _git("rev-list", "-n", "1", release.tag, root=root).strip()
        assert recorded in (None, commit), f"{release.tag} is on {commit}, recorded {recorded}"
    if tagged:
        return tagged[-1]
    reachable = [
        Release(f"v{version}", version, commit)
        for version, commit in RECORDED.items()
        if Version(version) < head and _is_ancestor(commit, root)
    ]
    assert reachable, FETCH_TAGS
    return max(reachable, key=lambda r: Version(r.version))


def _is_ancestor(commit: str, root: Path) -> bool:
    result = subprocess.run(
        ["git", "merge-base", "--is-ancestor", commit, "HEAD"],
        cwd=root,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return result.returncode == 0


def install(release: Release, where: Path) -> Installed:
    """Install ``release`` into the virtualenv ``where/venv`` (from its tree in ``where/src``)."""
    source, venv = where / "src", where / "venv"
    source.mkdir(parents=True)
    archive = where / "release.tar"
    _git("archive", "--format=tar", f"--output={archive}", release.ref)
    with tarfile.open(archive) as tar:
        tar.extractall(source, filter="tar")
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    installed = Installed(release, venv)
    result = subprocess.run(
        [
            str(installed.python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            str(source),
        ],
        env=installed.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (
        f"installing {release.tag} failed (is hatchling installed? pip install -e '.[test]'):\n"
        + result.stderr[-3000:]
    )
    return installed
