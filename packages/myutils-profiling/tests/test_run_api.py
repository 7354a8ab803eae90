"""``open_run``: the notebook's door onto a run, against values computed from the raw files and against the command.

The raw values come from gzip + json (Kineto traces), sqlite3 (nsys exports) and csv (ncu
exports); the HTML page is parsed for the charts it embeds, so a Figure is checked to be the
figure the page draws.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import my_utils.profiling
from my_utils.profiling import Run, open_run
from my_utils.profiling.cli import app

TRACES = ("kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz")


@pytest.fixture(scope="module")
def run_folder(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    for name in TRACES:
        shutil.copyfile(real_fixtures / name, folder / Path(name).name)
    return folder


@pytest.fixture(scope="module")
def run(run_folder: Path) -> Run:
    return open_run(run_folder, executor="serial")


def _raw_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def test_open_run_is_exported_and_light() -> None:
    assert my_utils.profiling.open_run is open_run and "open_run" in my_utils.profiling.__all__
    assert "kineto_frames" in my_utils.profiling.__all__
    code = "import sys, my_utils.profiling as p; p.open_run; p.Run; print(sorted(m for m in " \
           "('torch', 'numpy', 'pandas', 'plotly') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_tables_are_dataframes_of_the_raw_numbers(run: Run, run_folder: Path) -> None:
    top = run.table("kineto_top_kernels")
    for rank, name in enumerate(TRACES):
        totals: dict[str, float] = defaultdict(float)
        for e in _raw_events(run_folder / Path(name).name):
            if e.get("cat") == "kernel":
                totals[e["name"]] += e["dur"]
        best = max(totals, key=lambda k: totals[k])
        row = top[(top["rank"] == rank) & (top["name"] == best)]
        assert len(row) == 1 and row["total_us"].iloc[0] == pytest.approx(totals[best])
    inputs = run.inputs
    assert sorted(inputs["file"].map(lambda p: Path(p).name)) == sorted(Path(n).name for n in TRACES)
    assert inputs["rank"].tolist() == [0, 1] and inputs["read"].all()
    assert set(run.frames()) == set(run.tables) and "kineto_steps" in run.tables
    with pytest.raises(KeyError, match="no such table"):
        run.table("nope")


def test_findings_and_headline_are_the_reports(run: Run) -> None:
    findings = run.findings
    assert findings["id"].tolist() == [f.id for f in run.report.findings]
    # a finding without a per-step impact is None in the report, NaN in the float column
    assert [None if x != x else x for x in findings["ms_per_step"].tolist()[:3]] == \
        [f.impact.ms_per_step for f in run.report.findings[:3]]
    assert run.verdict.splitlines() == run.report.headline["verdict"]["lines"]
    assert run.summary().splitlines()[0] == f"verdict: {run.verdict.splitlines()[0]}"


def test_every_chart_is_the_figure_the_page_draws(run: Run, tmp_path: Path) -> None:
    import plotly.graph_objects as go

    (page,) = [p for p in run.write(tmp_path, formats=("html",))]
    text = page.read_text()
    embedded = {m.group(1): json.loads(m.group(2)) for m in re.finditer(
        r'<script type="application/json" id="(chart-[a-z-]+)-data">(.*?)</script>', text, re.S)}
    figures = run.figures()
    assert figures and set(figures) == set(embedded)
    for chart_id, fig in figures.items():
        assert isinstance(fig, go.Figure)
        page_data = embedded[chart_id]["data"]
        assert len(fig.data) == len(page_data)
        for drawn, shown in zip(fig.data, page_data, strict=True):
            for axis in ("x", "y"):
                if shown.get(axis) is not None:
                    assert list(getattr(drawn, axis)) == shown[axis], (chart_id, axis)


def test_the_kernels_chart_shows_the_raw_kernel_times(run: Run, run_folder: Path) -> None:
    fig = run.figure("chart-kernels")
    totals: dict[str, float] = defaultdict(float)
    for e in _raw_events(run_folder / Path(TRACES[0]).name):
        if e.get("cat") == "kernel":
            totals[e["name"]] += e["dur"]
    longest_ms = max(totals.values()) / 1e3
    bars = [v for trace in fig.data for v in (trace.x if trace.orientation == "h" else trace.y) or ()]
    assert any(v == pytest.approx(longest_ms) for v in bars)


def test_the_critical_path_writes_its_overlay(run: Run, tmp_path: Path) -> None:
    cp = run.critical_path(rank=1)
    assert cp.rank == 1 and cp.trace.name == Path(TRACES[1]).name
    table = run.table("kineto_critical_path")
    assert cp.length_us == table[table["rank"] == 1]["length_us"].iloc[0]
    assert cp.breakdown["pct"].sum() == pytest.approx(100.0)
    result = cp.write_overlay(tmp_path / "overlay.json.gz")
    with gzip.open(result.path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    marked = sum(1 for e in events if e.get("ph") == "X" and (e.get("args") or {}).get("critical") == 1)
    assert marked == int(cp.summary["path_events"].iloc[0]) == result.marked_events
    flows = [e for e in events if e.get("name") == "critical_path"]
    assert len(flows) == 2 * result.flows > 0
    with pytest.raises(KeyError):
        run.critical_path(rank=7)


def test_kineto_nsys_and_ncu_diffs_are_dataframes(real_fixtures: Any, tmp_path: Path) -> None:
    base = tmp_path / "base"
    target = tmp_path / "target"
    for side, trace, export in ((base, TRACES[0], "nsysai__mfu_2gpu_before"),
                                (target, TRACES[1], "nsysai__mfu_2gpu_after")):
        side.mkdir()
        shutil.copyfile(real_fixtures / trace, side / "rank1.json.gz")
        shutil.copyfile(real_fixtures / f"nsys/{export}.sqlite", side / "report.sqlite")
        shutil.copyfile(real_fixtures / "ncu/ai4mat__metrics_713_paddle_.csv", side / "kernels.csv")
    diffs = open_run(base, executor="serial").diff(target)
    assert set(diffs) == {"kineto", "nsys", "ncu"}
    kineto = diffs["kineto"]
    names = {side: {e["name"] for e in _raw_events(folder / "rank1.json.gz") if e.get("cat") == "kernel"}
             for side, folder in (("base", base), ("target", target))}
    status = dict(zip(kineto["name"], kineto["status"], strict=True))  # names are "<kind>:<name>"
    for name in names["base"] - names["target"]:
        assert status[f"kernel:{name}"] == "removed"
    for name in names["target"] - names["base"]:
        assert status[f"kernel:{name}"] == "added"
    assert names["base"] ^ names["target"]  # the two traces differ: the check above is not empty
    nsys = diffs["nsys"].set_index("name")
    con = sqlite3.connect(base / "report.sqlite")
    try:
        counts = dict(con.execute("SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                                  "ON s.id = k.demangledName GROUP BY s.value").fetchall())
    finally:
        con.close()
    for kernel, n in counts.items():
        assert nsys.loc[f"kernel:{kernel}", "base_count"] == n
    ncu = diffs["ncu"]  # the same CSV on both sides: nothing changed
    assert len(ncu) and (ncu["delta"] == 0).all() and not ncu["significant"].any()
    # each kernel of that CSV ran once (one "ID" per kernel name): one launch has no spread (the standard error
    # has n-1 degrees of freedom), so nothing is judged, not even "unchanged"
    assert set(ncu["base_n"]) == set(ncu["target_n"]) == {1} and set(ncu["verdict"]) == {"unmeasured"}


def test_the_api_and_the_command_give_the_same_report(run: Run, run_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["analyze", str(run_folder), "--output-dir", str(out), "-q", "--formats", "json"])
    assert res.exit_code == 0, res.output
    cli = json.loads((out / "analysis_report.json").read_text())
    api = json.loads(run.report.to_json())
    assert cli["headline"] == api["headline"]
    assert [f["id"] for f in cli["findings"]] == [f["id"] for f in api["findings"]]
    assert {k: v for k, v in cli["tables"].items()} == {k: v for k, v in api["tables"].items()}


def test_a_script_without_a_main_guard_works(run_folder: Path, tmp_path: Path) -> None:
    # the default spawn pool re-ran such a script in every worker: BrokenProcessPool and four tracebacks
    script = tmp_path / "notebook_like.py"
    script.write_text(textwrap.dedent(f"""
        from my_utils.profiling import kineto_frames, open_run

        run = open_run({str(run_folder)!r}, executor="process")
        frames = kineto_frames({str(run_folder)!r})  # its default: a process per trace
        print("ranks", sorted(run.table("kineto_temporal")["rank"].dropna().astype(int)), len(frames["temporal"]))
    """))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert res.stdout.split()[:3] == ["ranks", "[0,", "1]"]
