"""myutils-distributed: clock sync across ranks and machines, an etcd barrier, padding, stragglers.

Importing this package is light (no torch, no etcd client): the names below are resolved
from their modules on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports
from my_utils.distributed._version import __version__

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "ClockSynchronizer": "my_utils.distributed.clock_sync",
    "ClockSyncTimeout": "my_utils.distributed.clock_sync",
    "SocketClockSynchronizer": "my_utils.distributed.socket_clock",
    "ClockEstimate": "my_utils.distributed.clock_estimate",
    "ClockSample": "my_utils.distributed.clock_estimate",
    "DriftEstimate": "my_utils.distributed.clock_estimate",
    "estimate_drift": "my_utils.distributed.clock_estimate",
    "estimate_offset": "my_utils.distributed.clock_estimate",
    "align_clocks": "my_utils.distributed.clock_align",
    "CLOCK_SYNC_EVENT_TYPE": "my_utils.distributed.clock_record",
    "ClockSyncRecord": "my_utils.distributed.clock_record",
    "parse_clock_sync_row": "my_utils.distributed.clock_record",
    "record_clock_sync": "my_utils.distributed.clock_record",
    "EtcdBarrier": "my_utils.distributed.etcd_barrier",
    "BarrierTimeout": "my_utils.distributed.etcd_barrier",
    "EtcdStore": "my_utils.distributed.kv_store",
    "KeyValueStore": "my_utils.distributed.kv_store",
    "StoreUnavailable": "my_utils.distributed.kv_store",
    "all_gather_variable": "my_utils.distributed.padding",
    "pad_to": "my_utils.distributed.padding",
    "unpad": "my_utils.distributed.padding",
    "analyze_stragglers": "my_utils.distributed.stragglers.analysis",
    "analyze_rank_timings": "my_utils.distributed.stragglers.timings",
    "stragglers_of": "my_utils.distributed.stragglers.run",
    "StragglerReport": "my_utils.distributed.stragglers.model",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from my_utils.distributed.clock_align import align_clocks as align_clocks
    from my_utils.distributed.clock_estimate import ClockEstimate as ClockEstimate
    from my_utils.distributed.clock_estimate import ClockSample as ClockSample
    from my_utils.distributed.clock_estimate import DriftEstimate as DriftEstimate
    from my_utils.distributed.clock_estimate import estimate_drift as estimate_drift
    from my_utils.distributed.clock_estimate import estimate_offset as estimate_offset
    from my_utils.distributed.clock_record import CLOCK_SYNC_EVENT_TYPE as CLOCK_SYNC_EVENT_TYPE
    from my_utils.distributed.clock_record import ClockSyncRecord as ClockSyncRecord
    from my_utils.distributed.clock_record import parse_clock_sync_row as parse_clock_sync_row
    from my_utils.distributed.clock_record import record_clock_sync as record_clock_sync
    from my_utils.distributed.clock_sync import ClockSynchronizer as ClockSynchronizer
    from my_utils.distributed.clock_sync import ClockSyncTimeout as ClockSyncTimeout
    from my_utils.distributed.etcd_barrier import BarrierTimeout as BarrierTimeout
    from my_utils.distributed.etcd_barrier import EtcdBarrier as EtcdBarrier
    from my_utils.distributed.kv_store import EtcdStore as EtcdStore
    from my_utils.distributed.kv_store import KeyValueStore as KeyValueStore
    from my_utils.distributed.kv_store import StoreUnavailable as StoreUnavailable
    from my_utils.distributed.padding import all_gather_variable as all_gather_variable
    from my_utils.distributed.padding import pad_to as pad_to
    from my_utils.distributed.padding import unpad as unpad
    from my_utils.distributed.socket_clock import SocketClockSynchronizer as SocketClockSynchronizer
    from my_utils.distributed.stragglers.analysis import analyze_stragglers as analyze_stragglers
    from my_utils.distributed.stragglers.model import StragglerReport as StragglerReport
    from my_utils.distributed.stragglers.run import stragglers_of as stragglers_of
    from my_utils.distributed.stragglers.timings import analyze_rank_timings as analyze_rank_timings
