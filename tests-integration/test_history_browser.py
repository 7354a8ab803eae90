"""``myutils-profile history trend`` and ``history overview`` pages in headless Chromium, offline.

A store holds three series (two hardware, one with a markup-laden workload name) with planted
changes. The real commands write the pages; Chromium opens them from ``file://`` with every other
request aborted. No console error, page error or blocked request; every chart's points are exactly
the store's values, read here with sqlite3 (run ids from the hover data, values from the tables);
the change points are marked at the first run after each planted change; markup stays text.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app
from my_utils.profiling.history.context import RunContext
from my_utils.profiling.history.store import RunStore
from my_utils.profiling.model.report import REPORT_SCHEMA_VERSION, AnalysisReport, Fact

pytestmark = [pytest.mark.browser, pytest.mark.slow]
EVIL = "<img src=x onerror=window.__pwned=1>"
SERIES = [("pretrain", "NVIDIA H100 80GB HBM3", 40), ("pretrain", "NVIDIA A100-SXM4-80GB", 25), (EVIL, "G", None)]
CHANGE_AT = 30  # in the first series: +10% from its 31st run


def _report(workload: str, step: float, idle: float, tag: Any) -> AnalysisReport:
    facts = [Fact("step_time.median", "step", step, "ms"), Fact("gpu.idle", "idle", idle, "%")]
    return AnalysisReport(REPORT_SCHEMA_VERSION, workload, {}, [], {"tag": tag}, facts=facts)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    out = tmp_path_factory.mktemp("history_pages")
    store = out / "h.sqlite"
    rng = np.random.default_rng(5)
    items = []
    for s, (workload, gpu, n) in enumerate(SERIES):
        for i in range(n or 12):
            step = 100.0 * (1.1 if s == 0 and i >= CHANGE_AT else 1.0) * (1 + rng.normal(0, 0.01))
            ctx = RunContext(workload, 1.7e9 + 3600 * i + s, git_commit=f"{EVIL if s == 2 else 'c'}{s}-{i}",
                             git_branch="main", gpu_model=gpu, gpu_count=8, world_size=16)
            items.append((_report(workload, step, 5 + rng.normal(0, 0.2), (s, i)), ctx, None))
    with RunStore(store) as st:
        st.add_many(items)
    trend, overview = out / "trend.html", out / "overview.html"
    for args in (["history", "trend", "step_time.median", "--output", str(trend)],
                 ["history", "overview", "--output", str(overview)]):
        res = CliRunner().invoke(app, [*args, "--store", str(store)])
        assert res.exit_code == 0, res.output
    return store, trend, overview


@pytest.fixture
def page(chromium: Any) -> Iterator[tuple[Any, Any]]:
    import offline_browser

    page, log = offline_browser.open_page(chromium)
    page.unroute("**/*")

    def route(r: Any) -> None:
        if r.request.url.startswith(("file://", "data:", "blob:", "about:")):
            r.continue_()
        else:
            log.blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    yield page, log
    page.close()


def _charts(page: Any, path: Path) -> list[dict[str, Any]]:
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-charts-drawn]", timeout=60_000)
    return page.evaluate("""() => Array.from(document.querySelectorAll('div.plot')).map(d => ({
        title: d.getAttribute('aria-label'), svg: d.querySelectorAll('.main-svg').length,
        traces: d.data.map(t => ({name: t.name, y: Array.from(t.y),
                                  ids: t.customdata ? t.customdata.map(c => c[0]) : null}))}))""")


def _store_values(store: Path, metric: str, run_ids: list[int]) -> tuple[list[float], set[int]]:
    """The values of ``run_ids`` and every run id of their series, read with sqlite3."""
    with contextlib.closing(sqlite3.connect(store)) as conn:
        got = dict(conn.execute("SELECT f.run_id, f.value FROM facts f JOIN metrics m ON m.id = f.metric_id "
                                "WHERE m.name = ?", (metric,)).fetchall())
        w, h, ws = conn.execute("SELECT workload, hardware, world_size FROM runs WHERE id = ?", (run_ids[0],)).fetchone()
        series = {r for (r,) in conn.execute("SELECT id FROM runs WHERE workload = ? AND hardware = ? AND "
                                             "world_size IS ?", (w, h, ws))}
    return [got[r] for r in run_ids], series


def test_trend_page_points_are_the_store_values(pages: tuple[Path, Path, Path], page: tuple[Any, Any]) -> None:
    store, trend, _ = pages
    p, log = page
    charts = _charts(p, trend)
    assert len(charts) == 3 and all(c["svg"] > 0 for c in charts)
    for chart in charts:
        runs = chart["traces"][0]
        values, series = _store_values(store, "step_time.median", runs["ids"])
        assert runs["y"] == values  # exactly, not rounded
        assert set(runs["ids"]) == series  # every run of the series, and none of another
    first = next(c for c in charts if "H100" in c["title"])
    marks = next(t for t in first["traces"] if t["name"] == "change points")
    assert len(marks["y"]) == 1
    assert marks["y"][0] == first["traces"][0]["y"][CHANGE_AT]  # marked at the first run after the change
    assert p.evaluate("window.__pwned") is None
    assert EVIL in p.inner_text("body")  # shown as text
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])


def test_overview_puts_the_regression_on_top(pages: tuple[Path, Path, Path], page: tuple[Any, Any]) -> None:
    store, _, overview = pages
    p, log = page
    charts = _charts(p, overview)
    assert len(charts) == 6  # 3 series x 2 metrics
    for chart in charts:
        runs = chart["traces"][0]
        metric = chart["title"].split(" — ")[0]
        assert runs["y"] == _store_values(store, metric, runs["ids"])[0]
    first_row = p.inner_text("#overview tbody tr:first-child")
    assert "H100" in first_row and "step_time.median" in first_row and "worse" in first_row
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])
