"""AnalysisReport / Finding: the JSON contract (ARCHITECTURE.md §5), additive and strict."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from my_utils.core.errors import InputError
from my_utils.profiling.analysis.model import REPORT_SCHEMA_VERSION, AnalysisReport, Finding


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
