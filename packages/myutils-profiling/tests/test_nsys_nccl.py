"""NCCL across ranks on the real 6-rank ring all-reduce (2 nodes × 3 GPUs), recomputed from the raw kernel rows."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest

from my_utils.core.errors import InputError, UsageError
from my_utils.profiling.formats.ranks import expand_inputs
from my_utils.profiling.nsys.nccl_ops import bus_bandwidth, bus_factor, collective_of
from my_utils.profiling.nsys.run import analyze_run

MIB2 = 2 * 1024 * 1024


def _ring(real_fixtures: Any, tmp_path: Path) -> list[Path]:
    """The ring's six exports copied as report_<rank>.sqlite (rank = sorted position), as a launcher writes them."""
    out = []
    for i in range(6):
        dst = tmp_path / f"report_{i}.sqlite"
        shutil.copyfile(H.export_path(real_fixtures, f"ring:{i}"), dst)
        out.append(dst)
    return out


def _kernel(path: Path) -> tuple[int, int]:
    (row,) = H.raw(path, "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL")
    return row


def test_ring_allreduce_across_six_ranks(real_fixtures: Any, tmp_path: Path) -> None:
    files = _ring(real_fixtures, tmp_path)
    run = analyze_run([str(tmp_path / "report_%q{RANK}.sqlite")], message_bytes=MIB2)
    assert [i.rank for i in run.inputs] == list(range(6))
    assert {i.rank_source for i in run.inputs} == {"template %q{RANK}"}
    a = run.nccl
    assert a is not None and a.aligned and a.collectives == 1 and not a.unmatched
    kernels = [_kernel(f) for f in files]
    assert all(s > 10**18 for s, _ in kernels)  # this export wrote epoch times already (TIME_NORMALIZE)
    last = max(range(6), key=lambda r: kernels[r][0])
    first = min(range(6), key=lambda r: kernels[r][0])
    (c,) = a.worst_skew
    assert (c.collective, c.ranks, c.last_rank, c.first_rank) == ("AllReduce", 6, last, first)
    assert c.skew_ns == kernels[last][0] - kernels[first][0]
    assert c.duration_ns == max(e for _, e in kernels) - kernels[last][0]
    assert dict(c.waits_ns) == {r: kernels[last][0] - kernels[r][0] for r in range(6)}
    algbw = MIB2 / c.duration_ns
    assert c.algbw_gbps == pytest.approx(algbw) and c.busbw_gbps == pytest.approx(algbw * 2 * 5 / 6)
    for s in a.per_rank:
        start, end = kernels[s.rank]
        assert (s.collective, s.count, s.total_ns) == ("AllReduce", 1, end - start)
        assert s.wait_ns == kernels[last][0] - start and s.last_arrivals == (1 if s.rank == last else 0)
        assert s.busbw_gbps_mean == pytest.approx(MIB2 / (end - start) * 2 * 5 / 6)
    facts = {f.id: f for f in run.facts()}
    assert facts["nsys.nccl_last_rank:AllReduce"].value == last
    waits = sum(kernels[last][0] - s for s, _ in kernels)
    assert facts["nsys.nccl_wait:AllReduce"].value == pytest.approx(100 * waits / sum(e - s for s, e in kernels))
    tables = run.tables()
    assert len(tables["nsys_nccl_ranks"]) == 6 and len(tables["nsys_busy_device"]) == 6
    assert sorted(tables["nsys_busy_device"].column("rank")) == list(range(6))


def test_without_sizes_bus_bandwidth_is_not_measured(real_fixtures: Any, tmp_path: Path) -> None:
    _ring(real_fixtures, tmp_path)
    run = analyze_run([tmp_path])
    facts = {f.id: f for f in run.facts()}
    assert not facts["nsys.nccl_busbw:AllReduce"].measured
    assert "--nccl-bytes" in (facts["nsys.nccl_busbw:AllReduce"].not_measured or "")
    assert run.nccl is not None and all(s.busbw_gbps_mean is None for s in run.nccl.per_rank)


