"""``MemorySummary`` as text for the terminal (``myutils memory summarize``)."""

from __future__ import annotations

from my_utils.memory.allocator_advice import allocator_findings
from my_utils.memory.allocator_state import AllocatorState
from my_utils.memory.byte_units import format_bytes
from my_utils.memory.snapshot_stacks import StackTotal
from my_utils.memory.snapshot_summary import MemorySummary
from my_utils.memory.stack_frames import frame_label

__all__ = ["format_bytes", "render_summary", "stack_text", "terminal_text"]

SEGMENTS_SHOWN = 8


def terminal_text(text: str) -> str:
    """``text`` with every unprintable character escaped (``\\r``, ``\\x1b``): names from a file stay on their line.

    Frame and region names come from the snapshot; a carriage return or an escape sequence in
    one would rewrite the terminal (a fake ``peak in use`` line, a cleared screen).
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for ch in text)


def stack_text(st: StackTotal, *, full: bool = False) -> str:
    """A stack on one line: the operation that allocated, then the frames that name it, innermost first.

    ``full`` gives every recorded frame instead.
    """
    if full:
        parts = [frame_label(f) for f in st.full_stack]
    else:
        parts = ([st.operation] if st.operation else []) + list(st.frames)
    return " <- ".join(terminal_text(p) for p in parts) if parts else "(no stack recorded)"


def _signed(n: float) -> str:
    return ("+" if n > 0 else "") + format_bytes(n)


def render_summary(summary: MemorySummary, source: str, *, full_stacks: bool = False) -> str:
    """A plain-text report: totals, the stacks that hold the memory, regions (or windows), trend and who grows,
    the allocator's state and the findings; ``full_stacks`` adds every recorded frame under each stack."""
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
        + (f"reserved at the end: {format_bytes(s.reserved_bytes)}" if s.allocator is None or s.allocator.recorded
           else "reserved: not recorded (segments made from a CPU profile)"),
        "",
        f"allocation stacks by bytes still live at the end ({len(s.top_stacks)} of {s.stacks_seen} shown; "
        + _named_by(s.frames_view) + "):",
        f"  {'live at end':>12} {'at the peak':>12} {'allocated':>12} {'allocs':>7} {'growth/' + per:>14}  stack",
    ]
    for st in s.top_stacks:
        lines.append(f"  {format_bytes(st.live_end_bytes):>12} {format_bytes(st.live_at_peak_bytes):>12} "
                     f"{format_bytes(st.total_bytes):>12} {st.count:>7} {_signed(st.growth_bytes_per_s):>14}  "
                     f"{stack_text(st)}")
        if full_stacks:
            lines += [f"      {terminal_text(frame_label(f))}" for f in st.full_stack]
    if s.peak_stacks:
        lines += ["", f"allocation stacks by bytes live at the peak ({format_bytes(s.peak_bytes)} at "
                      f"{s.peak_at_s:.3f}{u}; {len(s.peak_stacks)} shown):",
                  f"  {'at the peak':>12} {'share':>6} {'live at end':>12} {'allocs':>7}  stack"]
        for st in s.peak_stacks:
            share = 100 * st.live_at_peak_bytes / s.peak_bytes if s.peak_bytes else 0.0
            lines.append(f"  {format_bytes(st.live_at_peak_bytes):>12} {share:5.1f}% {format_bytes(st.live_end_bytes):>12} "
                         f"{st.count:>7}  {stack_text(st)}")
    lines += ["", "time windows (no regions recorded):" if s.regions_are_windows else "regions:"]
    for r in s.regions:
        lines.append(f"  {terminal_text(r.name):<24} {r.start_s:9.3f}-{r.stop_s:9.3f}{u}  "
                     f"delta {format_bytes(r.delta_bytes):>12}  peak {format_bytes(r.peak_bytes):>12}")
    lines += ["", f"trend: {s.trend}, {format_bytes(s.slope_bytes_per_s)}/{per} (Theil-Sen over the trace)"]
    if s.growing_stacks:
        lines.append(f"growing stacks (live bytes per {per}, Theil-Sen):")
        lines += [f"  {_signed(st.growth_bytes_per_s) + '/' + per:>16}  {stack_text(st)}" for st in s.growing_stacks]
    elif s.growing:
        lines.append("growing stacks: none alone grows by 5 % of the peak (the growth is spread over many stacks)")
    lines += _allocator_lines(s.allocator, s.peak_bytes)
    findings = allocator_findings(s.allocator, peak_bytes=s.peak_bytes, entries=s.entries, timed=s.time_unit == "s",
                                  time_unit=s.time_unit)
    lines += ["", "findings:" if findings else "findings: none"]
    for f in findings:
        lines += [f"  [{f.severity}] {f.kind.value}: {terminal_text(f.evidence)}", f"      advice: {f.advice}"]
    if s.time_unit != "s":
        lines.append("(this snapshot records no times: positions are entry numbers, as `cut --from/--to` takes them)")
    return "\n".join(lines)


