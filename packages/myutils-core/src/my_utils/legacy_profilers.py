"""Legacy import path: ``my_utils.legacy_profilers`` (the seed's part name) is the package ``my_utils.legacy``."""

from typing import TYPE_CHECKING

from my_utils.core._legacy import alias_module

alias_module(__name__)

if TYPE_CHECKING:
    from my_utils.legacy import *  # noqa: F403
