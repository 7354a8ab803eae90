"""`myutils-profile ingest` and `myutils plugins run` on bad input: nothing lost with exit 0, one line, exit 2.

Each test reproduces a symptom seen with a real file (issue 8) and checks the command now
says what is wrong, where, with the right exit code and no output file.
"""

from __future__ import annotations

import json
import math
import os
import select
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from my_utils.core.events import read_events
from my_utils.profiling.cli import app
from my_utils.profiling.examples import example_config_path

_DATA = example_config_path().parent / "data"
_PROFILE = [sys.executable, "-c", "from my_utils.profiling.cli import main; main()"]
_MYUTILS = [sys.executable, "-m", "my_utils.core"]


def _run(cmd: list[str], *args: str, cwd: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=180, **kwargs)  # type: ignore[call-overload]


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def _config(tmp: Path, providers: list[dict]) -> Path:
    path = tmp / "cfg.json"
    path.write_text(json.dumps({"run_id": "t", "providers": providers}))
    return path


def _damaged_nsys(real_fixtures: Path, tmp: Path) -> Path:
    """The real nsys export with one byte of a table name in its schema flipped (not UTF-8 any more)."""
    data = bytearray((real_fixtures / "nsys/extrap__con_kernel.sqlite").read_bytes())
    at = data.index(b"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION") + 24
    data[at] = 0xBC
    path = tmp / "damaged.sqlite"
    path.write_bytes(bytes(data))
    return path


# -- nothing lost with exit 0 ------------------------------------------------------------


def test_damaged_nsys_beside_a_good_csv_fails_and_writes_nothing(real_fixtures: Path, tmp_path: Path) -> None:
    damaged = _damaged_nsys(real_fixtures, tmp_path)
    shutil.copy(_DATA / "profile_rank_0.csv", tmp_path)
    cfg = _config(tmp_path, [{"provider": "nsys_sqlite", "input": damaged.name},
                             {"provider": "mytimer", "input": "profile_rank_0.csv"}])
    result = _run(_PROFILE, "ingest", "--config", str(cfg), "--output-dir", "out", cwd=tmp_path)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert str(damaged) in line and "readable" in line
    assert not (tmp_path / "out").exists() and result.stdout == ""


