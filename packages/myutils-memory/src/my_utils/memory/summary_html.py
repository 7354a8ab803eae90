"""``MemorySummary`` as an offline page (``myutils memory summarize --html OUT``).

One plotly figure in three panels, as memory_viz draws a snapshot: memory in use and reserved
over the trace; the stacks' live bytes as a stacked area (those largest at the peak, then
those holding most at the end; the rest as "other stacks", memory from before the trace
apart); and each segment's allocated and free space at the end. Tables under it give the
figures, the stacks and the findings. plotly.js is inlined (the page works without a
network). Every name from the snapshot is escaped, in the tables and in the figure (plotly
reads a subset of HTML in names).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from my_utils.core.atomic import atomic_write
from my_utils.core.safe_io import utf8_text
from my_utils.memory.allocator_advice import allocator_findings
from my_utils.memory.byte_units import format_bytes
from my_utils.memory.charts import ChartUnavailable
from my_utils.memory.snapshot_stacks import StackTotal
from my_utils.memory.snapshot_summary import MemorySummary

__all__ = ["DIV_ID", "SEGMENTS_CHARTED", "TIMELINE_POINTS", "render_html", "require_plotly", "write_summary_html"]

DIV_ID = "memory_summary"
TIMELINE_POINTS = 600
_LEGEND_CHARS = 90
SEGMENTS_CHARTED = 24  # the segments with the most free space; a bar per segment stays legible
_MIB = float(1 << 20)


def require_plotly() -> None:
    """Raise ``ChartUnavailable`` (naming the extra) when plotly is absent: checked before any work."""
    try:
        import plotly  # noqa: F401
    except ImportError as exc:
        raise ChartUnavailable(f"plotly is not installed ({exc}); pip install 'myutils-memory[charts]'") from None


def _esc(text: str) -> str:
    return html.escape(utf8_text(text), quote=True)


def _stack_name(st: StackTotal) -> str:
    parts = ([st.operation] if st.operation else []) + list(st.frames)
    return " <- ".join(parts) if parts else "(no stack recorded)"


def _short(text: str) -> str:
    return text if len(text) <= _LEGEND_CHARS else text[:_LEGEND_CHARS - 1] + "…"


def _figure(s: MemorySummary) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    tl = s.timeline
    unit = "s" if s.time_unit == "s" else "entry"
    a = s.allocator
    every = sorted(a.segments, key=lambda g: (-g.free_bytes, g.address)) if a is not None and a.recorded else []
    segments = every[:SEGMENTS_CHARTED]
    shown = f"all {len(every)}" if len(segments) == len(every) else f"{len(segments)} of {len(every)}, most free first"
    fig = make_subplots(rows=3, cols=1, vertical_spacing=0.08, row_heights=[0.3, 0.4, 0.3],
                        subplot_titles=("memory in use and reserved (MiB)", "live bytes by stack (MiB)",
                                        f"segments at the end ({shown}): allocated and free (MiB)"))
    if tl is not None:
        xs = list(tl.times)
        fig.add_trace(go.Scatter(x=xs, y=[v / _MIB for v in tl.in_use], name="in use", mode="lines",
                                 line={"shape": "hv"}, legendgroup="totals"), row=1, col=1)
        if a is not None and a.recorded:
            fig.add_trace(go.Scatter(x=xs, y=[v / _MIB for v in tl.reserved], name="reserved", mode="lines",
                                     line={"shape": "hv", "dash": "dash"}, legendgroup="totals"), row=1, col=1)
        fig.add_trace(go.Scatter(x=[s.peak_at_s], y=[s.peak_bytes / _MIB], name="peak", mode="markers",
                                 marker={"size": 9, "symbol": "x"}, legendgroup="totals",
                                 hovertext=[f"peak {format_bytes(s.peak_bytes)}"]), row=1, col=1)
        chart = _chart_stacks(s)
        other = [u - b - sum(series[i] for series in tl.stacks)
                 for i, (u, b) in enumerate(zip(tl.in_use, tl.before_trace, strict=True))]
        areas: list[tuple[str, str, list[int]]] = [("before the trace", "memory live before the trace began",
                                                    list(tl.before_trace))]
        areas += [(_short(name), name, list(series)) for name, series in zip(chart, tl.stacks, strict=True)]
        areas.append(("other stacks", "every stack not drawn apart", other))
        from plotly.colors import qualitative

        palette = qualitative.Dark24
        colours = ["#9e9e9e"] + [palette[i % len(palette)] for i in range(len(areas) - 2)] + ["#d6d6d6"]
        for (label, full, series), colour in zip(areas, colours, strict=True):
            fig.add_trace(go.Scatter(x=xs, y=[max(v, 0) / _MIB for v in series], name=_esc(label),
                                     hovertext=_esc(full), hoverinfo="x+y+text", mode="lines",
                                     line={"shape": "hv", "width": 0.5, "color": colour}, fillcolor=colour,
                                     stackgroup="stacks", legendgroup="stacks"), row=2, col=1)
        fig.update_xaxes(title_text=f"time since the first entry ({unit})", row=2, col=1)
    if segments:
        names = [f"{g.address:#x} ({_esc(g.pool or '?')}, {format_bytes(g.total_bytes)})" for g in segments]
        for label, values in (("allocated", [g.allocated_bytes for g in segments]),
                              ("free: rounding", [g.internal_free_bytes for g in segments]),
                              ("free: unallocated", [g.external_free_bytes for g in segments])):
            fig.add_trace(go.Bar(y=names, x=[v / _MIB for v in values], name=label, orientation="h",
                                 legendgroup="segments"), row=3, col=1)
        fig.update_layout(barmode="stack")
        fig.update_yaxes(autorange="reversed", row=3, col=1)
    fig.update_layout(height=1100, margin={"l": 60, "r": 20, "t": 60, "b": 40}, legend={"font": {"size": 10}})
    return fig


def _chart_stacks(s: MemorySummary) -> list[str]:
    """Names of the stacks the timeline holds, in its order (the summary's ``chart_numbers``)."""
    return [_stack_name(st) for st in s.chart_stacks]


def _stack_rows(stacks: tuple[StackTotal, ...], peak: int) -> str:
    rows = []
    for st in stacks:
        share = f"{100 * st.live_at_peak_bytes / peak:.1f} %" if peak else "–"
        rows.append(f"<tr><td class=n>{format_bytes(st.live_end_bytes)}</td><td class=n>"
                    f"{format_bytes(st.live_at_peak_bytes)}</td><td class=n>{share}</td><td class=n>"
                    f"{format_bytes(st.total_bytes)}</td><td class=n>{st.count}</td>"
                    f"<td><code>{_esc(_stack_name(st))}</code></td></tr>")
    return "\n".join(rows)


def render_html(summary: MemorySummary, source: str) -> str:
    """The page of ``summary`` (its ``timeline`` drawn when present) with plotly.js inlined."""
    import plotly.io as pio

    s = summary
    u = "s" if s.time_unit == "s" else " (entry #)"
    figure = pio.to_html(_figure(s), include_plotlyjs=True, full_html=False, div_id=DIV_ID)
    a = s.allocator
    facts = [("trace", f"{s.entries} entries over {s.duration_s:.3f}{u}"),
             ("peak in use", f"{format_bytes(s.peak_bytes)} at {s.peak_at_s:.3f}{u}"),
             ("in use before the trace / at its end", f"{format_bytes(s.baseline_bytes)} / {format_bytes(s.end_bytes)}")]
    if a is not None and a.recorded:
        facts += [("reserved / allocated / free at the end (as memory_viz stats)",
                   f"{format_bytes(a.reserved_bytes)} / {format_bytes(a.allocated_bytes)} / "
                   f"{format_bytes(a.free_bytes)} in {len(a.segments)} segments"),
                  ("reserved at most", format_bytes(a.max_reserved_bytes)),
                  ("cudaMalloc / cudaFree during the trace", f"{a.segment_allocs} / {a.segment_frees}")]
    else:
        facts.append(("reserved", "not recorded (segments made from a CPU profile)"))
    findings = allocator_findings(a, peak_bytes=s.peak_bytes, entries=s.entries, timed=s.time_unit == "s",
                                  time_unit=s.time_unit)
    items = "\n".join(f"<li class={_esc(f.severity)}><b>{_esc(f.severity)}: {_esc(f.kind.value)}</b> — "
                      f"{_esc(f.evidence)}<br><i>advice:</i> {_esc(f.advice)}</li>" for f in findings)
    head = ("<tr><th>live at end</th><th>at the peak</th><th>share of peak</th><th>allocated</th><th>allocs</th>"
            "<th>stack (operation, then the user's frames)</th></tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>memory summary: {_esc(source)}</title>
<style>body{{font-family:sans-serif;margin:1em 2em}} table{{border-collapse:collapse;margin:.5em 0}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}} td.n{{text-align:right;
white-space:nowrap}} code{{font-size:90%}} li.warning b{{color:#b00}}</style></head>
<body><h1>memory summary</h1><p>snapshot: <code>{_esc(source)}</code></p>
<table id=facts>{''.join(f'<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>' for k, v in facts)}</table>
<h2>findings</h2><ul id=findings>{items or '<li>none</li>'}</ul>
{figure}
<h2>stacks by bytes live at the peak</h2><table id=peak_stacks>{head}{_stack_rows(s.peak_stacks, s.peak_bytes)}</table>
<h2>stacks by bytes still live at the end</h2><table id=end_stacks>{head}{_stack_rows(s.top_stacks, s.peak_bytes)}</table>
</body></html>
"""


def write_summary_html(path: str | Path, summary: MemorySummary, source: str) -> Path:
    """Write ``render_html`` to ``path`` atomically; return the path."""
    target = Path(path)
    text = render_html(summary, source)
    with atomic_write(target) as fh:
        fh.write(text)
    return target
