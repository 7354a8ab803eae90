"""One colour per category, for every chart of every report (analysis, diff).

A reader learns on the first chart that communication is orange and idle is grey; the
next chart must not paint memory orange. Every chart asks ``colour(category)`` and the
legend of a category is the same everywhere. Names are matched after folding case,
``-``/``_`` and spaces (``non_compute`` = ``non-compute``), and a few synonyms name the
same thing (the temporal breakdown's ``compute`` is the kernel kind ``computation``).

Colours: Tableau 10 (colour-blind-safer than plotly's default cycle), greys for idle and
its causes so that busy time stands out.
"""

from __future__ import annotations

#: category → colour; one row per category, the only place a chart's colour is chosen.
CATEGORY_COLOURS: dict[str, str] = {
    # GPU time by kind (kernel kinds, temporal breakdown)
    "computation": "#4E79A7",
    "communication": "#F28E2B",
    "memory": "#B07AA1",
    "non-compute": "#E15759",
    "sync": "#9C755F",
    "other": "#BAB0AC",
    # GPU idle and its causes
    "idle": "#A0A0A0",
    "host wait": "#D4A6A6",
    "kernel wait": "#8C8C8C",
    "other idle": "#C8C8C8",
    "setup": "#F1CE63",
    "rank wait": "#D4A6A6",
    "busy": "#4E79A7",
    # the critical path's kinds (CPU work; launch and kernel gaps share their idle causes' greys)
    "cpu": "#EDC948",
    "launch delay": "#D4A6A6",
    "kernel gaps": "#8C8C8C",
    # sources of a measurement
    "mytimer": "#59A14F",
    "torch_profiler": "#4E79A7",
    "nsys": "#76B7B2",
    "ncu": "#EDC948",
    "cprofile": "#FF9DA7",
    # scores and severities
    "good": "#59A14F",
    "fair": "#EDC948",
    "poor": "#E15759",
    "not measured": "#D0D0D0",
    "critical": "#E15759",
    "warning": "#F28E2B",
    "info": "#4E79A7",
}
_SYNONYMS: dict[str, str] = {"compute": "computation", "comm": "communication", "communications": "communication",
                             "memcpy": "memory", "memset": "memory", "noncompute": "non-compute",
                             "hostwait": "host wait", "kernelwait": "kernel wait", "torch.profiler": "torch_profiler",
                             "torchprofiler": "torch_profiler", "nsight systems": "nsys", "nsight compute": "ncu",
                             "gpucompute": "computation"}
#: Colours of series that are not categories (ranks, lines of one chart), in order.
SERIES_COLOURS: tuple[str, ...] = ("#4E79A7", "#F28E2B", "#59A14F", "#E15759", "#76B7B2", "#EDC948", "#B07AA1",
                                   "#FF9DA7", "#9C755F", "#BAB0AC")
#: The colour of a category this table does not know.
UNKNOWN = "#7F7F7F"


def _key(category: str) -> str:
    return " ".join(str(category).lower().replace("_", " ").replace("-", " ").split())


_INDEX = {_key(k): k for k in CATEGORY_COLOURS} | {"non compute": "non-compute", "torch profiler": "torch_profiler"}


def canonical(category: str) -> str | None:
    """The table's name for ``category`` (``non_compute`` → ``non-compute``), or None when unknown."""
    key = _key(category)
    if key in _INDEX:
        return _INDEX[key]
    squeezed = key.replace(" ", "")
    return _SYNONYMS.get(key) or _SYNONYMS.get(squeezed) or _INDEX.get(_key(_SYNONYMS.get(squeezed, "")))


def colour(category: str) -> str:
    """The colour of ``category`` in every chart (grey for a category the table does not know)."""
    name = canonical(category)
    return CATEGORY_COLOURS[name] if name is not None else UNKNOWN


def series_colour(index: int) -> str:
    """The colour of the ``index``-th series of a chart whose series are not categories."""
    return SERIES_COLOURS[index % len(SERIES_COLOURS)]


def score_colour(score: float | None) -> str:
    """A score's colour: good ≥ 80, fair ≥ 50, poor below; not measured when None."""
    if score is None:
        return CATEGORY_COLOURS["not measured"]
    return CATEGORY_COLOURS["good" if score >= 80 else "fair" if score >= 50 else "poor"]
