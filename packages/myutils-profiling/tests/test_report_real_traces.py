"""The report of real Kineto traces (HTA's df_index_resolver, the trace_filter rank pair): legible charts and tables.

Each report is what a user gets: the trace ingested by the torch-profiler provider and
analysed with its Kineto analyses by ``MetricsAnalyzer``, then rendered. The checks read the
charts' JSON and the rendered text, the numbers against the report's own tables.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.events import write_events
from my_utils.profiling.analysis import AnalysisReport, MetricsAnalyzer
from my_utils.profiling.reports.charts import build_charts
from my_utils.profiling.reports.names import MAX_LABEL
from my_utils.profiling.reports.palette import colour
from my_utils.profiling.reports.render import render_text

pytestmark = pytest.mark.slow

TRACES = {"df_index_resolver": ["kineto/hta/df_index_resolver.json.gz"],
          "trace_filter": ["kineto/hta/trace_filter__sampled_rank-0.json.gz",
                           "kineto/hta/trace_filter__sampled_rank-1.json.gz"]}
_E_NOTATION = re.compile(r"\d[eE][+-]?\d")


def analyse(paths: list[Path], folder: Path) -> AnalysisReport:
    """The report of ``paths`` as the CLI's ingest + analyze would make it."""
    from my_utils.profiling import TorchProfilerMetricsProvider

    events = [e for p in paths for e in TorchProfilerMetricsProvider.from_input(p).collect(None)]
    write_events(folder / "metrics_events.jsonl", events)
    return MetricsAnalyzer(folder / "metrics_events.jsonl", "pretrain", traces=paths).analyze()


@pytest.fixture(scope="module", params=list(TRACES))
def real(request: pytest.FixtureRequest, real_fixtures: Any,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[str, AnalysisReport]:
    paths = [real_fixtures / p for p in TRACES[request.param]]
    return request.param, analyse(paths, tmp_path_factory.mktemp(request.param))


def _charts(report: AnalysisReport) -> dict[str, Any]:
    return {c.id: c for c in build_charts(report)}


def test_top_kernels_short_names_in_a_fixed_margin_full_names_on_hover_per_rank(
        real: tuple[str, AnalysisReport]) -> None:
    name, report = real
    chart = _charts(report)["chart-kernels"]
    layout = chart.figure["layout"]
    assert layout["margin"]["l"] >= 300 and layout["yaxis"]["automargin"] is False  # fixed, not per label
    ranks = sorted({r["rank"] for r in report.tables["kineto_top_kernels"] if r["rank"] is not None})
    assert [a["text"] for a in layout["annotations"]] == [f"rank {r}" for r in ranks]  # one facet per rank
    assert len({t["xaxis"] for t in chart.figure["data"]}) == len(ranks)
    labels = [y for t in chart.figure["data"] for y in t["y"]]
    assert all(len(label) <= MAX_LABEL for label in chart.labels)
    assert not any(label.startswith("void ") or "at::native" in label for label in labels)
    hovers = [h for t in chart.figure["data"] for h in t["hovertext"]]
    full = {r["name"] for r in report.tables["kineto_top_kernels"]}
    long_names = [n for n in full if len(n) > MAX_LABEL and n != "others"]
    assert long_names and any(n.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in h
                              for n in long_names for h in hovers)
    # each facet shows its own rank's numbers (ms), never a sum over ranks
    for t in chart.figure["data"]:
        rank = ranks[0 if t["xaxis"] == "x" else int(t["xaxis"][1:]) - 1]
        for label, value, hover in zip(t["y"], t["x"], t["hovertext"], strict=True):
            row = next(r for r in report.tables["kineto_top_kernels"] if r["rank"] == rank and
                       r["name"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in hover)
            assert value == pytest.approx(row["total_us"] / 1e3, rel=1e-5), (name, label)


def test_step_axes_have_integer_ticks(real: tuple[str, AnalysisReport]) -> None:
    _, report = real
    axis = _charts(report)["chart-step-time"].figure["layout"]["xaxis"]
    assert axis["tickmode"] == "linear" and isinstance(axis["dtick"], int) and axis["dtick"] >= 1
    assert isinstance(axis["tick0"], int) and axis["tickformat"] == "d"


def test_one_colour_per_category_across_charts(real: tuple[str, AnalysisReport]) -> None:
    _, report = real
    charts = _charts(report)
    seen: dict[str, set[str]] = {}
    for c in charts.values():
        for t in c.figure["data"]:
            if t.get("type") == "bar" and isinstance(t.get("marker", {}).get("color"), str) and t.get("name"):
                seen.setdefault(t["name"].replace("-", " ").replace("_", " "), set()).add(t["marker"]["color"])
    assert {"computation", "communication", "idle"} <= set(seen) | {"compute"}
    assert all(len(colours) == 1 for colours in seen.values()), seen
    assert seen["communication"] == {colour("communication")}
    assert seen["compute"] == seen["computation"] == {colour("computation")}  # the same thing, the same colour


def test_idle_is_never_a_sum_over_streams(real: tuple[str, AnalysisReport]) -> None:
    _, report = real
    chart = _charts(report)["chart-idle"]
    spans = {r["rank"]: r["span_us"] / 1e3 for r in report.tables["kineto_temporal"] if r["rank"] is not None}
    totals = [sum(t["y"][i] for t in chart.figure["data"]) for i in range(len(chart.labels))]
    for label, total in zip(chart.labels, totals, strict=True):
        rank = int(label.split()[1])
        assert total <= spans[rank] * 1.001, (label, total, spans[rank])  # one stream (or the device) per bar


def test_rendered_text_has_no_e_notation_and_every_share_names_its_whole(real: tuple[str, AnalysisReport]) -> None:
    _, report = real
    from plotly.offline import get_plotlyjs

    html = render_text(report, "html").replace(get_plotlyjs(), "")
    text = re.sub(r"<(script|style)[^>]*>.*?</(script|style)>", " ", html, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    assert not _E_NOTATION.search(text), _E_NOTATION.search(text)
    markdown = render_text(report, "markdown")
    assert not _E_NOTATION.search(markdown)
    # the operations table: every share cell names its whole (rows of one table have different wholes)
    ops = markdown.split("#### Operations")[1].split("####")[0]
    header, _, *rows = [line for line in ops.splitlines() if line.startswith("|")]
    column = [c.strip() for c in header.split("|")].index("share")
    shares = [[c.strip() for c in row.split("|")][column] for row in rows]
    assert shares and all(" of " in s for s in shares if s != "–"), shares
    assert "(ms)" in markdown  # µs columns are shown in ms and say so
