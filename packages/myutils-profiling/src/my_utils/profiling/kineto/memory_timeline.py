"""torch.profiler's raw memory timeline: memory held per category (parameters, activations, gradients...) over time.

``prof.export_memory_timeline("mem.raw.json.gz", device="cuda:0")`` (a profile with ``profile_memory``,
``record_shapes`` and ``with_stack``) writes a JSON list of ``[time_ns, action, bytes, category]`` rows
(``torch/profiler/_memory_profiler.py``: ``export_memory_timeline_raw``). ``action`` is 1 pre-existing,
2 create, 3 version increment (a pair of rows: the bytes leave one category and enter the next), 4
destroy (negative bytes); ``category`` indexes :data:`CATEGORIES`. Pre-existing tensors carry time -1.

:func:`read_memory_timeline` folds the rows as Holistic Trace Analysis' ``MemoryAnalysis.
_process_raw_events`` does (``tests/test_memory_analysis.py``): one point per distinct time, each
category's bytes the running sum of its rows, the pre-existing rows' time replaced by the first real
one. ``memory_timeline_rows`` gives the peak of each category and of the total (when it was reached,
and what each category held then); ``to_frame`` the points as a DataFrame.

A file is bad input (one line naming it) when it is not such a list; it is read whole (the export is one
JSON array), refused above :data:`MAX_BYTES` uncompressed.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

#: torch's memory categories in the order of ``_CATEGORY_TO_INDEX`` (None, "Unknown", last).
CATEGORIES = ("Parameter", "Optimizer state", "Input", "Temporary", "Activation", "Gradient", "Autograd", "Unknown")
ACTIONS = {1: "pre-existing", 2: "create", 3: "increment version", 4: "destroy"}
MAX_BYTES = 2 << 30
_WHAT = "a torch.profiler raw memory timeline (a JSON list of [time_ns, action, bytes, category])"


@dataclass(frozen=True)
class MemoryTimeline:
    """The folded timeline: ``times`` (ns, one per distinct time) and ``sizes[i][c]`` (bytes of category c)."""

    file: str
    times: tuple[int, ...]
    sizes: tuple[tuple[float, ...], ...]
    rows: int
    actions: dict[str, int]

    def totals(self) -> list[float]:
        """Bytes of every category together at each point."""
        return [sum(s) for s in self.sizes]

    def to_frame(self) -> pd.DataFrame:
        """One row per point: ``time_ns``, ``time_ms`` (from the first point), and one column per category (bytes)."""
        import pandas as pd

        t0 = self.times[0] if self.times else 0
        data: dict[str, Any] = {"time_ns": list(self.times), "time_ms": [(t - t0) / 1e6 for t in self.times]}
        for i, name in enumerate(CATEGORIES):
            data[name] = [s[i] for s in self.sizes]
        return pd.DataFrame(data)


def _load(path: Path) -> Any:
    try:
        with path.open("rb") as fh:
            magic = fh.read(2)
        opener: Any = gzip.open if magic == b"\x1f\x8b" else open
        with opener(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise InputError(path, None, f"{_WHAT}; the file cannot be read ({exc})") from None
    if len(raw) > MAX_BYTES:
        raise InputError(path, None, f"{_WHAT} under {MAX_BYTES >> 30} GiB uncompressed")
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError(path, None, f"{_WHAT}; it is not JSON ({type(exc).__name__})") from None


def read_memory_timeline(path: str | Path) -> MemoryTimeline:
    """Read and fold one raw memory timeline (module docstring)."""
    p = Path(path)
    rows = _load(p)
    if not isinstance(rows, list):
        raise InputError(p, None, f"{_WHAT}; found a JSON {type(rows).__name__}")
    times: list[int] = []
    sizes: list[list[float]] = []
    first_real: int | None = None
    actions: dict[str, int] = {}
    for i, row in enumerate(rows):
        if (not isinstance(row, list) or len(row) != 4
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in row)
                or not isinstance(row[3], int) or not 0 <= row[3] < len(CATEGORIES)):
            raise InputError(p, f"row {i}", f"{_WHAT}; found {str(row)[:60]}")
        t, action, nbytes, category = int(row[0]), int(row[1]), float(row[2]), int(row[3])
        if not math.isfinite(nbytes):
            raise InputError(p, f"row {i}", f"{_WHAT}: a finite byte count; found {row[2]}")
        if t > 0 and (first_real is None or t < first_real):
            first_real = t
        if not times or t != times[-1]:
            times.append(t)
            sizes.append(list(sizes[-1]) if sizes else [0.0] * len(CATEGORIES))
        sizes[-1][category] += nbytes
        label = ACTIONS.get(action, f"action {action}")
        actions[label] = actions.get(label, 0) + 1
    fixed = tuple(first_real if t < 0 and first_real is not None else t for t in times)
    return MemoryTimeline(p.name, fixed, tuple(tuple(s) for s in sizes), len(rows), actions)


def memory_timeline_rows(timeline: MemoryTimeline) -> list[dict[str, Any]]:
    """The peak of each category and of the total: bytes, GiB, when (ms from the first point), the total then."""
    if not timeline.times:
        return []
    t0 = timeline.times[0]
    totals = timeline.totals()
    out = []
    for i, name in enumerate((*CATEGORIES, "total")):
        values = totals if name == "total" else [s[i] for s in timeline.sizes]
        k = max(range(len(values)), key=lambda j: (values[j], -j))
        out.append({"category": name, "peak_bytes": values[k], "peak_gib": values[k] / 2**30,
                    "at_ms": (timeline.times[k] - t0) / 1e6, "total_then_bytes": totals[k],
                    "final_bytes": values[-1]})
    return out
