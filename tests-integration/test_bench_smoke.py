"""Every bench runs in quick mode: exit 0, figures beside goals, no temp folder left, reasons for skips.

The benches run as a reviewer runs them (``python bench/X.py --quick``) in subprocesses, with
``TMPDIR`` pointed at an empty folder the test inspects afterwards. Figures are never
asserted (speed stays out of tests); what is asserted is the report's shape and the cleanup.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
SCRIPTS = [*sorted(p.name for p in BENCH.glob("bench_*.py")), "make_big_trace.py"]
VERDICT = re.compile(r"^\s+goal (.+): (met|MISSED) \(median ", re.MULTILINE)
NO_FIXTURES = {"MYUTILS_REAL_FIXTURES_OFFLINE": "1"}  # with mirror and cache pointed at empty folders


@pytest.fixture
def tmp_path(short_tmp_path: Path) -> Path:
    """A short folder: a bench's local Dask cluster puts its fork server's socket in ``tmp_path / "tmpdir"``
    ($TMPDIR), and pytest's own ``tmp_path`` was too long for a socket under pytest-xdist."""
    return short_tmp_path


def _env(tmp_path: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment with TMPDIR on a fresh empty folder (tempfile honours it)."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # torch keeps a per-user compile cache under TMPDIR (torchinductor_<user>) when an anchor imports
    # its compiler: a cache shared by runs, not a bench's temporary folder, so it is kept elsewhere
    env.update(TMPDIR=str(tmpdir), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor-cache"), **(extra or {}))
    return env


def _run(args: list[str], tmp_path: Path, timeout: float = 240,
         extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=_env(tmp_path, extra),
                          capture_output=True, text=True, timeout=timeout)


def _out_listing() -> list[tuple[str, int, int]]:
    """What bench/out (the benches' caches of generated inputs) holds: a quick run must not touch it.

    Folders count by name only: in a shared checkout a full run elsewhere may be filling its
    cached folder while this test runs; a quick run that wrote a cache would still add a name
    or rewrite a top-level file.
    """
    out = BENCH / "out"
    if not out.is_dir():
        return []
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else (p.name, 0, 0)
                  for p in out.iterdir())


def _quick_source() -> str:
    """The real trace a quick Kineto bench reads (``QUICK_SOURCE`` in bench/make_big_trace.py)."""
    found = re.search(r'^QUICK_SOURCE = "([^"]+)"', (BENCH / "make_big_trace.py").read_text(), re.MULTILINE)
    assert found is not None, "bench/make_big_trace.py no longer names QUICK_SOURCE"
    return found[1]


def _report_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_bench_report_under_test", BENCH / "_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", SCRIPTS)
def test_quick_run_reports_goals_and_cleans_up(script: str, tmp_path: Path, real_fixtures: Any) -> None:
    before = _out_listing()
    proc = _run([str(BENCH / script), "--quick", "--json", str(tmp_path / "report.json")], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    judged = [g for f in report["figures"] for g in f["goals"] if g["met"] is not None]
    if not judged and report["skipped"]:
        why = f"{script}: nothing judged here: " + "; ".join(s["reason"] for s in report["skipped"])
        if any(s["reason"].startswith("fixture ") for s in report["skipped"]):
            real_fixtures.unavailable(why)  # skips, or fails where CI has the fixtures
        pytest.skip(why)
    printed = VERDICT.findall(proc.stdout)
    assert printed, f"{script} printed no 'goal ...: met/MISSED' line:\n{proc.stdout[-2000:]}"
    # the text and the JSON say the same: every judged goal once, with the same verdict
    assert sorted((text, verdict == "met") for text, verdict in printed) == sorted(
        (g["goal"], g["met"]) for g in judged)
    header = [line for line in proc.stdout.splitlines() if line.startswith("== ")]
    assert len(header) == 1 and "QUICK" in header[0], header
    assert "interpreter: " + sys.executable in proc.stdout
    assert os.listdir(tmp_path / "tmpdir") == [], f"{script} left temporary files behind"
    assert _out_listing() == before, f"{script} --quick changed bench/out"


def test_missing_fixtures_skip_with_a_reason(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    extra = dict(NO_FIXTURES, MYUTILS_REAL_FIXTURES=str(empty), MYUTILS_REAL_FIXTURES_CACHE=str(empty))
    for args in (["bench_kineto.py", "--quick"], ["make_big_trace.py", "--quick"],
                 ["bench_kineto.py", "--quick", "--fixtures", str(empty)]):
        proc = _run([str(BENCH / args[0]), *args[1:]], tmp_path, extra=extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        skipped = [line for line in proc.stdout.splitlines() if "skipped: fixture kineto/hta/" in line]
        assert skipped, f"{args}: no skip line naming the fixture:\n{proc.stdout}"
        assert not VERDICT.search(proc.stdout), "a figure was judged without its input"
        assert os.listdir(tmp_path / "tmpdir") == []


def test_missing_anchor_is_skipped_with_a_reason(tmp_path: Path, real_fixtures: Any) -> None:
    # a package earlier on sys.path that refuses to import stands for an anchor not installed
    shadow = tmp_path / "shadow"
    for name in ("nvtx", "hta"):
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(f"raise ImportError('{name} hidden by the smoke test')\n")
    proc = _run([str(BENCH / "bench_nvtx.py"), "--quick"], tmp_path, extra={"PYTHONPATH": str(shadow)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^nvtx\.annotate\s+skipped: anchor nvtx not importable \(nvtx hidden by the smoke test\)",
                     proc.stdout, re.MULTILINE), proc.stdout
    assert "not judged (anchor 'nvtx.annotate' was not measured)" in proc.stdout
    real_fixtures / _quick_source()  # the HTA skip comes only once the real trace is read: fetched, or skip why
    proc = _run([str(BENCH / "bench_kineto.py"), "--quick", "--skip-big"], tmp_path, extra={"PYTHONPATH": str(shadow)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "skipped: fixture" not in proc.stdout, proc.stdout
    assert re.search(r"HTA\s+skipped: .*hta hidden by the smoke test", proc.stdout), proc.stdout
    assert os.listdir(tmp_path / "tmpdir") == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_bench_removes_its_temp_folder(sig: signal.Signals, tmp_path: Path, real_fixtures: Any) -> None:
    # the Kineto bench must be running when the signal comes: without its real trace it would skip at once,
    # so the trace its quick run reads is fetched here (or this test skips saying why); HTA is not needed
    # (the bench's own parse in a child interpreter runs for seconds, with or without the anchor)
    real_fixtures / _quick_source()
    tmpdir = tmp_path / "tmpdir"
    env = _env(tmp_path)
    proc = subprocess.Popen([sys.executable, str(BENCH / "bench_kineto.py"), "--quick", "--samples", "5"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        # wait until the bench has made its temp folder (a parse then runs in a child interpreter)
        while not list(tmpdir.glob("bench_kineto_*")):
            if proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if proc.poll() is not None:  # with its input at hand, only a crash ends it this early
            out, err = proc.communicate()
            pytest.fail(f"bench_kineto ended (exit {proc.returncode}) before it made its temp folder:\n"
                        f"{out[-1000:]}{err[-2000:]}", pytrace=False)
        if not list(tmpdir.glob("bench_kineto_*")):
            pytest.fail("bench_kineto made no temp folder within 60 s", pytrace=False)
        time.sleep(0.3)
        os.killpg(proc.pid, sig)  # the group, as Ctrl-C in a terminal does
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0
    assert os.listdir(tmpdir) == [], f"left behind after {sig.name}: {os.listdir(tmpdir)}"


def test_run_all_quick_collects_every_goal(tmp_path: Path) -> None:
    proc = _run([str(BENCH / "run_all.py"), "--quick", "nvtx", "cli_startup", "--json", str(tmp_path / "all.json")],
                tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = proc.stdout.split("=== every goal", 1)[1]
    combined = json.loads((tmp_path / "all.json").read_text())
    assert [b["bench"] for b in combined["benches"]] == ["bench_cli_startup", "bench_nvtx"]
    goals = [(b["bench"], g["goal"]) for b in combined["benches"] for f in b["figures"] for g in f["goals"]]
    assert goals and all(bench in summary and goal in summary for bench, goal in goals)
    assert re.search(r"^\d+ goals met, \d+ missed, 0 figures skipped$", summary, re.MULTILINE)
    assert os.listdir(tmp_path / "tmpdir") == []


@pytest.mark.parametrize(("args", "message"), [
    (["make_big_trace.py", "--source", "no/such/trace.json"], "make_big_trace: --source no/such/trace.json: no such file"),
    (["run_all.py", "nosuchbench"], "run_all: no bench named nosuchbench; choose from"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    proc = _run([str(BENCH / args[0]), *args[1:]], tmp_path, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(message) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_report_pairs_rounds_and_judges_medians() -> None:
    rep = _report_module()
    calls: list[str] = []

    def tool(name: str, value: float) -> Callable[[], float]:
        def call() -> float:
            calls.append(name)
            return value
        return call

    samples = rep.interleave({"a": tool("a", 2.0), "b": tool("b", 6.0)}, rounds=3, warmup=1)
    assert calls == ["a", "b"] * 4  # warm-up round dropped, then A B A B A B
    report = rep.Report("bench_t", "test")
    report.add("anchor", [1.0, 2.0, 4.0], "s")
    mine = report.add("mine", [0.5, 1.0, 4.0], "s", anchor="anchor",
                      goals=[rep.at_most(1.0), rep.at_most_times(0.6), rep.at_least_times(0.6),
                             rep.at_most_above(0.0)])
    lonely = report.add("lonely", samples["b"], "s", anchor="missing", goals=[rep.at_most_times(1.0)])
    # per-round ratios 0.5, 0.5, 1.0 -> median 0.5 (a ratio of medians would say 0.5 too, but range differs)
    assert report.ratio(mine) == [0.5, 0.5, 1.0]
    assert [(v.value, v.met) for v in report.verdicts(mine)] == [(1.0, True), (0.5, True), (0.5, False), (-0.5, True)]
    assert [v.met for v in report.verdicts(lonely)] == [None]
    text = report.render()
    assert "goal <= 0.6x anchor: met (median 0.5)" in text
    assert "goal >= 0.6x anchor: MISSED (median 0.5)" in text
    assert "not judged (anchor 'missing' was not measured)" in text
    assert "goals: 3 met, 1 missed, 0 figure(s) skipped" in text
    assert json.loads(json.dumps(report.to_json()))["figures"][1]["ratio_to_anchor"] == {
        "median": 0.5, "min": 0.5, "max": 1.0}


@pytest.mark.parametrize(("script", "module"), [("bench_nvtx", "my_utils.tracing"), ("bench_kineto", "my_utils.profiling"),
                                                ("bench_cli_startup", "my_utils.core")])
def test_an_interpreter_without_my_utils_is_told_which_to_use(script: str, module: str, tmp_path: Path) -> None:
    # -S leaves site-packages (and the editable installs) off sys.path: my_utils is not importable
    proc = _run(["-S", str(BENCH / f"{script}.py"), "--quick"], tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"{script}: {module} is not importable by {sys.executable}; run the bench with")
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
