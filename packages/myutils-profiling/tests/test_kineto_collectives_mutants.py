"""The collectives' link check and the straggler kernels at their boundaries (issue 36, ``.ci/mutants/kineto.toml``).

A collective is flagged when a message of at least 1 MiB reaches under a quarter of its link;
a group as wide as the GPUs of one host stays on NVLink. The real trace of
``test_kineto_collectives.py`` sits far from each boundary, so each is tested here on a generated
broadcast (bus factor 1, so the bus bandwidth is the message over the time) on an A100 SXM4 80GB
(NVLink 300 GB/s per direction: its datasheet's 600 GB/s, both directions). A kernel is a straggler
when its slowest rank spends at least 1.2× the *median* rank's time.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from my_utils.profiling.kineto import stragglers
from my_utils.profiling.kineto.collectives import (
    FLAG_SHARE,
    MIN_FLAG_BYTES,
    collective_rows,
    link_speed,
)
from my_utils.profiling.kineto.run import read_rank

A100 = "NVIDIA A100-SXM4-80GB"


def broadcast(tmp_path: Path, floats: int, dur_us: float, group: int = 2, gpus: int = 8) -> Any:
    """One rank's trace: one broadcast of ``floats`` float32 elements taking ``dur_us`` µs, in a group of ``group``
    ranks, on a host of ``gpus`` A100s."""
    args = {"Collective name": "broadcast", "In msg nelems": floats, "Out msg nelems": floats, "Group size": group,
            "dtype": "Float", "Process Group Name": "0", "stream": 20, "correlation": 1, "device": 0}
    kernel = {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Broadcast_RING_LL", "ts": 0, "dur": dur_us,
              "pid": 0, "tid": 20, "args": args}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [kernel]}))
    d = read_rank(path).data
    (row,) = collective_rows(replace(d, context=dict(d.context, gpu=A100, gpu_count=gpus)))
    return row


def test_a_collective_at_exactly_a_quarter_of_its_link_is_not_flagged(tmp_path: Path) -> None:
    """75,000,000 bytes in 1 ms is 75 GB/s, exactly 25 % of 300 GB/s: not *under* a quarter. 1 µs longer is."""
    assert FLAG_SHARE == 0.25
    at = broadcast(tmp_path, 18_750_000, 1000.0)
    assert (at.busbw_gbps, at.link_gbps, at.link_pct) == (pytest.approx(75.0), 300.0, pytest.approx(25.0))
    assert not at.flagged
    assert broadcast(tmp_path, 18_750_000, 1001.0).flagged


def test_a_message_of_exactly_one_mib_can_be_flagged(tmp_path: Path) -> None:
    """1 MiB (262,144 floats) in 1 ms is 1.05 GB/s, far under the link: flagged; 4 bytes less is latency-bound."""
    assert MIN_FLAG_BYTES == 2**20
    row = broadcast(tmp_path, 262_144, 1000.0)
    assert row.message_bytes == 2**20 and row.flagged
    assert not broadcast(tmp_path, 262_143, 1000.0).flagged


def test_a_group_as_wide_as_one_host_stays_on_nvlink() -> None:
    """8 ranks on a host of 8 GPUs: NVLink's 300 GB/s; 9 ranks would cross the network (not measured)."""
    assert link_speed(A100, 8, 8)[0] == 300.0
    speed, why = link_speed(A100, 8, 9)
    assert speed != speed and why.startswith("not measured: 9 ranks > 8 GPUs of one host")


def _kernel_totals(totals: list[float]) -> dict[str, Any]:
    """The across-ranks straggler rows of one kernel whose total time on rank r is ``totals[r]`` (10 calls each)."""
    results = [SimpleNamespace(rank=r, kernel_stats=[SimpleNamespace(kind="computation", name="gemm", total_us=t,
                                                                     mean_us=t / 10)])
               for r, t in enumerate(totals)]
    (row,) = stragglers.across_ranks(results)["kernel_stragglers"]
    return row


def test_a_kernel_at_one_point_two_times_its_median_rank_is_a_straggler() -> None:
    """Totals 100, 100, 120 µs: the slowest is 1.2× the median (100; the mean, 106.7, would hide it)."""
    row = _kernel_totals([100.0, 100.0, 120.0])
    assert (row.median_us, row.spread, row.max_rank, row.straggler) == (100.0, 1.2, 2, True)
    assert not _kernel_totals([100.0, 100.0, 119.0]).straggler
