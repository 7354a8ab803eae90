"""The legacy profilers' PNG line charts (matplotlib, no pyplot global state, atomic write)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write

__all__ = ["ChartUnavailable", "line_chart_figure", "write_line_chart"]


class ChartUnavailable(RuntimeError):
    """matplotlib is not installed; the message names the extra that brings it."""


def line_chart_figure(x: Sequence[float], series: Sequence[tuple[str, Sequence[float]]], *, title: str,
                      xlabel: str, ylabel: str, note: str | None = None) -> Any:
    """The matplotlib ``Figure`` of one panel of lines ``series`` (label, values) over ``x``, ``note`` under it.

    The legend sits outside the axes on the right and the note below them, so neither can
    cover the lines or each other whatever the data.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.layout_engine import ConstrainedLayoutEngine
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise ChartUnavailable(f"matplotlib is not installed ({exc}); pip install 'myutils-legacy[charts]'") from None
    # the layout keeps a strip at the bottom for the note: constrained layout ignores figure texts
    layout = ConstrainedLayoutEngine(rect=(0, 0.05, 1, 0.95) if note else (0, 0, 1, 1))
    fig = Figure(figsize=(9, 5), dpi=100, layout=layout)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for label, values in series:
        ax.plot(list(x), list(values), marker="o", label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # windows are whole numbers
    ax.grid(alpha=0.3)
    if series:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0.0)
    if note:
        fig.text(0.01, 0.005, note, fontsize="small", ha="left", va="bottom")
    return fig


def write_line_chart(path: Path, x: Sequence[float], series: Sequence[tuple[str, Sequence[float]]], *,
                     title: str, xlabel: str, ylabel: str, note: str | None = None) -> Path:
    """Write :func:`line_chart_figure` as a PNG to ``path`` (atomically) and return ``path``."""
    fig = line_chart_figure(x, series, title=title, xlabel=xlabel, ylabel=ylabel, note=note)
    with atomic_write(path, "wb", encoding=None) as fh:
        fig.savefig(fh, format="png")
    return path
