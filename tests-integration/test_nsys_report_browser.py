"""An nsys-only report in headless Chromium: its charts draw what the exports hold, and it links the timeline page.

``analyze --nsys`` runs on the real exports (the 6-rank NCCL ring, the 2-GPU H100 window); the
expected bars, labels and names are read from the raw exports with sqlite3, never from the report.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FILE_PREFIXES = ("file://", "data:", "blob:", "about:")


def raw(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def analyze(inputs: Path, out: Path) -> Path:
    res = CliRunner().invoke(app, ["analyze", "--nsys", str(inputs), "--output-dir", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out / "analysis_report.html"


@pytest.fixture
def page(chromium: Any) -> Iterator[tuple[Any, Any]]:
    import offline_browser

    p, log = offline_browser.open_page(chromium)
    p.unroute("**/*")

    def route(r: Any) -> None:
        if r.request.url.startswith(FILE_PREFIXES):
            r.continue_()
        else:
            log.blocked.append(r.request.url)
            r.abort()

    p.route("**/*", route)
    yield p, log
    p.close()


def _open(p: Any, path: Path) -> None:
    p.goto(path.resolve().as_uri(), wait_until="load")
    p.wait_for_selector("body[data-charts-drawn]", timeout=30_000)


def _ticks(p: Any, chart: str, axis: str) -> list[str]:
    return [t.strip() for t in p.locator(f"#{chart} .{axis}tick text").all_text_contents()]


def test_the_ring_report_draws_its_devices_ranks_and_hosts(real_fixtures: Any, page: tuple[Any, Any],
                                                           tmp_path: Path) -> None:
    files = sorted(real_fixtures / n for n in real_fixtures.names("nsys/dsl_ring_6ranks/"))
    assert len(files) == 6
    devices = [raw(f, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] for f in files]
    hosts = [raw(f, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'")[0][0] for f in files]
    # each export's rank is the launcher's (PMI_RANK in the captured environment), not the file order
    ranks = [int(raw(f, "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%:ENVIRONMENT_VARIABLE' "
                        "AND value LIKE 'PMI_RANK=%'")[0][0].split("=", 1)[1].strip('"')) for f in files]
    assert sorted(ranks) == list(range(6)) and ranks != list(range(6))  # the order differs on this ring
    by_rank = sorted(zip(ranks, devices, hosts, files, strict=True))
    html = analyze(files[0].parent, tmp_path)
    p, log = page
    _open(p, html)
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])
    # one bar per device (ranks by file order), stacked: busy, idle inside setup, idle outside it
    busy = p.locator("#chart-nsys-busy")
    assert [t for t in _ticks(p, "chart-nsys-busy", "x")] == [f"rank {r} · GPU {d}" for r, d, _h, _f in by_rank]
    legend = busy.locator(".legendtext").all_text_contents()
    assert {"busy", "setup"} <= set(legend)
    assert busy.locator(".point").count() == 6 * len(legend) == int(busy.get_attribute("data-marks"))
    # NCCL per rank, labelled with its host; the rank wait drawn apart from the rest
    nccl = p.locator("#chart-nsys-nccl")
    assert _ticks(p, "chart-nsys-nccl", "x") == [f"rank {r} · {h}" for r, _d, h, _f in by_rank]
    assert set(nccl.locator(".legendtext").all_text_contents()) == {"rank wait", "communication"}
    assert nccl.locator(".point").count() == 12
    # the one kernel each rank ran
    (name,) = {raw(f, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName")[0][0]
               for f in files}
    assert name in _ticks(p, "chart-nsys-kernels", "y")
    # the timeline page of the same exports, written beside the report and linked from it
    link = p.locator("#nsys-timeline-link a")
    assert link.get_attribute("href") == "nsys_timeline.html"
    link.click()
    p.wait_for_function("window.nsysTimeline && window.nsysTimeline.ready", timeout=15_000)
    assert p.url.endswith("/nsys_timeline.html") and (log.console_errors, log.page_errors) == ([], [])
    assert [r["label"] for r in p.evaluate("nsysTimeline.summary().ranks")] == [f.name for _r, _d, _h, f in by_rank]


def test_the_h100_report_names_its_top_kernel_first(real_fixtures: Any, page: tuple[Any, Any],
                                                    tmp_path: Path) -> None:
    path = real_fixtures / "nsys/nsysai__mfu_2gpu_before.sqlite"
    (top,) = raw(path, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                       "GROUP BY k.shortName ORDER BY SUM(k.end - k.start) DESC LIMIT 1")[0]
    devices = sorted(d for (d,) in raw(path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    html = analyze(path, tmp_path)
    p, log = page
    _open(p, html)
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])
    ticks = _ticks(p, "chart-nsys-kernels", "y")
    assert ticks[-1].startswith(top)  # plotly lists the bottom tick first: the largest bar is on top
    assert _ticks(p, "chart-nsys-busy", "x") == [f"GPU {d}" for d in devices]
    assert _ticks(p, "chart-nsys-nccl", "x") == ["rank 0", "rank 1"]  # two processes, two ranks
