"""ModuleProfiler on real torch CPU models: leaves only, every call counted, no dangling state, hooks removed."""

from __future__ import annotations

import csv
import logging
import time
from array import array
from pathlib import Path
from typing import Any

import pytest
import torch

from my_utils.core.errors import UsageError
from my_utils.hooks import SUMMARY_COLUMNS, ModuleProfiler
from my_utils.hooks.module_profiler import leaf_modules


def test_only_leaf_modules_are_hooked(mlp: Any, count_hooks: Any) -> None:
    with ModuleProfiler(mlp) as prof:
        assert prof.module_names == ["0.0", "0.1", "1.0", "1.1", "2"]
        assert count_hooks(mlp) == 2 * 5  # a pre and a post hook per leaf, none on containers
        for _ in range(3):
            prof.start()
            mlp(torch.randn(4, 16))
            prof.stop()
        df = prof.summary()
    assert list(df.columns) == list(SUMMARY_COLUMNS)
    assert sorted(df["module_name"]) == ["0.0", "0.1", "1.0", "1.1", "2"]
    assert set(df["run_count"]) == {3}
    assert prof.runs == 3


def test_a_leaf_model_is_profiled_under_its_class_name() -> None:
    layer = torch.nn.Linear(3, 3)
    with ModuleProfiler(layer) as prof:
        layer(torch.ones(2, 3))
        assert list(prof.summary()["module_name"]) == ["Linear"]


def test_known_durations_slowest_first_and_percentages(sleep_cls: Any) -> None:
    sleeps = {"0": sleep_cls(2), "1": sleep_cls(12), "3": sleep_cls(6)}
    model = torch.nn.Sequential(sleeps["0"], sleeps["1"], torch.nn.Identity(), sleeps["3"])
    with ModuleProfiler(model) as prof:
        walls = []
        for _ in range(3):
            prof.start()
            t0 = time.perf_counter()
            model(torch.ones(1))
            walls.append((time.perf_counter() - t0) * 1000)
            prof.stop()
    df = prof.summary()
    rows = df.set_index("module_name")
    # slowest first, by what each module really spent (a busy machine can oversleep any of them)
    expected = sorted(sleeps, key=lambda n: -sum(sleeps[n].spent))
    assert list(df["module_name"]) == [*expected, "2"]
    durations = prof.durations_ms()
    for name, module in sleeps.items():
        assert rows.loc[name, "run_count"] == 3
        # each timed call encloses the forward's own measurement, and adds little to it
        for timed, spent in zip(durations[name], module.spent, strict=True):
            assert spent - 1e-3 <= timed < spent + 50  # 1 µs: perf_counter is a float
        assert rows.loc[name, "mean_ms"] >= module.ms  # sleep never returns early
        assert rows.loc[name, "total_ms"] == pytest.approx(sum(durations[name]))
    # the modules' times fit inside the forwards that contained them
    assert df["total_ms"].sum() <= sum(walls)
    assert df["percentage"].sum() == pytest.approx(100.0)
    assert rows.loc["1", "percentage"] == pytest.approx(100 * rows.loc["1", "total_ms"] / df["total_ms"].sum())
    assert (df["std_ms"] >= 0).all()


class Reuse(torch.nn.Module):
    """Calls one leaf three times per forward and holds another leaf under two names."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()
        self.alias = self.act  # the same module object registered twice

    def forward(self, x: Any) -> Any:
        for _ in range(3):
            x = self.shared(x)
        return self.alias(self.act(x))


def test_each_call_counts_and_shared_modules_count_once_per_call(count_hooks: Any) -> None:
    model = Reuse()
    with ModuleProfiler(model) as prof:
        assert prof.module_names == ["shared", "act"]
        assert count_hooks(model) == 4
        for _ in range(5):
            model(torch.ones(2, 4))
        df = prof.summary().set_index("module_name")
    assert df.loc["shared", "run_count"] == 15
    assert df.loc["act", "run_count"] == 10  # called twice per forward (as act and as alias), hooked once


def test_exception_inside_forward_leaves_no_dangling_state(boom_cls: Any) -> None:
    boom = boom_cls()
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), boom, torch.nn.ReLU())
    with ModuleProfiler(model) as prof:
        prof.start()
        model(torch.ones(1, 2))
        boom.armed = True
        with pytest.raises(ValueError, match="boom") as info:
            model(torch.ones(1, 2))
        assert info.value is boom.error  # the original exception, unchanged
        assert not any(prof._open.values())  # nothing half-open after the raise
        boom.armed = False
        model(torch.ones(1, 2))
        prof.stop()
        df = prof.summary().set_index("module_name")
    assert prof.failed_calls == {"1": 1}
    assert df.loc["1", "run_count"] == 2  # the call that raised is not timed
    assert df.loc["0", "run_count"] == 3  # the layer before it finished in all three forwards
    assert df.loc["2", "run_count"] == 2  # the layer after it never ran in the failed forward


def test_interrupted_forward_is_dropped_by_the_next_start(boom_cls: Any) -> None:
    """KeyboardInterrupt skips torch's always-called hooks; start() forgets the open mark."""
    boom = boom_cls(KeyboardInterrupt())
    model = torch.nn.Sequential(boom)
    with ModuleProfiler(model) as prof:
        boom.armed = True
        with pytest.raises(KeyboardInterrupt):
            model(torch.ones(1))
        assert prof._open["0"]  # torch ran no post hook for it
        prof.start()
        assert not prof._open["0"]
        boom.armed = False
        model(torch.ones(1))
        prof.stop()
    assert prof.failed_calls == {"0": 1}
    assert prof.summary()["run_count"].tolist() == [1]


