"""PerfStatProvider on a real ``perf stat`` text, hand-built ``-x,`` files, and bad input (exit 2, one line)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError, MyUtilsError, UnsupportedInputError
from my_utils.core.events import read_events
from my_utils.profiling.formats.perf_stat import PerfStatProvider, read_perf_stat

DATA = Path(__file__).resolve().parent / "data"
REAL = "perf/two_sum__perf_stat.txt"


def _blocks(text: str) -> list[list[tuple[str, float]]]:
    """Counter lines per block, read with plain string operations (not the provider's patterns)."""
    blocks: list[list[tuple[str, float]]] = []
    for line in text.splitlines():
        if "Performance counter stats for" in line:
            blocks.append([])
            continue
        parts = line.split("#")[0].split()
        if blocks and len(parts) >= 2 and "seconds" not in parts and parts[0].replace(",", "").replace(".", "").isdigit():
            blocks[-1].append((parts[-1], float(parts[0].replace(",", ""))))
    return blocks


def test_real_perf_stat_text(real_fixtures: Path) -> None:
    path = real_fixtures / REAL
    text = path.read_text()
    blocks = _blocks(text)
    events = PerfStatProvider.from_input(path).collect()
    counters = [e for e in events if e.name.startswith("perf:")]
    assert len(blocks) == 3 and len(counters) == sum(len(b) for b in blocks) == 39
    for step, block in enumerate(blocks):
        got = {e.name.removeprefix("perf:"): e.value for e in counters if e.step == step}
        assert got == dict(block)
    task_clock = next(e for e in counters if e.name == "perf:task-clock" and e.step == 0)
    assert task_clock.unit == "ms" and task_clock.value == 60243.87 and task_clock.kind == "counter"
    assert task_clock.attrs["command"] == "./target/release/two_sum 300 l"
    # IPC derived from the counters agrees with perf's own "insn per cycle" comment (2 decimals)
    printed = [float(m) for m in re.findall(r"#\s+([\d.]+)\s+insn per cycle", text)]
    ipc = [e for e in events if e.name == "perf.ipc"]
    assert [e.step for e in ipc] == [0, 1, 2] and len(printed) == 3
    for event, shown in zip(ipc, printed, strict=True):
        assert event.value == pytest.approx(shown, abs=0.005) and event.unit == "instructions/cycle"
    elapsed = [e.value for e in events if e.name == "perf.time_elapsed"]
    assert elapsed == [float(m) for m in re.findall(r"([\d.]+) seconds time elapsed", text)]


def test_csv_hybrid_not_measured_is_never_zero() -> None:
    events = read_perf_stat(DATA / "perf_stat_x_hybrid.csv")
    by_name = {e.name: e for e in events}
    atom = by_name["perf:cpu_atom/cycles/"]
    assert math.isnan(atom.value) and atom.attrs["status"] == "not counted" and atom.attrs["running_pct"] == 0.0
    assert by_name["perf:cpu_atom/branches/"].attrs["status"] == "not supported"
    assert math.isnan(by_name["perf:cpu_atom/branches/"].value)
    assert by_name["perf:task-clock"].unit == "ms" and by_name["perf:task-clock"].value == 4821.37
    core = by_name["perf.ipc:cpu_core"]
    assert core.value == pytest.approx(51934482207 / 22416734013) and core.attrs["lines"] == [5, 3]
    assert core.value == pytest.approx(by_name["perf:cpu_core/instructions/"].attrs["perf_metric"], abs=0.005)
    no_ipc = by_name["perf.ipc:cpu_atom"]
    assert math.isnan(no_ipc.value) and no_ipc.attrs["status"] == "not measured: instructions not counted"


def test_csv_interval_per_cpu(tmp_path: Path) -> None:
    events = read_perf_stat(DATA / "perf_stat_x_interval_percpu.csv")
    counters = [e for e in events if e.name.startswith("perf:")]
    assert len(counters) == 12 and {e.attrs["aggregate"] for e in counters} == {"CPU0", "CPU1"}
    assert {e.attrs["interval_s"] for e in counters} == {1.001023456, 2.00211387}
    assert [e.attrs.get("running_pct") for e in counters if e.name == "perf:cache-misses"] == [75.0, 75.0, 75.0, 0.0]
    ipc = [(e.attrs["interval_s"], e.attrs["aggregate"], e.value) for e in events if e.name.startswith("perf.ipc@")]
    assert [e.name for e in events if e.name.startswith("perf.ipc")] == ["perf.ipc@CPU0", "perf.ipc@CPU1"] * 2
    assert ipc[:3] == [(1.001023456, "CPU0", pytest.approx(1022823159 / 1203321443)),
                       (1.001023456, "CPU1", pytest.approx(1591416651 / 884120375)),
                       (2.00211387, "CPU0", pytest.approx(1016403797 / 1210004521))]
    assert ipc[3][:2] == (2.00211387, "CPU1") and math.isnan(ipc[3][2])
    # the events file keeps "not measured" as null, never 0
    out = tmp_path / "out"
    result = _cli("plugins", "run", "perf_stat", "--input", str(DATA / "perf_stat_x_interval_percpu.csv"),
                  "--output-dir", str(out))
    assert result.returncode == 0, result.stderr
    line = next(raw for raw in (out / "metrics_events.jsonl").read_text().splitlines() if '"status": "not counted"' in
                raw or '"status":"not counted"' in raw)
    assert re.search(r'"value":\s*null', line)
    assert sum(math.isnan(e.value) for e in read_events(out / "metrics_events.jsonl")) == 3


def test_repeated_runs_noise_multiplexing_and_inert_names(tmp_path: Path) -> None:
    path = tmp_path / "r.txt"
    path.write_text(
        "\n Performance counter stats for './a.out' (5 runs):\n\n"
        "          1,023.45 msec task-clock                #    0.998 CPUs utilized            ( +-  0.31% )\n"
        "     3,812,445,120      cycles                    #    3.725 GHz                      ( +-  0.12% )  (83.21%)\n"
        "   <not supported>      stalled-cycles-frontend\n"
        "             1,234      \x1b[31mevil\x07name\n"
        "\n            1.0253 +- 0.0034 seconds time elapsed  ( +-  0.33% )\n")
    by = {e.name: e for e in read_perf_stat(path)}
    task = by["perf:task-clock"]
    assert (task.value, task.unit, task.attrs["stddev_pct"], task.attrs["runs"]) == (1023.45, "ms", 0.31, 5)
    cycles = by["perf:cycles"]
    assert cycles.attrs["running_pct"] == 83.21 and cycles.attrs["stddev_pct"] == 0.12
    assert math.isnan(by["perf:stalled-cycles-frontend"].value)
    assert by["perf.time_elapsed"].value == 1.0253
    (evil,) = [name for name in by if "evil" in name]
    assert evil == "perf:[31mevil name" and not re.search(r"[\x00-\x1f\x7f]", evil)


def test_folder_reads_only_perf_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("training notes, nothing measured\n")
    (tmp_path / "perf.csv").write_bytes((DATA / "perf_stat_x_hybrid.csv").read_bytes())
    provider = PerfStatProvider.from_input(tmp_path)
    assert [p.name for p in provider.files()] == ["perf.csv"] and len(provider.collect()) == 10


@pytest.mark.parametrize(("text", "kind", "match"), [
    ('{"traceEvents": []}\n', UnsupportedInputError, r"x\.txt: a perf stat output: a 'Performance counter stats"),
    (" Performance counter stats for 'ls':\n\n     1,234      cycles\n  garbage here\n", InputError,
     r"x\.txt:line 4: a perf stat counter line .* found 'garbage here'"),
    (" Performance counter stats for 'ls':\n\n  \xff\n", InputError, r"x\.txt:line 3: a perf stat output \(UTF-8 text\)"),
])
def test_bad_input_names_file_and_line(tmp_path: Path, text: str, kind: type, match: str) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(kind, match=match):
        PerfStatProvider.from_input(path).collect()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "my_utils.core", *args], capture_output=True, text=True, timeout=180)


