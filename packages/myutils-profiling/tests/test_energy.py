"""energy.per_step / energy.capture_window from the monitor's per-step energy, and energy in ``diff``."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from my_utils.core.events import MetricEvent
from my_utils.profiling import MetricsAnalyzer
from my_utils.profiling.analysis.diff import diff_reports
from my_utils.profiling.reports.diff_markdown import render_markdown


def monitor(rank: int, joules: dict[int, float], seconds: float = 0.1, method: float = 1.0) -> list[MetricEvent]:
    """Events as myutils-memory's provider emits them for a run whose tracker followed its steps."""
    out = [MetricEvent(name="monitor/energy_method", value=method, kind="info", unit="code", source="memory_monitor",
                       rank=rank, attrs={"energy_method": "nvml_total_energy"})]
    for step, j in joules.items():
        out.append(MetricEvent(name="monitor/step_energy_j", value=j, kind="gauge", unit="J", source="memory_monitor",
                               rank=rank, step=step))
        out.append(MetricEvent(name="monitor/step_power_w", value=j / seconds, kind="ratio", unit="W",
                               source="memory_monitor", rank=rank, step=step))
    return out


def timer(steps: range) -> list[MetricEvent]:
    return [MetricEvent(name="step_time", value=100.0, kind="duration", unit="ms", source="mytimer", rank=0, step=s)
            for s in steps]


def facts(events: list[MetricEvent], **kw: Any) -> dict[str, Any]:
    return {f.id: f for f in MetricsAnalyzer(events, **kw).analyze().facts if f.id.startswith("energy.")}


def test_energy_per_step_of_one_gpu() -> None:
    joules = {s: 30.0 + (s % 4) for s in range(1, 21)}
    got = facts(timer(range(21)) + monitor(0, joules))
    f = got["energy.per_step"]
    assert f.value == pytest.approx(sum(joules.values()) / 20) and f.unit == "J/step" and f.steps == 20
    assert f"{sum(joules.values()) / (0.1 * 20):,.1f} W mean" in f.detail  # total J over total s
    assert "measured with NVML's total-energy counter" in f.detail
    assert "energy.capture_window" not in got  # no capture window: no window figure


def test_two_gpus_add_up_per_step_and_each_has_its_own() -> None:
    got = facts(monitor(0, {s: 10.0 for s in range(5)}) + monitor(1, {s: 30.0 for s in range(5)}, method=2.0))
    assert got["energy.per_step"].value == pytest.approx(40.0)
    assert got["energy.per_step:rank0"].value == pytest.approx(10.0)
    assert got["energy.per_step:rank1"].value == pytest.approx(30.0)
    assert "NVML's total-energy counter and power integrated over time" in got["energy.per_step"].detail
    assert "W mean over 2 GPUs" in got["energy.per_step"].detail


def test_a_run_without_step_energy_has_no_energy_fact() -> None:
    assert facts(timer(range(5))) == {}


def test_energy_in_capture_windows(tmp_path: Any) -> None:
    """A real capture window (steps 5-8, torch on the CPU) splits the steps' energy."""
    torch = pytest.importorskip("torch")
    from my_utils.tracing.capture import CaptureController, TorchProfilerBackend
    from my_utils.tracing.capture.spec import CaptureSpec

    backend = TorchProfilerBackend(output_dir=tmp_path)
    controller = CaptureController(backend, rank=0)
    controller.arm(CaptureSpec("w", 5, 0, 8, 0))
    model = torch.nn.Linear(4, 4)
    for it in range(12):
        with controller.region("step", {"iter": it, "mb": 0}):
            model(torch.randn(2, 4))
        controller.on_step(it)
    controller.close()
    joules = {s: (50.0 if 5 <= s <= 8 else 40.0) for s in range(1, 12)}
    got = facts(monitor(0, joules), traces=backend.traces)
    window = got["energy.capture_window"]
    assert window.value == pytest.approx(50.0) and window.steps == 4
    assert "outside them 40.0 J/step over 7 step(s)" in window.detail and "steps 5-8" in window.detail


def test_diff_states_the_energy_change() -> None:
    base = MetricsAnalyzer(timer(range(1, 31)) + monitor(0, {s: 30.0 + 0.5 * (s % 3) for s in range(1, 31)})).analyze()
    target = MetricsAnalyzer(timer(range(1, 31)) + monitor(0, {s: 36.0 + 0.5 * (s % 3) for s in range(1, 31)})).analyze()
    result = diff_reports(base, target)
    energy = result.energy
    assert energy is not None and energy.significant
    base_mean = statistics.fmean(30.0 + 0.5 * (s % 3) for s in range(1, 31))
    assert energy.base.mean == pytest.approx(base_mean) and energy.target.mean == pytest.approx(base_mean + 6.0)
    md = render_markdown(result)
    assert f"**Energy per step:** {base_mean:,.3f} J → {base_mean + 6:,.3f} J per step" in md.replace("\\", "")
    assert result.to_dict()["energy_per_step"]["base"]["mean"] == pytest.approx(base_mean)
    assert diff_reports(base, MetricsAnalyzer(timer(range(1, 31))).analyze()).energy is None