def test_start_stop_bracket_what_is_recorded(mlp: Any) -> None:
    with ModuleProfiler(mlp) as prof:
        assert prof.recording  # records from construction (the seed's manual mode needs no start())
        mlp(torch.randn(1, 16))
        prof.stop()
        assert not prof.recording
        mlp(torch.randn(1, 16))  # not timed: after stop(), before start()
        prof.start()
        mlp(torch.randn(1, 16))
        prof.stop()
    assert set(prof.summary()["run_count"]) == {2}
    assert prof.runs == 2


def test_cleanup_removes_every_hook_and_keeps_the_statistics(mlp: Any, count_hooks: Any) -> None:
    prof = ModuleProfiler(mlp)
    mlp(torch.randn(1, 16))
    before = prof.summary()
    prof.cleanup()
    assert count_hooks(mlp) == 0 and not prof.attached
    mlp(torch.randn(1, 16))
    assert prof.summary().equals(before)
    prof.cleanup()  # again: harmless
    with pytest.raises(UsageError, match=r"ModuleProfiler.start\(\) after cleanup\(\).*new ModuleProfiler"):
        prof.start()


def test_context_exit_removes_hooks_also_when_the_body_raises(mlp: Any, count_hooks: Any) -> None:
    with pytest.raises(RuntimeError, match="training failed"), ModuleProfiler(mlp):
        assert count_hooks(mlp) == 10
        raise RuntimeError("training failed")
    assert count_hooks(mlp) == 0


def test_summary_csv_round_trips(mlp: Any, tmp_path: Path) -> None:
    with ModuleProfiler(mlp) as prof:
        for _ in range(4):
            mlp(torch.randn(2, 16))
    out = tmp_path / "sub" / "module_profile.csv"
    df = prof.summary(output_path=out)
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(SUMMARY_COLUMNS)
    assert [r["module_name"] for r in rows] == list(df["module_name"])
    for row, (_, expected) in zip(rows, df.iterrows(), strict=True):
        assert int(row["run_count"]) == expected["run_count"] == 4
        assert float(row["total_ms"]) == pytest.approx(expected["total_ms"], rel=1e-12)
    assert list(tmp_path.glob("sub/.*")) == []  # no temporary file left beside it


def test_unwritable_csv_is_logged_and_the_frame_returned(mlp: Any, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with ModuleProfiler(mlp) as prof:
        mlp(torch.randn(1, 16))
    with caplog.at_level(logging.ERROR, "my_utils.hooks"):
        df = prof.summary(output_path=blocker / "out.csv")
    assert len(df) == 5
    assert f"could not write {blocker / 'out.csv'}" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_empty_summary_has_the_columns(mlp: Any) -> None:
    with ModuleProfiler(mlp) as prof:
        df = prof.summary()
    assert list(df.columns) == list(SUMMARY_COLUMNS) and len(df) == 0


def test_not_a_module_is_refused() -> None:
    with pytest.raises(UsageError, match=r"ModuleProfiler\(model=dict\): expected a torch.nn.Module"):
        ModuleProfiler({})


class FakeCudaClock:
    """CUDA-event semantics on the CPU: marks are events readable only after ``settle()``."""

    name = "cuda"
    deferred = True

    def __init__(self) -> None:
        self.now = 0.0
        self.events: list[dict[str, Any]] = []
        self.settles = 0

    def mark(self) -> dict[str, Any]:
        self.now += 1.5  # every mark is 1.5 ms after the previous one
        event = {"t": self.now, "done": False}
        self.events.append(event)
        return event

    def settle(self) -> None:
        self.settles += 1
        for event in self.events:
            event["done"] = True

    def elapsed_ms(self, start: dict[str, Any], end: dict[str, Any]) -> float:
        if not (start["done"] and end["done"]):
            raise RuntimeError("CUDA error: device not ready (event read before it completed)")
        return float(end["t"] - start["t"])


def test_cuda_events_are_read_once_per_stop_after_one_settle() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())
    clock = FakeCudaClock()
    with ModuleProfiler(model, clock=clock) as prof:
        assert prof.clock == "cuda"
        for i in range(2):
            prof.start()
            model(torch.ones(1, 2))
            assert clock.settles == i  # never inside a hook
            prof.stop()
        assert clock.settles == 2
        prof.summary()
        assert clock.settles == 2  # nothing pending: no extra synchronize
    df = prof.summary().set_index("module_name")
    assert df["run_count"].tolist() == [2, 2]
    assert df["mean_ms"].tolist() == [1.5, 1.5]


