"""Nsight Systems exports in the one analysis: tables, facts, findings and headline, on the real exports.

Every figure checked here is recomputed from the raw export with plain SQL and a sort-and-sweep
union (``nsys_real.py``), never with package code. Before this wiring, an nsys-only run got no
finding at all (the events carry totals without steps, which no rule reads) and no headline figure.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import nsys_real as H  # nsys_real.py beside this file, registered by conftest.py
import pytest
from typer.testing import CliRunner

from my_utils.core.events import write_events
from my_utils.profiling.analysis import AnalysisReport, MetricsAnalyzer
from my_utils.profiling.analysis.nsight.analyze import NsightInputs
from my_utils.profiling.cli import app
from my_utils.profiling.nsys.provider import read_nsys_sqlite
from my_utils.profiling.reports.headline import find_row

SAXPY = "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"
SAXPY_RANGES = ("SELECT n.end - n.start FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
                "WHERE COALESCE(n.text, s.value) = 'saxpy' AND n.eventType IN (59, 60)")
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def raw_busy(path: Path) -> tuple[int, int]:
    """(span, busy) in ns summed over devices: first start to last end, and the union of all GPU work."""
    tables = H.tables(path)
    per: dict[int, list[tuple[int, int]]] = {}
    for t in GPU_TABLES:
        if t in tables:
            for dev, s, e in H.raw(path, f"SELECT deviceId, start, end FROM {t} WHERE end >= start"):
                per.setdefault(dev, []).append((s, e))
    span = sum(max(e for _, e in iv) - min(s for s, _ in iv) for iv in per.values())
    busy = sum(H.covered(iv)[0] for iv in per.values())
    return span, busy


def analyze(paths: list[Path], **options: Any) -> AnalysisReport:
    """The analysis a user gets from ``analyze --nsys``: the provider's events and the Nsight analyses."""
    events = [e for p in paths for e in read_nsys_sqlite(p)]
    return MetricsAnalyzer(events, nsight=NsightInputs(nsys=tuple(paths), **options)).analyze()


def assert_evidence_resolves(report: AnalysisReport) -> None:
    """Every finding rests on facts of the report, and every evidence row names a row of a report table."""
    facts = {f.id: f for f in report.facts}
    for finding in report.findings:
        assert finding.facts and all(fid in facts for fid in finding.facts), finding.id
        rows = [e for fid in finding.facts for e in facts[fid].evidence] + [b for a in finding.advice for b in a.because]
        assert rows, finding.id
        for ev in rows:
            if ev.table in report.tables:
                assert find_row(report, ev) is not None, (finding.id, ev)


