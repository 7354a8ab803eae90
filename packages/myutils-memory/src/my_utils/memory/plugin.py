"""The built-in plugin of myutils-memory, registered through the ``my_utils.plugins`` entry point.

Kept import-light: it only describes components (``"module:Class"`` strings).
"""

from __future__ import annotations
