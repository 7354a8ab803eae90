"""render_report: JSON round trip, Markdown with the same findings, escaped HTML with plotly.js once, overrides."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from my_utils.core.errors import InputError, UsageError
from my_utils.core.events import MetricEvent, write_events
from my_utils.profiling.analysis import AnalysisReport, Finding, MetricsAnalyzer
from my_utils.profiling.reports import render_report
from my_utils.profiling.reports.charts import build_charts

EVIL = "<script>window.__pwned=1</script>"


def _events(ranks: int = 3, steps: int = 60) -> list[MetricEvent]:
    """A run with a slow rank, a leaking memory gauge, a region named with markup and an ncu rule row."""
    rnd = random.Random(7)
    out: list[MetricEvent] = []
    for rank in range(ranks):
        for step in range(steps):
            fwd = 20 + rnd.random()
            evil = 9 + rnd.random() + (30 if step == 40 else 0)  # one spike: an anomaly finding
            out += [MetricEvent("forward", fwd, "duration", "ms", "mytimer", rank, step),
                    MetricEvent(EVIL, evil, "duration", "ms", "mytimer", rank, step),
                    MetricEvent("step_time", fwd + evil + 5 + 3 * rank, "duration", "ms", "mytimer", rank, step),
                    MetricEvent("memory.allocated", 1e9 + 4e6 * step, "gauge", "bytes", "mytimer", rank, step)]
    out.append(MetricEvent("ncu.rule:SOLBottleneck", 42.0, "ratio", "%", "ncu_csv", 0))
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> AnalysisReport:
    path = tmp_path_factory.mktemp("run") / "metrics_events.jsonl"
    write_events(path, _events())
    return MetricsAnalyzer(path, "pretrain").analyze()


def test_json_round_trips_through_from_dict(report: AnalysisReport, tmp_path: Path) -> None:
    path = render_report(report, "json", tmp_path)
    assert path == tmp_path / "analysis_report.json"
    loaded = AnalysisReport.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    assert loaded.findings == report.findings and loaded.scores == report.scores
    assert loaded.to_dict() == json.loads(report.to_json())


def test_the_run_has_what_the_report_must_show(report: AnalysisReport) -> None:
    # the fixture is only useful if the analyzer found the markup-named region and the leak
    assert any(EVIL in f.title for f in report.findings)
    assert any(f.category == "memory" for f in report.findings)
    assert {r["rank"] for r in report.tables["ranks"]} == {0, 1, 2}


def _text_of_markdown(path: Path) -> tuple[str, str]:
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(path.read_text(encoding="utf-8"))
    text = re.sub(r"<[^>]+>", " ", html)
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&amp;", "&")):
        text = text.replace(entity, char)
    return html, re.sub(r"\s+", " ", text)


def test_markdown_renders_the_same_findings_as_text(report: AnalysisReport, tmp_path: Path) -> None:
    path = render_report(report, "markdown", tmp_path / "r.md")
    html, text = _text_of_markdown(path)
    for f in report.findings:  # every title, detail and id reads as written, markup and all
        assert f.title in text and f.detail in text and f.id in text
    assert "<script" not in html.lower()  # the name is text, never an element
    assert f"Findings ({len(report.findings)})" in text
    assert f"overall {report.scores['overall']:g}" in text.split("Findings")[0]  # scores above the findings


def test_markdown_table_cells_keep_pipes_and_newlines_inside(tmp_path: Path) -> None:
    finding = Finding("x:1", "bottleneck", "warning", "a | b\n# not a heading", "d", {"name": "p|q\nr"}, "s")
    report = AnalysisReport("1.1", "pretrain", {"overall": 90.0}, [finding], {})
    html, text = _text_of_markdown(render_report(report, "md", tmp_path / "r.md"))
    assert "a | b # not a heading" in text and "p|q r" in text
    assert "<h1>" not in html.split("</h1>", 1)[1]  # only the report's own title is a level-1 heading


def test_html_escapes_names_and_inlines_plotly_once(report: AnalysisReport, tmp_path: Path) -> None:
    from plotly.offline import get_plotlyjs

    html = render_report(report, "html", tmp_path / "r.html").read_text(encoding="utf-8")
    assert EVIL not in html  # neither in the tables nor in the charts' JSON
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    charts = build_charts(report)
    # the only script elements: one JSON block per chart, plotly.js, the drawing script
    assert len(re.findall(r"<script\b", html)) == len(charts) + 2
    banner = get_plotlyjs()[:200]
    assert html.count(banner) == 1
    page = html.replace(get_plotlyjs(), "")  # plotly.js's own strings (its modebar link) are not the page's
    assert not re.search(r"\b(src|href)\s*=\s*[\"']?(https?:)?//", page)  # nothing to fetch
    assert "default-src 'none'" in html
    for c in charts:
        assert f'id="{c.id}"' in html and f'data-marks="{c.marks}"' in html


def test_html_findings_and_evidence_are_listed(report: AnalysisReport, tmp_path: Path) -> None:
    from markupsafe import escape

    html = render_report(report, "html", tmp_path / "r.html").read_text(encoding="utf-8")
    assert html.count('class="finding ') == len(report.findings)
    for f in report.findings:
        assert str(escape(f.title)) in html and f'data-finding-id="{escape(f.id)}"' in html
        for key in f.evidence:
            assert f"<th>{escape(key)}</th>" in html
    assert "SOLBottleneck" in html  # the ncu rule row


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_user_template_extends_the_builtin_one(report: AnalysisReport, tmp_path: Path, fmt: str) -> None:
    name = {"html": "report.html.j2", "markdown": "report.md.j2"}[fmt]
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / name).write_text(
        f'{{% extends "builtin/{name}" %}}{{% block header %}}TEAM HEADER {{{{ title }}}} {{{{ "<b>" }}}}\n'
        "{% endblock %}", encoding="utf-8")
    text = render_report(report, fmt, tmp_path / f"r.{fmt}", template_dir=tmp_path / "tpl").read_text("utf-8")
    assert text.startswith("TEAM HEADER") or "TEAM HEADER" in text
    assert "&lt;b&gt;" in text and "<b>" not in text  # user templates are escaped the same way
    assert report.findings[0].id.split(":")[0] in text  # the rest of the built-in report is there


def test_user_template_replaces_the_builtin_one(report: AnalysisReport, tmp_path: Path) -> None:
    (tmp_path / "report.md.j2").write_text("{% for f in findings %}{{ f.id }}\n{% endfor %}", encoding="utf-8")
    text = render_report(report, "markdown", tmp_path / "out.md", template_dir=tmp_path).read_text("utf-8")
    assert len(text.splitlines()) == len(report.findings)


def test_a_broken_user_template_is_one_line_naming_it_and_writes_nothing(report: AnalysisReport,
                                                                          tmp_path: Path) -> None:
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "report.html.j2").write_text("ok\n{% for x in %}\n", encoding="utf-8")
    target = tmp_path / "out" / "r.html"
    with pytest.raises(InputError) as info:
        render_report(report, "html", target, template_dir=tmp_path / "tpl")
    message = str(info.value)
    assert "report.html.j2" in message and "line 2" in message and "\n" not in message
    assert not (tmp_path / "out").exists()  # rendered before any file is opened


@pytest.mark.parametrize("kwargs, match", [
    ({"fmt": "pdf"}, "expected one of 'html', 'markdown' or 'json'"),
    ({"fmt": "html", "template_dir": "/nonexistent/templates"}, "not a folder"),
])
def test_misuse_names_the_argument(report: AnalysisReport, tmp_path: Path, kwargs: dict[str, str],
                                   match: str) -> None:
    with pytest.raises(UsageError, match=match):
        render_report(report, output_path=tmp_path / "x", **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "x").exists()


def test_existing_file_is_replaced_whole(report: AnalysisReport, tmp_path: Path) -> None:
    target = tmp_path / "r.md"
    target.write_text("old " * 100000, encoding="utf-8")
    render_report(report, "markdown", target)
    assert "old old" not in target.read_text("utf-8") and not list(tmp_path.glob(".*.tmp"))


def _big_report(ranks: int = 4, steps: int = 25_000) -> AnalysisReport:
    """The report of a run of 1M events (ranks x steps x 10 names), as the analyzer tabulates it."""
    rnd = random.Random(1)
    step_rows = [{"step": s, "rank": r, "source": "mytimer", "step_time": 100 + rnd.random(), "regions": 90.0}
                 for r in range(ranks) for s in range(steps)]
    step_rows[12_345]["step_time"] = 1e4  # one spike the downsampling must keep
    memory = [{"name": "memory.allocated", "step": s, "rank": r, "source": "mytimer", "value": 1e9 + s * 1e3,
               "unit": "bytes"} for r in range(ranks) for s in range(steps)]
    ops = [{"name": f"op_{i}", "source": "mytimer", "unit": "ms", "count": 1000, "steps": steps,
            "total": 1e5 / (i + 1), "mean": 1.0, "std": 0.1, "min": 0.5, "max": 2.0, "median": 1.0, "p90": 1.5,
            "cv": 0.1, "share": 0.01} for i in range(1000)]
    ops += [{"name": f"kernel:k{i}", "source": "torch_profiler", "unit": "ms", "total": 5.0 * i} for i in range(500)]
    findings = [Finding(f"anomaly:op_{i}", "anomaly", "warning", f"op_{i} spikes", "detail " * 20,
                        {"steps": list(range(50)), "names": [f"op_{i}"]}, "look") for i in range(2000)]
    return AnalysisReport("1.1", "pretrain", {"overall": 50.0, "performance": 40.0, "stability": 60.0}, findings,
                          {"events": ranks * steps * 10, "time_unit": "ms", "ranks": list(range(ranks))},
                          tables={"steps": step_rows, "memory": memory, "operations": ops,
                                  "ranks": [{"rank": r, "steps": steps, "mean_step_time": 100.0} for r in range(ranks)]})


def test_a_million_event_run_gives_an_html_report_under_10_mb(tmp_path: Path) -> None:
    report = _big_report()
    path = render_report(report, "html", tmp_path / "big.html")
    size = path.stat().st_size
    assert size < 10 * 1024 * 1024, size
    charts = {c.id: c for c in build_charts(report)}
    step = charts["chart-step-time"].figure["data"]
    assert sum(len(t["x"]) for t in step) <= 4000 and "downsampled from 100,000" in charts["chart-step-time"].note
    assert max(max(t["y"]) for t in step) == 1e4  # the spike survived
    assert charts["chart-kernels"].marks == 15 and charts["chart-sections"].marks == 15
    html = path.read_text("utf-8")
    assert html.count('class="finding ') == 200 and "1800 more findings" in html


def test_readme_template_example_overrides_the_header(report: AnalysisReport, tmp_path: Path) -> None:
    readme = Path(__file__).resolve().parent.parent / "README.md"
    (block,) = re.findall(r"```jinja\n(.*?)```", readme.read_text(encoding="utf-8"), flags=re.S)
    (tmp_path / "my_templates").mkdir()
    (tmp_path / "my_templates" / "report.html.j2").write_text(block, encoding="utf-8")
    html = render_report(report, "html", tmp_path / "r.html", template_dir=tmp_path / "my_templates").read_text(
        "utf-8")
    assert "<h1>Team Falcon: Analysis report: pretrain</h1>" in html and 'id="findings"' in html


def test_collector_export_report_writes_each_format_beside_the_events(tmp_path: Path) -> None:
    from my_utils.core.timer import MyTimer
    from my_utils.profiling import MetricsCollector, MyTimerMetricsProvider

    timer = MyTimer(use_cuda=False)
    collector = MetricsCollector(tmp_path / "run")
    collector.register_provider(MyTimerMetricsProvider(timer))
    for step in range(30):
        timer.set_step(step)
        timer.start("forward")
        sum(range(2000 + (40000 if step == 20 else 0)))
        timer.stop("forward")
        timer.step()
        collector.collect(step=step)
    report = collector.analyze()
    paths = {fmt: collector.export_report(fmt=fmt, report=report) for fmt in ("html", "markdown", "json")}
    assert paths == {"html": tmp_path / "run" / "analysis_report.html",
                     "markdown": tmp_path / "run" / "analysis_report.md",
                     "json": tmp_path / "run" / "analysis_report.json"}
    assert "Plotly.newPlot" in paths["html"].read_text("utf-8")
    assert "## Findings" in paths["markdown"].read_text("utf-8")
    assert collector.export_report(fmt="md", path=tmp_path / "x.md") == tmp_path / "x.md"  # last report reused


def test_importing_the_reports_loads_neither_jinja2_nor_plotly() -> None:
    import subprocess
    import sys

    code = ("import sys, my_utils.profiling.reports as r, my_utils.profiling.reports.render, "
            "my_utils.profiling.reports.charts; r.render_report; "
            "print(sorted(m for m in ('jinja2', 'plotly', 'pandas', 'numpy', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_a_table_added_by_a_plugin_is_listed(fmt: str, tmp_path: Path) -> None:
    rows = [{"layer": f"block{i}", "<i>flops</i>": i * 1e9} for i in range(60)]
    report = AnalysisReport("1.1", "pretrain", {"overall": 90.0}, [], {}, tables={"my_plugin_layers": rows})
    text = render_report(report, fmt, tmp_path / f"r.{fmt}").read_text("utf-8")
    assert "my plugin layers" in text and "block49" in text and "block50" not in text
    assert "first 50 of 60 rows" in text and "<i>flops" not in text
