"""``myutils-profile analyze PATH...``: a run's files told by their content, one report, every file accounted for.

Expected values are read from the raw inputs (csv, gzip + json, the perf text, sqlite3); the
``nsys`` binary, absent here, is replaced at its seam by a script that writes a real export.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.events import write_events
from my_utils.profiling.cli import app
from my_utils.profiling.examples import example_config_path
from my_utils.profiling.formats.mytimer import read_profile_csv_events

_CSV = example_config_path().parent / "data" / "profile_rank_0.csv"
TRACES = ("kineto/hta/trace_filter__sampled_rank-0.json.gz", "kineto/hta/trace_filter__sampled_rank-1.json.gz")
EXPORTS = ("nsys/dsl_ring_6ranks/ault43.cscs.ch_485050.sqlite", "nsys/dsl_ring_6ranks/ault44.cscs.ch_739537.sqlite")
PERF = "perf/two_sum__perf_stat.txt"
NCCL = "nccl/dsl__example_2.502726.o.nccl2.22.3.log"


def _run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["analyze", *args, "-q", "--formats", "json"], env=env)


def _report(out: Path) -> dict[str, Any]:
    return json.loads((out / "analysis_report.json").read_text())


def _csv_steps(path: Path) -> set[int]:
    with path.open(newline="") as fh:
        return {int(r["step"]) for r in csv.DictReader(fh) if r["event_type"] == "END"
                and "depth=0" in r["metadata"]}


@pytest.mark.parametrize("how", ["positional", "--events"])
def test_the_callbacks_profile_csv_is_analysed(tmp_path: Path, how: str) -> None:
    # before: "expected one JSON object per line (a metric event)", exit 2
    csv_path = tmp_path / "profile_rank_0.csv"
    shutil.copyfile(_CSV, csv_path)
    out = tmp_path / "out"
    res = _run(str(csv_path), "--output-dir", str(out)) if how == "positional" else \
        _run("--events", str(csv_path), "--output-dir", str(out))
    assert res.exit_code == 0, res.output
    report = _report(out)
    assert report["inputs"]["by_source"] == {"mytimer": len(read_profile_csv_events(csv_path))}
    steps = {r["step"] for r in report["tables"]["steps"] if r["source"] == "mytimer"}
    assert steps == _csv_steps(csv_path)
    rows = report["tables"]["run_inputs"]
    assert [(r["kind"], r["rank"], r["read"]) for r in rows] == [("profile_csv", 0, True)]


def _sqlite_kernels(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0])
    finally:
        con.close()


def test_a_folder_of_many_kinds_gives_one_report_and_names_every_file(real_fixtures: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "nsys").mkdir(parents=True)
    for name in TRACES:
        shutil.copyfile(real_fixtures / name, run / Path(name).name)
    for name in EXPORTS:
        shutil.copyfile(real_fixtures / name, run / "nsys" / Path(name).name)
    shutil.copyfile(real_fixtures / PERF, run / "perf.txt")
    shutil.copyfile(real_fixtures / NCCL, run / "job.out")
    shutil.copyfile(_CSV, run / "profile_rank_0.csv")
    import pickle

    (run / "snap.pickle").write_bytes(pickle.dumps({"segments": [], "device_traces": []}, protocol=4))
    (run / "README.txt").write_text("what this run was\n")
    out = tmp_path / "out"
    res = _run(str(run), "--output-dir", str(out))
    assert res.exit_code == 0, res.output
    report = _report(out)
    rows = {Path(r["file"]).name: r for r in report["tables"]["run_inputs"]}
    every = sorted(p.name for p in run.rglob("*") if p.is_file())
    assert sorted(rows) == every  # every file is used or named
    assert {n for n, r in rows.items() if not r["read"]} == {"snap.pickle", "README.txt"}
    assert rows["snap.pickle"]["command"] == f"myutils memory summarize {run / 'snap.pickle'}"
    notes = [line for line in res.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2 and any("myutils memory summarize" in n for n in notes)
    # each kind reached the analysis: its events, tables and rank
    by_source = report["inputs"]["by_source"]
    assert {"torch_profiler", "nsys_sqlite", "perf_stat", "nccl_log", "mytimer"} <= set(by_source)
    for name in TRACES:
        import gzip

        with gzip.open(real_fixtures / name, "rt") as fh:
            rank = json.load(fh)["distributedInfo"]["rank"]
        assert (rows[Path(name).name]["rank"], rows[Path(name).name]["rank_from"]) == (rank, "distributedInfo")
    assert sorted(r["rank"] for r in report["tables"]["kineto_temporal"] if r.get("rank") is not None) == [0, 1]
    nsys_rows = report["tables"]["nsys_inputs"]
    assert len(nsys_rows) == len(EXPORTS)
    kernels = sum(_sqlite_kernels(real_fixtures / n) for n in EXPORTS)
    assert sum(int(r["count"]) for r in report["tables"]["nsys_kernel_kinds"]) == kernels
    from my_utils.profiling.formats.perf_stat import read_perf_stat

    assert by_source["perf_stat"] == len(read_perf_stat(real_fixtures / PERF))
    assert by_source["mytimer"] == len(read_profile_csv_events(_CSV))


def test_a_named_file_analyze_cannot_read_is_one_line_exit_2(tmp_path: Path) -> None:
    import pickle

    snap = tmp_path / "snap.pickle"
    snap.write_bytes(pickle.dumps({"segments": [], "device_traces": []}, protocol=4))
    out = tmp_path / "out"
    res = _run(str(snap), "--output-dir", str(out))
    assert res.exit_code == 2
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"error: {snap}") and f"myutils memory summarize {snap}" in line
    assert not out.exists()


def test_an_nsys_template_gives_the_ranks(real_fixtures: Any, tmp_path: Path) -> None:
    # ranks 3 and 10: sorted by name, 10 comes first; the template, not the order, gives the rank
    for rank, name in zip((3, 10), EXPORTS, strict=True):
        shutil.copyfile(real_fixtures / name, tmp_path / f"report_{rank}.sqlite")
    out = tmp_path / "out"
    res = _run(str(tmp_path / "report_%q{RANK}.sqlite"), "--output-dir", str(out))
    assert res.exit_code == 0, res.output
    rows = {Path(r["file"]).name: (r["rank"], r["rank_from"]) for r in _report(out)["tables"]["run_inputs"]}
    assert rows == {"report_3.sqlite": (3, "template %q{RANK}"), "report_10.sqlite": (10, "template %q{RANK}")}
    assert sorted(r["rank"] for r in _report(out)["tables"]["nsys_inputs"]) == [3, 10]


def test_an_events_file_and_the_csv_it_was_made_from_are_not_counted_twice(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(_CSV, run / "profile_rank_0.csv")
    write_events(run / "metrics_events.jsonl", read_profile_csv_events(_CSV))
    out = tmp_path / "out"
    res = _run(str(run), "--output-dir", str(out))
    assert res.exit_code == 0, res.output
    report = _report(out)
    assert report["inputs"]["by_source"] == {"mytimer": len(read_profile_csv_events(_CSV))}
    row = next(r for r in report["tables"]["run_inputs"] if r["file"].endswith(".csv"))
    assert not row["read"] and "already in metrics_events.jsonl" in row["use"]


def _fake_nsys(folder: Path, source: Path, log: Path) -> Path:
    """An ``nsys`` that writes ``source`` (a real export) where ``--output`` says, logging each call."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nsys"
    script.write_text(f"""#!{sys.executable}
import shutil, sys
args = sys.argv[1:]
open({str(log)!r}, "a").write(" ".join(args) + "\\n")
assert args[:3] == ["export", "--type", "sqlite"], args
shutil.copyfile({str(source)!r}, args[args.index("--output") + 1])
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def test_an_nsys_report_is_exported_once_beside_it_or_into_the_cache(real_fixtures: Any, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "calls.txt"
    bin_dir = _fake_nsys(tmp_path / "bin", real_fixtures / EXPORTS[0], log)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "MYUTILS_CACHE_DIR": str(tmp_path / "cache")}
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.nsys-rep").write_bytes(b"not read by us")
    for attempt in (1, 2):
        out = tmp_path / f"out{attempt}"
        res = _run(str(run), "--output-dir", str(out), env=env)
        assert res.exit_code == 0, res.output
        (row,) = _report(out)["tables"]["run_inputs"]
        assert row["kind"] == "nsys_sqlite" and row["file"] == str(run / "rank0.sqlite") and row["read"]
        assert row["detail"] == ("exported from rank0.nsys-rep (exported now)" if attempt == 1 else
                                 "exported from rank0.nsys-rep (beside the report)")
    assert len(log.read_text().splitlines()) == 1  # exported once, then reused
    assert _report(tmp_path / "out2")["tables"]["nsys_inputs"][0]["rank"] == 0
    # a folder this user cannot write: the export goes to the cache folder
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "job.nsys-rep").write_bytes(b"x")
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):  # root writes anywhere: deny it as the permission check would for a user
            from my_utils.profiling.formats import nsys_rep

            monkeypatch.setattr(nsys_rep, "_writable", lambda folder: folder.resolve() != ro.resolve())
        res = _run(str(ro), "--output-dir", str(tmp_path / "out3"), env=env)
        assert res.exit_code == 0, res.output
        (row,) = _report(tmp_path / "out3")["tables"]["run_inputs"]
        assert Path(row["file"]).parent == tmp_path / "cache" / "nsys-export"
        assert not (ro / "job.sqlite").exists()
    finally:
        ro.chmod(0o755)


def test_without_nsys_a_report_gets_the_exact_export_command(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    rep = run / "job.nsys-rep"
    rep.write_bytes(b"x")
    shutil.copyfile(_CSV, run / "profile_rank_0.csv")
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir()
    env = {"PATH": str(empty_bin)}
    res = _run(str(run), "--output-dir", str(tmp_path / "out"), env=env)
    assert res.exit_code == 0, res.output
    command = f"nsys export --type sqlite --output {run / 'job.sqlite'} {rep}"
    assert f"note: {rep}: Nsight Systems report (.nsys-rep); nsys is not on PATH; export it, then analyze the " \
           f".sqlite: {command}" in res.stderr
    res = _run(str(rep), "--output-dir", str(tmp_path / "out2"), env=env)
    assert res.exit_code == 2 and command in res.stderr


def test_the_headline_reaches_the_terminal(real_fixtures: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    trace = real_fixtures / TRACES[0]
    res = CliRunner().invoke(app, ["analyze", str(trace), "--output-dir", str(out), "-q", "--headline"])
    assert res.exit_code == 0, res.output
    report = _report(out)
    lines = res.stdout.splitlines()
    verdict = report["headline"]["verdict"]["lines"][0]
    assert f"verdict: {verdict}" in lines
    by_id = {f["id"]: f for f in report["findings"]}
    titles = [by_id[i]["title"] for i in report["headline"]["top_findings"]]
    fixes = lines[lines.index("fix first:") + 1:][:len(titles)]
    # up to three: only findings that state a saving of at least 1% of the step are fixes (two on this trace;
    # the region shares are breakdowns and the two-step variability cannot be told from the host)
    assert 1 <= len(titles) <= 3 and all(f.split(". ", 1)[1].startswith(t) for f, t in zip(fixes, titles, strict=True))
    assert all("save" in f or "per step" in f for f in fixes)  # what each would save
    assert lines[-1] == f"report: {out / 'analysis_report.html'}"
    # piped (CliRunner is no terminal) and without --headline: the output stays the written paths only
    res = CliRunner().invoke(app, ["analyze", str(trace), "--output-dir", str(tmp_path / "o2"), "-q"])
    assert [line.split(" ", 1)[0] for line in res.stdout.splitlines()] == ["wrote"] * 3


def test_dcgm_inspector_and_cprofile_files_join_the_run(real_fixtures: Any, tmp_path: Path) -> None:
    """The other providers' files, named by nothing but their content, reach the one report."""
    data = Path(__file__).parent / "data"
    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(data / "dcgmi_dmon_2gpu_h100.txt", run / "gpu.log")
    inspector = sorted((data / "nccl_inspector").iterdir())[0]
    shutil.copyfile(inspector, run / "inspector.out")
    shutil.copyfile(real_fixtures / "cprofile/gprof2dot__print1.pstats", run / "host.bin")
    out = tmp_path / "out"
    res = _run(str(run), "--output-dir", str(out))
    assert res.exit_code == 0, res.output
    report = _report(out)
    kinds = {Path(r["file"]).name: (r["kind"], r["read"]) for r in report["tables"]["run_inputs"]}
    assert kinds == {"gpu.log": ("dcgm_dmon", True), "inspector.out": ("nccl_inspector", True),
                     "host.bin": ("cprofile", True)}
    import pstats

    functions = len(pstats.Stats(str(run / "host.bin")).stats)
    by_source = report["inputs"]["by_source"]
    assert by_source["cprofile"] == functions + 1  # one event per function, and the total
    assert by_source["dcgm_dmon"] > 0 and by_source["nccl_inspector"] > 0
