"""Legacy import path: ``my_utils.memory_snapshot`` is the module ``my_utils.memory.snapshot``."""

from typing import TYPE_CHECKING

from my_utils.core._legacy import alias_module

alias_module(__name__)

if TYPE_CHECKING:
    from my_utils.memory.snapshot import *  # noqa: F403
