"""Formats: what each tool's files are, told by their content (the first layer of ARCHITECTURE.md §9).

The readers themselves still live in ``providers/``, ``nsys/`` and ``ncu/``; this package holds
what decides which of them a file goes to (``sniff``), how ``PATH...`` arguments become files
(``discover``), and the conversions a file needs before a reader can take it (``nsys_rep``).
"""

from my_utils.profiling.formats.kinds import FileKind, KindInfo, Role
from my_utils.profiling.formats.sniff import Sniffed, sniff

__all__ = ["FileKind", "KindInfo", "Role", "Sniffed", "sniff"]
