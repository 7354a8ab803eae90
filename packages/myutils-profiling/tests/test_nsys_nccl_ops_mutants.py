"""NCCL sizes and bandwidths of the Nsight Systems analysis per collective kind (issue 36, ``.ci/mutants/nsys.toml``).

NCCL's NVTX payload gives each rank's message size; NCCL-tests' ``S`` is ``n`` × that for
AllGather and ReduceScatter (their per-rank chunk) and the message itself for the others, and the
bus bandwidth scales ``S / t`` by the bus factor (``2(n−1)/n``, ``(n−1)/n`` or 1). Each kind is
checked here against those definitions on 4 ranks (1 MB in 1 ms: 1 GB/s per rank's message),
not only AllReduce; a group of one rank has no bandwidth; ranks disagreeing on a size keep the
largest and say so.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from my_utils.profiling.nsys.nccl import _across_size
from my_utils.profiling.nsys.nccl_ops import bus_bandwidth, size_factor
from my_utils.profiling.nsys.nccl_sizes import SizeTally

#: collective -> (NCCL-tests' S over NCCL's per-rank size on 4 ranks, bus factor on 4 ranks)
NCCL_TESTS = {"AllReduce": (1, 2 * 3 / 4), "AllGather": (4, 3 / 4), "ReduceScatter": (4, 3 / 4),
              "Broadcast": (1, 1.0), "Reduce": (1, 1.0), "SendRecv": (1, 1.0), "Send": (1, 1.0), "Recv": (1, 1.0)}


@pytest.mark.parametrize(("collective", "s_factor", "bus"), [(k, *v) for k, v in NCCL_TESTS.items()])
def test_every_collectives_size_and_bus_factor_are_nccl_tests(collective: str, s_factor: int, bus: float) -> None:
    """1,000,000 bytes per rank in 1,000,000 ns: algbw = S / t = s_factor GB/s, busbw = algbw × the bus factor."""
    assert size_factor(collective, 4) == s_factor
    algbw, busbw = bus_bandwidth(collective, 1_000_000, 1_000_000, 4)  # type: ignore[misc]
    assert (algbw, busbw) == (pytest.approx(s_factor * 1.0), pytest.approx(s_factor * bus))


def test_a_group_of_one_rank_has_no_bandwidth() -> None:
    """Its group size is unknown (an all-reduce's factor would read 0): the row keeps its size and time only."""
    tally = SizeTally({0: SimpleNamespace(gpus=lambda: [])}, {0: 0})
    tally.add(0, "AllReduce", 1 << 20, "NCCL NVTX payload", 1_000_000)
    (one,) = tally.rows({"AllReduce": 1})
    assert (one.message_bytes, one.algbw_gbps, one.busbw_gbps) == (1 << 20, None, None)
    (two,) = tally.rows({"AllReduce": 2})
    assert two.algbw_gbps == pytest.approx((1 << 20) / 1_000_000) and two.busbw_gbps == pytest.approx(two.algbw_gbps)


def test_ranks_disagreeing_on_a_size_keep_the_largest_and_say_so() -> None:
    rows = [("AllReduce", 1, 0, 0, 10, 1024, "NCCL NVTX payload"), ("AllReduce", 1, 1, 0, 10, 4096, "NCCL NVTX payload")]
    assert _across_size(rows) == (4096, "NCCL NVTX payload (ranks differ: 1024..4096 B, the largest used)")
