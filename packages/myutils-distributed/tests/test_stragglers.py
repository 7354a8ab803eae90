"""``analyze_stragglers`` and ``myutils stragglers`` on generated runs, checked against independent counts."""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.core.errors import InputError, UsageError
from my_utils.distributed.stragglers import analyze_stragglers, render_text
from my_utils.distributed.testing import write_synthetic_run

runner = CliRunner()


def _independent_steps(log_dir: Path) -> dict[str, dict[int, dict[int, float]]]:
    """END duration per (section, rank, step), read with the csv module (not with the code under test)."""
    found: dict[str, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for path in log_dir.glob("profile_rank_*.csv"):
        rank = int(path.stem.rsplit("_", 1)[1])
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row["event_type"] == "END":
                    found[row["event_name"]][rank][int(row["step"])] = float(row["duration_ms"])
    return found


def _lower_median(values: list[float]) -> float:
    """The lower of the two middle values of an even count (what the report's medians are)."""
    return sorted(values)[(len(values) - 1) // 2]


def _independent_medians(log_dir: Path) -> dict[str, dict[int, float]]:
    """Each rank's median time per step in each section (the synthetic runs hold no waits)."""
    return {name: {r: _lower_median(list(steps.values())) for r, steps in ranks.items()}
            for name, ranks in _independent_steps(log_dir).items()}


def _median_ratio(log_dir: Path, section: str, rank: int) -> float:
    """The median over steps of ``rank``'s time over the median of the other ranks' in the same step."""
    ranks = _independent_steps(log_dir)[section]
    ratios = [t / statistics.median(ranks[r][step] for r in ranks if r != rank) for step, t in ranks[rank].items()]
    return _lower_median(ratios)


def test_the_slow_rank_and_section_are_named(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 4, 20, slow=(2, "forward", 1.5))
    report = analyze_stragglers(tmp_path)
    assert report.ranks == [0, 1, 2, 3] and report.steps == 20
    assert report.stragglers == [(2, "forward")]
    forward = next(s for s in report.sections if s.section == "forward")
    medians = _independent_medians(tmp_path)["forward"]
    assert forward.max.rank == 2 and forward.max.ms == pytest.approx(medians[2], rel=1e-3)
    assert forward.min.ms == pytest.approx(min(medians.values()), rel=1e-3)
    assert forward.slowdown == pytest.approx(_median_ratio(tmp_path, "forward", 2), rel=1e-3)
    assert forward.slowest_steps == 20 and forward.late_steps == 20 and forward.waiting == []
    assert "persistent stragglers: rank 2 in forward" in render_text(report)


def test_one_rank_is_compared_with_nothing_and_says_so(tmp_path: Path) -> None:
    """One rank's logs printed "1 ranks (0..0)", "0 of 30" steps per section and "no persistent straggler"."""
    write_synthetic_run(tmp_path, 1, 30)
    text = render_text(analyze_stragglers(tmp_path))
    medians = _independent_medians(tmp_path)
    assert text.splitlines()[0].endswith(": 1 rank (0), 30 steps")
    assert "stragglers need at least two ranks" in text
    assert "0 of 30" not in text and "no persistent straggler" not in text
    for name, by_rank in medians.items():
        row = next(line for line in text.splitlines() if line.startswith(name + " ")).split()
        assert row[1] == "30" and float(row[2]) == pytest.approx(by_rank[0], rel=1e-3)


def test_an_even_run_names_nobody(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 8, 30)
    report = analyze_stragglers(tmp_path)
    assert report.stragglers == [] and all(s.slowdown < 1.1 for s in report.sections)
    assert "no persistent straggler" in render_text(report)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ranks=st.integers(2, 6), steps=st.integers(1, 8), factor=st.floats(1.5, 4.0), data=st.data())
def test_stats_match_independent_counts(tmp_path_factory: pytest.TempPathFactory, ranks: int, steps: int,
                                        factor: float, data: st.DataObject) -> None:
    folder = tmp_path_factory.mktemp("run")
    slow_rank = data.draw(st.integers(0, ranks - 1))
    section = data.draw(st.sampled_from(["data", "forward", "backward"]))
    write_synthetic_run(folder, ranks, steps, slow=(slow_rank, section, factor))
    report = analyze_stragglers(folder)
    expected = _independent_medians(folder)
    for stats in report.sections:
        medians = expected[stats.section]
        assert stats.ranks == ranks and stats.steps == steps == stats.seen_steps
        assert stats.min.ms == pytest.approx(min(medians.values()), rel=1e-3)
        assert stats.max.ms == pytest.approx(max(medians.values()), rel=1e-3)
        assert stats.median.ms == pytest.approx(statistics.median(medians.values()), rel=1e-3)
    # persistent means more slow steps than chance gives (sign test at 1 %: 7 of 7 steps or more);
    # fewer steps are outliers at most, never a straggler
    assert report.stragglers == ([(slow_rank, section)] if steps >= 7 else [])


def test_recorded_offsets_line_up_the_starts(tmp_path: Path) -> None:
    # rank 1's clock is 5 ms behind; it recorded the offset without applying it (applied=0)
    write_synthetic_run(tmp_path, 2, 5, clock_offsets={0: (0.0, True), 1: (0.005, False)})
    report = analyze_stragglers(tmp_path)
    data = next(s for s in report.sections if s.section == "data")
    assert data.start_spread_ms == pytest.approx(0.0, abs=1e-3)  # every step's "data" starts together
    assert [(c.rank, c.offset_s, c.applied) for c in report.clocks] == [(0, 0.0, True), (1, 0.005, False)]
    # the same rows without the CLOCK_SYNC row: 5 ms apart
    path = tmp_path / "profile_rank_1.csv"
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True) if "CLOCK_SYNC" not in line))
    data = next(s for s in analyze_stragglers(tmp_path).sections if s.section == "data")
    assert data.start_spread_ms == pytest.approx(5.0, abs=1e-3) and data.last_to_start_rank == 0


