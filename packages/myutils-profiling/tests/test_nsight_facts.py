"""Run-level Nsight facts and the numbers issue 33 found wrong, each checked against the raw exports (sqlite3)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest

from my_utils.profiling.analysis.nsight.analyze import NsightInputs, analyze_nsight
from my_utils.profiling.analysis.nsight.rules import nsight_findings

H100 = "nsys/nsysai__mfu_2gpu_before.sqlite"


def run(*paths: Any) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    result = analyze_nsight(NsightInputs(nsys=tuple(paths)))
    facts = {f.id: f for f in result.facts}
    return facts, result.tables, nsight_findings(facts, result.tables)


def test_kernels_top_names_the_dominant_kernel(real_fixtures: Any) -> None:
    path = real_fixtures / H100
    per: dict[str, list[int]] = defaultdict(list)
    for name, dur in H.raw(path, "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                 "JOIN StringIds s ON s.id = k.shortName"):
        per[name].append(dur)
    total = sum(sum(v) for v in per.values())
    name = max(per, key=lambda n: sum(per[n]))
    facts, _tables, findings = run(path)
    top = facts["kernels.top"]
    assert top.label == f"kernel time in {name}" and name in top.detail
    assert top.number == pytest.approx(100.0 * sum(per[name]) / total)  # CASES.md: flash_fwd_kernel, 51%
    assert top.denominator_value == pytest.approx(total / 1e6)
    assert f"{len(per[name])} launch" in top.detail
    triage = next(f for f in findings if f["id"] == "nsys:triage")
    assert triage["evidence"]["bound"] == "compute" and name in triage["title"]  # named up front, not in a detail


def _raw_ncu(path: Any) -> dict[str, dict[str, dict[str, float]]]:
    """kernel -> launch id -> metric -> value, read with the csv module after the preamble (thousands commas)."""
    import csv
    import io

    text = path.read_text(encoding="utf-8", errors="replace")
    body = text[text.index('"ID","Process ID"'):]
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in csv.DictReader(io.StringIO(body)):
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        out[row["Kernel Name"]][row["ID"]][row["Metric Name"]] = value
    return out


def test_ncu_percentages_are_weighted_by_duration_and_launches_are_not_steps(real_fixtures: Any) -> None:
    path = real_fixtures / "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt"
    raw = _raw_ncu(path)
    kernel, launches = next((k, v) for k, v in raw.items() if len(v) >= 2
                            and len({m["gpu__time_duration.sum"] for m in v.values()}) > 1)
    dur = [m["gpu__time_duration.sum"] for m in launches.values()]
    mem = [m["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] for m in launches.values()]
    weighted = sum(d * m for d, m in zip(dur, mem, strict=True)) / sum(dur)
    assert abs(weighted - sum(mem) / len(mem)) > 0.5  # the two means differ on this kernel: the test can tell
    result = analyze_nsight(NsightInputs(ncu=(path,)))
    (row,) = [r for r in result.tables["ncu_kernels"] if r["kernel"] == kernel]
    assert row["sol_memory_pct"] == pytest.approx(weighted)
    facts = {f.id: f for f in result.facts}
    bound = facts[f"ncu.bound:{kernel[:120]}"]
    assert bound.steps is None and f"{len(launches)} launches" in bound.aggregate  # launches are not steps
    findings = nsight_findings(facts, result.tables)
    for f in findings:
        if f["impact"].get("share_of_step") is not None:
            assert "profiled kernels' total time" in f["impact"]["denominator"]  # never "of the median step"


def test_short_kernels_count_kernels_only(real_fixtures: Any) -> None:
    # saxpy: kernels, copies and sets; only kernels are launches that can run shorter than their call
    path = real_fixtures / "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"
    calls = {(tid >> 24, corr): e - s for tid, corr, s, e in H.raw(
        path, "SELECT globalTid, correlationId, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    kernels = H.raw(path, "SELECT globalPid, correlationId, end - start FROM CUPTI_ACTIVITY_KIND_KERNEL")
    matched = [(d, calls[(pid >> 24, corr)]) for pid, corr, d in kernels if (pid >> 24, corr) in calls]
    copies = H.raw(path, "SELECT (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY) + "
                         "(SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET)")[0][0]
    assert copies > 0 and matched
    facts, _tables, _findings = run(path)
    short = facts["launch.short_kernels"]
    assert short.denominator_value == len(matched)  # copies and sets are not counted
    assert short.number == pytest.approx(100.0 * sum(1 for d, c in matched if d < c) / len(matched))


def test_ranks_are_said_with_where_their_numbers_come_from(real_fixtures: Any) -> None:
    ring = H.ring_by_rank(real_fixtures)  # rank order: the PMI_RANK each export recorded, not the sorted names
    assert not any("rank" in p.name for p in ring)  # nothing in the names: the recorded PMI_RANK numbers them
    facts, _tables, findings = run(*ring)
    ranks = facts["context.ranks"]
    assert ranks.measured and "ranks 0-5" in ranks.value and "PMI_RANK that nsys recorded" in ranks.detail
    named = [f for f in findings if any(isinstance(r, int) for r in f["evidence"].get("ranks") or [])]
    assert named and not any("file order" in f["detail"] for f in named)  # real ranks need no caveat
    # one export holding two processes on two devices: two ranks, not "not measured"
    path = real_fixtures / H100
    pids = H.raw(path, "SELECT COUNT(DISTINCT globalPid), COUNT(DISTINCT deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0]
    assert pids == (2, 2)
    facts, _tables, _findings = run(path)
    assert facts["context.ranks"].value == "ranks 0-1 (2 ranks)" and "numbered by device" in facts["context.ranks"].detail


def test_the_world_size_is_the_launchers(real_fixtures: Any) -> None:
    ring = H.ring_by_rank(real_fixtures)
    sizes = {H.raw(p, "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE' "
                      "AND value LIKE 'PMI_SIZE=%'")[0][0].split("=", 1)[1].strip('"') for p in ring}
    assert sizes == {"6"}  # read with SQL alone: every export recorded PMI_SIZE=6
    facts, _tables, _findings = run(*ring)
    assert facts["context.world_size"].value == 6 and "6 of 6" in facts["context.world_size"].detail
    one, _t, _f = run(H.export_path(real_fixtures, "nsys/nsysai__mfu_2gpu_before.sqlite"))
    assert "context.world_size" not in one  # no launcher variable recorded: no world size guessed


def test_nccl_skew_waits_are_in_milliseconds(real_fixtures: Any) -> None:
    ring = H.ring_by_rank(real_fixtures)  # rank order: the PMI_RANK each export recorded, not the sorted names
    arrive = [H.raw(p, "SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] for p in ring]
    _facts, tables, _findings = run(*ring)
    (row,) = tables["nsys_nccl_skew"]
    assert "waits_ns" not in row
    got = {int(part.split(":")[0].split()[1]): float(part.split(":")[1]) for part in row["waits_ms"].split(";")}
    assert got == {r: pytest.approx((max(arrive) - a) / 1e6, abs=5e-4) for r, a in enumerate(arrive)}


@pytest.mark.parametrize(("key", "implausible"), [("nsys/extrap__concurrent_s1_profile1.sqlite", True),
                                                   ("nsys/extrap__con_kernel.sqlite", False)])
def test_a_set_faster_than_the_gpu_memory_is_implausible(real_fixtures: Any, key: str, implausible: bool) -> None:
    path = real_fixtures / key
    nbytes, ns = H.raw(path, "SELECT SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMSET")[0]
    ((bw,),) = H.raw(path, "SELECT memoryBandwidth FROM TARGET_INFO_GPU WHERE smCount > 0")
    assert (nbytes / ns > bw / 1e9) is implausible  # GB/s against the GPU's own memory bandwidth (no table row)
    facts, tables, findings = run(path)
    (row,) = [r for r in tables["nsys_copies"] if r["op"] == "memset"]
    assert row["limit_gbps"] == pytest.approx(bw / 1e9)
    assert bool(row["implausible"]) is implausible
    fact = facts["nsys.copy_bandwidth:memset:device"]
    assert fact.measured is not implausible
    if implausible:
        assert f"{nbytes / ns:,.1f} GB/s" in fact.value.reason and f"{bw / 1e9:,.1f} GB/s" in fact.value.reason
        assert not any("memset" in f["title"] or fact.id in f["facts"] for f in findings)  # nothing built on it
