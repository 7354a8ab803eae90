"""MyTimer: rows, tree ids, misuse messages, listeners, the CUDA seam (fake and real), NVTX labels."""

from __future__ import annotations

import copy
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.errors import UsageError
from my_utils.core.logger import GlobalLogger
from my_utils.core.profile_csv import ProfileRow, read_profile_csv
from my_utils.core.step_log import sync_profile_csv
from my_utils.core.testing.fake_cuda import RecordingCudaEvents
from my_utils.core.timer import MyTimer, TimedRegion, global_timer


@pytest.fixture(autouse=True)
def fresh_logger() -> Iterator[None]:
    GlobalLogger._reset_for_tests()
    yield
    GlobalLogger._reset_for_tests()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    GlobalLogger().setup(tmp_path, rank=0, world_size=1)
    return tmp_path


def rows_of(log_dir: Path) -> list[ProfileRow]:
    # a reader brings the CSV up to date from the step log first (the helper may trail by ms)
    sync_profile_csv(log_dir / "profile_rank_0.csv")
    return read_profile_csv(log_dir / "profile_rank_0.csv")


def run_iteration(timer: MyTimer, step: int) -> None:
    timer.set_step(step)
    timer.start("iter")
    timer.start("forward")
    timer.stop("forward")
    timer.start("backward")
    timer.start("allreduce")
    timer.stop("allreduce")
    timer.stop("backward")
    timer.stop("iter")
    timer.step()


def test_rows_are_chronological_with_tree_ids(log_dir: Path) -> None:
    timer = MyTimer(tag="train")
    run_iteration(timer, 7)
    rows = rows_of(log_dir)
    assert [(r.event_name, r.event_type) for r in rows] == [
        ("iter", "START"), ("forward", "START"), ("forward", "END"), ("backward", "START"),
        ("allreduce", "START"), ("allreduce", "END"), ("backward", "END"), ("iter", "END")]
    assert {r.step for r in rows} == {7}
    ids = {(r.event_name, r.metadata_dict()["node_id"], r.metadata_dict()["parent_id"]) for r in rows}
    assert ids == {("iter", "0", "-1"), ("forward", "1", "0"), ("backward", "2", "0"), ("allreduce", "3", "2")}
    assert all(r.metadata_dict()["tag"] == "train" for r in rows)
    stamps = [r.timestamp_unix for r in rows]
    assert stamps == sorted(stamps)
    assert abs(stamps[0] - time.time()) < 60
    assert all(r.duration_ms == 0.0 for r in rows if r.event_type == "START")
    ends = {r.event_name: r for r in rows if r.event_type == "END"}
    starts = {r.event_name: r for r in rows if r.event_type == "START"}
    for name, end in ends.items():  # END - START (one clock) equals the duration, to the µs
        assert end.timestamp_unix - starts[name].timestamp_unix == pytest.approx(end.duration_ms / 1e3, abs=2e-6)
    assert ends["iter"].duration_ms >= ends["backward"].duration_ms + ends["forward"].duration_ms


def test_durations_measure_real_time(log_dir: Path) -> None:
    timer = MyTimer()
    timer.start("sleep")
    time.sleep(0.02)
    timer.stop("sleep")
    timer.step()
    (end,) = [r for r in rows_of(log_dir) if r.event_type == "END"]
    assert 19.0 <= end.duration_ms < 1000.0


def test_each_step_writes_once_and_resets(log_dir: Path) -> None:
    timer = MyTimer()
    for step in range(3):
        run_iteration(timer, step)
        assert len(rows_of(log_dir)) == 8 * (step + 1)  # on disk as soon as step() returns
    timer.step()  # nothing open, nothing recorded: no rows
    assert len(rows_of(log_dir)) == 24
    assert [r.step for r in rows_of(log_dir)][::8] == [0, 1, 2]


def test_stop_of_a_non_innermost_region_names_both_and_the_step(log_dir: Path) -> None:
    timer = MyTimer(tag="t")
    timer.set_step(12)
    timer.start("outer")
    timer.start("inner")
    with pytest.raises(UsageError) as info:
        timer.stop("outer")
    assert str(info.value) == ("MyTimer(tag='t'): stop('outer') called at step 12 while 'inner' is the innermost "
                               "open region (open: 'outer' > 'inner'); stop 'inner' first")
    timer.stop("inner")  # the state is intact after the error
    timer.stop("outer")
    timer.step()
    assert len(rows_of(log_dir)) == 4


