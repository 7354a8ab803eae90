"""Legacy import path: ``my_utils.profilerwrapper`` is the module ``my_utils.legacy.profiler_wrapper``."""

from typing import TYPE_CHECKING

from my_utils.core._legacy import alias_module

alias_module(__name__)

if TYPE_CHECKING:
    from my_utils.legacy.profiler_wrapper import *  # noqa: F403
