"""The Dockerfile, checked as far as a machine without a Docker engine allows: its stages
copy files that exist and that .dockerignore lets through, its base images are pinned, it
ends as a numeric non-root user, its final stage carries no build tools; and the steps it
runs — build the wheels from the build context, install them into a fresh virtualenv, run
``tickwork`` — run here, against a real database."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tickwork.db import migrate

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass
class Instruction:
    keyword: str
    arguments: str


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [i.arguments for i in self.instructions if i.keyword == keyword]


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continuation"
    result = []
    for line in logical:
        keyword, _, arguments = line.partition(" ")
        result.append(Instruction(keyword.upper(), arguments.strip()))
    return result


def stages(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with ${ARG} in FROM resolved."""
    args: dict[str, str] = {}
    found: list[Stage] = []
    for instruction in instructions(text):
        if instruction.keyword == "ARG" and not found:
            name, _, default = instruction.arguments.partition("=")
            args[name] = default
        elif instruction.keyword == "FROM":
            words = [w for w in instruction.arguments.split() if not w.startswith("--")]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args[m.group(1)], words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            found.append(Stage(image, name))
        else:
            assert found, f"{instruction.keyword} before the first FROM"
            found[-1].instructions.append(instruction)
    return args, found


ARGS, STAGES = stages(DOCKERFILE.read_text())
FINAL = STAGES[-1]


# --- .dockerignore, as Docker reads it ----------------------------------------------------


def _pattern(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i:]:
            end = pattern.index("]", i)
            out += "[" + pattern[i + 1 : end].replace("\\", "\\\\") + "]"
            i = end + 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + "$")


def ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[1:] if negated else line
        rules.append((negated, _pattern(pattern.strip("/").removeprefix("./"))))
    return rules