def test_stop_without_start_and_step_with_open_regions(log_dir: Path) -> None:
    timer = MyTimer()
    with pytest.raises(UsageError, match=r"stop\('x'\) called at step 0 but no region is open; call start"):
        timer.stop("x")
    timer.start("a")
    with pytest.raises(UsageError, match=r"step\(\) called at step 0 while regions are still open \('a'\)"):
        timer.step()
    with pytest.raises(UsageError, match="expected an integer step"):
        timer.set_step("soon")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="expected True, False or 'auto'"):
        MyTimer(use_cuda="yes")


def test_disabled_timer_records_nothing(log_dir: Path) -> None:
    timer = MyTimer(enabled=False)
    seen: list[int] = []
    timer.add_listener(lambda step, regions: seen.append(step))
    timer.stop("never-started")  # no error: disabled means inert
    run_iteration(timer, 1)
    assert rows_of(log_dir) == [] and seen == []
    timer.enabled = True
    run_iteration(timer, 2)
    assert len(rows_of(log_dir)) == 8 and seen == [2]


def test_listeners_get_the_regions_of_each_step(log_dir: Path) -> None:
    GlobalLogger().set_time_offset(2.5)
    timer = MyTimer()
    got: list[tuple[int, Sequence[TimedRegion]]] = []
    timer.add_listener(lambda step, regions: got.append((step, regions)))
    run_iteration(timer, 3)
    step, regions = got[0]
    assert step == 3
    assert [(r.name, r.node_id, r.parent_id, r.depth) for r in regions] == [
        ("iter", 0, None, 0), ("forward", 1, 0, 1), ("backward", 2, 0, 1), ("allreduce", 3, 2, 2)]
    assert all(r.step == 3 and r.cuda_ms is None and r.end_ns >= r.start_ns for r in regions)
    assert regions[0].cpu_ms == pytest.approx((regions[0].end_ns - regions[0].start_ns) / 1e6)
    rows = {(r.event_name, r.event_type): r.timestamp_unix for r in rows_of(log_dir)}
    for region in regions:  # listener times are the (offset-corrected) row times
        assert rows[(region.name, "START")] == pytest.approx(region.start_unix, abs=2e-6)
        assert rows[(region.name, "END")] == pytest.approx(region.end_unix, abs=2e-6)
    assert regions[0].start_unix - time.time() == pytest.approx(2.5, abs=5.0)


def test_a_failing_listener_is_reported_once_and_removed(log_dir: Path) -> None:
    timer = MyTimer(tag="x")
    calls: list[int] = []

    def bad(step: int, regions: Sequence[TimedRegion]) -> None:
        calls.append(step)
        raise KeyError("boom")

    good: list[int] = []
    timer.add_listener(bad)
    timer.add_listener(lambda step, regions: good.append(step))
    run_iteration(timer, 0)
    run_iteration(timer, 1)
    assert calls == [0] and good == [0, 1]
    # reported once, through the GlobalLogger's file
    assert (log_dir / "rank_0.log").read_text().count("raised KeyError: 'boom' at step 0; it is removed") == 1
    timer.remove_listener(bad)  # already gone: no error


def test_timer_sets_up_the_logger_from_log_dir(tmp_path: Path) -> None:
    timer = MyTimer(log_dir=tmp_path / "logs")
    run_iteration(timer, 0)
    assert GlobalLogger().is_configured
    assert len(rows_of(tmp_path / "logs")) == 8


def test_without_logger_rows_are_not_written_and_that_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    timer = MyTimer(tag="lonely")
    got: list[int] = []
    timer.add_listener(lambda step, regions: got.append(len(regions)))
    with caplog.at_level(logging.WARNING):
        run_iteration(timer, 0)
        run_iteration(timer, 1)
    assert got == [4, 4]
    assert caplog.text.count("profile rows are not written") == 1


def test_set_logger_accepts_logger_or_manager(log_dir: Path) -> None:
    timer = MyTimer()
    timer.set_logger(GlobalLogger().get_logger())
    timer.set_logger(GlobalLogger())
    run_iteration(timer, 0)
    assert len(rows_of(log_dir)) == 8
    with pytest.raises(UsageError, match=r"expected a logging\.Logger or a GlobalLogger, got str"):
        timer.set_logger("logger")


