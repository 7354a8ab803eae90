"""Issue 17's rules 3 and 5 as properties of ``analyze``, ``diff`` and ``ingest``, over generated inputs.

Rule 3: bad input (numbers that overflow, nesting that recurses, text that is not UTF-8, values
of the wrong type) is one line on stderr naming the file, exit 2, no output file, no traceback.
Rule 5: what the commands write is safe to open: JSON is strict (no bare NaN/Infinity), and
names carrying Markdown or HTML never change the structure of the Markdown or HTML written
(compared with the same run under plain names). None of the three writes CSV.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from my_utils.core.events import MetricEvent, write_events
from my_utils.profiling.cli import app
from my_utils.profiling.examples import example_config_path

_DATA = example_config_path().parent / "data"
_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# -- bad JSON tokens, by what they break ------------------------------------------------------------------------

_INT64_PLUS = st.integers(20, 450).flatmap(lambda n: st.sampled_from(["9" * n, "-" + "9" * n]))  # > 64 bits
_HUGE_INT = st.integers(310, 450).flatmap(lambda n: st.sampled_from(["9" * n, "-" + "9" * n]))  # > float range
_NONFINITE = st.sampled_from(["1e999", "-1e999", "1E400", "NaN", "Infinity", "-Infinity"])
_DEEP = st.integers(66, 3000).map(lambda d: "[" * d + "]" * d)
_SURROGATE = st.sampled_from(['"x\\udce9"', '"\\ud800"', '"a\\udfffb"'])
_TEXT = st.sampled_from(['"text"', '"1.5"'])
_OBJECT = st.sampled_from(["{}", '{"a": 1}', "[]", "[1]"])
_BOOL = st.sampled_from(["true", "false"])

# field of a metric event -> tokens that make the event bad input
EVENT_FIELDS: dict[str, st.SearchStrategy[str]] = {
    "value": st.one_of(_HUGE_INT, _DEEP, _TEXT, _OBJECT, _BOOL),
    "ts": st.one_of(_NONFINITE, _HUGE_INT, _DEEP, _TEXT, _OBJECT, _BOOL),
    "rank": st.one_of(_INT64_PLUS, _DEEP, _TEXT, _OBJECT, _BOOL, st.just("1.5")),
    "step": st.one_of(_INT64_PLUS, _DEEP, _TEXT, _OBJECT, _BOOL, st.just("-0.5")),
    "name": st.one_of(_SURROGATE, _DEEP, _OBJECT, _BOOL, st.sampled_from(['""', "7", "null"])),
    "kind": st.one_of(_SURROGATE, _DEEP, _OBJECT, st.sampled_from(["7", "null"])),
    "unit": st.one_of(_SURROGATE, _DEEP, st.sampled_from(["7", "[1]"])),
    "attrs": st.one_of(_TEXT, st.sampled_from(["7", "[1]", "true"]), _DEEP.map(lambda d: '{"k": ' + d + "}"),
                       _SURROGATE.map(lambda s: '{"k": ' + s + "}"), _SURROGATE.map(lambda s: "{" + s + ": 1}")),
    "extra_field": st.one_of(_DEEP, _SURROGATE),
}
# field of an operations row of an analysis report -> tokens that make the report bad input
REPORT_FIELDS: dict[str, st.SearchStrategy[str]] = {
    "mean": st.one_of(_HUGE_INT, _NONFINITE, _DEEP, _TEXT, _OBJECT, _BOOL),
    "std": st.one_of(_HUGE_INT, _NONFINITE, _DEEP, _TEXT, _OBJECT, st.just("-1")),
    "steps": st.one_of(_HUGE_INT, _NONFINITE, _TEXT, _BOOL, st.sampled_from(["0.5", "-3", "2.5", "[2]"])),
    "count": st.one_of(_HUGE_INT, _NONFINITE, _TEXT, st.sampled_from(["-1", "{}"])),
    "name": _SURROGATE,
    "unit": st.one_of(_SURROGATE, _DEEP),
}
# field of a kernel event of a trace -> tokens that make the trace bad input
TRACE_FIELDS: dict[str, st.SearchStrategy[str]] = {
    "dur": st.one_of(_HUGE_INT, _NONFINITE, _DEEP, _TEXT, _OBJECT),
    "ts": st.one_of(_HUGE_INT, _NONFINITE, _DEEP, _TEXT, _OBJECT, st.just("null")),
}
# key of a collector config -> tokens that make the config bad input
CONFIG_FIELDS: dict[str, st.SearchStrategy[str]] = {
    "providers": st.one_of(_DEEP, _TEXT, st.just("7"), st.just("{}")),
    "rank": st.one_of(_INT64_PLUS, _TEXT, _NONFINITE, st.just("-1")),
    "run_id": st.one_of(_DEEP, st.just("7"), _OBJECT),
    "output_dir": st.one_of(_DEEP, st.just("7"), st.just("{}")),
    "analysis": st.one_of(_DEEP, _TEXT, st.just("[1]")),
}


def _with_token(obj: dict[str, Any], path: list[Any], token: str) -> str:
    """JSON of ``obj`` with the value at ``path`` replaced by the raw ``token``."""
    target: Any = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = "@@TOKEN@@"
    return json.dumps(obj).replace('"@@TOKEN@@"', token)


def _events(folder: Path) -> Path:
    from my_utils.profiling.formats.mytimer import read_profile_csv_events

    path = folder / "metrics_events.jsonl"
    write_events(path, read_profile_csv_events(_DATA / "profile_rank_0.csv"))
    return path


def _check_refused(res: Any, path: Path, outputs: list[Path]) -> None:
    context = f"exit {res.exit_code}, stderr {res.stderr[:300]!r}"
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(context) from res.exception
    assert res.exit_code == 2, context
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.stderr, context
    assert path.name in lines[0], context
    assert not any(p.exists() for p in outputs), context


def _work(run: Callable[[Path], None]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp))


# -- rule 3 ---------------------------------------------------------------------------------------------------


@_SETTINGS
@given(data=st.data(), field=st.sampled_from(sorted(EVENT_FIELDS)), line=st.integers(0, 29),
       non_utf8=st.booleans())
def test_rule3_analyze_refuses_bad_events_in_one_line(data: st.DataObject, field: str, line: int,
                                                      non_utf8: bool) -> None:
    token = data.draw(EVENT_FIELDS[field], label="token")

    def run(tmp: Path) -> None:
        path = _events(tmp)
        lines = path.read_bytes().splitlines()
        raw = _with_token(json.loads(lines[line]), [field], token).encode()
        if non_utf8:  # and a byte that is not UTF-8 in the name: refused alike
            raw = raw.replace(b'"name": "', b'"name": "\xff\xfe', 1)
        lines[line] = raw
        path.write_bytes(b"\n".join(lines) + b"\n")
        out = tmp / "out"
        res = CliRunner().invoke(app, ["analyze", "--events", str(path), "--output-dir", str(out), "-q"])
        _check_refused(res, path, [out])

    _work(run)


@_SETTINGS
@given(data=st.data(), field=st.sampled_from(sorted(REPORT_FIELDS)), side=st.sampled_from(["base", "target"]))
def test_rule3_diff_refuses_bad_reports_in_one_line(data: st.DataObject, field: str, side: str) -> None:
    token = data.draw(REPORT_FIELDS[field], label="token")

    def run(tmp: Path) -> None:
        from my_utils.profiling.analysis import MetricsAnalyzer

        good = MetricsAnalyzer(_events(tmp), "pretrain").analyze().write(tmp / "good.json")
        report = json.loads(good.read_text())
        bad = tmp / "bad_report.json"
        bad.write_text(_with_token(report, ["tables", "operations", 0, field], token))
        outs = [tmp / "d.json", tmp / "d.md", tmp / "d.html"]
        pair = [str(bad), str(good)] if side == "base" else [str(good), str(bad)]
        res = CliRunner().invoke(app, ["diff", "--base-report", pair[0], "--target-report", pair[1], "--output",
                                       str(outs[0]), "--markdown", str(outs[1]), "--html", str(outs[2])])
        _check_refused(res, bad, outs)

    _work(run)


@_SETTINGS
@given(data=st.data(), field=st.sampled_from(sorted(TRACE_FIELDS)), gz=st.booleans())
def test_rule3_diff_refuses_bad_traces_in_one_line(data: st.DataObject, field: str, gz: bool,
                                                   real_fixtures: Any) -> None:
    import gzip

    token = data.draw(TRACE_FIELDS[field], label="token")
    real = real_fixtures / "kineto/kineto_repo/after_fix_trace.json"

    def run(tmp: Path) -> None:
        trace = json.loads(real.read_text())
        index = next(i for i, e in enumerate(trace["traceEvents"]) if e.get("cat") == "kernel")
        text = _with_token(trace, ["traceEvents", index, field], token)
        bad = tmp / ("bad.json.gz" if gz else "bad.json")
        bad.write_bytes(gzip.compress(text.encode(), mtime=0) if gz else text.encode())
        outs = [tmp / "d.json", tmp / "d.md"]
        res = CliRunner().invoke(app, ["diff", "--base-trace", str(real), "--target-trace", str(bad), "--output",
                                       str(outs[0]), "--markdown", str(outs[1])])
        _check_refused(res, bad, outs)

    _work(run)


@_SETTINGS
@given(data=st.data(), field=st.sampled_from(sorted(CONFIG_FIELDS)), analyze=st.booleans())
def test_rule3_ingest_refuses_bad_configs_in_one_line(data: st.DataObject, field: str, analyze: bool) -> None:
    token = data.draw(CONFIG_FIELDS[field], label="token")

    def run(tmp: Path) -> None:
        shutil.copy(_DATA / "profile_rank_0.csv", tmp)
        config = {"run_id": "r", "providers": [{"provider": "mytimer", "input": "profile_rank_0.csv"}]}
        cfg = tmp / "cfg.json"
        cfg.write_text(_with_token(config, [field], token))
        out = tmp / "out"
        res = CliRunner().invoke(app, ["ingest", "--config", str(cfg), "--output-dir", str(out), "-q",
                                       *(["--analyze"] if analyze else [])])
        _check_refused(res, cfg, [out])

    _work(run)


# -- rule 5 ---------------------------------------------------------------------------------------------------

_MARKUP = st.sampled_from(["<script>x()</script>", "<img src=x onerror=y>", "**b**", "`c`", "| p |", "\r# h",
                           "\n- i", "[l](http://x)", "&amp;", "=HYPERLINK(\"x\")", "+1", "@SUM(A1)", "\\", "_u_",
                           "\u2028", "\x00", "<!--", "~~s~~", "\ud800", "\udce9"])
_NAME = st.lists(st.one_of(_MARKUP, st.text(min_size=1, max_size=12)), min_size=1, max_size=4).map("".join)


def _run_events(names: list[str], slow: float) -> list[MetricEvent]:
    out = []
    for step in range(8):
        total = 0.0
        for i, name in enumerate(names):
            value = (10.0 + i) * (slow if i == 0 else 1.0) * (1 + 0.001 * step)
            total += value
            out.append(MetricEvent(name, value, "duration", "ms", "mytimer", 0, step, 1.7e9 + step))
        out.append(MetricEvent("step_time", total, "duration", "ms", "mytimer", 0, step, 1.7e9 + step))
    out.append(MetricEvent("gpu.util", float("nan"), "gauge", "%", "mytimer", 0, 0, 1.7e9))  # NaN: never bare
    out.append(MetricEvent("gpu.mem", float("inf"), "gauge", "bytes", "mytimer", 0, 1, 1.7e9))
    return out


def _outputs(tmp: Path, names: list[str]) -> dict[str, str]:
    """Everything analyze and diff write for a base and a 30 %-slower target run of ``names``."""
    from my_utils.core.safe_io import utf8_text

    written: dict[str, str] = {}
    for side, slow in (("base", 1.0), ("target", 1.3)):
        folder = tmp / side
        folder.mkdir()
        write_events(folder / "metrics_events.jsonl", [MetricEvent(utf8_text(e.name), e.value, e.kind, e.unit,
                                                                   e.source, e.rank, e.step, e.ts)
                                                       for e in _run_events(names, slow)])
        res = CliRunner().invoke(app, ["analyze", "--events", str(folder / "metrics_events.jsonl"), "--output-dir",
                                       str(folder), "-q"])
        assert res.exit_code == 0, res.output
        for ext in ("json", "md", "html"):
            written[f"analyze.{side}.{ext}"] = (folder / f"analysis_report.{ext}").read_text(encoding="utf-8")
    res = CliRunner().invoke(app, ["diff", "--base-report", str(tmp / "base"), "--target-report", str(tmp / "target"),
                                   "--output", str(tmp / "d.json"), "--markdown", str(tmp / "d.md"), "--html",
                                   str(tmp / "d.html"), "--fail-on-regression", "5"])
    assert res.exit_code == 1, res.output  # the first name got 30 % slower: the gate sees it
    for ext in ("json", "md", "html"):
        written[f"diff.{ext}"] = (tmp / f"d.{ext}").read_text(encoding="utf-8")
    assert not list(tmp.rglob("*.csv"))
    return written


def _md_shape(text: str) -> list[str]:
    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough").parse(text)
    shape = [t.type for t in tokens]
    shape += [c.type for t in tokens for c in (t.children or []) if c.type.startswith(("html", "link", "image"))]
    return shape


def _html_shape(text: str) -> list[str]:
    body = re.sub(r"<script>.*?</script>", "", text, flags=re.S)  # the inlined plotly.js and the draw script
    body = re.sub(r'<script type="application/json"[^>]*>.*?</script>', "", body, flags=re.S)
    return re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", body)


@pytest.mark.slow  # each example analyses and diffs two runs twice, HTML included (~10 s)
@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(_NAME, min_size=2, max_size=4, unique_by=lambda n: n.strip()))
def test_rule5_outputs_are_strict_json_and_names_never_change_the_markup(names: list[str]) -> None:
    from my_utils.core.safe_io import utf8_text

    if len({utf8_text(n) for n in names}) < len(names) or any(n in ("step_time", "gpu.util", "gpu.mem")
                                                               for n in names):
        return  # two names that write alike, or a reserved one: another run, not this property
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        hostile = _outputs(Path(a), names)
        plain = _outputs(Path(b), [f"name{i}" for i in range(len(names))])
    for key, text in hostile.items():
        if key.endswith("json"):
            json.loads(text, parse_constant=lambda token: (_ for _ in ()).throw(AssertionError(f"bare {token}")))
        elif key.endswith("md"):
            assert _md_shape(text) == _md_shape(plain[key]), key
        else:
            assert _html_shape(text) == _html_shape(plain[key]), key
