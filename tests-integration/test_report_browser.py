"""The HTML report in headless Chromium, offline: drawn, silent, and a name carrying <script> stays text.

The page is loaded from file:// with every other request aborted (and no host name
resolving), so a report that needed a CDN would fail here the way it fails offline.
The run is real: the real Kineto control trace ingested (and given to the Kineto analyses),
plus timer events of three ranks (one region named with markup) and a leaking memory gauge,
analysed by ``MetricsAnalyzer``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import MetricEvent, write_events
from my_utils.profiling.analysis import AnalysisReport, MetricsAnalyzer
from my_utils.profiling.reports import render_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]

EVIL = "<script>window.__pwned=1</script>"
CONTROL = "kineto/hta/trace_diff__control.json.gz"
FILE_PREFIXES = ("file://", "data:", "blob:", "about:")


def _timer_events() -> list[MetricEvent]:
    rnd = random.Random(3)
    out: list[MetricEvent] = []
    for rank in range(3):
        for step in range(50):
            evil = 8 + rnd.random() + (25 if step == 30 else 0)
            out += [MetricEvent(EVIL, evil, "duration", "ms", "mytimer", rank, step),
                    MetricEvent("forward", 20 + rnd.random(), "duration", "ms", "mytimer", rank, step),
                    MetricEvent("step_time", 35 + evil + 2 * rank, "duration", "ms", "mytimer", rank, step),
                    MetricEvent("memory.allocated", 2e9 + 3e6 * step, "gauge", "bytes", "mytimer", rank, step)]
    return out


@pytest.fixture(scope="module")
def report_html(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[AnalysisReport, Path]:
    from my_utils.profiling import TorchProfilerMetricsProvider

    trace = real_fixtures / CONTROL
    folder = tmp_path_factory.mktemp("report")
    events = TorchProfilerMetricsProvider.from_input(trace).collect(None) + _timer_events()
    write_events(folder / "metrics_events.jsonl", events)
    report = MetricsAnalyzer(folder / "metrics_events.jsonl", "pretrain", traces=[trace]).analyze()
    return report, render_report(report, "html", folder)


@pytest.fixture
def page(chromium: Any) -> Iterator[tuple[Any, Any]]:
    """A page that may read file:// (the report) and nothing else; its errors are in the log."""
    import offline_browser

    page, log = offline_browser.open_page(chromium)
    page.unroute("**/*")  # the helper allows 127.0.0.1 only; a report is opened as a file

    def route(r: Any) -> None:
        if r.request.url.startswith(FILE_PREFIXES):
            r.continue_()
        else:
            log.blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    yield page, log
    page.close()


def _open(page: Any, path: Path) -> None:
    page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_selector("body[data-charts-drawn]", timeout=30_000)


