"""The seed's ``my_utils.utils`` / ``my_utils.core.utils``: re-exports of the logger, timer and helpers.

``my_utils.utils`` is this very module (a flat legacy alias). New code imports from the home
modules (``my_utils.core.timer``, ``my_utils.core.logger``, ...).
"""

from my_utils.core.debug import ChecksumUtils, DumpTensorIO
from my_utils.core.logger import GlobalLogger, get_global_logger
from my_utils.core.timer import MyTimer, TimedRegion, global_timer
from my_utils.core.trace import csv_to_trace

__all__ = [
    "ChecksumUtils",
    "DumpTensorIO",
    "GlobalLogger",
    "MyTimer",
    "TimedRegion",
    "csv_to_trace",
    "get_global_logger",
    "global_timer",
]
