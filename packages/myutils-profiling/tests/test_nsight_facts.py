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