def test_region_context_manager_and_subclassing(log_dir: Path) -> None:
    uploads: list[int] = []

    class MyCustomTimer(MyTimer):
        def step(self) -> None:
            super().step()
            uploads.append(self.current_step)

    timer = MyCustomTimer()
    timer.set_step(5)
    with timer.region("outer"), timer.region("inner"):
        pass
    timer.synchronize_and_log()  # the seed's name goes through the subclass's step()
    assert uploads == [5]
    assert [(r.event_name, r.event_type) for r in rows_of(log_dir)] == [
        ("outer", "START"), ("inner", "START"), ("inner", "END"), ("outer", "END")]


def test_names_with_commas_quotes_and_newlines_round_trip(log_dir: Path) -> None:
    timer = MyTimer(tag='a,"b"')
    name = 'layer,0 "attn"\nqkv'
    timer.start(name)
    timer.stop(name)
    timer.step()
    rows = rows_of(log_dir)
    assert [r.event_name for r in rows] == [name, name]
    assert rows[0].metadata_dict()["tag"] == 'a,"b"'


@pytest.mark.parametrize("mode", ["process", "inline", "direct"])
def test_a_name_that_is_not_utf8_keeps_the_csv_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        mode: str) -> None:
    import json

    from my_utils.core.trace import csv_to_trace

    monkeypatch.setenv("MYUTILS_PROFILE_CSV", mode)
    manager = GlobalLogger()
    manager.setup(tmp_path, rank=0, world_size=1)
    layer = os.fsdecode(b"layer_\xe9")  # a name built from a non-UTF-8 file name: "layer_\udce9"
    timer = MyTimer(tag=os.fsdecode(b"tag_\xff"))
    for step in range(2):
        timer.set_step(step)
        with timer.region("iter"), timer.region(layer):
            pass
        timer.step()
    manager.log_profile_event(2, os.fsdecode(b"mark_\xfe"), "MARK", 0.0)
    manager.flush()
    csv_path = tmp_path / "profile_rank_0.csv"
    csv_path.read_bytes().decode("utf-8")  # valid UTF-8 throughout
    rows = read_profile_csv(csv_path)
    assert [r.event_name for r in rows] == ["iter", "layer_\\xe9", "layer_\\xe9", "iter"] * 2 + ["mark_\\xfe"]
    assert rows[0].metadata_dict()["tag"] == "tag_\\xff"
    trace = json.loads(csv_to_trace(csv_path, tmp_path / "t.json").read_bytes().decode("utf-8"))
    assert "layer_\\xe9" in {e["name"] for e in trace["traceEvents"]}


@pytest.mark.parametrize("mode", ["process", "inline", "direct"])
def test_formula_names_round_trip_through_timer_csv_and_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               mode: str) -> None:
    import csv

    monkeypatch.setenv("MYUTILS_PROFILE_CSV", mode)
    GlobalLogger().setup(tmp_path, rank=0, world_size=1)
    names = ['=HYPERLINK("http://x.example","click")', "+cmd", "-1", "@SUM(A1)", "'=quoted", "plain"]
    timer = MyTimer(tag="=tag")
    for name in names:
        timer.start(name)
        timer.stop(name)
    timer.step()
    GlobalLogger().flush()
    csv_path = tmp_path / "profile_rank_0.csv"
    with csv_path.open(newline="") as fh:
        cells = [record[4] for record in list(csv.reader(fh))[1:]]
    assert [c for c in cells if c.startswith(("=", "+", "-", "@"))] == []  # nothing a spreadsheet would run
    rows = read_profile_csv(csv_path)
    assert [r.event_name for r in rows] == [n for name in names for n in (name, name)]
    assert {r.metadata_dict()["tag"] for r in rows} == {"=tag"}


