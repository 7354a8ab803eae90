"""TorchProfilerMetricsProvider on a live CPU torch.profiler, and the trace it exports."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from my_utils.profiling.kineto.read.provider import TorchProfilerMetricsProvider  # noqa: E402


def test_each_cycle_once_with_its_steps(tmp_path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    provider = TorchProfilerMetricsProvider(None, rank=0)
    exported: list[Path] = []

    def export(prof: object) -> None:
        out = tmp_path / f"rank0.cycle{len(exported)}.json"
        prof.export_chrome_trace(str(out))  # type: ignore[attr-defined]
        exported.append(out)

    model = torch.nn.Linear(32, 32)
    batches = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Profiler clears events at the end of each cycle"
        with profile(activities=[ProfilerActivity.CPU], on_trace_ready=provider.trace_handler(export),
                     schedule=schedule(wait=1, warmup=1, active=2, repeat=2)) as prof:
            for step in range(9):
                model(torch.randn(4, 32)).sum().backward()
                prof.step()
                if step in (4, 8):
                    batches.append(provider.collect())
    steps = [sorted(e.step for e in batch if e.name == "step_time") for batch in batches]
    assert steps == [[2, 3], [6, 7]]
    assert provider.collect() == []
    live_ops = {e.name for e in batches[0] if e.name.startswith("cpu_op:")}
    assert "cpu_op:aten::linear" in live_ops
    # the exported trace of the same cycle gives the same op names through the file reader
    file_ops = {e.name for e in TorchProfilerMetricsProvider(exported[0]).collect() if e.name.startswith("cpu_op:")}
    assert live_ops <= file_ops
    assert all(e.ts is not None and e.ts > 1.6e9 for e in batches[0] if e.name == "step_time")
