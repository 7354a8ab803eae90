"""Legacy import path: ``my_utils.DITProfiler`` is the module ``my_utils.legacy.dit_profiler``."""

from typing import TYPE_CHECKING

from my_utils.core._legacy import alias_module

alias_module(__name__)

if TYPE_CHECKING:
    from my_utils.legacy.dit_profiler import *  # noqa: F403
