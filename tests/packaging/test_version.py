"""One version, stated where each reader looks for it (docs/releases.md): pyproject.toml,
``tickwork.__version__`` (which ``tickwork --version`` prints, right even where the installed
metadata is older: an editable install made before a bump). The chart's appVersion is checked
in tests/chart/test_chart_docs.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import tickwork
from tickwork.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_says_the_version_pyproject_builds() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert tickwork.__version__ == project["version"]


def test_tickwork_version_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    assert exit.value.code == 0
    assert capsys.readouterr().out.strip() == tickwork.__version__
