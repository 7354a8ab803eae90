"""``trace`` on numbers no clock can place and nesting no parser can hold: one line naming the file and the
place, exit 2, nothing written (torch traces and metric events alike)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.events import write_events
from my_utils.profiling.cli import app

BASE_NS = 1_700_000_000_000_000_000
EVENT = {"schema_version": 1, "run_id": "r", "source": "mytimer", "rank": 0, "step": 0, "name": "iter",
         "kind": "duration", "unit": "ms", "value": 1.0, "ts": 1.7e9, "attrs": {"depth": 0}}


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, ["trace", *args, "-q", "--executor", "serial"])


def _torch(event: str = '{"ph": "X", "name": "a", "ts": 1.0, "dur": 2.0, "pid": 1, "tid": 1}',
           base: str = str(BASE_NS)) -> str:
    return f'{{"traceEvents": [{event}], "baseTimeNanoseconds": {base}}}'


def _x(field: str, value: str) -> str:
    fields = {"ph": '"X"', "name": '"a"', "ts": "1.0", "dur": "2.0", "pid": "1", "tid": "1", field: value}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


TORCH_CASES = {
    "400-digit dur": (_torch(_x("dur", "9" * 400)), "traceEvents[0].dur"),
    "400-digit ts": (_torch(_x("ts", "9" * 400)), "traceEvents[0].ts"),
    "ts 1e999": (_torch(_x("ts", "1e999")), "traceEvents[0].ts"),
    "dur NaN": (_torch(_x("dur", "NaN")), "traceEvents[0].dur"),
    "negative dur": (_torch(_x("dur", "-5")), "traceEvents[0].dur"),
    "5000-digit arg": (_torch(_x("args", '{"n": ' + "7" * 5000 + "}")), "numbers of at most"),
    "deep list": (_torch(_x("args", "[" * 100_000 + "]" * 100_000)), "nested less deeply"),
    "deep object": (_torch(_x("args", '{"a": ' * 5000 + "1" + "}" * 5000)), "nested less deeply"),
    "400-digit base": (_torch(base="1" + "0" * 400), "baseTimeNanoseconds"),
    "base 1e999": (_torch(base="1e999"), "baseTimeNanoseconds"),
}


@pytest.mark.parametrize("case", list(TORCH_CASES))
def test_bad_numbers_in_a_torch_trace_are_one_line(tmp_path: Path, case: str) -> None:
    text, place = TORCH_CASES[case]
    source = tmp_path / "trace_rank_0.json"
    source.write_text(text)
    events = tmp_path / "metrics_events.jsonl"
    write_events(events, [])
    out = tmp_path / "out" / "t.json"
    res = _run("--events", str(events), "--torch-trace", str(source), "--output", str(out))
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(source) in lines[0] and place in lines[0] and len(lines[0]) < 400, lines
    assert "Traceback" not in res.output and not out.parent.exists()


def test_nan_in_a_torch_events_args_becomes_null(tmp_path: Path) -> None:
    source = tmp_path / "trace_rank_0.json"
    source.write_text(_torch(_x("args", '{"x": NaN, "y": Infinity, "z": 1}')))
    events = tmp_path / "metrics_events.jsonl"
    write_events(events, [])
    out = tmp_path / "t.json"
    res = _run("--events", str(events), "--torch-trace", str(source), "--output", str(out))
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "NaN" not in text and "Infinity" not in text
    (a,) = [e for e in json.loads(text)["traceEvents"] if e.get("name") == "a"]
    assert a["args"] == {"x": None, "y": None, "z": 1}


def _events_file(tmp_path: Path, bad: str) -> Path:
    path = tmp_path / "metrics_events.jsonl"
    path.write_text("\n".join([json.dumps(EVENT), bad, json.dumps(EVENT)]) + "\n")
    return path


EVENT_CASES = {
    "400-digit value": json.dumps(EVENT).replace('"value": 1.0', '"value": ' + "9" * 400),
    "deep attrs": json.dumps(EVENT).replace('"attrs": {"depth": 0}', '"attrs": {"a": ' + "[" * 100_000
                                            + "]" * 100_000 + "}"),
    "ts 1e999": json.dumps(EVENT).replace('"ts": 1700000000.0', '"ts": 1e999'),
    "value -1": json.dumps(EVENT).replace('"value": 1.0', '"value": -1.0'),
}


@pytest.mark.parametrize("case", list(EVENT_CASES))
def test_bad_numbers_in_the_events_are_one_line(tmp_path: Path, case: str) -> None:
    events = _events_file(tmp_path, EVENT_CASES[case])
    out = tmp_path / "out" / "t.json"
    res = _run("--events", str(events), "--output", str(out))
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(events) in lines[0], lines
    assert "event 2" in lines[0] or "line 2" in lines[0], lines
    assert "Traceback" not in res.output and not out.parent.exists()


def _reader_names_the_line(tmp: Path) -> bool:
    """Whether core's events reader refuses these lines itself (naming the line), as trace's own checks cannot."""
    from my_utils.core.errors import InputError
    from my_utils.core.events import read_events

    for i, bad in enumerate(EVENT_CASES[c] for c in ("400-digit value", "deep attrs", "ts 1e999")):
        path = tmp / f"probe{i}.jsonl"
        path.write_text(bad + "\n")
        try:
            read_events(path)
        except InputError as exc:
            if "line 1" not in str(exc):
                return False
        except Exception:  # an OverflowError, a RecursionError: the reader does not refuse it yet
            return False
        else:
            return False
    return True


@pytest.mark.parametrize("case", ["400-digit value", "deep attrs", "ts 1e999"])
def test_the_events_reader_names_the_line(tmp_path: Path, case: str, request: pytest.FixtureRequest) -> None:
    if not _reader_names_the_line(tmp_path):
        # core/events.py is the 'cli' helper's: until its reader refuses these lines, trace names 'event 2'
        request.applymarker(pytest.mark.xfail(strict=True, reason="core/events.py does not refuse a 400-digit "
                                              "value, deep nesting or ts 1e999 with the line yet"))
    events = _events_file(tmp_path, EVENT_CASES[case])
    res = _run("--events", str(events), "--output", str(tmp_path / "t.json"))
    assert res.exit_code == 2 and f"{events}:line 2" in res.stderr, res.stderr
