"""The built wheel carries what tickwork reads at run time: migrations, named SQL, the
example schedules (the repository's top-level migrations/ links into the package) and the
Kubernetes schema a jobTemplate is checked against."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tickwork.db import migrate, queries

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_migrations_sql_and_example_schedules(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("tickwork-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())

    for migration in migrate.available():
        assert f"tickwork/db/migrations/{migration.name}" in names
    for sql in (ROOT / "src/tickwork/db/sql").glob("*.sql"):
        assert f"tickwork/db/sql/{sql.name}" in names
    assert queries.QUERIES, "the named queries load from package data"
    for manifest in (ROOT / "examples/schedules").glob("*.yaml"):
        assert f"tickwork/example_schedules/{manifest.name}" in names
    assert "tickwork/schedules/job_template_schema.json" in names
    assert (ROOT / "migrations").resolve() == (ROOT / "src/tickwork/db/migrations").resolve()
