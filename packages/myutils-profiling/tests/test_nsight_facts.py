"""Run-level Nsight facts and the numbers issue 33 found wrong, each checked against the raw exports (sqlite3)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest

from my_utils.profiling.analysis.nsight import NsightInputs, analyze_nsight
from my_utils.profiling.analysis.nsight_rules import nsight_findings

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
