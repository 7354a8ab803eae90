"""``MemorySummary`` as text for the terminal (``myutils memory summarize``)."""

from __future__ import annotations

from my_utils.memory.snapshot_summary import MemorySummary

__all__ = ["format_bytes", "render_summary", "terminal_text"]


def format_bytes(n: float) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1 (``1.50 GiB``), sign kept."""
    sign, v = ("-" if n < 0 else ""), float(abs(n))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024 or unit == "GiB":
            return f"{sign}{v:.0f} {unit}" if unit == "B" else f"{sign}{v:.2f} {unit}"
        v /= 1024
    raise AssertionError("unreachable")


def terminal_text(text: str) -> str:
    """``text`` with every unprintable character escaped (``\\r``, ``\\x1b``): names from a file stay on their line.

    Frame and region names come from the snapshot; a carriage return or an escape sequence in
    one would rewrite the terminal (a fake ``peak in use`` line, a cleared screen).
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for ch in text)


def _where(frames: tuple[str, ...]) -> str:
    return " <- ".join(terminal_text(f) for f in frames) if frames else "(no stack recorded)"


def _signed(n: float) -> str:
    return ("+" if n > 0 else "") + format_bytes(n)


def render_summary(summary: MemorySummary, source: str) -> str:
    """A plain-text report: totals, the stacks that hold the memory, regions (or windows), trend and who grows."""
    s = summary
    u = "s" if s.time_unit == "s" else " (entry #)"
    per = "s" if s.time_unit == "s" else "entry"
    before = f" ({format_bytes(s.baseline_end_bytes)} of it still live at the end)" if s.baseline_bytes else ""
    lines = [
        f"snapshot: {terminal_text(source)}",
        f"trace: {s.entries} entries over {s.duration_s:.3f}{u} ("
        + ", ".join(f"{terminal_text(k)} {v}" for k, v in sorted(s.actions.items())) + ")",
        f"peak in use: {format_bytes(s.peak_bytes)} at {s.peak_at_s:.3f}{u}",
        f"in use: {format_bytes(s.baseline_bytes)} before the trace{before}, {format_bytes(s.end_bytes)} at its end; "
        f"reserved at the end: {format_bytes(s.reserved_bytes)}",
        "",
        f"allocation stacks by bytes still live at the end ({len(s.top_stacks)} shown):",
        f"  {'live at end':>12} {'at the peak':>12} {'allocated':>12} {'allocs':>7} {'growth/' + per:>14}  stack",
    ]
    for st in s.top_stacks:
        lines.append(f"  {format_bytes(st.live_end_bytes):>12} {format_bytes(st.live_at_peak_bytes):>12} "
                     f"{format_bytes(st.total_bytes):>12} {st.count:>7} {_signed(st.growth_bytes_per_s):>14}  "
                     f"{_where(st.frames)}")
    lines += ["", "time windows (no regions recorded):" if s.regions_are_windows else "regions:"]
    for r in s.regions:
        lines.append(f"  {terminal_text(r.name):<24} {r.start_s:9.3f}-{r.stop_s:9.3f}{u}  "
                     f"delta {format_bytes(r.delta_bytes):>12}  peak {format_bytes(r.peak_bytes):>12}")
    lines += ["", f"trend: {s.trend}, {format_bytes(s.slope_bytes_per_s)}/{per} (Theil-Sen over the trace)"]
    if s.growing_stacks:
        lines.append(f"growing stacks (live bytes per {per}, Theil-Sen):")
        lines += [f"  {_signed(st.growth_bytes_per_s) + '/' + per:>16}  {_where(st.frames)}" for st in s.growing_stacks]
    elif s.growing:
        lines.append("growing stacks: none alone grows by 5 % of the peak (the growth is spread over many stacks)")
    if s.time_unit != "s":
        lines.append("(this snapshot records no times: positions are entry numbers, as `cut --from/--to` takes them)")
    return "\n".join(lines)
