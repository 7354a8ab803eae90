"""``myutils-profile analyze`` on bad input and hostile limits: one line, exit 2, nothing written.

Each case is a defect of issue 17 reproduced through the real command (typer's runner,
in-process) or a real subprocess where a process limit is part of the case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from my_utils.core import events as events_module
from my_utils.core.events import write_events
from my_utils.profiling.cli import app
from my_utils.profiling.examples import example_config_path
from my_utils.profiling.providers.mytimer import read_profile_csv_events

_DATA = example_config_path().parent / "data"


def good_events(folder: Path) -> Path:
    """A real run's events: the shipped MyTimer CSV converted by the provider."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "metrics_events.jsonl"
    write_events(path, read_profile_csv_events(_DATA / "profile_rank_0.csv"))
    return path


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def _first_line_with(path: Path, key: str, token: str) -> None:
    """Replace the value of ``key`` in the first event of ``path`` by the raw JSON ``token``."""
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first[key] = "@@TOKEN@@"
    lines[0] = json.dumps(first).replace('"@@TOKEN@@"', token)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("backend", ["orjson", "stdlib"])
@pytest.mark.parametrize("key, token, expected", [
    ("value", "9" * 400, "'value' must be a number within the range of a 64-bit float"),
    ("value", "-" + "9" * 400, "'value' must be a number within the range of a 64-bit float"),
    ("ts", "1e999", "'ts' must be a finite number"),
    ("ts", "NaN", "'ts' must be a finite number"),
    ("ts", "-Infinity", "'ts' must be a finite number"),
    ("rank", "9" * 30, "'rank' must be a 64-bit integer"),
    ("step", "-" + "9" * 25, "'step' must be a 64-bit integer"),
    ("attrs", '{"k": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested at most 64 levels"),
    ("attrs", '{"k": ' + "[" * 500 + "]" * 500 + "}", "nested at most 64 levels"),  # orjson reads this one
    ("extra_field", "[" * 70 + "]" * 70, "nested at most 64 levels"),
])
def test_events_with_overflowing_numbers_or_deep_nesting_are_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, key: str, token: str, expected: str
) -> None:
    # before: OverflowError / RecursionError tracebacks (exit 1), and ts 1e999 analysed with exit 0
    if backend == "stdlib":
        monkeypatch.setattr(events_module, "_orjson", None)
        monkeypatch.setattr(events_module, "_loads", events_module._strict_stdlib_loads)
    path = good_events(tmp_path / "run")
    _first_line_with(path, key, token)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["analyze", "--events", str(path), "--output-dir", str(out), "-q"])
    assert res.exit_code == 2, res.output
    line = one_error_line(res.stderr)
    assert f"{path}:line 1:" in line and expected in line
    assert len(line) < 400  # the 400-digit number is described, not quoted
    assert not out.exists()