def test_cli_refuses_in_one_line_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "trace.json"
    bad.write_text('{"traceEvents": []}\n')
    result = _cli("plugins", "run", "perf_stat", "--input", str(bad), "--output-dir", str(tmp_path / "o"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert str(bad) in line and "Performance counter stats" in line
    assert not (tmp_path / "o" / "metrics_events.jsonl").exists()


_LINES = st.sampled_from([
    " Performance counter stats for './a':", "", "     60,243.87 msec task-clock   #    1.000 CPUs utilized",
    "   <not counted>      cycles", "  1234,,instructions,100,100.00,,", "      60.2 seconds time elapsed",
    "1,,,,", "#  comment", "  12 x", "abc", "<not supported>,,x,0,100.00,,",
])


@settings(derandomize=True, database=None, max_examples=60, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=30)), max_size=12))
def test_any_text_gives_events_or_one_input_error(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "p.txt"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    try:
        events = read_perf_stat(path)
    except MyUtilsError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert events and all(e.source == "perf_stat" for e in events)


def test_provider_contract(real_fixtures: Path, tmp_path: Path) -> None:
    from my_utils.core.testing import check_metrics_provider

    bad = tmp_path / "bad.txt"
    bad.write_text(" Performance counter stats for 'ls':\n\n     12 cycles\n  oops\n")
    unsupported = tmp_path / "notes.txt"
    unsupported.write_text("nothing measured here\n")
    report = check_metrics_provider("perf_stat", real_fixtures / REAL, bad_input=bad, unsupported_input=unsupported)
    assert report.name == "perf_stat" and len(report.events) == 51


# -- boundaries and units (issue 36): each value at its threshold, each unit with a value whose scale error shows

def _one(tmp_path: Path, text: str, name: str) -> Any:
    path = tmp_path / "p.txt"
    path.write_text(text)
    return {e.name: e for e in read_perf_stat(path)}[name]


_HUMAN = " Performance counter stats for 'a.out':\n\n{line}\n\n       1.50 seconds time elapsed\n"


@pytest.mark.parametrize(("printed", "unit"), [("msec", "ms"), ("usec", "us"), ("nsec", "ns"), ("sec", "s"),
                                               ("Joules", "J"), ("Watts", "W"), ("MiB", "MiB"), ("KiB", "KiB"),
                                               ("GiB", "GiB"), ("B", "B"), ("ns", "ns"), ("ms", "ms"), ("us", "us")])
def test_each_unit_perf_prints_is_kept_with_the_value_unscaled(tmp_path: Path, printed: str, unit: str) -> None:
    human = _one(tmp_path, _HUMAN.format(line=f"          1,023.45 {printed} power/energy-pkg/"),
                 "perf:power/energy-pkg/")
    assert (human.value, human.unit) == (1023.45, unit)  # msec stays ms: 1023.45, never 1.02345 s
    csv = _one(tmp_path, f"1023.45,{printed},power/energy-pkg/,1000,100.00,,\n", "perf:power/energy-pkg/")
    assert (csv.value, csv.unit) == (1023.45, unit)


def test_a_unit_word_alone_is_the_event_name(tmp_path: Path) -> None:
    alone = _one(tmp_path, _HUMAN.format(line="                 7      msec"), "perf:msec")
    assert (alone.value, alone.unit) == (7.0, "")
    named = _one(tmp_path, _HUMAN.format(line="                 7      msec task-clock"), "perf:task-clock")
    assert (named.value, named.unit) == (7.0, "ms")


def test_seconds_of_the_footer_are_seconds(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text(" Performance counter stats for 'a.out':\n\n     1,234      cycles\n\n"
                    "       2.250000000 seconds time elapsed\n\n       1.500000000 seconds user\n"
                    "       0.125000000 seconds sys\n")
    by = {e.name: e for e in read_perf_stat(path)}
    assert [(by[n].value, by[n].unit) for n in ("perf.time_elapsed", "perf.time_user", "perf.time_sys")] == [
        (2.25, "s"), (1.5, "s"), (0.125, "s")]


def test_percent_columns_are_percent_not_ratios(tmp_path: Path) -> None:
    human = _one(tmp_path, _HUMAN.format(
        line="     3,812,445,120      cycles      #    3.725 GHz      ( +-  0.12% )  (83.21%)"), "perf:cycles")
    assert (human.attrs["stddev_pct"], human.attrs["running_pct"]) == (0.12, 83.21)
    assert (human.attrs["perf_metric"], human.attrs["perf_metric_unit"]) == (3.725, "GHz")
    csv = _one(tmp_path, "3812445120,,cycles,0.12%,1000821345,83.21,3.725,GHz\n", "perf:cycles")
    assert (csv.attrs["stddev_pct"], csv.attrs["running_pct"]) == (0.12, 83.21)
    assert (csv.attrs["perf_metric"], csv.attrs["perf_metric_unit"]) == (3.725, "GHz")


@pytest.mark.parametrize(("pct", "running"), [("100.00", None), ("100", None), ("99.99", 99.99), ("0.00", 0.0)])
def test_a_counter_that_ran_all_the_time_has_no_running_share(tmp_path: Path, pct: str, running: float | None) -> None:
    event = _one(tmp_path, f"1234,,cycles,1000,{pct},,\n", "perf:cycles")
    assert event.attrs.get("running_pct") == running


def test_a_csv_counter_needs_five_fields(tmp_path: Path) -> None:
    assert _one(tmp_path, "1234,,cycles,1000,100.00\n", "perf:cycles").value == 1234
    path = tmp_path / "four.txt"
    path.write_text("1234,,cycles,1000\n")
    with pytest.raises(UnsupportedInputError, match="found none"):
        read_perf_stat(path)


@pytest.mark.parametrize(("tail", "metric"), [(",1.23,insn per cycle", (1.23, "insn per cycle")), (",1.23,", None),
                                              ("", None)])
def test_perfs_metric_needs_its_unit(tmp_path: Path, tail: str, metric: tuple[float, str] | None) -> None:
    event = _one(tmp_path, f"5000,,instructions,1000,100.00{tail}\n", "perf:instructions")
    got = (event.attrs["perf_metric"], event.attrs["perf_metric_unit"]) if "perf_metric" in event.attrs else None
    assert got == metric


def test_aggregation_prefix_and_cpu_count(tmp_path: Path) -> None:
    event = _one(tmp_path, "S0,8,1234,,cycles,1000,100.00,,\n", "perf:cycles")
    assert (event.attrs["aggregate"], event.attrs["cpus"]) == ("S0", 8)
    interval = _one(tmp_path, "2.000000001,S1,4,1234,,cycles,1000,100.00,,\n", "perf:cycles")
    assert (interval.attrs["interval_s"], interval.attrs["aggregate"], interval.attrs["cpus"]) == (2.000000001, "S1", 4)


@pytest.mark.parametrize(("cycles", "ipc"), [("0", None), ("1", 5000.0), ("2500", 2.0)])
def test_ipc_at_zero_cycles_is_not_measured(tmp_path: Path, cycles: str, ipc: float | None) -> None:
    path = tmp_path / "p.txt"
    path.write_text(f"5000,,instructions,1000,100.00,,\n{cycles},,cycles,1000,100.00,,\n")
    (event,) = [e for e in read_perf_stat(path) if e.name == "perf.ipc"]
    if ipc is None:
        assert math.isnan(event.value) and event.attrs["status"] == "not measured: cycles is 0"
    else:
        assert event.value == ipc and "status" not in event.attrs