def ignored(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for negated, pattern in rules:
        if any(pattern.match(prefix) for prefix in prefixes):
            result = not negated
    return result


def build_context(target: Path) -> Path:
    """A copy of the repository as Docker would send it: .dockerignore applied."""
    rules = ignore_rules()
    for path in sorted(ROOT.rglob("*")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(".git/") or relative == ".git" or path.is_dir():
            continue
        if ignored(relative, rules):
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
    return target


def copy_sources(stage: Stage) -> list[str]:
    sources = []
    for arguments in stage.all("COPY") + stage.all("ADD"):
        words = shlex.split(arguments)
        if any(w.startswith("--from") for w in words):
            continue
        sources += [w for w in words if not w.startswith("--")][:-1]
    return sources


# --- static checks ----------------------------------------------------------------------


def test_it_is_multi_stage_with_a_builder() -> None:
    assert len(STAGES) >= 2
    assert STAGES[0].name == "builder"
    assert any("pip wheel" in run for run in STAGES[0].all("RUN"))


def unpinned_images(stages: list[Stage]) -> list[str]:
    """Base images not pinned to a full version (or a digest), or not slim."""
    names = {s.name for s in stages if s.name}
    return [
        stage.image
        for stage in stages
        if stage.image not in names
        and (
            not ("@sha256:" in stage.image or re.search(r":\d+\.\d+\.\d+(-[\w.-]+)?$", stage.image))
            or "slim" not in stage.image
        )
    ]


def bad_copy_sources(stages: list[Stage], root: Path = ROOT) -> list[str]:
    """COPY sources that do not exist or that .dockerignore keeps out of the context."""
    rules = ignore_rules()
    return [
        source
        for stage in stages
        for source in copy_sources(stage)
        if not (root / source).exists() or ignored(source, rules)
    ]


def user_problem(stage: Stage) -> str | None:
    """Why the stage does not end as a numeric non-root user, if it does not."""
    users = stage.all("USER")
    if not users:
        return "no USER: the image runs as root"
    user, _, group = users[-1].partition(":")
    if not user.isdigit() or int(user) == 0 or (group and (not group.isdigit() or int(group) == 0)):
        return f"USER {users[-1]}: give a numeric, non-root user (and group)"
    return None


def test_every_base_image_is_pinned() -> None:
    assert unpinned_images(STAGES) == []


def test_every_copy_source_exists_and_reaches_the_build_context() -> None:
    assert any(copy_sources(stage) for stage in STAGES)
    assert bad_copy_sources(STAGES) == []


def test_it_ends_as_a_numeric_non_root_user() -> None:
    assert user_problem(FINAL) is None
    user = FINAL.all("USER")[-1].partition(":")[0]
    chart = yaml.safe_load((ROOT / "helm/tickwork/values.yaml").read_text())
    assert chart["podSecurityContext"]["runAsUser"] == int(user), "the chart runs the image's user"


def test_the_checks_catch_a_bad_dockerfile() -> None:
    _, bad = stages(
        "ARG BASE=python:3.11-slim\n"
        "FROM ${BASE} AS builder\n"
        "COPY pyproject.toml no-such-file.txt tests/ ./\n"
        "FROM python:latest\n"
        "COPY --from=builder /x /x\n"
        "USER tickwork\n"
    )
    assert unpinned_images(bad) == ["python:3.11-slim", "python:latest"]
    assert bad_copy_sources(bad) == ["no-such-file.txt", "tests/"]
    assert user_problem(bad[-1]) == "USER tickwork: give a numeric, non-root user (and group)"
    assert user_problem(Stage("python:3.11.11-slim", None)) == "no USER: the image runs as root"
    assert user_problem(stages("FROM x\nUSER 0:0\n")[1][0]) is not None


def test_the_dockerignore_keeps_out_what_the_image_does_not_need() -> None:
    rules = ignore_rules()
    for path in (
        "tests/conftest.py",
        "helm/tickwork/Chart.yaml",
        ".git/HEAD",
        ".tickwork/x",
        ".venv/bin/python",
        "src/tickwork/__pycache__/app.cpython-311.pyc",
        "src/tickwork/stray.pyc",
    ):
        assert ignored(path, rules), f"{path} would be sent to the build"
    for path in (
        "pyproject.toml",
        "README.md",
        "src/tickwork/db/migrations/0001_jobs.sql",
        "src/tickwork/db/sql/jobs.sql",
        "src/tickwork/example_schedules/hello.yaml",
    ):
        assert not ignored(path, rules), f"{path} is needed by the build"


def test_the_final_stage_has_no_build_tools_or_caches() -> None:
    runs = " ".join(FINAL.all("RUN"))
    for tool in (
        "gcc",
        "build-essential",
        "make ",
        "git ",
        "pip wheel",
        "pip install",
        "apt-get install",
    ):
        assert tool not in runs, f"the final stage runs {tool!r}"
    copies = FINAL.all("COPY")
    from_builder = [c for c in copies if "--from=builder" in c]
    assert from_builder == ["--from=builder /opt/tickwork /opt/tickwork"], copies
    assert not copy_sources(FINAL), "the final stage copies nothing from the build context"
    env = " ".join(FINAL.all("ENV"))
    assert "PIP_NO_CACHE_DIR=1" in env and "PYTHONDONTWRITEBYTECODE=1" in env


def test_the_entrypoint_is_tickwork() -> None:
    (entrypoint,) = FINAL.all("ENTRYPOINT")
    assert json.loads(entrypoint) == ["tickwork"]


# --- the image's steps, run here --------------------------------------------------------


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The builder stage's RUN, step by step: wheels of the build context, a fresh virtualenv,
    tickwork installed from those wheels only."""
    (builder_run,) = STAGES[0].all("RUN")
    assert "pip wheel --wheel-dir /wheels ." in builder_run
    assert "python -m venv /opt/tickwork" in builder_run
    assert "--no-index --find-links /wheels tickwork" in builder_run
    base = tmp_path_factory.mktemp("image")
    context = build_context(base / "context")
    wheels, prefix = base / "wheels", base / "opt-tickwork"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(wheels), "."], cwd=context)
    run([sys.executable, "-m", "venv", str(prefix)], cwd=base)
    run(
        [
            str(prefix / "bin/python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",  # the image compiles its bytecode; no test here reads it (~15 s)
            "--no-index",
            "--find-links",
            str(wheels),
            "tickwork",
        ],
        cwd=base,
    )
    return prefix


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{command}: {result.stdout}\n{result.stderr}"
    return result.stdout


def clean_env(venv: Path, **extra: str) -> dict[str, str]:
    """The image's environment: the virtualenv first on PATH, nothing from this checkout."""
    return {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": "/nonexistent",
        **extra,
    }


def test_the_installed_wheel_is_tickwork_from_the_virtualenv(venv: Path, tmp_path: Path) -> None:
    where = run(
        ["python", "-c", "import tickwork; print(tickwork.__file__)"],
        cwd=tmp_path,
        env=clean_env(venv),
    )
    assert where.strip().startswith(str(venv)), where


@pytest.mark.parametrize("role", [[], ["worker"], ["operator"], ["migrate"]], ids=str)
def test_every_role_answers_help(venv: Path, tmp_path: Path, role: list[str]) -> None:
    output = run(["tickwork", *role, "--help"], cwd=tmp_path, env=clean_env(venv))
    assert output.startswith("usage: tickwork")


def test_tickwork_migrate_from_the_virtualenv(
    venv: Path, tmp_path: Path, empty_database_url: str
) -> None:
    env = clean_env(venv, TICKWORK_DATABASE_URL=empty_database_url)
    first = run(["tickwork", "migrate"], cwd=tmp_path, env=env)
    assert [line for line in first.splitlines() if line.startswith("applied ")], first
    assert "up to date" in run(["tickwork", "migrate"], cwd=tmp_path, env=env)
    status = json.loads(
        run(["tickwork", "migrate", "--status", "-o", "json"], cwd=tmp_path, env=env)
    )
    assert [s["name"] for s in status] == [m.name for m in migrate.available()]
    assert all(s["applied"] for s in status)
    assert not os.path.exists(tmp_path / "__pycache__")
