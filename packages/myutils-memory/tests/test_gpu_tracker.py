"""GPU_Performance_Tracker: real thread, real psutil, real pynvml (no driver, then a fake driver), real files."""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from my_utils.core.errors import UsageError
from my_utils.memory.charts import panels
from my_utils.memory.gpu_tracker import GPU_Performance_Tracker
from my_utils.memory.samples_file import read_samples

pytest.importorskip("psutil", reason="psutil is not installed (the [system] extra)")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _tracker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("GPU_Performance_Tracker")]


def _run(tracker: GPU_Performance_Tracker, seconds: float = 0.25) -> None:
    tracker.start_monitoring()
    assert tracker.running and len(_tracker_threads()) == 1
    busy = time.monotonic() + seconds
    x = 0
    while time.monotonic() < busy:  # some CPU work for the host metrics
        x += sum(range(1000))
    tracker.stop_monitoring()
    assert not tracker.running and _tracker_threads() == []


def test_without_nvml_samples_host_and_says_why_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed (the [nvml] extra)")
    tracker = GPU_Performance_Tracker("exp", interval=0.02, output_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="my_utils.memory"):
        _run(tracker)
    assert tracker.nvml_status == "NVML unavailable: NVML Shared Library Not Found"
    assert len([r for r in caplog.records if "NVML unavailable" in r.getMessage()]) == 1
    assert len(tracker.samples) >= 3
    assert all(set(s.metrics) == {"host_rss_bytes", "host_cpu_pct"} for s in tracker.samples)
    assert all(s.metrics["host_rss_bytes"] > 10 << 20 for s in tracker.samples)
    header, samples, notes, _ = read_samples(tmp_path / "exp_rank0_samples.jsonl")
    assert header["nvml"] == tracker.nvml_status and header["energy_method"] == "unavailable"
    assert [s.metrics for s in samples] == [s.metrics for s in tracker.samples] and notes == []


def test_png_and_offline_html(tmp_path: Path) -> None:
    """The seed's two-panel PNG and the interactive page, written by stop_monitoring()."""
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (the [charts] extra)")
    pytest.importorskip("plotly", reason="plotly is not installed (the [charts] extra)")
    tracker = GPU_Performance_Tracker("exp", interval=0.02, output_dir=tmp_path, track_hardware_metrics=False)
    _run(tracker, 0.1)
    png = tmp_path / "exp_rank0_performance_profile.png"
    assert tracker.png_path == png and png.read_bytes()[:8] == PNG_MAGIC
    from matplotlib.image import imread

    assert imread(png).shape[:2] == (700, 1000)
    html = (tmp_path / "exp_rank0_performance_profile.html").read_text()
    assert re.findall(r"<script[^>]*\bsrc=", html) == []  # nothing to fetch: plotly.js is inlined
    assert html.count("Plotly.newPlot(") >= 1 and len(html) > 1_000_000
    assert tracker.plot_usage_graphs(tmp_path / "again.png") == tmp_path / "again.png"


