"""Legacy import path: ``my_utils.gpu_mem_tracker`` is the module ``my_utils.memory.gpu_tracker``."""

from typing import TYPE_CHECKING

from my_utils.core._legacy import alias_module

alias_module(__name__)

if TYPE_CHECKING:
    from my_utils.memory.gpu_tracker import *  # noqa: F403
