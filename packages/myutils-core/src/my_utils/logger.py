"""Legacy import path: ``my_utils.logger`` is the module ``my_utils.core.logger``."""

from typing import TYPE_CHECKING

from my_utils.core._legacy import alias_module

alias_module(__name__)

if TYPE_CHECKING:
    from my_utils.core.logger import *  # noqa: F403
