"""NcuCsvMetricsProvider: Nsight Compute ``--csv`` exports (details page, long or raw/wide).

The parsing lives with the Nsight Compute analyses (:mod:`my_utils.profiling.ncu.csv_read`:
every layout, program output before the header, rule rows, ``--page raw``); this provider
finds the files and returns their events: ``ncu:<metric>`` per metric value and
``ncu.rule:<rule>`` per rule row with its estimated speedup.
"""

from __future__ import annotations

from pathlib import Path

from my_utils.core.errors import UnsupportedInputError
from my_utils.core.events import MetricEvent
from my_utils.profiling.formats._files import FileProviderBase, read_head
from my_utils.profiling.formats.ncu_header import is_header
from my_utils.profiling.ncu.csv_read import read_ncu_csv

__all__ = ["NcuCsvMetricsProvider", "read_ncu_csv"]
_SNIFF_BYTES = 1 << 20  # program output before the header rarely exceeds this


class NcuCsvMetricsProvider(FileProviderBase):
    """Metrics from Nsight Compute CSV exports (a file, or a folder of ``.csv``/``.txt`` files)."""

    name = "ncu_csv"
    # .txt/.log: ncu's stdout redirected to a file (`ncu --csv ... > run.log`), read when named directly
    patterns = ("*.csv", "*.txt", "*.log")
    what = "ncu CSV export"

    def in_folder(self, file: Path) -> bool:
        """``.csv`` files are all read (and refused when not ncu); ``.txt``/``.log`` only when they hold the header.

        Console output (no ``--csv``) and unrelated notes beside the exports are left out
        of a folder read; named directly, they are refused with the reason.
        """
        if file.name.lower().endswith((".csv", ".csv.txt")):
            return True
        try:
            with open(file, "rb") as fh:
                head = fh.read(_SNIFF_BYTES)
        except OSError:
            return True  # unreadable: let the read report it
        return any(is_header(line) for line in head.decode("utf-8", errors="replace").splitlines())

    def sniff(self, file: Path) -> None:
        """Binary files are refused at once (the header search needs text)."""
        if b"\x00" in read_head(file, 4096):
            raise UnsupportedInputError(file, None, "an ncu CSV export (text); found binary data")

    def _read_files(self, files: list[Path]) -> list[MetricEvent]:
        out: list[MetricEvent] = []
        for f in files:
            out.extend(read_ncu_csv(f, self.rank))
        return out
