"""Legacy import path: ``my_utils.clockSyncUtils`` is the module ``my_utils.distributed.clock_sync``."""

from typing import TYPE_CHECKING

from my_utils.core._legacy import alias_module

alias_module(__name__)

if TYPE_CHECKING:
    from my_utils.distributed.clock_sync import *  # noqa: F403
