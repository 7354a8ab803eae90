"""myutils-core: the logger, the timer, trace conversion, events and the plugin system.

Importing this package is light (no torch, numpy, pandas or plotly): the public names below
are resolved from their modules on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core._version import __version__
from my_utils.core.lazy import lazy_exports

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "GlobalLogger": "my_utils.core.logger",
    "get_global_logger": "my_utils.core.logger",
    "MyTimer": "my_utils.core.timer",
    "TimedRegion": "my_utils.core.timer",
    "global_timer": "my_utils.core.timer",
    "csv_to_trace": "my_utils.core.trace",
    "ChecksumUtils": "my_utils.core.debug",
    "DumpTensorIO": "my_utils.core.debug",
    "PROFILE_CSV_COLUMNS": "my_utils.core.profile_csv",
    "ProfileRow": "my_utils.core.profile_csv",
    "iter_profile_rows": "my_utils.core.profile_csv",
    "read_profile_csv": "my_utils.core.profile_csv",
}

__all__ = ["__version__", *_EXPORTS]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from my_utils.core.debug import ChecksumUtils as ChecksumUtils
    from my_utils.core.debug import DumpTensorIO as DumpTensorIO
    from my_utils.core.logger import GlobalLogger as GlobalLogger
    from my_utils.core.logger import get_global_logger as get_global_logger
    from my_utils.core.profile_csv import PROFILE_CSV_COLUMNS as PROFILE_CSV_COLUMNS
    from my_utils.core.profile_csv import ProfileRow as ProfileRow
    from my_utils.core.profile_csv import iter_profile_rows as iter_profile_rows
    from my_utils.core.profile_csv import read_profile_csv as read_profile_csv
    from my_utils.core.timer import MyTimer as MyTimer
    from my_utils.core.timer import TimedRegion as TimedRegion
    from my_utils.core.timer import global_timer as global_timer
    from my_utils.core.trace import csv_to_trace as csv_to_trace
