"""The report draws the Nsight tables, findings and headline the analysis made (it computes nothing)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from my_utils.profiling.analysis import AnalysisReport, MetricsAnalyzer
from my_utils.profiling.analysis.nsight.analyze import NsightInputs
from my_utils.profiling.ncu.csv_read import read_ncu_csv
from my_utils.profiling.nsys.provider import read_nsys_sqlite
from my_utils.profiling.reports import render_report
from my_utils.profiling.reports.context import NSIGHT_TABLES

SAXPY = "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite"


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "a" and str(a.get("href") or "").startswith("#"):
            self.hrefs.append(str(a["href"])[1:])


@pytest.fixture(scope="module")
def saxpy(real_fixtures: Any) -> AnalysisReport:
    path = real_fixtures / SAXPY
    return MetricsAnalyzer(read_nsys_sqlite(path), nsight=NsightInputs(nsys=(path,), iteration_range="saxpy")).analyze()


def test_html_draws_every_nsight_table_and_every_link_lands(saxpy: AnalysisReport, tmp_path: Path) -> None:
    html = render_report(saxpy, "html", tmp_path).read_text(encoding="utf-8")
    parser = _Ids()
    parser.feed(html)
    for name, (title, _) in NSIGHT_TABLES.items():
        if saxpy.tables.get(name):
            assert f'id="table-{name}"' in html and title in html, name
    assert not [h for h in parser.hrefs if h not in parser.ids]  # every evidence link has its row on the page
    for fid in saxpy.headline["top_findings"]:
        assert f'data-finding-id="{fid}"' in html
    busy = next(r for r in saxpy.tables["nsys_busy_device"])
    # the busy table shows the analysis' numbers in ms (the JSON keeps ns)
    assert f"{busy['span_ns'] / 1e6:,.1f}" in html and f"{busy['idle_ns'] / 1e6:,.1f}" in html


def test_markdown_has_the_same_tables_and_headline(saxpy: AnalysisReport, tmp_path: Path) -> None:
    md = render_report(saxpy, "markdown", tmp_path).read_text(encoding="utf-8")
    for name, (title, _) in NSIGHT_TABLES.items():
        if saxpy.tables.get(name):
            assert f"#### {title}" in md.replace("\\_", "_"), name
    assert "A100 SXM4 40GB" in md and "**Verdict (host):**" in md
    idle = saxpy.fact("gpu.idle")
    assert idle is not None and f"**{idle.number:.1f}%** GPU idle" in md
    assert re.search(r"Nsight: Nsight Systems analyses of 1 export", md)


def test_ncu_tables_and_rule_rows_render(real_fixtures: Any, tmp_path: Path) -> None:
    path = real_fixtures / "ncu/ai4mat__metrics_713_paddle_.csv"
    report = MetricsAnalyzer(read_ncu_csv(path), nsight=NsightInputs(ncu=(path,))).analyze()
    md = render_report(report, "markdown", tmp_path).read_text(encoding="utf-8")
    assert "#### Nsight Compute: kernels (means over launches)" in md
    assert "Nsight Compute replays kernels one at a time" in md  # the headline's figures say why they are missing
    html = render_report(report, "html", tmp_path).read_text(encoding="utf-8")
    assert 'id="table-ncu_kernels"' in html
