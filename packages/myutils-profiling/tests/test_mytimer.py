"""MyTimerMetricsProvider with the real core MyTimer: live listener and profile CSV files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from my_utils.core.errors import InputError, UsageError
from my_utils.core.timer import MyTimer
from my_utils.profiling.formats.mytimer import MyTimerMetricsProvider


def _run_steps(timer: MyTimer, steps: range) -> None:
    for step in steps:
        timer.set_step(step)
        timer.start("iter")
        timer.start("forward")
        time.sleep(0.001)
        timer.stop("forward")
        timer.start("backward")
        timer.stop("backward")
        timer.stop("iter")
        timer.step()


def test_live_never_loses_steps_with_equal_region_counts() -> None:
    timer = MyTimer(use_cuda=False, tag="t")
    provider = MyTimerMetricsProvider(timer, rank=3)
    _run_steps(timer, range(0, 3))
    first = provider.collect()
    _run_steps(timer, range(3, 5))
    second = provider.collect()
    assert provider.collect() == []
    assert sorted({e.step for e in first}) == [0, 1, 2]
    assert sorted({e.step for e in second}) == [3, 4]
    for batch, steps in ((first, 3), (second, 2)):
        assert sum(1 for e in batch if e.name == "forward") == steps
        assert sum(1 for e in batch if e.name == "step_time") == steps
    fwd = next(e for e in first if e.name == "forward")
    assert fwd.value >= 1.0 and fwd.unit == "ms" and fwd.rank == 3
    assert fwd.attrs["path"] == "iter/forward" and fwd.attrs["depth"] == 1
    step0 = [e for e in first if e.step == 0]
    iter_ms = next(e.value for e in step0 if e.name == "iter")
    assert next(e.value for e in step0 if e.name == "step_time") == pytest.approx(iter_ms)
    provider.close()
    _run_steps(timer, range(5, 6))
    assert provider.collect() == []


def test_profile_csv_written_by_the_real_logger(tmp_path: Path) -> None:
    from my_utils.core.logger import GlobalLogger

    GlobalLogger._reset_for_tests()
    try:
        mgr = GlobalLogger()
        mgr.setup(log_dir=str(tmp_path), rank=2, world_size=4)
        timer = MyTimer(use_cuda=False, tag="csv")
        timer.set_logger(mgr)
        _run_steps(timer, range(4))
    finally:
        GlobalLogger._reset_for_tests()
    csv_path = tmp_path / "profile_rank_2.csv"
    events = MyTimerMetricsProvider(csv_path).collect()
    rows = [line for line in csv_path.read_text().splitlines()[1:] if ",END," in line]
    assert len([e for e in events if e.name != "step_time"]) == len(rows) == 12
    assert {e.rank for e in events} == {2}
    assert sorted({e.step for e in events}) == [0, 1, 2, 3]
    assert {e.attrs.get("path") for e in events if e.name == "forward"} == {"iter/forward"}
    # a folder of rank files works through the same provider
    assert len(MyTimerMetricsProvider(tmp_path).collect()) == len(events)


def test_a_csv_appended_by_two_runs_is_read_as_two(tmp_path: Path) -> None:
    """The real logger appends: a second run into the same folder wrote steps 0-2 again, and their
    step_time summed both runs' regions. Each run is now its own (run ids), and the report says so."""
    from my_utils.core.logger import GlobalLogger
    from my_utils.profiling.analysis import MetricsAnalyzer

    for _ in range(2):
        GlobalLogger._reset_for_tests()
        try:
            mgr = GlobalLogger()
            mgr.setup(log_dir=str(tmp_path), rank=0, world_size=1)
            timer = MyTimer(use_cuda=False, tag="csv")
            timer.set_logger(mgr)
            _run_steps(timer, range(3))
        finally:
            GlobalLogger._reset_for_tests()
    csv_path = tmp_path / "profile_rank_0.csv"
    ends = [line.split(",") for line in csv_path.read_text().splitlines()[1:] if ",iter,END," in line]
    assert [int(r[3]) for r in ends] == [0, 1, 2, 0, 1, 2]  # what the file holds, read without our reader
    events = MyTimerMetricsProvider(csv_path).collect()
    steps = [e for e in events if e.name == "step_time"]
    assert sorted((e.run_id, e.step) for e in steps) == [
        ("profile_rank_0.csv#run1", 0), ("profile_rank_0.csv#run1", 1), ("profile_rank_0.csv#run1", 2),
        ("profile_rank_0.csv#run2", 0), ("profile_rank_0.csv#run2", 1), ("profile_rank_0.csv#run2", 2)]
    iters = sorted(float(r[6]) for r in ends)
    assert sorted(e.value for e in steps) == pytest.approx(iters)  # each step its own run's, never a sum of two
    (warn,) = [f for f in MetricsAnalyzer(events).analyze().findings if f.id.startswith("capture:one run per step")]
    assert "2 runs" in warn.detail and "(0-2)" in warn.detail
    # one run: no run id, as before
    single = tmp_path / "one"
    single.mkdir()
    (single / "profile_rank_0.csv").write_text("\n".join(csv_path.read_text().splitlines()[:1 + 3 * 6]) + "\n")
    assert {e.run_id for e in MyTimerMetricsProvider(single / "profile_rank_0.csv").collect()} == {""}


def test_bad_csv_and_misuse(tmp_path: Path) -> None:
    bad = tmp_path / "profile_rank_0.csv"
    bad.write_text("timestamp_unix,readable_time,machine_id,step,event_name,event_type,duration_ms,metadata\n"
                   "abc,x,m,1,e,END,1.0,\n1.0,x,m,1,e,END,1.0,\n")
    with pytest.raises(InputError, match=r"profile_rank_0\.csv:line 2"):
        MyTimerMetricsProvider(bad).collect()
    with pytest.raises(UsageError, match=r"MyTimerMetricsProvider.*add_listener"):
        MyTimerMetricsProvider(object())