def test_without_charting_libraries_says_which_extra(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg", "plotly",
                 "plotly.graph_objects", "plotly.io", "plotly.subplots"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it raises ImportError
    tracker = GPU_Performance_Tracker("nochart", interval=0.02, output_dir=tmp_path, track_hardware_metrics=False)
    with caplog.at_level(logging.WARNING, logger="my_utils.memory"):
        _run(tracker, 0.05)
    assert tracker.png_path is None and tracker.html_path is None and tracker.samples
    assert "pip install 'myutils-memory[charts]'" in caplog.text


def test_with_a_fake_driver(tmp_path: Path, use_fake_nvml: Callable[[str], Path]) -> None:
    use_fake_nvml("full")
    tracker = GPU_Performance_Tracker("gpu", interval=0.02, output_dir=tmp_path, device_index=0)
    _run(tracker)
    assert tracker.nvml_status == "ok: Fake GPU 0" and tracker.energy_method == "nvml_total_energy"
    first = tracker.samples[0].metrics
    assert (first["gpu_util_pct"], first["mem_bw_util_pct"], first["power_w"]) == (41.0, 25.0, 250.0)
    energies = [s.metrics["energy_j"] for s in tracker.samples]
    assert energies == sorted(energies) and energies[-1] > energies[0]
    memory, activity, power = panels(tracker.samples)
    assert [m[0] for m in memory] == ["GPU memory used (NVML)"]
    assert [a[0] for a in activity] == ["GPU utilisation", "memory-bandwidth utilisation"]
    assert [p[0] for p in power] == ["power"]


def test_driver_lacking_energy_records_the_method(tmp_path: Path, use_fake_nvml: Callable[[str], Path]) -> None:
    use_fake_nvml("no_energy")
    tracker = GPU_Performance_Tracker("old", interval=0.02, output_dir=tmp_path)
    _run(tracker)
    header, samples, notes, _ = read_samples(tmp_path / "old_rank0_samples.jsonl")
    assert header["energy_method"] == "integrated_power"
    assert notes == ["nvmlDeviceGetTotalEnergyConsumption: Function Not Found; energy is integrated power"]
    assert samples[0].metrics["energy_j"] == 0.0 and samples[-1].metrics["energy_j"] > 0


def test_sampler_error_reported_once_and_sampling_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tracker = GPU_Performance_Tracker("err", interval=0.01, output_dir=tmp_path, track_hardware_metrics=False)
    calls = {"n": 0}
    real = tracker._host.sample

    def flaky() -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] % 2:
            raise OSError("proc vanished")
        return real()

    monkeypatch.setattr(tracker._host, "sample", flaky)
    with caplog.at_level(logging.WARNING, logger="my_utils.memory"):
        _run(tracker, 0.2)
    assert calls["n"] >= 6 and len(tracker.samples) >= 3
    assert len([r for r in caplog.records if "sampler error" in r.getMessage()]) == 1
    _, _, notes, _ = read_samples(tmp_path / "err_rank0_samples.jsonl")
    assert notes == ["sampler error (reported once, sampling goes on): OSError: proc vanished"]


def test_misuse_raises(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="interval must be a number of seconds > 0"):
        GPU_Performance_Tracker("x", interval=0)
    tracker = GPU_Performance_Tracker("x", interval=0.05, output_dir=tmp_path, track_hardware_metrics=False)
    tracker.start_monitoring()
    try:
        with pytest.raises(UsageError, match="already monitoring"):
            tracker.start_monitoring()
    finally:
        tracker.stop_monitoring()
    tracker.stop_monitoring()  # twice is harmless
    assert _tracker_threads() == []


def test_unwritable_folder_never_stops_training(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    tracker = GPU_Performance_Tracker("x", interval=0.02, output_dir=blocker / "sub", track_hardware_metrics=False)
    with caplog.at_level(logging.WARNING, logger="my_utils.memory"):
        _run(tracker, 0.1)
    assert tracker.samples and tracker.png_path is None and "samples file" in tracker.notes[0]


def test_rank_from_torchrun_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    tracker = GPU_Performance_Tracker("r", interval=0.05, output_dir=tmp_path, track_hardware_metrics=False)
    _run(tracker, 0.05)
    assert (tmp_path / "r_rank5_samples.jsonl").exists()


def test_seed_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed's README example on the legacy path, training a small model on the CPU."""
    import torch

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RANK", raising=False)
    from my_utils.gpu_mem_tracker import GPU_Performance_Tracker as Legacy

    tracker = Legacy(prefix="experiment_1", interval=1, use_distributed=True, track_hardware_metrics=True)
    tracker.start_monitoring()
    model = torch.nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(20):
        opt.zero_grad()
        model(torch.randn(8, 32)).pow(2).mean().backward()
        opt.step()
    tracker.stop_monitoring()
    assert _tracker_threads() == [] and (tmp_path / tracker.samples_path).is_file()
    if tracker.png_path is not None:  # with the [charts] extra
        assert (tmp_path / "experiment_1_rank0_performance_profile.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.cuda
def test_torch_cuda_memory_is_sampled(tmp_path: Path) -> None:
    import torch

    x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    tracker = GPU_Performance_Tracker("cuda", interval=0.05, output_dir=tmp_path)
    _run(tracker, 0.2)
    assert tracker.samples[0].metrics["torch_allocated_bytes"] >= 256 << 20
    assert tracker.nvml_status.startswith("ok:") and "gpu_util_pct" in tracker.samples[0].metrics
    lines = (tmp_path / "cuda_rank0_samples.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["energy_method"] in ("nvml_total_energy", "integrated_power")
    del x