class ScriptedClock:
    """A non-deferred clock whose marks are the scripted ints; ``ns_marks`` says how they are read."""

    name = "scripted"
    deferred = False

    def __init__(self, marks: list[int], ns_marks: bool) -> None:
        self._marks = iter(marks)
        self.ns_marks = ns_marks
        self.read: list[tuple[int, int]] = []

    def mark(self) -> int:
        return next(self._marks)

    def settle(self) -> None:
        pass

    def elapsed_ms(self, start: int, end: int) -> float:
        self.read.append((start, end))
        return (end - start) / 1e6


@pytest.mark.parametrize("ns_marks", [True, False])
def test_ns_marks_are_kept_as_ints_and_read_as_the_clock_reads_them(ns_marks: bool) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())
    marks = [1_000, 3_500_123, 3_600_000, 3_600_007, 10**12, 10**12 + 999_999_999, 5 * 10**12, 5 * 10**12 + 1]
    clock = ScriptedClock(marks, ns_marks)
    with ModuleProfiler(model, clock=clock) as prof:
        model(torch.ones(1, 2))
        model(torch.ones(1, 2))
        if ns_marks:  # the hot path kept int nanoseconds (8 bytes a call) and called nothing on the clock
            assert {name: list(v) for name, v in prof._durations.items()} == {"0": [3_499_123, 999_999_999],
                                                                                "1": [7, 1]}
            assert all(isinstance(v, array) and v.typecode == "q" for v in prof._durations.values())
            assert clock.read == []
        durations = prof.durations_ms()
    expected = {"0": [(3_500_123 - 1_000) / 1e6, 999_999_999 / 1e6], "1": [7 / 1e6, 1 / 1e6]}
    assert durations == expected  # the very floats CpuClock.elapsed_ms gives
    assert prof.summary().set_index("module_name")["total_ms"].to_dict() == {
        "0": pytest.approx(sum(expected["0"])), "1": pytest.approx(sum(expected["1"]))}


def test_the_cpu_clock_keeps_ns_and_a_raising_call_is_not_timed(boom_cls: Any) -> None:
    boom = boom_cls()
    model = torch.nn.Sequential(boom)
    with ModuleProfiler(model, use_cuda=False) as prof:
        model(torch.ones(1))
        boom.armed = True
        with pytest.raises(ValueError):
            model(torch.ones(1))
        assert all(isinstance(v, int) for v in prof._durations["0"])
        assert not prof._open["0"] and prof.failed_calls == {"0": 1}
    assert prof.durations_ms()["0"] == [prof._durations["0"][0] / 1e6]


def test_legacy_path_is_the_same_class() -> None:
    from my_utils.moduleProfiler import ModuleProfiler as Legacy

    assert Legacy is ModuleProfiler


def test_leaf_modules_of_an_empty_container() -> None:
    assert [n for n, _ in leaf_modules(torch.nn.Sequential())] == ["Sequential"]


@pytest.mark.cuda
def test_cuda_model_is_timed_with_cuda_events() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8192, 8192), torch.nn.ReLU()).cuda()
    x = torch.randn(4096, 8192, device="cuda")
    with ModuleProfiler(model) as prof:
        assert prof.clock == "cuda"
        for _ in range(10):
            prof.start()
            model(x)
            prof.stop()
    df = prof.summary().set_index("module_name")
    assert df["run_count"].tolist() == [10, 10]
    assert list(df.index) == ["0", "1"]  # a 4096x8192x8192 matmul takes longer than a ReLU over its output
    assert (df["mean_ms"] > 0).all()
