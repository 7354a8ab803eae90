"""from_config, the ingest command, the shipped example config and `myutils plugins run`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core.errors import ConfigError
from my_utils.profiling import AnalysisReport, MetricsCollector, read_events
from my_utils.profiling.examples import example_config_path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from my_utils.profiling.cli import main; main()", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_example_config_ingests(tmp_path: Path) -> None:
    result = _cli("ingest", "--config", str(example_config_path()), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = read_events(tmp_path / "metrics_out" / "metrics_events.jsonl")
    assert {e.source for e in events} == {"mytimer", "torch_profiler", "table_csv"}
    assert {e.run_id for e in events} == {"collector-config-example"}
    assert "wrote" in result.stdout and "Traceback" not in result.stderr


def test_ingest_analyze_writes_the_report_beside_the_events(tmp_path: Path) -> None:
    result = _cli("ingest", "--config", str(example_config_path()), "--analyze", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "metrics_out"
    report = AnalysisReport.load(out / "analysis_report.json")
    assert "wrote metrics_out/analysis_report.json" in result.stdout
    assert report.inputs["events"] == len(read_events(out / "metrics_events.jsonl"))
    assert set(report.summary["sources"]) == {"mytimer", "torch_profiler", "table_csv"}
    assert report.summary["rule_errors"] == [] and "Traceback" not in result.stderr


def test_analyze_command_and_workloads(tmp_path: Path) -> None:
    assert _cli("ingest", "--config", str(example_config_path()), "-q", cwd=tmp_path).returncode == 0
    events = tmp_path / "metrics_out" / "metrics_events.jsonl"
    for workload in ("pretrain", "finetune", "inference"):
        out = tmp_path / workload
        result = _cli("analyze", "--events", str(events), "--workload", workload, "--output-dir", str(out),
                      "--formats", "json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert AnalysisReport.load(out).workload == workload
    pre = AnalysisReport.load(tmp_path / "pretrain")
    inf = AnalysisReport.load(tmp_path / "inference")
    assert len(inf.findings) >= len(pre.findings)  # inference thresholds are tighter
    # default formats: the JSON report and, rendered from it, Markdown and HTML
    result = _cli("analyze", "--events", str(events), "--output-dir", str(tmp_path / "all"), "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = sorted(p.name for p in (tmp_path / "all").iterdir())
    assert written == ["analysis_report.html", "analysis_report.json", "analysis_report.md"]
    report = AnalysisReport.load(tmp_path / "all")
    markdown = (tmp_path / "all" / "analysis_report.md").read_text().replace("\\", "")  # Markdown escapes
    assert report.findings and all(f.title in markdown for f in report.findings)


def _analysis_config(tmp_path: Path, analysis: object) -> Path:
    data = json.loads(example_config_path().read_text())
    base = example_config_path().parent
    for entry in data["providers"]:
        entry["input"] = str(base / entry["input"])
    data["output_dir"] = str(tmp_path / "out")
    data["analysis"] = analysis
    return _write(tmp_path, "cfg.json", json.dumps(data))


def test_config_analysis_section_sets_workload_rules_and_options(tmp_path: Path) -> None:
    cfg = _analysis_config(tmp_path, {"workload": "inference", "rules": ["bottleneck"],
                                      "rule_options": {"bottleneck": {"share": 0.35}}})
    collector = MetricsCollector.from_config(cfg)
    assert collector.analysis_settings is not None and collector.analysis_settings.workload == "inference"
    result = _cli("ingest", "--config", str(cfg), "--analyze", "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = AnalysisReport.load(tmp_path / "out")
    assert report.workload == "inference" and report.summary["rules"] == ["bottleneck"]
    assert report.findings and all(f.evidence["share"] > 0.35 for f in report.findings)
    result = _cli("ingest", "--config", str(cfg), "--analyze", "--workload", "finetune", "-q", cwd=tmp_path)
    assert AnalysisReport.load(tmp_path / "out").workload == "finetune"  # the command line wins


@pytest.mark.parametrize(("analysis", "place"), [
    ({"workload": "training"}, "analysis.workload"),
    ({"rules": ["bottleneck", "nope"]}, "analysis.rules[1]"),
    ({"rule_options": {"bottleneck": {"colour": 1}}}, "analysis.rule_options.bottleneck.colour"),
    ({"rule_options": {"anomalies": {"method": "iqr"}}}, "analysis.rule_options.anomalies.method"),
    ({"wrkload": "x"}, "analysis.wrkload"),
])
def test_config_analysis_errors_name_the_key(tmp_path: Path, analysis: object, place: str) -> None:
    cfg = _analysis_config(tmp_path, analysis)
    with pytest.raises(ConfigError, match=re.escape(f"cfg.json:{place}")):
        MetricsCollector.from_config(cfg)
    result = _cli("ingest", "--config", str(cfg), "--analyze", cwd=tmp_path)
    assert result.returncode == 2 and place in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--events", "missing.jsonl"], "missing.jsonl: an existing metrics_events.jsonl"),
    (["--events", "bad.jsonl"], "bad.jsonl:line 2: expected one JSON object per line"),
    (["--events", "good.jsonl", "--workload", "training"], "--workload 'training': expected one of"),
    (["--events", "good.jsonl", "--formats", "pdf"], "--formats 'pdf'"),
    (["--events", "good.jsonl", "--trace", "nope.json"], "nope.json: an existing torch.profiler trace"),
])
def test_analyze_bad_input_exits_2_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    line = json.dumps({"name": "step_time", "value": 1.0, "kind": "duration", "step": 0})
    (tmp_path / "good.jsonl").write_text(line + "\n")
    (tmp_path / "bad.jsonl").write_text(line + "\n{oops\n" + line + "\n")
    result = _cli("analyze", *args, "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def _write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("cfg", "place"), [
    ({"providers": [{"provider": "nope", "input": "x"}]}, "providers[0].provider"),
    ({"providers": [{"provider": "table_csv"}]}, "providers[0].input"),
    ({"providers": [{"provider": "table_csv", "input": "missing.csv"}]}, "providers[0].input"),
    ({"providers": [{"provider": "module_profiler", "input": "t.csv"}]}, "providers[0].provider"),
    ({"providers": [{"provider": "table_csv", "input": "t.csv", "options": {"colour": 1}}]}, "providers[0].options"),
    ({"providers": [{"provider": "table_csv", "input": "t.csv", "typo": 1}]}, "providers[0].typo"),
    ({"provders": []}, "key 'provders'"),
])
def test_config_errors_name_the_key(tmp_path: Path, cfg: dict, place: str) -> None:
    _write(tmp_path, "t.csv", "name,value\na,1\n")
    path = _write(tmp_path, "cfg.json", json.dumps(cfg))
    with pytest.raises(ConfigError) as err:
        MetricsCollector.from_config(path)
    assert f"cfg.json:{place}" in str(err.value)
    result = _cli("ingest", "--config", str(path), "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2 and place in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_yaml_config_and_ignore_provider_errors(tmp_path: Path) -> None:
    _write(tmp_path, "t.csv", "name,value\na,1\nb,2\n")
    cfg = _write(tmp_path, "cfg.yaml", "output_dir: out\nproviders:\n  - provider: table_csv\n    input: t.csv\n"
                                       "  - provider: cprofile\n    input: t.csv\n")
    with pytest.raises(Exception, match="unreadable pstats"):
        MetricsCollector.from_config(cfg).collect()
    collector = MetricsCollector.from_config(cfg, ignore_provider_errors=True, output_dir=tmp_path / "o")
    assert collector.failures == []  # cprofile builds fine; it fails when reading
    bad = _write(tmp_path, "bad.yaml", "providers:\n  - provider: table_csv\n    input: missing.csv\n"
                                       "  - provider: table_csv\n    input: t.csv\n")
    collector = MetricsCollector.from_config(bad, ignore_provider_errors=True, output_dir=tmp_path / "o2")
    assert [f.place for f in collector.failures] == ["providers[0]"]
    assert [e.name for e in collector.collect()] == ["a", "b"]


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.yml", "providers:\n  - provider: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yml:line \d+, column \d+: valid YAML"):
        MetricsCollector.from_config(bad)


@pytest.mark.parametrize(("provider", "relpath"), [
    ("torch_profiler", "kineto/hta/trace_filter__sampled_rank-1.json.gz"),
    ("ncu_csv", "ncu/ai4mat__metrics_713_paddle_.csv"),
    ("nsys_sqlite", "nsys/extrap__con_kernel.sqlite"),
    ("cprofile", "cprofile/gprof2dot__print1.pstats"),
])
def test_plugins_run(real_fixtures: Path, tmp_path: Path, provider: str, relpath: str) -> None:
    result = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "run", provider, "--input",
                             str(real_fixtures / relpath), "--output-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    events = read_events(tmp_path / "metrics_events.jsonl")
    assert events and {e.source for e in events} == {provider}


def test_plugins_run_refuses_unsupported_input(real_fixtures: Path, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "run", "cprofile", "--input",
                             str(real_fixtures / "cprofile/gprof2dot__cProfile_py2_legacy.pstats"),
                             "--output-dir", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "unreadable pstats" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "o" / "metrics_events.jsonl").exists()
