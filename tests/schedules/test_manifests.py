"""Schedule manifests: loading files and directories, every kind of bad input, and the CRD."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.schedule_helpers import NIGHTLY_DEFINITION
from tickwork.errors import TickworkError
from tickwork.schedules.manifests import (
    MAX_FILE_BYTES,
    ManifestError,
    load_documents,
    load_path,
    target_namespace,
)
from tickwork.schedules.options import IntervalMode

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / "schedules.tickwork.io.yaml"
EXAMPLES = ROOT / "examples" / "schedules"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))

NIGHTLY = """\
apiVersion: tickwork.io/v1
kind: Schedule
metadata: {name: nightly-report, namespace: billing}
spec:
  schedule: "0 3 * * *"
  timeZone: Europe/London
  suspend: false
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 300
  misfirePolicy: CatchUp
  catchUpLimit: 3
  jitterSeconds: 0
  job:
    kind: report.nightly
    queue: default
    payload: {format: pdf}
    priority: 0
    maxAttempts: 5
    retryPolicy: {baseDelaySeconds: 30, backoffRate: 1.5, maxDelaySeconds: 3600}
    timeoutSeconds: 600
    concurrencyKey: reports
"""


def schedule(name: str, spec: str = "every: 30s\njob: {kind: poll}", **metadata: str) -> str:
    """One Schedule document, with ``spec`` given as YAML text."""
    fields = "".join(f", {key}: {value}" for key, value in metadata.items())
    body = textwrap.indent(spec, "  ")
    head = f"apiVersion: tickwork.io/v1\nkind: Schedule\nmetadata: {{name: {name}{fields}}}\n"
    return f"{head}spec:\n{body}\n"


def error_of(text: str, source: str = "s.yaml", **options: Any) -> str:
    with pytest.raises(ManifestError) as caught:
        load_documents(text, source, **options)
    assert isinstance(caught.value, TickworkError)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def write(directory: Path, relative: str, text: str) -> Path:
    path = directory / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- loading -----------------------------------------------------------------------------


def test_a_full_manifest_loads() -> None:
    assert load_documents(NIGHTLY, "nightly.yaml") == [NIGHTLY_DEFINITION]


def test_multi_document_text_keeps_document_order_and_skips_empty_documents() -> None:
    text = "---\n" + schedule("b") + "---\n# only a comment\n---\n" + schedule("a") + "---\n"
    assert [d.name for d in load_documents(text, "s.yaml")] == ["b", "a"]


def test_status_is_ignored() -> None:
    text = schedule("a") + "status: {revision: 3, anything: [1, 2]}\n"
    assert load_documents(text, "s.yaml")[0].name == "a"


@pytest.mark.parametrize(
    ("api_version", "kind"), [("v1", "List"), ("tickwork.io/v1", "ScheduleList")]
)
def test_list_documents(api_version: str, kind: str) -> None:
    items = [yaml.safe_load(schedule(name)) for name in ("x", "y")]
    text = yaml.safe_dump({"apiVersion": api_version, "kind": kind, "items": items})
    assert [d.name for d in load_documents(text, "list.yaml")] == ["x", "y"]


def test_dates_stay_strings_as_the_kubernetes_api_reads_them() -> None:
    text = schedule("a", "every: 30s\njob: {kind: k, payload: {day: 2026-12-01}}")
    assert load_documents(text, "s.yaml")[0].job.payload == {"day": "2026-12-01"}


def test_yaml_one_one_booleans_and_plain_cron_text() -> None:
    text = schedule("a", "schedule: 0 3 * * *\nsuspend: yes\njob: {kind: k}")
    [definition] = load_documents(text, "s.yaml")
    assert definition.schedule == "0 3 * * *"
    assert definition.suspend is True


def test_interval_manifest() -> None:
    text = schedule("poll", "every: 1h30m\nintervalMode: FixedDelay\njob: {kind: poll}")
    [definition] = load_documents(text, "s.yaml")
    assert definition.every == timedelta(minutes=90)
    assert definition.interval_mode is IntervalMode.FIXED_DELAY


def test_load_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, "nightly.yaml", NIGHTLY)
    assert load_path(path) == [NIGHTLY_DEFINITION]
    assert load_path(str(path)) == [NIGHTLY_DEFINITION]


def test_an_explicit_file_loads_whatever_its_suffix(tmp_path: Path) -> None:
    path = write(tmp_path, "schedules.txt", schedule("a"))
    assert [d.name for d in load_path(path)] == ["a"]


def test_load_a_directory_recursively_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", schedule("b1") + "---\n" + schedule("b2"))
    write(tmp_path, "a.yml", schedule("a"))
    write(tmp_path, "sub/c.yaml", schedule("c"))
    write(tmp_path, "sub/deeper/d.yaml", schedule("d"))
    write(tmp_path, "README.md", "not yaml")
    write(tmp_path, "notes.json", "{}")
    names = [d.name for d in load_path(tmp_path)]
    assert names == ["a", "b1", "b2", "c", "d"]


def test_hidden_files_and_directories_are_skipped(tmp_path: Path) -> None:
    # A mounted ConfigMap: real files under ..2026_01_01/, ..data links to it, and the
    # visible names link through ..data. Each schedule must load once.
    real = write(tmp_path, "..2026_01_01/a.yaml", schedule("a"))
    (tmp_path / "..data").symlink_to(real.parent.name)
    (tmp_path / "a.yaml").symlink_to("..data/a.yaml")
    write(tmp_path, ".hidden.yaml", "not: [valid")
    write(tmp_path, ".git/config.yaml", "not: [valid")
    assert [d.name for d in load_path(tmp_path)] == ["a"]


def test_namespace_option_accepts_matching_and_unnamed_namespaces() -> None:
    text = (
        schedule("a", namespace="billing")
        + "---\n"
        + schedule("b")
        + "---\n"
        + schedule("c", "every: 1m\nscheduleNamespace: billing\njob: {kind: k}", namespace="x")
    )
    assert len(load_documents(text, "s.yaml", namespace="billing")) == 3
    assert len(load_documents(text, "s.yaml")) == 3


def test_target_namespace() -> None:
    document = yaml.safe_load(schedule("a", namespace="team"))
    assert target_namespace(document) == "team"
    document["spec"]["scheduleNamespace"] = "team-prod"
    assert target_namespace(document) == "team-prod"
    assert target_namespace(yaml.safe_load(schedule("a"))) is None


# --- bad input ---------------------------------------------------------------------------

BAD_DOCUMENTS: list[tuple[str, str]] = [
    # (text, the complete message for source "s.yaml")
    (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        "s.yaml: document 1: not a tickwork.io/v1 Schedule (apiVersion: 'v1', kind: 'ConfigMap')",
    ),
    (
        schedule("a").replace("tickwork.io/v1", "tickwork.io/v2"),
        "s.yaml: document 1: not a tickwork.io/v1 Schedule"
        " (apiVersion: 'tickwork.io/v2', kind: 'Schedule')",
    ),
    (
        "kind: Schedule\nmetadata: {name: a}\nspec: {every: 1m, job: {kind: k}}\n",
        "s.yaml: document 1: not a tickwork.io/v1 Schedule (apiVersion: None, kind: 'Schedule')",
    ),
    ("- 1\n- 2\n", "s.yaml: document 1: must be a mapping, not list"),
    (
        "apiVersion: tickwork.io/v1\nkind: Schedule\nspec: {every: 1m, job: {kind: k}}\n",
        "s.yaml: document 1: metadata: is required and must be a mapping",
    ),
    (
        "apiVersion: tickwork.io/v1\nkind: Schedule\nmetadata: {namespace: a}\nspec: {}\n",
        "s.yaml: document 1: metadata.name: is required and must be a string",
    ),
    (
        schedule("a") + "extra: true\n",
        "s.yaml: document 1: extra: unknown field",
    ),
    (
        schedule("a").replace("spec:", "spce:"),
        "s.yaml: document 1: spce: unknown field (did you mean `spec`?)",
    ),
    (
        schedule("a", "schedule: '*/5 * * * *'\nconcurrencyPolcy: Forbid\njob: {kind: k}"),
        "s.yaml: document 1: Schedule 'a': spec.concurrencyPolcy: unknown field (did you mean "
        "`concurrencyPolicy`?)",
    ),
    (
        "apiVersion: tickwork.io/v1\nkind: Schedule\nmetadata: {name: a}\n",
        "s.yaml: document 1: Schedule 'a': spec: is required",
    ),
    (
        schedule("a", "every: 30s\nsuspended: true\njob: {kind: k}"),
        "s.yaml: document 1: Schedule 'a': spec.suspended: unknown field (did you mean `suspend`?)",
    ),
    (
        schedule("a", "every: 30s\njob: {kind: k, retryPolicy: {base: 1}}"),
        "s.yaml: document 1: Schedule 'a': spec.job.retryPolicy.base: unknown field",
    ),
    (
        schedule("a", "every: 30\njob: {kind: k}"),
        "s.yaml: document 1: Schedule 'a': spec.every: must be a string, not a number (30)",
    ),
    (
        schedule("a", "every: 30s\njob: {kind: k, maxAttempts: many}"),
        "s.yaml: document 1: Schedule 'a': spec.job.maxAttempts: must be an integer,"
        " not a string ('many')",
    ),
    (
        schedule("a", "every: 30s\nconcurrencyPolicy: Never\njob: {kind: k}"),
        "s.yaml: document 1: Schedule 'a': spec.concurrencyPolicy: must be one of"
        " Allow, Forbid, BufferOne, Replace, not 'Never'",
    ),
    (
        schedule("a", "every: 30s\njob: {kind: k, priority: -1}"),
        "s.yaml: document 1: Schedule 'a': spec.job.priority: must be >= 0, not -1",
    ),
    (
        schedule("a", "every: 30s\nschedule: '@daily'\njob: {kind: k}"),
        "s.yaml: document 1: Schedule 'a': spec: set exactly one of spec.schedule"
        " or spec.every (both are set)",
    ),
    (
        schedule("a", "job: {kind: k}"),
        "s.yaml: document 1: Schedule 'a': spec: set exactly one of spec.schedule"
        " or spec.every (neither is set)",
    ),
    (
        schedule("Nightly"),
        "s.yaml: document 1: Schedule 'Nightly': metadata.name: must be lowercase letters,"
        " digits, '-' and '.', starting and ending with a letter or digit",
    ),
    (
        schedule("a") + "---\n" + schedule("b") + "---\n" + schedule("a"),
        "s.yaml: document 3: Schedule 'a': metadata.name: duplicate name,"
        " first defined at s.yaml: document 1",
    ),
    (
        "apiVersion: v1\nkind: List\nitems:\n- "
        + schedule("a", "every: 1\njob: {kind: k}").replace("\n", "\n  "),
        "s.yaml: document 1: items[0]: Schedule 'a': spec.every: must be a string,"
        " not a number (1)",
    ),
    (
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n",
        "s.yaml: document 1: items[0]: not a tickwork.io/v1 Schedule"
        " (apiVersion: 'v1', kind: 'Secret')",
    ),
    (
        "apiVersion: tickwork.io/v1\nkind: List\nitems: []\n",
        "s.yaml: document 1: apiVersion: must be 'v1' for a List",
    ),
    ("apiVersion: v1\nkind: List\nitems: {}\n", "s.yaml: document 1: items: must be a list"),
    ("", "s.yaml: no Schedule documents found"),
    ("# nothing here\n---\n", "s.yaml: no Schedule documents found"),
    ("apiVersion: v1\nkind: List\nitems: []\n", "s.yaml: no Schedule documents found"),
]


@pytest.mark.parametrize(("text", "message"), BAD_DOCUMENTS)
def test_bad_documents(text: str, message: str) -> None:
    assert error_of(text) == message


def test_the_reason_of_an_invalid_value_is_passed_through() -> None:
    text = schedule("ok") + "---\n" + schedule("nightly", "schedule: 61 3 * * *\njob: {kind: k}")
    message = error_of(text, "examples/schedules/bad.yaml")
    prefix = "examples/schedules/bad.yaml: document 2: Schedule 'nightly': spec.schedule: "
    assert message.startswith(prefix)
    assert "minute" in message and "61" in message


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("every: soon\njob: {kind: k}", "spec.every"),
        ("schedule: '@daily'\ntimeZone: Mars/Base\njob: {kind: k}", "spec.timeZone"),
        ("every: 10s\njitterSeconds: 10\njob: {kind: k}", "spec.jitterSeconds"),
        ("every: 10s\njob: {kind: k, payload: !!binary aGVsbG8=}", "spec.job.payload"),
        ("every: 10s\njob: {kind: k, payload: {a: !!timestamp 2026-01-01}}", "spec.job.payload.a"),
        ("every: 10s\njob: {kind: k, payload: {1: one}}", "spec.job.payload"),
    ],
)
def test_invalid_values_name_their_field(spec: str, field: str) -> None:
    assert error_of(schedule("a", spec)).startswith(f"s.yaml: document 1: Schedule 'a': {field}: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            schedule("a") + "spec: [\n",
            "s.yaml: invalid YAML at line 8, column 1:"
            " expected the node content, but found '<stream end>'",
        ),
        (
            "apiVersion: tickwork.io/v1\nkind: Schedule\n  metadata: x\n",
            "s.yaml: invalid YAML at line 3, column 11: mapping values are not allowed here",
        ),
        (
            schedule("a", "every: 30s\nevery: 1m\njob: {kind: k}"),
            "s.yaml: invalid YAML at line 6, column 3: duplicate key 'every'",
        ),
    ],
)
def test_yaml_errors_name_the_line(text: str, message: str) -> None:
    assert error_of(text) == message


def test_a_namespace_mismatch_is_an_error() -> None:
    assert error_of(schedule("a", namespace="ops"), namespace="billing") == (
        "s.yaml: document 1: Schedule 'a': belongs to namespace 'ops', not 'billing'"
    )
    spec = "every: 1m\nscheduleNamespace: ops\njob: {kind: k}"
    assert error_of(schedule("b", spec, namespace="billing"), namespace="billing") == (
        "s.yaml: document 1: Schedule 'b': belongs to namespace 'ops', not 'billing'"
    )


def test_duplicate_names_across_files_name_both_files(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", schedule("x") + "---\n" + schedule("nightly"))
    write(tmp_path, "b/c.yaml", schedule("nightly"))
    with pytest.raises(ManifestError) as caught:
        load_path(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}/b/c.yaml: document 1: Schedule 'nightly': metadata.name: duplicate name,"
        f" first defined at {tmp_path}/a.yaml: document 2"
    )


def test_the_first_problem_in_sorted_order_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", schedule("b", "every: bad\njob: {kind: k}"))
    write(tmp_path, "a.yaml", schedule("a", "every: 1m\njob: {kind: k, priority: -5}"))
    with pytest.raises(ManifestError) as caught:
        load_path(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path}/a.yaml: document 1: Schedule 'a': ")


def not_utf8(root: Path) -> Path:
    (root / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    return root


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda root: root / "missing.yaml", "{path}: no such file or directory"),
        (lambda root: root, "{path}: no *.yaml or *.yml files found"),
        (
            lambda root: write(root, "notes.md", "# hi").parent,
            "{path}: no *.yaml or *.yml files found",
        ),
        (
            lambda root: write(root, "sub/empty.yaml", "# nothing\n").parent.parent,
            "{path}: no Schedule documents found",
        ),
        (not_utf8, "{path}/latin1.yaml: cannot read: 'utf-8' codec can't decode"),
    ],
)
def test_path_errors(tmp_path: Path, setup: Callable[[Path], Path], message: str) -> None:
    path = setup(tmp_path)
    with pytest.raises(ManifestError) as caught:
        load_path(path)
    assert str(caught.value).startswith(message.format(path=path))


# --- hostile files -----------------------------------------------------------------------

POLL = "every: 30s\njob:\n  kind: poll\n"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (POLL + "  payload: " + "[" * 3000 + "]" * 3000, "invalid YAML at line 8, column 111: "
         "nested deeper than 100 levels"),
        (POLL + "  payload: " + "{a: " * 70 + "1" + "}" * 70, "spec.job.payload" + ".a" * 64
         + ": nests deeper than 64 levels"),
        (POLL + "  priority: " + "9" * 5000, "invalid YAML at line 8, column 15: integer with too "
         "many digits"),
        (POLL + "  priority: 0x" + "f" * 5000, "spec.job.priority: must be <= 32767, not an "
         "integer of about 6020 digits"),
        (POLL + "  priority: 40000", "spec.job.priority: must be <= 32767, not 40000"),
        (POLL + "  timeoutSeconds: .nan", "spec.job.timeoutSeconds: must be a finite number"),
        (POLL + "  payload: {a: -.inf}", "spec.job.payload.a: -inf is not a JSON number"),
        (POLL + '  kind2: 1\n  "' + "k" * 1000 + '": 2', "spec.job.kind2: unknown field"),
        (POLL.replace("poll", '"po\\0ll"'), "spec.job.kind: must not contain NUL"),
        (POLL + '  payload: {"a\\0": 1}', "spec.job.payload: key 'a\\x00': must not contain NUL"),
        (POLL + '  concurrencyKey: "\\ud800"', "spec.job.concurrencyKey: must be valid Unicode"),
        (POLL.replace("30s", "1" * 5000 + "s"), "spec.every: must be at most 64 characters, "
         "not 5001"),
        (POLL.replace("30s", "367d"), "spec.every: invalid duration '367d': too long, at most "
         "366d"),
        (POLL + "  payload: !!binary aGVsbG8=", "spec.job.payload: b'hello' is not a JSON value"),
        (
            POLL + "  payload:\n" + "".join(
                f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}' if i else 'x'] * 10)}]\n"
                for i in range(12)
            ),
            "spec.job.payload: is larger than 65536 bytes encoded as JSON",
        ),
    ],
    ids=[
        "deep-yaml", "deep-payload", "decimal-digits", "hex-digits", "smallint", "nan", "inf",
        "long-key", "nul", "nul-key", "surrogate", "long-every", "every-range", "binary",
        "alias-bomb",
    ],
)  # fmt: skip
def test_hostile_documents_are_one_line_errors(spec: str, expected: str) -> None:
    message = error_of(schedule("a", spec))
    assert expected in message
    assert len(message) < 400


def test_a_huge_name_is_shown_cut_short() -> None:
    message = error_of(schedule("a" * 100_000))
    assert message.startswith("s.yaml: document 1: Schedule 'aaaa")
    assert "metadata.name: must be at most 253 characters" in message
    assert len(message) < 300


def test_a_file_larger_than_the_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(ManifestError, match=f"big.yaml: larger than {MAX_FILE_BYTES} bytes"):
        load_path(path)


@pytest.mark.parametrize("junk", [bytes(range(256)) * 4, b"\x00" * 100, b"\x01\x02kind: x"])
def test_binary_junk_is_one_line(tmp_path: Path, junk: bytes) -> None:
    path = tmp_path / "junk.yaml"
    path.write_bytes(junk)
    with pytest.raises(ManifestError) as caught:
        load_path(path)
    assert "\n" not in str(caught.value) and str(caught.value).startswith(str(path))
