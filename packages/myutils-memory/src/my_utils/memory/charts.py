"""The monitor's charts: the seed's two-panel PNG (matplotlib) and an offline HTML page (plotly).

Panel 1 is memory: torch allocated/reserved when CUDA was in use, else NVML's used memory,
else this process's RSS. Panel 2 is activity: GPU and memory-bandwidth utilisation (%) with
power (W) on a second axis; without NVML it shows host CPU use and says why NVML is absent.
Both writers build their figures without pyplot's global state (safe off the main thread)
and write atomically.

Memory is drawn in the binary unit that suits the largest value (a 300 MB process in MiB,
not as 0.29 GiB), from zero, with ticks at round steps and at most one decimal: a nearly
flat RSS must not turn into six-decimal tick labels. Legends sit above their panel and the
NVML note below the figure, so neither covers the other or the lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.memory.samples_file import Sample

__all__ = ["ChartUnavailable", "memory_scale", "panels", "png_figure", "write_html", "write_png"]

_UNITS = (("B", 1.0), ("KiB", float(1 << 10)), ("MiB", float(1 << 20)), ("GiB", float(1 << 30)),
          ("TiB", float(1 << 40)))
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
    """(memory series in bytes, activity series in %, power series in W) as (label, t, values)."""
    memory = _series(samples, _MEMORY)
    if not memory:
        for key, label in _FALLBACK_MEMORY:
            memory = _series(samples, [(key, label)])
            if memory:
                break
    activity = _series(samples, _ACTIVITY) or _series(samples, [("host_cpu_pct", "process CPU (% of one core)")])
    return memory, activity, _series(samples, [("power_w", "power")])


def memory_scale(memory: Series) -> tuple[str, float]:
    """(unit, bytes per unit): the largest binary unit in which the largest value is at least 1."""
    top = max((max(v) for _, _, v in memory if v), default=0.0)
    unit = _UNITS[0]
    for candidate in _UNITS:
        if top >= candidate[1]:
            unit = candidate
    return unit


def png_figure(samples: Sequence[Sample], *, title: str, nvml_status: str) -> Any:
    """The two-panel matplotlib ``Figure`` that ``write_png`` saves."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.layout_engine import ConstrainedLayoutEngine
        from matplotlib.ticker import MaxNLocator, StrMethodFormatter
    except ImportError as exc:
        raise ChartUnavailable(f"matplotlib is not installed ({exc}); pip install 'myutils-memory[charts]'") from None

    memory, activity, power = panels(samples)
    note = None if nvml_status.startswith("ok") else nvml_status
    # constrained layout places the legends; it ignores figure texts, so a strip is kept for the note
    fig = Figure(figsize=(10, 7), dpi=100, layout=ConstrainedLayoutEngine(rect=(0, 0.04, 1, 0.96) if note
                                                                          else (0, 0, 1, 1)))
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    fig.suptitle(title)
    unit, scale = memory_scale(memory)
    for label, t, v in memory:
        top.plot(t, [x / scale for x in v], label=label)
    top.set_ylabel(f"memory ({unit})")
    highest = max((max(v) / scale for _, _, v in memory if v), default=0.0)
    top.set_ylim(0, max(highest * 1.08, 1.0))
    top.yaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 5, 10]))
    # round steps from zero: a step is >= 0.2 below 10 units, >= 2 above, so these never cut a tick
    top.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}" if highest >= 10 else "{x:,.1f}"))
    for label, t, v in activity:
        bottom.plot(t, v, label=label)
    bottom.set_ylabel("utilisation (%)")
    bottom.set_ylim(bottom=0)
    bottom.set_xlabel("time since start (s)")
    handles, labels = bottom.get_legend_handles_labels()
    if power:
        right = bottom.twinx()
        for label, t, v in power:
            right.plot(t, v, label=label, color="tab:red", linestyle="--")
        right.set_ylabel("power (W)")
        right.set_ylim(bottom=0)
        more = right.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    for ax, (h, lab) in ((top, top.get_legend_handles_labels()), (bottom, (handles, labels))):
        if h:
            ax.legend(h, lab, loc="lower left", bbox_to_anchor=(0.0, 1.01), ncols=min(len(h), 4), fontsize="small",
                      frameon=False, borderaxespad=0.0)
        ax.grid(alpha=0.3)
    if note:
        fig.text(0.01, 0.005, note, fontsize="small", ha="left", va="bottom")
    return fig


def write_png(path: Path, samples: Sequence[Sample], *, title: str, nvml_status: str) -> Path:
    """Write the two-panel PNG (``png_figure``) to ``path``; return it."""
    fig = png_figure(samples, title=title, nvml_status=nvml_status)
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
    unit, scale = memory_scale(memory)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, specs=[[{}], [{"secondary_y": True}]],
                        subplot_titles=(f"memory ({unit})", f"activity ({nvml_status})"))
    for label, t, v in memory:
        fig.add_trace(go.Scatter(x=t, y=[x / scale for x in v], name=label, mode="lines"), row=1, col=1)
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
