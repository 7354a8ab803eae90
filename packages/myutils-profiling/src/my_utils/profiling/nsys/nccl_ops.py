"""NCCL collectives by kernel name, and NCCL-tests' bus-bandwidth definitions.

A communication kernel's name says its collective: ``ncclKernel_AllReduce_RING_LL_Sum_float``
(NCCL 2.8-2.18), ``ncclDevKernel_SendRecv`` / ``ncclDevKernel_AllGather_RING_LL`` (2.19+),
``ncclAllReduceRingLLKernel_sum_f32`` (2.4-2.7). :func:`collective_of` returns the
collective (``AllReduce``, ``AllGather``, ``ReduceScatter``, ``Broadcast``, ``Reduce``,
``SendRecv``, ``Send``, ``Recv``) or None.

Bus bandwidth follows NCCL-tests (``doc/PERFORMANCE.md``): ``algbw = S / t`` and
``busbw = algbw × factor(n)``, where ``S`` is the buffer size NCCL-tests reports (the
per-rank buffer for all-reduce, broadcast and reduce; the *total* buffer, ``n`` × the
per-rank chunk, for all-gather and reduce-scatter) and the factor is the Kineto collectives
analysis's own :func:`~my_utils.profiling.kineto.collectives.bus_factor` (``2(n-1)/n``
for all-reduce, ``(n-1)/n`` for all-gather, reduce-scatter and all-to-all, 1 for broadcast,
reduce and point-to-point): one definition for both analyses. NCCL's own NVTX payload reports
the per-rank size (``Message size [bytes]``: NCCL passes ``sendcount`` for all-gather and
``recvcount`` for reduce-scatter), so :func:`bus_bandwidth` takes that and scales it.
"""

from __future__ import annotations

import re

from my_utils.profiling.kineto.collectives import bus_factor

__all__ = ["COLLECTIVES", "bus_bandwidth", "bus_factor", "collective_of", "size_factor"]

_MODERN = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_LEGACY = re.compile(r"^nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv)"
                     r"(?:Ring|Tree|CollNet\w*|NVLS\w*)?(?:LL128|LL|Simple)?Kernel")
COLLECTIVES: tuple[str, ...] = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "SendRecv",
                                "Send", "Recv", "AllToAll")


def collective_of(name: str) -> str | None:
    """The NCCL collective a kernel name runs, or None when it is not an NCCL kernel."""
    head = name.split("(", 1)[0].strip()
    m = _MODERN.match(head) or _LEGACY.match(head)
    if not m:
        return None
    op = m.group(1)
    return op if op in COLLECTIVES else None


def size_factor(op: str, ranks: int) -> float:
    """NCCL-tests' ``S`` over NCCL's per-rank message size (``n`` for all-gather and reduce-scatter)."""
    return float(ranks) if op in ("AllGather", "ReduceScatter") else 1.0


def bus_bandwidth(op: str, message_bytes: float, duration_ns: float, ranks: int) -> tuple[float, float] | None:
    """``(algbw, busbw)`` in GB/s (1e9 B/s) from NCCL's per-rank message size, or None when undefined."""
    factor = bus_factor(op, ranks)
    if factor is None or duration_ns <= 0 or message_bytes < 0:
        return None
    algbw = message_bytes * size_factor(op, ranks) / duration_ns  # bytes per ns = GB/s
    return algbw, algbw * factor
