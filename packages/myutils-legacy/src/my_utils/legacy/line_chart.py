"""The legacy profilers' PNG line charts (matplotlib, no pyplot global state, atomic write)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from my_utils.core.atomic import atomic_write

__all__ = ["ChartUnavailable", "write_line_chart"]


class ChartUnavailable(RuntimeError):
    """matplotlib is not installed; the message names the extra that brings it."""


def write_line_chart(path: Path, x: Sequence[float], series: Sequence[tuple[str, Sequence[float]]], *,
                     title: str, xlabel: str, ylabel: str, note: str | None = None) -> Path:
    """One panel of lines ``series`` (label, values) over ``x``; ``note`` is printed in the corner."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ChartUnavailable(f"matplotlib is not installed ({exc}); pip install 'myutils-legacy[charts]'") from None
    fig = Figure(figsize=(9, 5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for label, values in series:
        ax.plot(list(x), list(values), marker="o", label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(loc="upper right", fontsize="small")
    if note:
        ax.text(0.01, 0.98, note, transform=ax.transAxes, fontsize="small", va="top")
    with atomic_write(path, "wb", encoding=None) as fh:
        fig.savefig(fh, format="png")
    return path