def test_cli_text_and_json(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 3, 10, slow=(1, "backward", 2.0))
    result = runner.invoke(build_app(), ["stragglers", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 2 and doc["stragglers"] == [{"rank": 1, "section": "backward"}]
    assert {s["section"] for s in doc["sections"]} == {"data", "forward", "backward"}
    text = runner.invoke(build_app(), ["stragglers", str(tmp_path), "--min-slowdown", "2.5"]).stdout
    assert "no persistent straggler" in text and "no rank at >= 2.50x" in text


def test_the_command_is_installed_through_the_plugin_hook(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 2, 10, slow=(0, "data", 3.0))
    proc = subprocess.run([sys.executable, "-m", "my_utils.core", "stragglers", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "persistent stragglers: rank 0 in data" in proc.stdout
    help_text = subprocess.run([sys.executable, "-m", "my_utils.core", "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    assert "stragglers" in help_text


def _bad(tmp_path: Path, case: str) -> Path:
    write_synthetic_run(tmp_path, 2, 3)
    path = tmp_path / "profile_rank_1.csv"
    lines = path.read_text().splitlines(keepends=True)
    if case == "malformed row":
        lines.insert(3, "12.5,x,host,notastep,forward,END,1.0,\n")
    elif case == "steps go back":
        lines.append(lines[1])  # step 0 again after step 2
    elif case == "bad clock row":
        lines.insert(1, "1764000000.000000,x,host,0,clock_sync,CLOCK_SYNC,0.0,offset_s=abc;uncertainty_s=1\n")
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize(("case", "expected"), [
    ("malformed row", r"profile_rank_1.csv:line 4: "),
    ("steps go back", r"profile_rank_1.csv:line 20: steps in increasing order \(step 0 after step 2\)"),
    ("bad clock row", r"profile_rank_1.csv:line 2: a CLOCK_SYNC row needs offset_s=<finite seconds>"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str, expected: str) -> None:
    _bad(tmp_path, case)
    with pytest.raises(InputError, match=expected):
        analyze_stragglers(tmp_path)
    result = runner.invoke(build_app(), ["stragglers", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and "Traceback" not in result.output


@pytest.mark.parametrize("what", ["missing", "empty", "a file"])
def test_no_csvs_is_exit_2(tmp_path: Path, what: str) -> None:
    target = tmp_path / "logs"
    if what == "empty":
        target.mkdir()
    elif what == "a file":
        target.write_text("x")
    result = runner.invoke(build_app(), ["stragglers", str(target)])
    assert result.exit_code == 2 and str(target) in result.stderr and "profile_rank_<rank>.csv" in result.stderr


def test_bad_thresholds_are_usage_errors(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 2, 1)
    with pytest.raises(UsageError, match="expected 0 < persistent_fraction <= 1"):
        analyze_stragglers(tmp_path, persistent_fraction=0)
    assert runner.invoke(build_app(), ["stragglers", str(tmp_path), "--min-slowdown", "0.5"]).exit_code == 2


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=2, max_size=30), st.data())
def test_median_without_one_value(values: list[float], data: st.DataObject) -> None:
    from my_utils.distributed.stragglers.analysis import _median_without

    ordered = sorted(values)
    index = data.draw(st.integers(0, len(ordered) - 1))
    assert _median_without(ordered, index) == pytest.approx(statistics.median(ordered[:index] + ordered[index + 1:]))


# -- untrusted input: FIFOs, numbers that overflow, bytes that are not UTF-8, names that are not text --------


def _cli(log_dir: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``myutils stragglers`` as a real process (a hang fails the test at ``timeout``, it cannot block it)."""
    return subprocess.run([sys.executable, "-m", "my_utils.core", "stragglers", str(log_dir), *args],
                          capture_output=True, text=True, timeout=timeout)


def _refused(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)
    return proc.stderr


@pytest.mark.parametrize("which", ["profile_rank_1.csv", "profile_rank_1.steplog"])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, which: str) -> None:
    import os

    write_synthetic_run(tmp_path, 2, 3)
    fifo = tmp_path / which
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    _refused(_cli(tmp_path, timeout=30), str(fifo), "a regular file (this is a FIFO)")
    with pytest.raises(InputError, match="this is a FIFO"):
        analyze_stragglers(tmp_path)


def _set_duration(path: Path, text: str, nth_end: int = 0) -> int:
    """Put ``text`` in the duration_ms of the ``nth_end``-th END row of ``path``; return its line number."""
    lines = path.read_text().splitlines(keepends=True)
    ends = [i for i, line in enumerate(lines) if ",END," in line]
    i = ends[nth_end]
    fields = lines[i].split(",")
    fields[6] = text
    lines[i] = ",".join(fields)
    path.write_text("".join(lines))
    return i + 1


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "9" * 400, "-" + "9" * 400])
def test_a_duration_that_is_not_finite_is_one_line(tmp_path: Path, value: str) -> None:
    write_synthetic_run(tmp_path, 3, 4)
    line = _set_duration(tmp_path / "profile_rank_1.csv", value, nth_end=4)
    message = _refused(_cli(tmp_path, "--json"), f"profile_rank_1.csv:line {line}: a finite duration")
    assert len(message) < 400 and "Traceback" not in message


def test_an_end_minus_start_that_overflows_is_one_line(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 2, 2)
    path = tmp_path / "profile_rank_1.csv"
    lines = path.read_text().splitlines(keepends=True)
    for i, stamp in ((1, "-1.7e308"), (2, "1.7e308")):  # START and END of 'data', step 0: both finite
        fields = lines[i].split(",")
        fields[0] = stamp
        fields[6] = "0.0"  # no duration written: END minus START it is
        lines[i] = ",".join(fields)
    path.write_text("".join(lines))
    _refused(_cli(tmp_path), "profile_rank_1.csv:line 3: a finite duration (END minus START) for 'data', got inf")


def test_a_step_number_too_long_to_read_is_one_line(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 2, 2)
    path = tmp_path / "profile_rank_0.csv"
    lines = path.read_text().splitlines(keepends=True)
    fields = lines[3].split(",")
    fields[3] = "9" * 5000  # more digits than Python converts to int
    lines[3] = ",".join(fields)
    path.write_text("".join(lines))
    _refused(_cli(tmp_path), "profile_rank_0.csv:line 4: expected an integer in column 'step'")


def test_json_stays_strict_when_a_sum_overflows(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 3, 3)
    path = tmp_path / "profile_rank_2.csv"
    lines = path.read_text().splitlines(keepends=True)
    out = []
    for line in lines:  # every 'forward' of rank 2 runs twice more, 1e308 ms each: finite alone, not summed
        out.append(line)
        if ",forward,END," in line:
            start = line.replace(",END,", ",START,").split(",")
            start[6] = "0.0"
            end = line.split(",")
            end[6] = "1e308"
            out += [",".join(start), ",".join(end)] * 2
    path.write_text("".join(out))
    proc = _cli(tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout, parse_constant=lambda token: pytest.fail(f"bare {token} in the JSON"))
    forward = next(s for s in doc["sections"] if s["section"] == "forward")
    assert forward["max"] == {"rank": 2, "ms": None}  # overflowed: null, not Infinity
    text = _cli(tmp_path).stdout
    assert "inf (r2)" in text


def test_a_file_with_bytes_that_are_not_utf8_is_read_with_them_escaped(tmp_path: Path) -> None:
    # what older versions wrote for MyTimer regions named with os.fsdecode(b"layer_\xe9")
    write_synthetic_run(tmp_path, 3, 8, slow=(1, "forward", 2.0))
    expected = _independent_medians(tmp_path)["forward"]
    for path in tmp_path.glob("profile_rank_*.csv"):
        path.write_bytes(path.read_bytes().replace(b"forward", b"layer_\xe9"))
    proc = _cli(tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    layer = next(s for s in doc["sections"] if s["section"] == "layer_\\xe9")
    assert layer["max"]["rank"] == 1 and layer["max"]["ms"] == pytest.approx(expected[1], rel=1e-3)
    assert layer["min"]["ms"] == pytest.approx(min(expected.values()), rel=1e-3) and layer["steps"] == 8
    assert doc["stragglers"] == [{"rank": 1, "section": "layer_\\xe9"}]
    assert "persistent stragglers: rank 1 in layer_\\xe9" in _cli(tmp_path).stdout


def test_a_bad_row_after_bytes_that_are_not_utf8_names_the_users_file(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path, 2, 3)
    path = tmp_path / "profile_rank_0.csv"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b"data", b"d\xffta")
    lines.insert(5, b"1.0,x,h,notastep,forward,END,1.0,\n")
    path.write_bytes(b"".join(lines))
    _refused(_cli(tmp_path), f"{path}:line 6: expected an integer in column 'step'")


def test_names_cannot_break_the_text_table(tmp_path: Path) -> None:
    evil = "fwd\x1b[2J\nrank 9 in everything\u2028x"
    write_synthetic_run(tmp_path, 2, 8, sections=(("data", 2.0), (evil, 10.0)), slow=(0, evil, 3.0))
    report = analyze_stragglers(tmp_path)
    assert {s.section for s in report.sections} == {"data", evil}  # the data keeps the name as written
    text = render_text(report)
    assert "\x1b" not in text and "\u2028" not in text
    assert "fwd\\x1b[2J\\nrank 9 in everything\\u2028x" in text
    assert len(text.splitlines()) == 7  # title, clocks, header, 2 sections, what the times are, verdict
    doc = json.loads(_cli(tmp_path, "--json").stdout)
    assert {s["section"] for s in doc["sections"]} == {"data", evil}


def test_profiler_files_beside_a_csv_run_are_named_as_not_read(tmp_path: Path) -> None:
    import gzip

    write_synthetic_run(tmp_path, 2, 10)
    traces = tmp_path / "torch_traces"
    traces.mkdir()
    with gzip.open(traces / "rank0.pt.trace.json.gz", "wt") as fh:
        fh.write('{"schemaVersion": 1, "traceEvents": []}')
    (traces / "notes.json").write_text('{"not": "a trace"}')  # a JSON file no profiler wrote: not named
    result = runner.invoke(build_app(), ["stragglers", str(tmp_path)])
    assert result.exit_code == 0, result.output
    note = result.output.strip().splitlines()[-1]
    assert note.startswith("note: read as a MyTimer run") and "1 profiler file(s)" in note
    assert "torch_traces/rank0.pt.trace.json.gz" in note and "notes.json" not in note
    as_json = json.loads(runner.invoke(build_app(), ["stragglers", str(tmp_path), "--json"]).output)
    assert as_json["notes"] == [note.removeprefix("note: ")]
    # a run folder with nothing beside its CSVs has no note
    (traces / "rank0.pt.trace.json.gz").unlink()
    assert runner.invoke(build_app(), ["stragglers", str(tmp_path), "--json"]).output.count('"notes": []') == 1