def test_ignore_provider_errors_says_each_skip_once_and_names_it_in_the_summary(
    real_fixtures: Path, tmp_path: Path
) -> None:
    damaged = _damaged_nsys(real_fixtures, tmp_path)
    shutil.copy(_DATA / "profile_rank_0.csv", tmp_path)
    cfg = _config(tmp_path, [{"provider": "nsys_sqlite", "input": damaged.name},
                             {"provider": "table_csv", "input": "missing.csv"},
                             {"provider": "mytimer", "input": "profile_rank_0.csv"}])
    result = _run(_PROFILE, "ingest", "--config", str(cfg), "--output-dir", "out", "--ignore-provider-errors",
                  cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = result.stderr.splitlines()
    assert len(warnings) == 2 and all(w.startswith("warning: skipped providers[") for w in warnings), warnings
    assert "providers[0] (nsys_sqlite" in warnings[1] and str(damaged) in warnings[1]
    assert "providers[1] (table_csv)" in warnings[0] and "missing.csv" in warnings[0]
    assert "skipped 2 provider(s) (--ignore-provider-errors): providers[1] (table_csv); providers[0] (nsys_sqlite)" \
        in result.stdout
    events = read_events(tmp_path / "out" / "metrics_events.jsonl")
    assert events and {e.source for e in events} == {"mytimer"}


def test_bad_delimiter_is_refused_not_zero_events(tmp_path: Path) -> None:
    shutil.copy(_DATA / "op_summary.csv", tmp_path)
    cfg = _config(tmp_path, [{"provider": "table_csv", "input": "op_summary.csv", "options": {"delimiter": ";"}}])
    result = _run(_PROFILE, "ingest", "--config", str(cfg), "--output-dir", "out", cwd=tmp_path)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert "op_summary.csv:line 1" in line and "is the delimiter ','" in line
    assert not (tmp_path / "out").exists()


def test_a_provider_bug_exits_1_naming_provider_file_and_cause(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from my_utils.profiling.formats.table_csv import TableCsvMetricsProvider

    def broken(self: object, path: Path) -> list:
        raise KeyError("column index")

    monkeypatch.setattr(TableCsvMetricsProvider, "_read", broken)
    shutil.copy(_DATA / "op_summary.csv", tmp_path)
    shutil.copy(_DATA / "profile_rank_0.csv", tmp_path)
    cfg = _config(tmp_path, [{"provider": "table_csv", "input": "op_summary.csv"},
                             {"provider": "mytimer", "input": "profile_rank_0.csv"}])
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", "--config", str(cfg), "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    line = _one_error_line(result.stderr)
    assert line == (f"error: {tmp_path / 'op_summary.csv'}: metrics provider 'table_csv' failed: "
                    "KeyError: 'column index'")
    assert not (tmp_path / "out").exists()
    result = runner.invoke(app, ["ingest", "--config", str(cfg), "--output-dir", str(tmp_path / "out"),
                                 "--ignore-provider-errors"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("warning: skipped providers[0] (table_csv") == 1
    assert {e.source for e in read_events(tmp_path / "out" / "metrics_events.jsonl")} == {"mytimer"}


def test_output_honours_the_umask(tmp_path: Path) -> None:
    shutil.copy(_DATA / "profile_rank_0.csv", tmp_path)
    cfg = _config(tmp_path, [{"provider": "mytimer", "input": "profile_rank_0.csv"}])
    result = _run(_PROFILE, "ingest", "--config", str(cfg), "--output-dir", "out", cwd=tmp_path, umask=0o027)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE((tmp_path / "out" / "metrics_events.jsonl").stat().st_mode) == 0o640


def test_ncu_text_values_are_null_with_the_text_kept(real_fixtures: Path, tmp_path: Path) -> None:
    text = (real_fixtures / "ncu/ai4mat__metrics_713_paddle_.csv").read_text()
    lines = text.splitlines(keepends=True)
    header = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    for i in (header + 1, header + 2):  # what ncu writes where it could not measure
        lines[i] = lines[i][: lines[i].rstrip().rindex(',"') + 1] + '"n/a"\n'
    src = tmp_path / "ncu.csv"
    src.write_text("".join(lines))
    result = _run(_MYUTILS, "plugins", "run", "ncu_csv", "--input", str(src), "--output-dir", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    raw = (tmp_path / "out" / "metrics_events.jsonl").read_text().splitlines()
    decoded = [json.loads(line, parse_constant=lambda t: pytest.fail(f"bare {t} in the events file")) for line in raw]
    nulls = [d for d in decoded if d["value"] is None]
    assert len(nulls) == 2 and all(d["attrs"]["text"] == "n/a" and d["kind"] == "info" for d in nulls)
    assert sum(math.isnan(e.value) for e in read_events(tmp_path / "out" / "metrics_events.jsonl")) == 2


# -- declared options ----------------------------------------------------------------------


@pytest.mark.parametrize(("provider", "option", "expected"), [
    ("table_csv", "value_columns=5", "--option:value_columns: metrics provider 'table_csv' option 'value_columns' "
                                     "must be a list of strings (or one string), got 5 (int); known options: "),
    ("table_csv", 'delimiter="ab"', "option 'delimiter' must be one character"),
    ("table_csv", "kind=average", "option 'kind' must be one of 'duration', 'counter', 'gauge', 'ratio', 'info'"),
    ("torch_profiler", "exector=dask", "--option:exector: metrics provider 'torch_profiler' has no option 'exector'; "
                                       "known options: executor, rank"),
    ("cprofile", "rank=first", "--option:rank: metrics provider 'cprofile' option 'rank' must be an integer"),
])
def test_plugins_run_refuses_bad_options(tmp_path: Path, provider: str, option: str, expected: str) -> None:
    src = {"table_csv": _DATA / "op_summary.csv", "torch_profiler": _DATA / "cpu_trace_rank_0.json.gz",
           "cprofile": _DATA / "op_summary.csv"}[provider]
    result = _run(_MYUTILS, "plugins", "run", provider, "--input", str(src), "--output-dir", "out",
                  "--option", option, cwd=tmp_path)
    assert result.returncode == 2
    assert expected in _one_error_line(result.stderr)
    assert not (tmp_path / "out").exists()


def test_one_string_value_column_is_one_column(tmp_path: Path) -> None:
    result = _run(_MYUTILS, "plugins", "run", "table_csv", "--input", str(_DATA / "op_summary.csv"),
                  "--output-dir", "out", "--option", "value_columns=cpu_time_total_us", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = read_events(tmp_path / "out" / "metrics_events.jsonl")
    assert events and {e.attrs["column"] for e in events} == {"cpu_time_total_us"}


@pytest.mark.parametrize(("options", "place"), [
    ({"value_columns": 5}, "providers[0].options.value_columns"),
    ({"executor": 3}, "providers[0].options.executor"),
])
def test_config_options_are_checked_the_same_way(tmp_path: Path, options: dict, place: str) -> None:
    provider = "table_csv" if "value_columns" in options else "torch_profiler"
    src = _DATA / ("op_summary.csv" if provider == "table_csv" else "cpu_trace_rank_0.json.gz")
    cfg = _config(tmp_path, [{"provider": provider, "input": str(src), "options": options}])
    result = _run(_PROFILE, "ingest", "--config", str(cfg), "--output-dir", "out", cwd=tmp_path)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert f"cfg.json:{place}: metrics provider {provider!r} option" in line and "known options: " in line


# -- progress ------------------------------------------------------------------------------


_SLOW_COPIES = 16


def _slow_config(real_fixtures: Path, tmp: Path) -> Path:
    # copies of a large real trace: together they take well over the bar's one-second delay even with the
    # typed decoder (one of them alone no longer did: the bar never showed and the test failed; six no longer
    # did once the compiled scanner read the bytes: 1.4 s of wall time on two cores, the bar's first draw missed)
    source = real_fixtures / "kineto/hta/df_index_resolver.json.gz"
    copies = []
    for i in range(_SLOW_COPIES):
        copy = tmp / "traces" / f"rank_{i}.json.gz"
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(source.read_bytes())
        copies.append({"provider": "torch_profiler", "input": str(copy)})
    return _config(tmp, copies)


@pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX only")
@pytest.mark.parametrize("quiet", [False, True])
def test_progress_bar_on_a_terminal_only(real_fixtures: Path, tmp_path: Path, quiet: bool) -> None:
    cfg = _slow_config(real_fixtures, tmp_path)
    leader, follower = os.openpty()
    try:
        args = [*_PROFILE, "ingest", "--config", str(cfg), "--output-dir", "out", *(["--quiet"] if quiet else [])]
        proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=follower)
        os.close(follower)
        follower = -1
        seen = b""
        deadline = time.monotonic() + 180
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.1)[0]:
                try:
                    seen += os.read(leader, 4096)
                except OSError:
                    break
        proc.wait(timeout=60)
        while select.select([leader], [], [], 0.1)[0]:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        assert proc.stdout is not None
        stdout = proc.stdout.read().decode()
        proc.stdout.close()
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 0, seen
    assert stdout.startswith("wrote ") and "ingest [" not in stdout
    if quiet:
        assert seen == b""
    else:
        assert b"ingest [" in seen and f"/{_SLOW_COPIES}".encode() in seen and b"torch_profiler" in seen
        assert seen.endswith(b"\r\x1b[K")  # erased when done


def test_no_progress_in_a_pipe(real_fixtures: Path, tmp_path: Path) -> None:
    result = _run(_PROFILE, "ingest", "--config", str(_slow_config(real_fixtures, tmp_path)), "--output-dir", "out",
                  cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""


def test_a_bug_while_opening_the_input_exits_1_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from my_utils.profiling.formats.table_csv import TableCsvMetricsProvider

    def broken(self: object, file: Path) -> None:
        raise IndexError("sniff bug")

    monkeypatch.setattr(TableCsvMetricsProvider, "sniff", broken)
    shutil.copy(_DATA / "op_summary.csv", tmp_path)
    cfg = _config(tmp_path, [{"provider": "table_csv", "input": "op_summary.csv"}])
    result = CliRunner().invoke(app, ["ingest", "--config", str(cfg), "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert _one_error_line(result.stderr) == (f"error: {tmp_path / 'op_summary.csv'}: metrics provider 'table_csv' "
                                              "failed: IndexError: sniff bug")
    assert not (tmp_path / "out").exists()
