"""ProfilerWrapper with real torch.profiler windows on the CPU; the memory pickle through the allocator seam."""

from __future__ import annotations

import importlib.util
import json
import logging
import mmap
import pickle
from pathlib import Path

import pytest
import torch

from my_utils.core.errors import UsageError
from my_utils.legacy.profiler_wrapper import ProfilerWrapper
from my_utils.memory.cuda_memory import RecordingCudaMemory

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HAS_MPL = importlib.util.find_spec("matplotlib") is not None  # the [charts] extra


def _train(profiler: ProfilerWrapper, windows: int, width: int = 32) -> None:
    model = torch.nn.Linear(width, width)
    for _ in range(windows):
        with profiler:
            model(torch.randn(16, width)).pow(2).mean().backward()


def test_every_output_on_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    wrapper = ProfilerWrapper(is_st=True, profile_memory=False, log_dir=tmp_path / "prof",
                              enabled_record_cuda_average_time=True, enable_record_cuda_mm=True, rank=0)
    _train(wrapper, 3)
    result = wrapper.leave()
    assert [r.window for r in wrapper.time_records] == [1, 2, 3] and len(wrapper.memory_records) == 3
    assert all(r.op_time_ms > 0 for r in wrapper.time_records)
    assert wrapper.average_time_ms == pytest.approx(sum(r.op_time_ms for r in wrapper.time_records) / 3)
    assert result.trace == tmp_path / "prof" / "st_trace.json"
    names = {e.get("name") for e in json.loads(result.trace.read_text())["traceEvents"]}
    assert {"aten::linear", "aten::addmm"} <= names
    charts = ["st_cuda_time_plot.png", "st_memory_usage_line_chart.png"] if HAS_MPL else []
    if HAS_MPL:
        for png in (result.cuda_time_plot, result.memory_chart):
            assert png is not None and png.read_bytes()[:8] == PNG_MAGIC
        assert result.cuda_time_plot == tmp_path / "prof" / "st_cuda_time_plot.png"
        assert result.memory_chart == tmp_path / "prof" / "st_memory_usage_line_chart.png"
    else:  # skipped, saying which extra brings them, never raised
        assert result.cuda_time_plot is None and result.memory_chart is None
    log = (tmp_path / "prof" / "st_rank_0.log").read_text()
    if not torch.cuda.is_available():
        assert "no CUDA device: times are CPU times" in log and "process RSS" in log
    assert log.count("\n     1  ") + log.count("\n     2  ") >= 2 and "aten::addmm" in log
    assert result.memory_pickle is None and result.problems == []
    assert sorted(p.name for p in (tmp_path / "prof").iterdir()) == sorted(
        [*charts, "st_rank_0.log", "st_trace.json"])


def test_recorders_only_when_asked(tmp_path: Path) -> None:
    wrapper = ProfilerWrapper(log_dir=tmp_path, rank=0)
    _train(wrapper, 2)
    assert wrapper.time_records == [] and wrapper.memory_records == []
    assert wrapper.record_cuda_average_time() is not None  # the seed's methods can be called by hand
    result = wrapper.leave()
    assert (result.cuda_time_plot is not None) is HAS_MPL and result.memory_chart is None


def test_memory_pickle_through_the_seam(tmp_path: Path) -> None:
    seam = RecordingCudaMemory(state={"segments": [{"total_size": 1 << 20}], "device_traces": [[]]})
    wrapper = ProfilerWrapper(profile_memory=True, log_dir=tmp_path / "log", mem_dir=tmp_path / "mem",
                              cuda_memory=seam, rank=0)
    _train(wrapper, 2)
    result = wrapper.leave()
    assert result.memory_pickle is not None and result.memory_pickle.parent == tmp_path / "mem"
    assert result.memory_pickle.name.startswith("mt_mem_") and result.memory_pickle.suffix == ".pickle"
    with result.memory_pickle.open("rb") as fh:
        assert pickle.load(fh) == seam.state
    assert [c[0] for c in seam.calls if c[0] != "unavailable_reason"] == ["start_history", "snapshot", "stop_history"]


def test_no_cuda_memory_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    seam = RecordingCudaMemory(unavailable="no CUDA here")
    wrapper = ProfilerWrapper(profile_memory=True, log_dir=tmp_path, cuda_memory=seam, rank=0)
    with caplog.at_level(logging.WARNING, logger="my_utils.legacy"):
        _train(wrapper, 3)
        assert wrapper.leave().memory_pickle is None
    assert [r.getMessage() for r in caplog.records].count(
        "ProfilerWrapper: no memory pickle will be written: no CUDA here") == 1


