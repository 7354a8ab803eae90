"""A ``StragglerReport`` as text for people (``myutils stragglers``); ``--json`` uses ``to_dict``."""

from __future__ import annotations

import re
from collections.abc import Sequence

from my_utils.distributed.stragglers.model import RankValue, SectionStats, StragglerReport

__all__ = ["render_text"]

# control characters (C0, DEL, C1) and line/paragraph separators: a section name read from a
# file must not break the table's lines or send escape sequences to the terminal
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: A rank's wait in a section is listed from this many ms per step.
SHOWN_WAIT_MS = 1.0
#: Outlying steps listed (the largest); the JSON has them all.
SHOWN_OUTLIERS = 10


def shown(name: str) -> str:
    """``name`` with every control character as a visible escape (``\\n``, ``\\x1b``)."""
    if not _UNSAFE.search(name):
        return name
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), name)


def _value(v: RankValue) -> str:
    return f"{v.ms:.3f} (r{v.rank})"


def _steps(s: SectionStats) -> str:
    return str(s.steps) if s.steps == s.seen_steps else f"{s.steps} of {s.seen_steps}"


def _waits(s: SectionStats) -> str:
    waits = [w for w in s.waiting if w.ms >= SHOWN_WAIT_MS]
    return ", ".join(f"r{w.rank} {w.ms:.3f}" for w in waits) or "-"


def table_lines(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` (the first the header) as lines of left-aligned columns two spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def render_text(report: StragglerReport) -> str:
    """A table, one line per section (times are each rank's median per step), then the verdict."""
    ranks = report.ranks
    who = f"{len(ranks)} ranks ({ranks[0]}..{ranks[-1]})" if len(ranks) > 1 else f"1 rank ({ranks[0]})"
    lines = [f"{shown(report.log_dir)}: {who}, {report.steps} steps"]
    if len(ranks) == 1:
        # nothing to compare across: the per-section medians only, never "0 of 30 steps" or "no straggler"
        lines.append(f"one rank (rank {ranks[0]}): stragglers need at least two ranks' logs of the same steps; "
                     "its per-section medians follow, compared with nothing")
        lines += table_lines([("section", "steps", "median ms"),
                           *((shown(s.section), str(s.seen_steps), f"{s.median.ms:.3f}") for s in report.sections)])
        lines += [f"note: {shown(n)}" for n in report.notes]
        return "\n".join(lines)
    if report.clocks:
        offsets = ", ".join(f"r{c.rank} {c.offset_s * 1e3:+.3f} ms ± {c.uncertainty_s * 1e3:.3f}"
                            f"{'' if c.applied else ' (applied here)'}" for c in report.clocks)
        lines.append(f"clock offsets vs reference: {offsets}")
    else:
        lines.append("clock offsets: none recorded (no CLOCK_SYNC rows); start spreads assume one clock")
    head = ("section", "steps", "min ms (rank)", "median ms (rank)", "max ms (rank)", "slowdown",
            "late steps", "waits ms/step", "start spread ms", "straggler")
    rows = [head]
    for s in report.sections:
        compared = s.steps > 0
        rows.append((shown(s.section), _steps(s), _value(s.min), _value(s.median), _value(s.max),
                     f"{s.slowdown:.2f}x (r{s.slowest_rank})" if compared else "-",
                     f"r{s.slowest_rank} {s.late_steps}/{s.steps}" if compared else "-", _waits(s),
                     f"{s.start_spread_ms:.3f}" if compared else "-",
                     f"rank {s.straggler}" if s.straggler is not None else "-"))
    lines += table_lines(rows)
    lines.append("times: each rank's median per step of its working time (time spent waiting for a later "
                 "rank inside the section taken out); slowdown: the median, over steps, of a rank's time "
                 "over the other ranks' median")
    by_name = {s.section: s for s in report.sections}
    found = report.stragglers
    if found:
        parts = []
        for r, name in found:
            s = by_name[name]
            parts.append(f"rank {r} in {shown(name)} ({s.slowdown:.2f}x the other ranks' median on "
                         f"{s.late_steps} of {s.steps} steps at >= {report.min_slowdown:.2f}x; "
                         f"+{s.slowest_excess_ms:.3f} ms per step)")
        lines.append("persistent stragglers: " + "; ".join(parts))
    else:
        lines.append(f"no persistent straggler (no rank at >= {report.min_slowdown:.2f}x the other ranks' "
                     f"median in >= {report.persistent_fraction:.0%} of steps, more often than chance, costing "
                     "1% of the step or more)")
    waits = [(s, w) for s in report.sections for w in s.waiting if w.ms >= SHOWN_WAIT_MS]
    for s, w in sorted(waits, key=lambda x: -x[1].ms)[:SHOWN_OUTLIERS]:
        lines.append(f"waiting: rank {w.rank} waits {w.ms:.3f} ms per step in {shown(s.section)} for the ranks that "
                     f"come in after it (it leaves with them: a collective ends the section); not counted as its time")
    for s in report.sections:
        if s.period is not None:
            rank = next(o.rank for o in s.outliers if o.step == s.recurring_steps[0])
            lines.append(f"periodic: rank {rank} in {shown(s.section)} every {s.period} steps (steps "
                         f"{', '.join(map(str, s.recurring_steps))})")
    outliers = report.outliers
    if outliers:
        lines.append(f"outlying steps (>= 1.5x the other ranks' median and >= {report.min_excess_ms:g} ms above it):")
        for name, o in outliers[:SHOWN_OUTLIERS]:
            lines.append(f"  step {o.step} rank {o.rank} {shown(name)}: {o.ms:.3f} ms against {o.reference_ms:.3f} "
                         f"ms on the other ranks (+{o.excess_ms:.3f} ms)")
        if len(outliers) > SHOWN_OUTLIERS:
            lines.append(f"  ... {len(outliers) - SHOWN_OUTLIERS} more (--json lists them all)")
    lines += [f"note: {shown(n)}" for n in report.notes]
    return "\n".join(lines)