def test_fast_calls_follow_mode_changes_copies_and_subclasses(tmp_path: Path) -> None:
    GlobalLogger().setup(tmp_path, rank=0, world_size=1)
    timer = MyTimer()
    start, stop = timer.start, timer.stop  # fetched once, as a hot loop does
    timer.enabled = False
    start("off")
    stop("never started")  # the retired closure forwards to the disabled timer: inert
    timer.enabled = True
    start("on")
    stop("on")
    timer.step()
    assert [r.event_name for r in rows_of(tmp_path)] == ["on", "on"]

    seen: list[str] = []

    class Counting(MyTimer):
        def start(self, name: str) -> None:
            seen.append(name)
            super().start(name)

    sub = Counting()
    sub.start("x")
    sub.stop("x")
    sub.enabled = False
    sub.start("y")
    assert seen == ["x", "y"] and "start" not in vars(sub)

    twin = copy.deepcopy(timer)  # a copy records into its own lists, not into the original's
    twin.start("twin")
    assert timer._ev == [] and twin._ev[0] == "twin"
    twin.stop("twin")


# -- CUDA seam ---------------------------------------------------------------------------


def test_cuda_events_are_read_only_in_step_with_one_synchronize(log_dir: Path) -> None:
    fake = RecordingCudaEvents(gpu_scale=2.0)
    timer = MyTimer(use_cuda=True, cuda_events=fake)
    got: list[Sequence[TimedRegion]] = []
    timer.add_listener(lambda step, regions: got.append(regions))
    timer.set_step(0)
    timer.start("iter")
    timer.start("forward")
    time.sleep(0.002)
    timer.stop("forward")
    timer.stop("iter")
    # stop() recorded the events and did not wait: nothing has been synchronised or read yet
    assert fake.count("record") == 4 and fake.count("synchronize") == 0 and fake.count("elapsed_ms") == 0
    timer.step()
    assert fake.count("synchronize") == 1 and fake.count("elapsed_ms") == 2
    assert [name for name, _ in fake.calls[-3:]] == ["synchronize", "elapsed_ms", "elapsed_ms"]
    regions = got[0]
    for region in regions:  # the fake "GPU" runs twice as long as the host region
        assert region.cuda_ms == pytest.approx(2 * region.cpu_ms, rel=0.05, abs=0.05)
    ends = [r for r in rows_of(log_dir) if r.event_type == "END"]
    assert all("cuda_ms" in r.metadata_dict() for r in ends)
    fwd = next(r for r in ends if r.event_name == "forward")
    # CUDA time goes to metadata; the END row keeps the CPU duration from the one clock
    assert float(fwd.metadata_dict()["cuda_ms"]) == pytest.approx(2 * fwd.duration_ms, rel=0.05, abs=0.05)
    # events are pooled: step 1 (4 regions, 8 events) reuses step 0's 4; step 2 creates none
    created = fake.count("new_event")
    assert created == 4
    run_iteration(timer, 1)
    assert fake.count("new_event") == created + 4
    run_iteration(timer, 2)
    assert fake.count("new_event") == created + 4 and fake.count("synchronize") == 3


def test_unavailable_cuda_is_reported_once_and_cpu_timing_goes_on(log_dir: Path) -> None:
    fake = RecordingCudaEvents(unavailable="no device in this test")
    timer = MyTimer(use_cuda=True, cuda_events=fake)
    run_iteration(timer, 0)
    run_iteration(timer, 1)
    log_text = (log_dir / "rank_0.log").read_text()
    assert log_text.count("CUDA timing requested but unavailable (no device in this test)") == 1
    assert fake.count("record") == 0 and len(rows_of(log_dir)) == 16
    assert not any("cuda_ms" in r.metadata for r in rows_of(log_dir))


@pytest.mark.parametrize("failing", ["record", "synchronize", "elapsed_ms"])
def test_a_cuda_failure_degrades_to_cpu_timing(log_dir: Path, failing: str) -> None:
    fake = RecordingCudaEvents(fail_on=failing)
    timer = MyTimer(use_cuda=True, cuda_events=fake)
    run_iteration(timer, 0)
    run_iteration(timer, 1)
    assert len(rows_of(log_dir)) == 16
    assert not any("cuda_ms" in r.metadata for r in rows_of(log_dir))


def test_real_cuda_seam_on_this_build_answers_with_a_reason() -> None:
    from my_utils.core.cuda_events import TorchCudaEvents

    torch = pytest.importorskip("torch")
    reason = TorchCudaEvents().unavailable_reason()
    if torch.cuda.is_available():
        assert reason is None
    else:
        assert reason is not None and "is_available() is False" in reason


