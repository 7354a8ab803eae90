"""A ``StragglerReport`` as text for people (``myutils stragglers``); ``--json`` uses ``to_dict``."""

from __future__ import annotations

import re

from my_utils.distributed.stragglers.model import RankValue, StragglerReport

__all__ = ["render_text"]

# control characters (C0, DEL, C1) and line/paragraph separators: a section name read from a
# file must not break the table's lines or send escape sequences to the terminal
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def shown(name: str) -> str:
    """``name`` with every control character as a visible escape (``\\n``, ``\\x1b``)."""
    if not _UNSAFE.search(name):
        return name
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), name)


def _value(v: RankValue) -> str:
    return f"{v.ms:.3f} (r{v.rank})"


def render_text(report: StragglerReport) -> str:
    """A table, one line per section, then the verdict."""
    ranks = report.ranks
    lines = [f"{shown(report.log_dir)}: {len(ranks)} ranks ({ranks[0]}..{ranks[-1]}), {report.steps} steps"]
    if report.clocks:
        offsets = ", ".join(f"r{c.rank} {c.offset_s * 1e3:+.3f} ms ± {c.uncertainty_s * 1e3:.3f}"
                            f"{'' if c.applied else ' (applied here)'}" for c in report.clocks)
        lines.append(f"clock offsets vs reference: {offsets}")
    else:
        lines.append("clock offsets: none recorded (no CLOCK_SYNC rows); start spreads assume one clock")
    head = ("section", "steps", "min ms (rank)", "median ms (rank)", "max ms (rank)", "slowdown",
            "slowest in", "start spread ms", "straggler")
    rows = [head]
    for s in report.sections:
        rows.append((shown(s.section), str(s.steps), _value(s.min), _value(s.median), _value(s.max),
                     f"{s.slowdown:.2f}x", f"r{s.slowest_rank} {s.slowest_steps}/{s.steps}",
                     f"{s.start_spread_ms:.3f}", f"rank {s.straggler}" if s.straggler is not None else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    found = report.stragglers
    if found:
        lines.append("persistent stragglers: " + "; ".join(f"rank {r} in {shown(name)}" for r, name in found))
    else:
        lines.append(f"no persistent straggler (none slowest in >= {report.persistent_fraction:.0%} of steps "
                     f"by >= {report.min_slowdown:.2f}x the other ranks' median)")
    return "\n".join(lines)
