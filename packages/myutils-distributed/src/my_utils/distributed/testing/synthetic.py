"""Profile CSVs of a made-up run (tests and the stragglers bench): known times, one slow rank if asked.

Rows are what MyTimer writes (START/END pairs with ``node_id``/``parent_id``, the duration
on END) and, per rank, a ``CLOCK_SYNC`` row first when an offset is given. Times are
deterministic: ``base_ms`` per section, +``jitter`` (a fixed pattern over ranks and steps),
times ``factor`` for the slow (rank, section).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from my_utils.core.profile_csv import HEADER_LINE, format_metadata, format_profile_line
from my_utils.distributed.clock_estimate import ClockEstimate
from my_utils.distributed.clock_record import (
    CLOCK_SYNC_EVENT_NAME,
    CLOCK_SYNC_EVENT_TYPE,
    clock_sync_metadata,
)

__all__ = ["write_synthetic_run"]

BASE_NS = 1_764_000_000_000_000_000


def write_synthetic_run(
    log_dir: str | Path,
    ranks: int,
    steps: int,
    sections: Sequence[tuple[str, float]] = (("data", 2.0), ("forward", 10.0), ("backward", 20.0)),
    *,
    slow: tuple[int, str, float] | None = None,
    jitter: float = 0.05,
    clock_offsets: Mapping[int, tuple[float, bool]] | None = None,
) -> list[Path]:
    """Write ``profile_rank_<r>.csv`` for ``ranks`` ranks; return the paths.

    ``slow=(rank, section, factor)`` makes one rank slower in one section. ``clock_offsets``
    maps a rank to ``(offset_s, applied)``: a CLOCK_SYNC row is written first; with
    ``applied=False`` the rows are written on the rank's own (shifted) clock, so a reader
    must add the offset to line them up.
    """
    folder = Path(log_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(ranks):
        machine = f"host_rank{rank}"
        offset_s, applied = (clock_offsets or {}).get(rank, (0.0, True))
        shift_ns = 0 if applied else -round(offset_s * 1e9)  # the rank's own clock, before correction
        path = folder / f"profile_rank_{rank}.csv"
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(HEADER_LINE)
            if clock_offsets and rank in clock_offsets:
                estimate = ClockEstimate(offset_s, 5e-6, 1e-5, 60, 1, BASE_NS / 1e9)
                fh.write(format_profile_line(BASE_NS + shift_ns, machine, 0, CLOCK_SYNC_EVENT_NAME,
                                             CLOCK_SYNC_EVENT_TYPE, 0.0,
                                             clock_sync_metadata(estimate, 0, applied)))
            lines = []
            for step in range(steps):
                t = BASE_NS + shift_ns + step * 1_000_000_000
                for node, (name, base_ms) in enumerate(sections):
                    ms = base_ms * (1 + jitter * (((rank * 7 + step * 3 + node) % 5) - 2) / 2)
                    if slow is not None and slow[0] == rank and slow[1] == name:
                        ms *= slow[2]
                    meta = format_metadata({"node_id": node, "parent_id": -1, "depth": 0})
                    end = t + round(ms * 1e6)
                    lines.append(format_profile_line(t, machine, step, name, "START", 0.0, meta))
                    lines.append(format_profile_line(end, machine, step, name, "END", ms, meta))
                    t = end
                if len(lines) > 4096:
                    fh.write("".join(lines))
                    lines.clear()
            fh.write("".join(lines))
        paths.append(path)
    return paths