def _named_by(view: str) -> str:
    if view == "user":
        return "named by the operation and the user's frames; --frames all for the full stacks"
    if view == "python":
        return "named by their Python frames"
    return "named by their innermost frames as recorded"


def _allocator_lines(a: AllocatorState | None, peak: int) -> list[str]:
    if a is None or not a.recorded:
        return ["", "allocator: not recorded (the segments were made from a CPU profile: no reserved memory, "
                    "no cudaMalloc calls)"]
    internal = f" ({format_bytes(a.internal_free_bytes)} of it inside allocated blocks, rounding)" \
        if a.internal_free_bytes else ""
    lines = ["", f"allocator at the end (as `python -m torch.cuda._memory_viz stats` counts): {len(a.segments)} "
                 f"segments, reserved {format_bytes(a.reserved_bytes)}, allocated {format_bytes(a.allocated_bytes)}, "
                 f"free {format_bytes(a.free_bytes)}{internal}"]
    if a.max_reserved_bytes:
        gap = a.max_reserved_bytes - peak
        lines.append(f"  reserved at most {format_bytes(a.max_reserved_bytes)} against a peak in use of "
                     f"{format_bytes(peak)}: " + (f"{format_bytes(gap)} ({100 * gap / a.max_reserved_bytes:.1f} %) "
                                                  "more than ever in use at once" if gap > 0 else "no excess"))
    if a.largest_request_bytes:
        fits = "fits" if a.largest_free_bytes >= a.largest_request_bytes else "does not fit: it needs a new segment"
        lines.append(f"  largest free block {format_bytes(a.largest_free_bytes)}; largest request of the trace "
                     f"{format_bytes(a.largest_request_bytes)}: {fits}")
    churn = f"{a.round_trips} segments allocated after the cache returned memory" if a.round_trips \
        else "no segment allocated after a free, so no churn"
    lines.append(f"  allocator calls during the trace: {a.segment_allocs} cudaMalloc "
                 f"({format_bytes(a.segment_alloc_bytes)}), {a.segment_frees} cudaFree "
                 f"({format_bytes(a.segment_free_bytes)}); {churn}"
                 + (f"; {format_bytes(a.reserved_before_bytes)} was reserved before the trace began"
                    if a.reserved_before_bytes else ""))
    if a.ooms:
        lines.append(f"  failed requests (oom entries): {len(a.ooms)}")
    shown = sorted(a.segments, key=lambda g: (-g.free_bytes, g.address))[:SEGMENTS_SHOWN]
    if shown:
        lines.append(f"  segments by free space ({len(shown)} of {len(a.segments)} shown):")
        lines.append(f"    {'reserved':>12} {'allocated':>12} {'free':>12} {'largest free':>13} {'blocks':>6}  "
                     "pool   device  address")
        for g in shown:
            lines.append(f"    {format_bytes(g.total_bytes):>12} {format_bytes(g.allocated_bytes):>12} "
                         f"{format_bytes(g.free_bytes):>12} {format_bytes(g.largest_free_bytes):>13} {g.blocks:>6}  "
                         f"{terminal_text(g.pool or '?'):<6} {g.device:>6}  {g.address:#x}")
    return lines