def test_one_export_holding_two_gpus_has_two_participants(real_fixtures: Any) -> None:
    path = real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite"
    run = analyze_run([path])
    a = run.nccl
    assert a is not None and [(p.rank, p.device) for p in a.participants] == [(0, 0), (1, 1)]
    per_dev = dict(H.raw(path, "SELECT k.deviceId, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                               "ON s.id = k.shortName WHERE s.value GLOB 'nccl*' GROUP BY k.deviceId"))
    assert {s.rank: s.count for s in a.per_rank} == {0: per_dev[0], 1: per_dev[1]} and a.collectives == 33
    assert sum(s.last_arrivals for s in a.per_rank) == 33
    assert a.unmatched == {}


def test_folder_and_glob_inputs_number_ranks_by_file_order(real_fixtures: Any, tmp_path: Path) -> None:
    # exports that recorded no launcher variable (the ring's PMI_RANK would number them: test_rank_coverage.py)
    for name, key in (("b.sqlite", "nsys/extrap__con_kernel.sqlite"), ("a.sqlite", "nsys/extrap__concurrent_s1_profile1.sqlite")):
        shutil.copyfile(real_fixtures / key, tmp_path / name)
    got = expand_inputs([tmp_path])
    assert [(p.path.name, p.rank, p.rank_source) for p in got] == [("a.sqlite", 0, "file order"),
                                                                   ("b.sqlite", 1, "file order")]
    assert [p.path.name for p in expand_inputs([str(tmp_path / "*.sqlite")])] == ["a.sqlite", "b.sqlite"]
    (tmp_path / "a.sqlite").rename(tmp_path / "job_rank7.sqlite")
    got = expand_inputs([tmp_path / "job_rank7.sqlite"])
    assert [(p.rank, p.rank_source) for p in got] == [(7, "file name")]


def test_templates_read_the_rank_and_refuse_duplicates(real_fixtures: Any, tmp_path: Path) -> None:
    src = H.export_path(real_fixtures, "ring:0")
    for name in ["run_node1_3.sqlite", "run_node0_12.sqlite"]:
        shutil.copyfile(src, tmp_path / name)
    got = expand_inputs([str(tmp_path / "run_%h_%q{OMPI_COMM_WORLD_RANK}.sqlite")])
    assert [(p.path.name, p.rank) for p in got] == [("run_node1_3.sqlite", 3), ("run_node0_12.sqlite", 12)]
    shutil.copyfile(real_fixtures / "nsys/extrap__con_kernel.sqlite", tmp_path / "x_rank3.sqlite")  # no environment
    with pytest.raises(InputError, match="one export per rank; rank 3"):
        expand_inputs([str(tmp_path / "run_%h_%q{OMPI_COMM_WORLD_RANK}.sqlite"), tmp_path / "x_rank3.sqlite"])
    with pytest.raises(UsageError, match="no file matches"):
        expand_inputs([str(tmp_path / "none_%q{RANK}.sqlite")])


@pytest.mark.parametrize(("name", "op"), [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm *, unsigned long, ncclWork *)", "AllReduce"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "SendRecv"),
    ("ncclDevKernel_AllGather_RING_LL", "AllGather"),
    ("ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)", "AllReduce"),
    ("ncclReduceScatterTreeLL128Kernel_sum_bf16", "ReduceScatter"),
    ("flash_fwd_kernel", None),
])
def test_collective_from_kernel_name(name: str, op: str | None) -> None:
    assert collective_of(name) == op


def test_bus_bandwidth_follows_nccl_tests() -> None:
    # NCCL-tests doc/PERFORMANCE.md: allreduce 2(n-1)/n; allgather, reducescatter (n-1)/n; broadcast, reduce 1
    assert bus_factor("AllReduce", 8) == pytest.approx(1.75)
    assert bus_factor("AllGather", 8) == pytest.approx(0.875) == bus_factor("ReduceScatter", 8)
    assert bus_factor("Broadcast", 8) == bus_factor("Reduce", 8) == bus_factor("SendRecv", 2) == 1.0
    assert bus_factor("Nope", 8) is None
    assert bus_bandwidth("AllReduce", 1e9, 1e9, 4) == pytest.approx((1.0, 1.5))
    # all-gather: NCCL reports the per-rank chunk; NCCL-tests' S is the whole gathered buffer
    assert bus_bandwidth("AllGather", 1e9, 1e9, 4) == pytest.approx((4.0, 3.0))
    assert bus_bandwidth("AllReduce", 1e9, 0, 4) is None
