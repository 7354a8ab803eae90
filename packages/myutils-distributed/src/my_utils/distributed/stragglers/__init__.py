"""Who is slow across ranks: ``stragglers_of(paths)`` (CSVs, Kineto traces, nsys exports), the ``myutils stragglers`` command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "analyze_stragglers": "my_utils.distributed.stragglers.analysis",
    "find_rank_files": "my_utils.distributed.stragglers.analysis",
    "RankClock": "my_utils.distributed.stragglers.model",
    "RankValue": "my_utils.distributed.stragglers.model",
    "SectionStats": "my_utils.distributed.stragglers.model",
    "StragglerReport": "my_utils.distributed.stragglers.model",
    "render_text": "my_utils.distributed.stragglers.render",
    "analyze_rank_timings": "my_utils.distributed.stragglers.timings",
    "stragglers_of": "my_utils.distributed.stragglers.run",
    "TimingsReport": "my_utils.distributed.stragglers.timings_model",
    "render_timings": "my_utils.distributed.stragglers.timings_render",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.distributed.stragglers.analysis import analyze_stragglers as analyze_stragglers
    from my_utils.distributed.stragglers.analysis import find_rank_files as find_rank_files
    from my_utils.distributed.stragglers.model import RankClock as RankClock
    from my_utils.distributed.stragglers.model import RankValue as RankValue
    from my_utils.distributed.stragglers.model import SectionStats as SectionStats
    from my_utils.distributed.stragglers.model import StragglerReport as StragglerReport
    from my_utils.distributed.stragglers.render import render_text as render_text
    from my_utils.distributed.stragglers.run import stragglers_of as stragglers_of
    from my_utils.distributed.stragglers.timings import analyze_rank_timings as analyze_rank_timings
    from my_utils.distributed.stragglers.timings_model import TimingsReport as TimingsReport
    from my_utils.distributed.stragglers.timings_render import render_timings as render_timings
