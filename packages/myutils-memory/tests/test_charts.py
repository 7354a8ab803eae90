"""The monitor's PNG as drawn: legends, note and panels apart (matplotlib's bounding boxes), memory in a unit that
suits it, tick labels with at most one decimal and no offset."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from my_utils.memory.charts import memory_scale, panels, png_figure
from my_utils.memory.gpu_tracker import GPU_Performance_Tracker
from my_utils.memory.samples_file import Sample

pytest.importorskip("matplotlib", reason="matplotlib is not installed (the [charts] extra)")
MiB, GiB = 1 << 20, 1 << 30
TICK = re.compile(r"^-?[0-9,]+(\.[0-9])?$")  # at most one decimal


def _tracked(tmp_path: Path, seconds: float = 0.3, **kw: Any) -> GPU_Performance_Tracker:
    tracker = GPU_Performance_Tracker("chart", interval=0.02, output_dir=tmp_path, **kw)
    tracker.start_monitoring()
    end, x = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        x += sum(range(1000))
    tracker.stop_monitoring()
    return tracker


def _notes(fig: Any) -> list[Any]:
    return [t for t in fig.texts if t is not fig._suptitle]


def _boxes(fig: Any) -> dict[str, Any]:
    """Window extents of what must not overlap: each panel, each legend, the note, the title."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    top, bottom = fig.axes[:2]
    boxes = {"top panel": top.get_window_extent(renderer), "bottom panel": bottom.get_window_extent(renderer),
             "title": fig._suptitle.get_window_extent(renderer),
             "bottom axis labels": bottom.xaxis.get_tightbbox(renderer)}
    for name, ax in (("top legend", top), ("bottom legend", bottom)):
        if ax.get_legend() is not None:
            boxes[name] = ax.get_legend().get_window_extent(renderer)
    for i, text in enumerate(_notes(fig)):
        boxes[f"note {i}"] = text.get_window_extent(renderer)
    return boxes


def _assert_apart(fig: Any) -> dict[str, Any]:
    boxes = _boxes(fig)
    names = sorted(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), f"{a} {boxes[a]} overlaps {b} {boxes[b]}"
    return boxes


def _memory_ticks(fig: Any) -> list[str]:
    top = fig.axes[0]
    assert top.yaxis.get_offset_text().get_text() == ""  # no "+2.16e-1" above the axis
    return [t.get_text().replace("\u2212", "-") for t in top.get_yticklabels() if t.get_text()]


def test_cpu_run_legend_note_apart_rss_in_mib(tmp_path: Path) -> None:
    """A real CPU run (no NVML: the note is drawn): process RSS in MiB, whole-number ticks, nothing overlaps."""
    pytest.importorskip("psutil", reason="psutil is not installed (the [system] extra)")
    tracker = _tracked(tmp_path, track_hardware_metrics=True)
    assert not tracker.nvml_status.startswith("ok")
    fig = png_figure(tracker.samples, title="t", nvml_status=tracker.nvml_status)
    boxes = _assert_apart(fig)
    assert "note 0" in boxes and "top legend" in boxes and "bottom legend" in boxes
    # the unit suits the largest RSS (read from the samples, not from the chart): MiB for a small process, GiB for a
    # test worker that earlier tests left above 1 GiB; whole numbers in MiB, at most one decimal in GiB
    top = max(s.metrics["host_rss_bytes"] for s in tracker.samples if "host_rss_bytes" in s.metrics)
    unit = "GiB" if top >= 1 << 30 else "MiB"
    assert fig.axes[0].get_ylabel() == f"memory ({unit})"
    ticks = _memory_ticks(fig)
    assert len(ticks) >= 3 and all(TICK.match(t) and (unit == "GiB" or "." not in t) for t in ticks), ticks
    assert [t.get_text() for t in _notes(fig)] == [tracker.nvml_status]


def test_nearly_flat_gib_memory_with_power_and_a_note() -> None:
    """1.5 GiB changing by a few bytes (six decimals on a GiB axis before), two activity lines, power on a second
    axis, and a note: every legend entry in one place, ticks with one decimal at most."""
    samples = [Sample(1000.0 + i, i * 0.5, {"torch_allocated_bytes": 1.5 * GiB + i, "torch_reserved_bytes": 2 * GiB,
                                          "gpu_util_pct": 50.0 + i, "mem_bw_util_pct": 20.0, "power_w": 250.0 + i})
               for i in range(40)]
    note = "NVML unavailable: a long reason that used to run under the legend of the lower panel"
    fig = png_figure(samples, title="flat", nvml_status=note)
    _assert_apart(fig)
    assert fig.axes[0].get_ylabel() == "memory (GiB)"
    ticks = _memory_ticks(fig)
    assert len(ticks) >= 3 and all(TICK.match(t) for t in ticks), ticks
    bottom_legend = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert bottom_legend == ["GPU utilisation", "memory-bandwidth utilisation", "power"]
    for ax in fig.axes:  # the second axis (power) too
        labels = [t.get_text().replace("\u2212", "-") for t in ax.get_yticklabels() if t.get_text()]
        assert all(TICK.match(t) for t in labels), labels


@pytest.mark.parametrize(("top", "unit"), [(0, "B"), (900, "B"), (300 * MiB, "MiB"), (1023 * MiB, "MiB"),
                                           (3 * GiB, "GiB"), (5 << 40, "TiB")])
def test_memory_scale_picks_the_unit_of_the_largest_value(top: int, unit: str) -> None:
    memory, _, _ = panels([Sample(0.0, 0.0, {"host_rss_bytes": float(top)}), Sample(1.0, 1.0, {"host_rss_bytes": 1.0})])
    name, scale = memory_scale(memory)
    assert name == unit and (top == 0 or 1 <= top / scale < 1024)


def test_fake_driver_run_has_no_note_and_apart(tmp_path: Path, use_fake_nvml: Callable[[str], Path]) -> None:
    pytest.importorskip("psutil", reason="psutil is not installed (the [system] extra)")
    use_fake_nvml("full")
    tracker = _tracked(tmp_path, device_index=0)
    fig = png_figure(tracker.samples, title="gpu", nvml_status=tracker.nvml_status)
    boxes = _assert_apart(fig)
    assert not any(name.startswith("note") for name in boxes) and len(fig.axes) == 3  # power on its own axis
    assert all(TICK.match(t) for t in _memory_ticks(fig))
