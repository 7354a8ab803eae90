"""The one line that tells an ncu CSV table: shared by the sniffer (formats) and the ncu home's reader.

Below both, so that sniffing a file's kind never imports the ncu home.
"""

from __future__ import annotations

__all__ = ["is_header"]


def is_header(line: str) -> bool:
    """Whether ``line`` is the header of an ncu CSV table (``"ID","Process ID",...``)."""
    s = line.lstrip("\ufeff").lstrip()
    return s.startswith('"ID","Process ID"') or s.startswith("ID,Process ID")