class RecordingLabeler:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def start(self, label: str) -> int:
        self.calls.append(("start", label))
        return len(self.calls)

    def stop(self, token: int) -> None:
        self.calls.append(("stop", token))


def test_labeler_gets_one_nvtx_range_per_region(log_dir: Path) -> None:
    labeler = RecordingLabeler()
    timer = MyTimer(labeler=labeler)
    timer.start("a")
    timer.start("b")
    timer.stop("b")
    timer.stop("a")
    timer.step()
    assert labeler.calls == [("start", "a"), ("start", "b"), ("stop", 2), ("stop", 1)]


def test_real_labeler_from_tracing_if_installed(log_dir: Path) -> None:
    tracing = pytest.importorskip("my_utils.tracing.nvtx_utils", reason="myutils-tracing is not installed")
    timer = MyTimer(labeler=tracing.create_labeler(enabled=True, default_domain="test"))
    run_iteration(timer, 0)
    assert len(rows_of(log_dir)) == 8


# -- global_timer ------------------------------------------------------------------------


def test_global_timer_is_off_without_env() -> None:
    if os.environ.get("ENABLE_TIMER") == "1":
        pytest.skip("ENABLE_TIMER=1 in this environment")
    assert global_timer.enabled is False
    global_timer.start("x")
    global_timer.stop("y")  # inert: no error
    global_timer.step()


@pytest.mark.parametrize(("value", "expected"), [("1", "8"), ("0", "missing"), ("", "missing")])
def test_global_timer_follows_enable_timer(tmp_path: Path, value: str, expected: str) -> None:
    code = (
        "import sys\n"
        "from my_utils.logger import GlobalLogger\n"
        "from my_utils.utils import global_timer\n"
        f"GlobalLogger().setup({str(tmp_path)!r}, rank=0, world_size=1)\n"
        "for s in range(2):\n"
        "    global_timer.set_step(s)\n"
        "    global_timer.start('a'); global_timer.start('b'); global_timer.stop('b'); global_timer.stop('a')\n"
        "    global_timer.step()\n"
        "from my_utils.core.profile_csv import read_profile_csv\n"
        "GlobalLogger().flush()\n"
        f"print(len(read_profile_csv({str(tmp_path / 'profile_rank_0.csv')!r})) or 'missing')\n"
        "print('torch' in sys.modules)\n"
    )
    env = {**os.environ, "ENABLE_TIMER": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == [expected, "False"]  # "auto" CUDA never imports torch by itself


# -- real GPU ----------------------------------------------------------------------------


def _cuda_or_skip() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: torch.cuda.is_available() is False on this machine")
    return torch


@pytest.mark.cuda
def test_real_kernels_are_timed_with_cuda_events(log_dir: Path) -> None:
    torch = _cuda_or_skip()
    a = torch.randn(4096, 4096, device="cuda")
    timer = MyTimer(use_cuda=True)
    got: list[Sequence[TimedRegion]] = []
    timer.add_listener(lambda step, regions: got.append(regions))
    for step in range(3):
        timer.set_step(step)
        timer.start("matmul")
        for _ in range(10):
            a = (a @ a).clamp_(-1, 1)
        timer.stop("matmul")  # returns before the kernels finish: no synchronisation here
        timer.step()
    regions = [r for step_regions in got for r in step_regions]
    assert all(r.cuda_ms is not None and r.cuda_ms > 0 for r in regions)
    # the kernels are queued asynchronously, so their GPU time exceeds the host time of the launches
    assert regions[-1].cuda_ms > regions[-1].cpu_ms  # type: ignore[operator]
    ends = [r for r in rows_of(log_dir) if r.event_type == "END"]
    assert len(ends) == 3 and all(float(r.metadata_dict()["cuda_ms"]) > 0 for r in ends)


@pytest.mark.cuda
def test_stop_does_not_synchronise_on_a_real_gpu(log_dir: Path) -> None:
    torch = _cuda_or_skip()
    timer = MyTimer(use_cuda=True)
    timer.start("sleep")
    torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU spinning
    t0 = time.perf_counter()
    timer.stop("sleep")
    stop_s = time.perf_counter() - t0
    timer.step()  # waits for the GPU here
    assert stop_s < 0.05
    (end,) = [r for r in rows_of(log_dir) if r.event_type == "END"]
    assert float(end.metadata_dict()["cuda_ms"]) > 20
