"""myutils-legacy: the seed's ``ProfilerWrapper`` and ``create_profiler_context`` (DITProfiler).

Re-exports only, resolved on first access: plugin discovery (every ``myutils`` command)
imports this package, and must not pay for the profiler modules; torch is never imported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports
from my_utils.legacy._version import __version__

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "ProfilerWrapper": "my_utils.legacy.profiler_wrapper",
    "create_profiler_context": "my_utils.legacy.dit_profiler",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.legacy.dit_profiler import create_profiler_context as create_profiler_context
    from my_utils.legacy.profiler_wrapper import ProfilerWrapper as ProfilerWrapper
