"""Put every rank of a process group on one reference rank's clock, and write it down.

``align_clocks()`` is the one call a training script makes after ``init_process_group`` and
``GlobalLogger().setup(...)``: the reference rank serves each other rank in turn, each rank
applies its offset to its GlobalLogger and records it as a ``CLOCK_SYNC`` row (see
``clock_record``), and the estimate (offset ± uncertainty) is returned.
"""

from __future__ import annotations

import time
from typing import Any

from my_utils.core.errors import UsageError
from my_utils.distributed.clock_estimate import ClockEstimate
from my_utils.distributed.clock_record import record_clock_sync
from my_utils.distributed.clock_sync import (
    DEFAULT_KEEP,
    DEFAULT_ROUNDS,
    DEFAULT_TIMEOUT_S,
    Clock,
    ClockSynchronizer,
)

__all__ = ["align_clocks"]


def align_clocks(
    reference_rank: int = 0,
    group: Any = None,
    *,
    logger: Any = None,
    step: int = 0,
    apply: bool = True,
    record: bool = True,
    rounds: int = DEFAULT_ROUNDS,
    keep: int = DEFAULT_KEEP,
    timeout: float = DEFAULT_TIMEOUT_S,
    clock: Clock | None = None,
) -> ClockEstimate:
    """Sync every rank of ``group`` against ``reference_rank`` (global ranks); return this rank's estimate.

    Collective: every rank of the group must call it. The reference rank gets offset 0 ± 0.
    ``apply`` sets ``GlobalLogger.set_time_offset``; ``record`` writes the ``CLOCK_SYNC`` row.
    Ranks wait for their turn: ``timeout`` bounds each wait, so allow for ``rounds`` round trips
    per rank before yours.
    """
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise UsageError("align_clocks: torch.distributed is not initialised; call init_process_group(...) first")
    members = dist.get_process_group_ranks(group) if group is not None else list(range(dist.get_world_size()))
    if reference_rank not in members:
        raise UsageError(f"align_clocks(reference_rank={reference_rank}): not a rank of the group {members}")
    me = dist.get_rank()
    options: dict[str, Any] = {"rounds": rounds, "keep": keep, "timeout": timeout, "clock": clock}
    if me == reference_rank:
        for peer in members:
            if peer != reference_rank:
                ClockSynchronizer.measure(True, peer, group, **options)
        estimate = ClockEstimate.reference(_now(clock), reference_rank)
    else:
        estimate = ClockSynchronizer.measure(False, reference_rank, group, **options)
    if record or apply:
        if record:
            record_clock_sync(estimate, reference_rank, logger=logger, step=step, apply=apply)
        else:
            _logger(logger).set_time_offset(estimate.offset_s)
    return estimate


def _now(clock: Clock | None) -> float:
    return (clock or time.time_ns)() / 1e9


def _logger(logger: Any) -> Any:
    if logger is not None:
        return logger
    from my_utils.core.logger import GlobalLogger

    return GlobalLogger()
