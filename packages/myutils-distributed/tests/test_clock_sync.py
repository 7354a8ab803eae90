"""ClockSynchronizer's misuse errors in one process (its real runs are in test_gloo_ranks.py)."""

from __future__ import annotations

import pytest

from my_utils.core.errors import UsageError
from my_utils.distributed.clock_align import align_clocks
from my_utils.distributed.clock_sync import ClockSynchronizer


def test_sync_before_init_process_group_says_what_to_do() -> None:
    with pytest.raises(UsageError, match=r"torch.distributed is not initialised; call .*init_process_group"):
        ClockSynchronizer.sync(is_server=False, peer_rank=0)
    with pytest.raises(UsageError, match=r"torch\.distributed is not initialised"):
        align_clocks()


def test_too_few_rounds() -> None:
    with pytest.raises(UsageError, match="rounds=3; use more than 5"):
        ClockSynchronizer.measure(True, 1, rounds=3)


def test_legacy_path_is_this_module() -> None:
    import my_utils
    import my_utils.clockSyncUtils as legacy
    from my_utils.distributed import clock_sync

    assert legacy is clock_sync
    assert my_utils.ClockSynchronizer is ClockSynchronizer
    assert my_utils.SocketClockSynchronizer is clock_sync.SocketClockSynchronizer
