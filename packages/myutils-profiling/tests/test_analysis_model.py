"""AnalysisReport / Finding: the JSON contract (ARCHITECTURE.md §5), additive and strict."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from my_utils.core.errors import InputError
from my_utils.profiling.model.report import REPORT_SCHEMA_VERSION, AnalysisReport, Finding


def _report() -> AnalysisReport:
    return AnalysisReport(REPORT_SCHEMA_VERSION, "pretrain", {"overall": 90.0, "performance": 80.0},
                          [Finding("bottleneck:fwd", "bottleneck", "warning", "fwd takes 40%", "d",
                                   {"names": ["fwd"], "steps": [1, 2]}, "s")],
                          {"events": 3, "nan": math.nan}, tables={"steps": [{"step": 1, "step_time": 2.0}]})


def test_round_trip_keeps_unknown_fields_and_writes_strict_json(tmp_path: Path) -> None:
    data = _report().to_dict()
    data["from_a_newer_writer"] = {"x": 1}
    report = AnalysisReport.from_dict(data)
    assert report.extra == {"from_a_newer_writer": {"x": 1}}
    path = report.write(tmp_path)
    assert path == tmp_path / "analysis_report.json"
    text = path.read_text()
    assert "NaN" not in text and json.loads(text)["summary"]["nan"] is None
    again = AnalysisReport.load(tmp_path)
    assert again.findings == report.findings and again.to_dict()["from_a_newer_writer"] == {"x": 1}
    assert set(json.loads(text)) >= {"schema_version", "workload", "scores", "findings", "summary"}


@pytest.mark.parametrize(("mutate", "place"), [
    (lambda d: d.update(schema_version="9.0"), "schema_version"),
    (lambda d: d.update(scores={"overall": "high"}), "scores"),
    (lambda d: d["findings"][0].update(severity="fatal"), "findings[0]"),
    (lambda d: d["findings"][0].pop("title"), "findings[0]"),
    (lambda d: d.update(tables={"steps": 3}), "tables.steps"),
])
def test_bad_reports_name_the_place(mutate, place: str) -> None:  # type: ignore[no-untyped-def]
    data = _report().to_dict()
    mutate(data)
    with pytest.raises(InputError) as info:
        AnalysisReport.from_dict(data, "r.json")
    assert str(info.value).startswith(f"r.json:{place}") and "\n" not in str(info.value)


def test_load_reports_bad_json_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "analysis_report.json"
    path.write_text('{\n "schema_version": "1.0",\n oops\n}')
    with pytest.raises(InputError, match=r"analysis_report\.json:line 3"):
        AnalysisReport.load(path)


def test_facts_headline_dimensions_and_finding_fields_round_trip(tmp_path: Path) -> None:
    from my_utils.profiling.model.report import (
        Advice,
        EvidenceRow,
        Fact,
        Headline,
        Impact,
        NotMeasured,
        Verdict,
    )

    row = EvidenceRow("kineto_temporal", {"rank": 1}, {"idle_us": 732352.0, "span_us": 1732965.0})
    idle = Fact("gpu.idle:rank1", "GPU idle", 42.26, "%", "kineto", "GPU span", 1732.965, "ms", (1,), "rank 1",
                5, (row,), "732.4 ms of 1,733.0 ms")
    missing = Fact("context.cuda_driver", "CUDA driver", NotMeasured("no input records it"))
    finding = Finding("gpu:host_bound", "optimization", "critical", "GPU idle 42%", "d", {"ranks": [1]}, "s",
                      ("gpu.idle:rank1",), Impact(84.0, 0.24, "host wait per step", 5, 0.625, "torch_profiler"),
                      (Advice("use CUDA graphs", (row,), ("gpu.idle:rank1",), "idle:host_wait"),))
    head = Headline("t", (missing,), (idle,), Verdict("host", ("Host-bound",), ("gpu.idle:rank1",)), ("gpu:host_bound",))
    report = AnalysisReport(REPORT_SCHEMA_VERSION, "pretrain", {}, [finding], {}, facts=[idle, missing],
                            headline=head.to_dict(), dimensions={"memory": {"score": None, "not_measured": "x"}})
    again = AnalysisReport.load(report.write(tmp_path))
    assert again.findings == [finding] and again.facts == [idle, missing]
    assert again.fact("context.cuda_driver") == missing and not missing.measured and missing.number is None
    data = json.loads(report.to_json())
    assert data["facts"][1]["value"] is None and data["facts"][1]["not_measured"] == "no input records it"
    assert data["headline"]["verdict"]["bound"] == "host" and data["dimensions"]["memory"]["score"] is None
    # the ranking orders by the saving itself; the evidence weight breaks ties only (issue 33: a finding ranked
    # first saves at least as much as any other, whatever the steps it rests on)
    assert finding.impact.rank_value == pytest.approx(0.24)
    breakdown = Impact(None, None, "where the time is", 5, region_ms=229.3, region_share=0.66, region_of="the step")
    assert breakdown.breakdown and breakdown.rank_value == 0.0 and Impact.from_dict(breakdown.to_dict()) == breakdown
    # a 1.1 report (no facts, no impact) still loads: the new fields are additive
    old = _report().to_dict()
    for key in ("facts", "headline", "dimensions"):
        old.pop(key)
    for f in old["findings"]:
        for key in ("facts", "impact", "advice"):
            f.pop(key)
    legacy = AnalysisReport.from_dict(old)
    assert legacy.facts == [] and legacy.findings[0].impact == Impact() and legacy.findings[0].advice == ()