def test_ranks_do_not_share_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    wrapper = ProfilerWrapper(log_dir=tmp_path)
    _train(wrapper, 1)
    wrapper.leave()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mt_r1_rank_1.log", "mt_r1_trace.json"]


def test_misuse_raises_and_training_errors_propagate(tmp_path: Path) -> None:
    wrapper = ProfilerWrapper(log_dir=tmp_path, enabled_record_cuda_average_time=True)
    with wrapper:
        with pytest.raises(UsageError, match="already open"):
            wrapper.__enter__()
        with pytest.raises(UsageError, match="inside `with profiler:`"):
            wrapper.leave()
    with pytest.raises(ZeroDivisionError), wrapper:
        1 / 0  # noqa: B018
    assert len(wrapper.time_records) == 1  # the failed window is not recorded


def test_unwritable_folder_is_reported_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    wrapper = ProfilerWrapper(log_dir=blocker, enabled_record_cuda_average_time=True)
    _train(wrapper, 1)
    result = wrapper.leave()
    assert result.trace is None and result.log is None and result.cuda_time_plot is None
    assert {p.split(":")[0] for p in result.problems} == {"trace", "log"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_dir"]


def test_print_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wrapper = ProfilerWrapper(log_dir=tmp_path, enable_print_summary=True, rank=0)
    _train(wrapper, 1)
    wrapper.leave()
    assert "operators of the last window:" in capsys.readouterr().out


@pytest.mark.cuda
def test_cuda_times_and_memory(tmp_path: Path) -> None:
    wrapper = ProfilerWrapper(profile_memory=True, log_dir=tmp_path, enabled_record_cuda_average_time=True,
                              enable_record_cuda_mm=True, rank=0)
    model = torch.nn.Linear(512, 512).cuda()
    for _ in range(3):
        with wrapper:
            model(torch.randn(256, 512, device="cuda")).sum().backward()
    result = wrapper.leave()
    assert wrapper.use_cuda and all(r.op_time_ms > 0 for r in wrapper.time_records)
    assert all(r.current_mib > 0 and r.reserved_mib for r in wrapper.memory_records)
    assert result.memory_pickle is not None and result.memory_pickle.stat().st_size > 0
    assert "times are CUDA (device) times" in (tmp_path / "mt_rank_0.log").read_text()


def _no_overlap(fig: object, *artists: object) -> None:
    """No two of ``artists`` (legend, note, axes) overlap on the drawn canvas."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    fig.draw(renderer)  # type: ignore[attr-defined]
    boxes = [a.get_window_extent(renderer) for a in artists]  # type: ignore[attr-defined]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)


@pytest.mark.skipif(not HAS_MPL, reason="matplotlib is not installed (the [charts] extra)")
@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path (process RSS) is what is tested")
def test_cpu_memory_chart_plots_a_peak_never_below_the_rss(tmp_path: Path) -> None:
    """Memory grows window by window, then drops: the plotted peak RSS is a running maximum at or above every RSS."""
    wrapper = ProfilerWrapper(log_dir=tmp_path, enable_record_cuda_mm=True, rank=0)
    kept = []
    for window in range(6):
        with wrapper:
            if window < 4:
                # 16, 32, 48, 64 MiB more each window, in fresh anonymous pages written through a tensor: memory
                # from malloc may reuse what earlier tests in this process freed, and then RSS does not grow
                pages = mmap.mmap(-1, 16 * 2**20 * (window + 1))
                kept.append((pages, torch.frombuffer(pages, dtype=torch.uint8).fill_(1)))
            else:
                kept.clear()
    fig = wrapper.memory_usage_figure()
    (ax,) = fig.axes
    plotted = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    rss, peak = plotted["process RSS"], plotted["peak RSS"]
    assert len(rss) == len(peak) == 6
    assert all(p >= r for p, r in zip(peak, rss, strict=True)), (rss, peak)
    assert peak == sorted(peak) and peak[-1] >= max(rss)
    assert rss[3] - rss[0] > 100  # MiB: the tensors really were resident
    _no_overlap(fig, ax, ax.get_legend(), fig.texts[0])
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks and all(t.lstrip("−-").isdigit() for t in ticks), ticks  # whole windows, never 2.5
    result = wrapper.leave()
    assert result.memory_chart is not None and result.memory_chart.read_bytes()[:8] == PNG_MAGIC
