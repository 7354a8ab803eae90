"""The monitor's charts: the seed's two-panel PNG (matplotlib) and an offline HTML page (plotly).

Panel 1 is memory: torch allocated/reserved when CUDA was in use, else NVML's used memory,
else this process's RSS. Panel 2 is activity: GPU and memory-bandwidth utilisation (%) with
power (W) on a second axis; without NVML it shows host CPU use and says why NVML is absent.
Both writers build their figures without pyplot's global state (safe off the main thread)
and write atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from my_utils.core.atomic import atomic_write
from my_utils.memory.samples_file import Sample

__all__ = ["ChartUnavailable", "panels", "write_html", "write_png"]

GIB = float(1 << 30)
_MEMORY = (("torch_allocated_bytes", "torch allocated"), ("torch_reserved_bytes", "torch reserved"))
_FALLBACK_MEMORY = (("gpu_mem_used_bytes", "GPU memory used (NVML)"), ("host_rss_bytes", "process RSS"))
_ACTIVITY = (("gpu_util_pct", "GPU utilisation"), ("mem_bw_util_pct", "memory-bandwidth utilisation"))


class ChartUnavailable(RuntimeError):
    """The charting library is not installed; the message names the extra to install."""


Series = list[tuple[str, list[float], list[float]]]


def _series(samples: Sequence[Sample], keys: Sequence[tuple[str, str]], scale: float = 1.0) -> Series:
    out = []
    for key, label in keys:
        pts = [(s.t, s.metrics[key] / scale) for s in samples if key in s.metrics]
        if pts:
            out.append((label, [p[0] for p in pts], [p[1] for p in pts]))
    return out


def panels(samples: Sequence[Sample]) -> tuple[Series, Series, Series]:
    """(memory series in GiB, activity series in %, power series in W) as (label, t, values)."""
    memory = _series(samples, _MEMORY, GIB)
    if not memory:
        for key, label in _FALLBACK_MEMORY:
            memory = _series(samples, [(key, label)], GIB)
            if memory:
                break
    activity = _series(samples, _ACTIVITY) or _series(samples, [("host_cpu_pct", "process CPU (% of one core)")])
    return memory, activity, _series(samples, [("power_w", "power")])


def write_png(path: Path, samples: Sequence[Sample], *, title: str, nvml_status: str) -> Path:
    """Write the two-panel PNG to ``path``; return it."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ChartUnavailable(f"matplotlib is not installed ({exc}); pip install 'myutils-memory[charts]'") from None
    memory, activity, power = panels(samples)
    fig = Figure(figsize=(10, 7), dpi=100)
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for label, t, v in memory:
        top.plot(t, v, label=label)
    top.set_ylabel("memory (GiB)")
    top.set_title(title)
    for label, t, v in activity:
        bottom.plot(t, v, label=label)
    bottom.set_ylabel("utilisation (%)")
    bottom.set_xlabel("time since start (s)")
    if power:
        right = bottom.twinx()
        for label, t, v in power:
            right.plot(t, v, label=label, color="tab:red", linestyle="--")
        right.set_ylabel("power (W)")
        right.legend(loc="upper right", fontsize="small")
    if not nvml_status.startswith("ok"):
        bottom.text(0.01, 0.95, nvml_status, transform=bottom.transAxes, fontsize="small", va="top")
    for ax in (top, bottom):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize="small")
        ax.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb", encoding=None) as fh:
        fig.savefig(fh, format="png")
    return path


def write_html(path: Path, samples: Sequence[Sample], *, title: str, nvml_status: str) -> Path:
    """Write an interactive page with plotly.js inlined (no network needed); return it."""
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
        from plotly.subplots import make_subplots
    except ImportError as exc:
        raise ChartUnavailable(f"plotly is not installed ({exc}); pip install 'myutils-memory[charts]'") from None
    memory, activity, power = panels(samples)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, specs=[[{}], [{"secondary_y": True}]],
                        subplot_titles=("memory (GiB)", f"activity ({nvml_status})"))
    for label, t, v in memory:
        fig.add_trace(go.Scatter(x=t, y=v, name=label, mode="lines"), row=1, col=1)
    for label, t, v in activity:
        fig.add_trace(go.Scatter(x=t, y=v, name=label, mode="lines"), row=2, col=1)
    for label, t, v in power:
        fig.add_trace(go.Scatter(x=t, y=v, name=f"{label} (W)", mode="lines", line={"dash": "dash"}),
                      row=2, col=1, secondary_y=True)
    fig.update_layout(title=title, height=700)
    fig.update_xaxes(title_text="time since start (s)", row=2, col=1)
    html = pio.to_html(fig, include_plotlyjs=True, full_html=True, div_id="performance_profile")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        fh.write(html)
    return path