@pytest.fixture(scope="module")
def saxpy_cli(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("saxpy")
    path = H.export_path(real_fixtures, SAXPY)
    res = CliRunner().invoke(app, ["analyze", "--nsys", str(path), "--iteration-range", "saxpy",
                                   "--output-dir", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return {"path": path, "out": out, "json": json.loads((out / "analysis_report.json").read_text()),
            "report": AnalysisReport.load(out)}


def test_analyze_nsys_alone_writes_findings_tables_and_headline(saxpy_cli: dict[str, Any]) -> None:
    report, path = saxpy_cli["report"], saxpy_cli["path"]
    assert {p.name for p in saxpy_cli["out"].iterdir()} == {"analysis_report.json", "analysis_report.md",
                                                             "analysis_report.html", "nsys_timeline.html"}
    for name in ("nsys_busy_device", "nsys_overlap", "nsys_kernel_kinds", "nsys_copies", "nsys_cuda_api",
                 "nsys_iterations", "nsys_idle_causes", "nsys_inputs"):
        assert report.tables.get(name), name
    assert "nsys_osrt" not in report.tables  # OS runtime was not traced: no empty table ...
    osrt = report.fact("nsys.osrt_top")
    assert osrt is not None and not osrt.measured and "OS runtime" in str(osrt.value)  # ... but "not measured"
    ids = {f.id for f in report.findings}
    assert {"nsys:gpu_idle", "nsys:copies", "nsys:host_sync", "nsys:warmup_in_window", "nsys:triage"} <= ids
    assert report.headline["top_findings"] == ["nsys:gpu_idle", "nsys:host_sync", "nsys:copies"]
    assert_evidence_resolves(report)
    # the headline's figures, recomputed from the raw export
    span, busy = raw_busy(path)
    assert report.fact("gpu.busy").value == pytest.approx(100 * busy / span)
    assert report.fact("gpu.idle").value == pytest.approx(100 * (span - busy) / span)
    saxpy = sorted(d for (d,) in H.raw(path, SAXPY_RANGES))
    assert report.fact("step_time.median").value == pytest.approx(statistics.median(saxpy) / 1e6)
    assert report.fact("step_time.worst").value == pytest.approx(max(saxpy) / 1e6)
    assert report.fact("context.gpu").value == "A100 SXM4 40GB"  # TARGET_INFO_GPU: NVIDIA A100-SXM4-40GB
    assert report.headline["verdict"]["bound"] == "host"
    assert report.headline["title"] == path.name
    # a dimension the exports could not measure says so; the measured ones are scored from these findings
    dims = report.dimensions
    assert dims["performance"]["score"] is not None and dims["capture"]["score"] is not None
    assert dims["memory"]["score"] is None and dims["memory"]["not_measured"]


def test_the_warm_up_finding_names_the_first_iteration(saxpy_cli: dict[str, Any]) -> None:
    report, path = saxpy_cli["report"], saxpy_cli["path"]
    (warm,) = [f for f in report.findings if f.id == "nsys:warmup_in_window"]
    first = H.raw(path, SAXPY_RANGES + " ORDER BY n.start LIMIT 1")[0][0]
    assert warm.category == "capture" and warm.evidence["steps"] == [1]
    assert warm.evidence["first_ms"] == pytest.approx(first / 1e6)
    assert "warm-up inside the capture window" in warm.title


def test_each_export_is_opened_once(real_fixtures: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from my_utils.profiling.nsys import schema

    opened: list[str] = []
    real_init = schema.NsysExport.__init__

    def counting(self: Any, path: Any, **kw: Any) -> None:
        opened.append(Path(path).name)
        real_init(self, path, **kw)

    monkeypatch.setattr(schema.NsysExport, "__init__", counting)
    folder = H.export_path(real_fixtures, "ring:0").parent
    res = CliRunner().invoke(app, ["analyze", "--nsys", str(folder), "--output-dir", str(tmp_path), "--formats",
                                   "json", "--quiet"])
    assert res.exit_code == 0, res.output
    assert sorted(opened) == sorted(p.name for p in folder.glob("*.sqlite")) and len(opened) == 6
    report = AnalysisReport.load(tmp_path)
    assert {e for e in report.summary["sources"]} == {"nsys_sqlite"} and report.summary["ranks"] == list(range(6))


def test_multi_rank_ring_names_the_last_rank(real_fixtures: Any) -> None:
    paths = [H.export_path(real_fixtures, k) for k in H.RING]
    report = analyze(paths)
    assert len(report.tables["nsys_nccl_ranks"]) == 6
    # the last to arrive at the AllReduce, from each raw export (these exports wrote UTC epoch times already)
    arrivals = {}
    for rank, p in enumerate(sorted(paths)):
        (start,), = H.raw(p, "SELECT MIN(k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                             "ON s.id = k.shortName WHERE s.value GLOB 'nccl*AllReduce*'")
        assert start > 10**18
        arrivals[rank] = start
    last = max(arrivals, key=arrivals.__getitem__)
    assert next(r for r in report.tables["nsys_nccl_ranks"] if r["rank"] == last)["last_arrivals"] == 1
    # the ranks of one host arrive together: the straggler is that host (test_nsys_nccl_hosts), never one rank of it
    skew = next(f for f in report.findings if f.id == "nsys:host_skew")
    assert last in skew.evidence["ranks"] and skew.category == "imbalance"
    assert not any(f.id.startswith("nsys:rank_skew") for f in report.findings)
    # no computation kernel on any rank: exposed communication has nothing to overlap with (no DDP advice)
    assert not any(f.id.startswith("nsys:comm_exposed") for f in report.findings)
    assert_evidence_resolves(report)
    span, busy = zip(*(raw_busy(p) for p in paths), strict=True)
    assert report.fact("gpu.idle").value == pytest.approx(100 * (sum(span) - sum(busy)) / sum(span))


@pytest.mark.parametrize("key", [k for k in H.EXPORTS if not k.startswith("ring:")])
def test_every_export_has_findings_with_evidence(real_fixtures: Any, key: str) -> None:
    path = H.export_path(real_fixtures, key)
    report = analyze([path])
    assert report.findings and "nsys:triage" in {f.id for f in report.findings}  # never "100, no findings"
    assert_evidence_resolves(report)
    span, busy = raw_busy(path)
    assert report.fact("gpu.busy").value == pytest.approx(100 * busy / span)
    for dim, entry in report.dimensions.items():
        assert entry["score"] is not None or entry["not_measured"], dim


def test_the_events_name_the_exports_beside_them(real_fixtures: Any, tmp_path: Path) -> None:
    path = H.export_path(real_fixtures, SAXPY)
    run = tmp_path / "run"
    run.mkdir()
    (run / path.name).symlink_to(path)
    write_events(run / "metrics_events.jsonl", read_nsys_sqlite(path))
    report = MetricsAnalyzer(run / "metrics_events.jsonl").analyze()
    assert report.tables.get("nsys_busy_device") and "nsys:gpu_idle" in {f.id for f in report.findings}
    assert report.inputs["nsight_files"] == [path.name]
    # events whose export is not beside them: said, and the figures are "not measured", never 0
    alone = tmp_path / "alone"
    alone.mkdir()
    write_events(alone / "metrics_events.jsonl", read_nsys_sqlite(path))
    report = MetricsAnalyzer(alone / "metrics_events.jsonl").analyze()
    assert "not found beside them" in report.summary["nsight"] and path.name in report.summary["nsight"]
    assert not report.fact("gpu.busy").measured and not report.findings


def test_a_bad_export_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "report.sqlite"
    bad.write_text("Generating '/tmp/nsys-report.qdstrm'\nProcessing events...\n")
    res = CliRunner().invoke(app, ["analyze", "--nsys", str(bad), "--output-dir", str(tmp_path / "out")])
    assert res.exit_code == 2 and "nsys export --type sqlite" in res.output
    assert not (tmp_path / "out").exists()


def test_ingest_analyze_runs_the_nsight_analyses(real_fixtures: Any, tmp_path: Path) -> None:
    path = H.export_path(real_fixtures, SAXPY)
    config = tmp_path / "collect.json"
    config.write_text(json.dumps({"output_dir": str(tmp_path / "out"),
                                  "providers": [{"provider": "nsys_sqlite", "input": str(path)}]}))
    res = CliRunner().invoke(app, ["ingest", "--config", str(config), "--analyze", "--quiet"])
    assert res.exit_code == 0, res.output
    report = AnalysisReport.load(tmp_path / "out")
    assert report.tables.get("nsys_busy_device") and "nsys:gpu_idle" in {f.id for f in report.findings}
    assert report.fact("gpu.busy").measured and "not analysed" not in report.summary.get("nsight", "")


def test_iteration_idle_names_the_host_wait_when_os_runtime_was_traced() -> None:
    # no public export holds NVTX iterations with idle GPU windows and OS-runtime tracing: the facts are built
    # here in the shape nsys.summary_facts writes them (the rule reads facts only)
    from my_utils.profiling.analysis.nsight.rules import nsight_findings
    from my_utils.profiling.model.report import EvidenceRow, Fact, NotMeasured

    ev = (EvidenceRow("nsys_iterations", {"rank": 0, "pid": 7}, {"iterations": 40}),)
    idle = Fact("nsys.iteration_gpu_idle:rank0:pid7", "GPU idle inside the iterations' GPU windows", 35.0, "%",
                "nsys", "summed GPU windows of the iterations", 4000.0, "ms", (0,), steps=40, evidence=ev)
    osrt = Fact("nsys.osrt_top:rank0", "OS runtime wait with the most time", "pthread_cond_wait", ranks=(0,),
                source="nsys", detail="812.000 ms in 40 call(s) on 3 thread(s)",
                evidence=(EvidenceRow("nsys_osrt", {"rank": 0, "name": "pthread_cond_wait"}, {"total_ns": 812e6}),))
    (f,) = [f for f in nsight_findings({idle.id: idle, osrt.id: osrt}, {}) if f["id"] == "nsys:iteration_idle"]
    assert "while the host waits in pthread_cond_wait: a data-loader stall?" in f["title"]
    assert f["facts"] == [idle.id, osrt.id] and f["advice"][0]["kind"] == "data_loading"
    assert f["impact"]["ms_per_step"] == pytest.approx(4000.0 * 0.35 / 40) and f["impact"]["steps"] == 40
    untraced = Fact(osrt.id, osrt.label, NotMeasured("OS runtime calls were not traced (nsys profile --trace osrt)"))
    (g,) = [f for f in nsight_findings({idle.id: idle, osrt.id: untraced}, {}) if f["id"] == "nsys:iteration_idle"]
    assert "data-loader" not in g["title"] and "--trace cuda,nvtx,osrt" in g["suggestion"] and g["facts"] == [idle.id]