def test_report_loads_offline_with_every_chart_drawn(report_html: tuple[AnalysisReport, Path],
                                                     page: tuple[Any, Any]) -> None:
    report, path = report_html
    p, log = page
    _open(p, path)
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])
    charts = p.locator("div.plot").all()
    assert int(p.get_attribute("body", "data-charts-drawn")) == len(charts) == 11
    drawn: dict[str, int] = {}
    for div in charts:
        selector = ".point" if div.get_attribute("data-mark") == "bar" else ".scatterlayer .trace path.js-line"
        drawn[div.get_attribute("id")] = div.locator(selector).count()
        assert drawn[div.get_attribute("id")] == int(div.get_attribute("data-marks")) > 0
    # the marks the tables call for, counted here independently of the chart code
    steps = report.tables["steps"]
    rank_rows = report.tables["ranks"]
    assert drawn["chart-ranks"] == len(rank_rows) and {r["rank"] for r in rank_rows} == {0, 1, 2, 3}
    assert drawn["chart-step-time"] == len({(r["source"], r["rank"]) for r in steps}) == 4
    assert drawn["chart-memory"] == len({(r["name"], r["rank"]) for r in report.tables["memory"]}) == 3
    # top kernels: the trace's one rank, its 15 largest kernels (HTA's "others" row left to the note)
    kernel_rows = [r for r in report.tables["kineto_top_kernels"] if r["rank"] == 3 and r["name"] != "others"]
    assert drawn["chart-kernels"] == min(15, len(kernel_rows))
    # sections: one facet per source, at most 15 bars each
    sources = {r["source"] for r in report.tables["operations"]}
    assert len(sources) == 2 and drawn["chart-sections"] <= 15 * len(sources)
    kineto_ranks = {r["rank"] for r in report.tables["kineto_temporal"]}
    assert drawn["chart-temporal"] == 3 * len(kineto_ranks)  # compute, non-compute, idle per rank
    kinds = report.tables["kineto_kernel_kinds"]
    assert drawn["chart-kernel-kinds"] == len({r["kind"] for r in kinds}) * len({r["rank"] for r in kinds})
    idle = report.tables.get("kineto_idle_device") or report.tables["kineto_idle"]
    lanes = {(r["rank"], r["device"], r.get("stream")) for r in idle}  # one bar per GPU (or stream), never summed
    assert drawn["chart-idle"] == len({r["category"] for r in idle}) * len(lanes)
    # the Kineto analyses' charts: the critical path's kinds per rank, one queue line per stream (at most 8)
    path_rows = report.tables["kineto_critical_path_breakdown"]
    assert drawn["chart-critical-path"] == len({r["bound_by"] for r in path_rows}) * len({r["rank"] for r in path_rows})
    streams = {(r["rank"], r["device"], r["stream"]) for r in report.tables["kineto_queue_length_series"]}
    assert drawn["chart-queue-length"] == min(8, len(streams))
    shapes = report.tables["kineto_op_shapes"]  # one point per operation and shape with FLOPs and GPU time
    assert drawn["chart-roofline"] == len([r for r in shapes if (r["intensity_low"] or 0) > 0 and (r["tflops"] or 0)
                                           > 0]) > 0
    # the kernel names in the margin are short, the full ones in the hover text
    ticks = p.locator("#chart-kernels .ytick text").all_text_contents()
    assert ticks and max(len(t) for t in ticks) <= 56 and not any(t.startswith("void ") for t in ticks)
    assert p.evaluate("Plotly.version").split(".")[0].isdigit()


def test_a_name_carrying_script_shows_as_text_and_does_not_run(report_html: tuple[AnalysisReport, Path],
                                                               page: tuple[Any, Any]) -> None:
    report, path = report_html
    p, log = page
    _open(p, path)
    assert p.evaluate("typeof window.__pwned") == "undefined"
    assert p.evaluate("[...document.scripts].filter(s => s.textContent.includes('__pwned=1</')).length") == 0
    titles = p.locator(".finding .title").all_text_contents()
    assert any(EVIL in t for t in titles)  # the finding's title reads as written
    ticks = p.locator("#chart-sections .ytick text").all_text_contents()
    assert any(EVIL in t for t in ticks)  # and so does the chart's axis label
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])
    assert len(p.locator(".finding").all()) == len(report.findings)


def test_the_page_fixture_would_catch_a_cdn_report(page: tuple[Any, Any], tmp_path: Path) -> None:
    """The control: a report that loads plotly.js from a CDN is blocked, errs, and draws nothing here."""
    p, log = page
    html = tmp_path / "cdn.html"
    html.write_text('<html><body><div id="c"></div><script src="https://cdn.plot.ly/plotly-2.35.2.min.js"></script>'
                    '<script>Plotly.newPlot("c", [{type: "bar", y: [1]}]);</script></body></html>', encoding="utf-8")
    p.goto(html.resolve().as_uri(), wait_until="load")
    assert any("cdn.plot.ly" in url for url in log.blocked)
    assert any("Plotly is not defined" in e for e in log.page_errors)
    assert p.locator("#c .point").count() == 0
