"""``myutils-profile analyze`` on bad input and hostile limits: one line, exit 2, nothing written.

Each case is a defect of issue 17 reproduced through the real command (typer's runner,
in-process) or a real subprocess where a process limit is part of the case.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core import events as events_module
from my_utils.core.events import write_events
from my_utils.profiling.cli import app
from my_utils.profiling.examples import example_config_path
from my_utils.profiling.formats.mytimer import read_profile_csv_events

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


# -- traces: one parse each, bad ones refused (issue 17 and 18) ----------------------------------------------

CONTROL = "kineto/hta/trace_diff__control.json.gz"
SMALL = "kineto/hta/trace_filter__sampled_rank-0.json.gz"


def _torn_copy(real: Path, tmp: Path, keep: float = 0.6) -> Path:
    """The real trace cut at ``keep`` of its bytes, as a killed writer would leave it."""
    import gzip

    data = gzip.decompress(real.read_bytes())
    torn = tmp / "torn.json"
    torn.write_bytes(data[: int(len(data) * keep)])
    return torn


@pytest.mark.parametrize("with_events", [True, False])
def test_a_torn_trace_is_refused_not_skipped(real_fixtures: Any, tmp_path: Path, with_events: bool) -> None:
    # before: exit 0, the report without its Kineto tables and a log line only
    torn = _torn_copy(real_fixtures / SMALL, tmp_path)
    out = tmp_path / "out"
    args = ["--events", str(good_events(tmp_path / "run"))] if with_events else []
    res = CliRunner().invoke(app, ["analyze", *args, "--trace", str(torn), "--output-dir", str(out), "-q"])
    assert res.exit_code == 2, res.output
    line = one_error_line(res.stderr)
    assert str(torn) in line and "truncated" in line
    assert not out.exists()


def test_a_torn_trace_named_by_the_events_is_refused(real_fixtures: Any, tmp_path: Path) -> None:
    # the default lookup (the traces the events name, beside the events file) failed silently as well
    from my_utils.profiling.kineto.read.provider import parse_trace_file

    real = real_fixtures / SMALL
    run = tmp_path / "run"
    run.mkdir()
    write_events(run / "metrics_events.jsonl", parse_trace_file(real))
    (run / real.name).write_bytes(_torn_copy(real, tmp_path).read_bytes())  # same name, torn
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["analyze", "--events", str(run / "metrics_events.jsonl"), "--output-dir",
                                   str(out), "-q"])
    assert res.exit_code == 2, res.output
    assert real.name in one_error_line(res.stderr)
    assert not out.exists()


def test_analyze_a_trace_alone_reads_it_once(real_fixtures: Any, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # before: --events was required (an ingest first), and events + Kineto analyses read each trace twice
    from my_utils.profiling.analysis import MetricsAnalyzer
    from my_utils.profiling.kineto import analyze_traces
    from my_utils.profiling.kineto.read import stream as trace_stream
    from my_utils.profiling.kineto.read.provider import parse_trace_file

    real = real_fixtures / SMALL
    opened: list[str] = []
    original = trace_stream.TraceStream.__init__

    def counting(self: Any, path: Any) -> None:
        opened.append(str(path))
        original(self, path)

    monkeypatch.setattr(trace_stream.TraceStream, "__init__", counting)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["analyze", "--trace", str(real), "--output-dir", str(out), "-q"])
    assert res.exit_code == 0, res.output
    assert opened == [str(real)]  # one pass for the events, the Kineto analyses and the context
    monkeypatch.setattr(trace_stream.TraceStream, "__init__", original)
    report = json.loads((out / "analysis_report.json").read_text())
    # the same tables as the two separate passes give (independent path: provider events, then analyze_traces)
    separate = MetricsAnalyzer(parse_trace_file(real), "pretrain", kineto=analyze_traces([real], executor="serial"))
    expected = json.loads(separate.analyze().to_json())
    for table in ("operations", "kineto_temporal", "kineto_top_kernels", "kineto_kernel_kinds", "kineto_idle"):
        assert report["tables"][table] == expected["tables"][table], table
    # the one context reader, from the same pass: no deviceProperties in this trace, so no GPU
    assert report["hardware"] == expected["hardware"]
    assert {k: report["hardware"].get(k) for k in ("ranks", "world_size", "backend", "gpu")} == \
        {"ranks": [0], "world_size": 128, "backend": "nccl", "gpu": None}
    assert report["inputs"]["trace_files"] == [str(real)]
    assert {"analysis_report.json", "analysis_report.md", "analysis_report.html"} <= {p.name for p in out.iterdir()}


def test_events_and_trace_together_take_the_hardware_from_the_trace(real_fixtures: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["analyze", "--events", str(good_events(tmp_path / "run")), "--trace",
                                   str(real_fixtures / CONTROL), "--output-dir", str(out), "-q", "--formats", "json"])
    assert res.exit_code == 0, res.output
    report = json.loads((out / "analysis_report.json").read_text())
    assert report["hardware"]["gpu"] == "NVIDIA A100-PG509-200" and report["hardware"]["world_size"] == 8
    assert report["inputs"]["by_source"] == {"mytimer": 30}  # the trace fed the Kineto tables only
    assert "kineto_top_kernels" in report["tables"]


def test_neither_events_nor_trace_is_a_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["analyze", "--output-dir", str(tmp_path / "out")])
    assert res.exit_code == 2 and "--events" in one_error_line(res.stderr)


# -- all reports or none (issue 17) ----------------------------------------------------------------------------

_PROFILE = [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # the JSON and Markdown fit, the HTML does not


def test_a_file_size_limit_leaves_no_report_behind(tmp_path: Path) -> None:
    # before: exit 2 but new analysis_report.json/.md beside no .html (its docstring says nothing is written)
    events = good_events(tmp_path / "run")
    out = tmp_path / "out"
    res = subprocess.run([*_PROFILE, "analyze", "--events", str(events), "--output-dir", str(out), "-q"],
                         capture_output=True, text=True, timeout=300, preexec_fn=_limit_file_size)
    assert res.returncode == 2, res.stderr
    line = one_error_line(res.stderr)
    assert "analysis_report.html" in line and "File too large" in line and ".tmp" not in line
    assert not out.exists() and res.stdout == ""


def test_a_failing_rerun_keeps_the_previous_reports_whole(tmp_path: Path) -> None:
    events = good_events(tmp_path / "run")
    out = tmp_path / "out"
    first = CliRunner().invoke(app, ["analyze", "--events", str(events), "--output-dir", str(out), "-q"])
    assert first.exit_code == 0, first.output
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    res = subprocess.run([*_PROFILE, "analyze", "--events", str(events), "--output-dir", str(out), "-q",
                          "--workload", "inference"], capture_output=True, text=True, timeout=300,
                         preexec_fn=_limit_file_size)
    assert res.returncode == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no mix of old and new, no temporaries


_OOM = """
import resource, sys
def vm():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
from my_utils.profiling.cli import main
import my_utils.profiling.analysis.analyzer, numpy
limit = vm() + 20 * 2 ** 20  # 20 MiB more than the interpreter and its imports: the trace's parse cannot fit
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["myutils-profile", *sys.argv[1:]]
main()
"""


def test_out_of_memory_is_one_line_and_writes_nothing(real_fixtures: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-c", _OOM, "analyze", "--trace", str(real_fixtures / CONTROL),
                          "--output-dir", str(out), "-q"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stderr
    assert "out of memory" in one_error_line(res.stderr)
    assert not out.exists()
