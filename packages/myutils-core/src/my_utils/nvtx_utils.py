"""Legacy import path: ``my_utils.nvtx_utils`` is the module ``my_utils.tracing.nvtx_utils``."""

from typing import TYPE_CHECKING

from my_utils.core._legacy import alias_module

alias_module(__name__)

if TYPE_CHECKING:
    from my_utils.tracing.nvtx_utils import *  # noqa: F403
