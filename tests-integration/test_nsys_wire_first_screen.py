"""The first screen of an Nsight Systems export's HTML report, in headless Chromium at 1920×1080.

The report is built as a user builds it (``myutils-profile analyze --nsys EXPORT``) from a real
export and opened offline. Within the first 1080 px the page shows the GPU model, the idle %,
the overlap % (or why it is not measured) and three distinct findings, each linked to a row of
the page. Three of the numbers on that screen are recomputed here with SQL written for this
test on the raw export (no package code): the GPU idle % (gaps between the device's work, by a
correlated subquery), the host's time blocked in synchronous CUDA calls, and the copies' share
of the GPU's busy time.

``MYUTILS_REPORT_SCREENSHOTS=<folder>`` also saves a full-page screenshot of each report there
(``report_nsys_<case>.png``; docs/img/report_nsys.png is the saxpy one).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.analysis import AnalysisReport
from my_utils.profiling.cli import app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CASES = {"saxpy": "nsys/pipit__saxpy-mpi-cuda_perlmutter0.sqlite", "mfu_2gpu": "nsys/nsysai__mfu_2gpu_before.sqlite"}
WIDTH, HEIGHT = 1920, 1080
FILE_PREFIXES = ("file://", "data:", "blob:", "about:")
# the device's work in one list; a gap is a start later than every earlier end (row values order by start, then end)
_OPS = ("SELECT deviceId AS dev, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
        "SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY{memset}")
IDLE_SQL = """
WITH ops AS ({ops}), reach AS (
  SELECT o.dev, o.start, (SELECT MAX(p.end) FROM ops p WHERE p.dev = o.dev AND (p.start, p.end) < (o.start, o.end))
         AS prev_end FROM ops o)
SELECT SUM(CASE WHEN start > prev_end THEN start - prev_end ELSE 0 END),
       (SELECT SUM(e - s) FROM (SELECT MAX(end) AS e, MIN(start) AS s FROM ops GROUP BY dev))
FROM reach
"""


def _sql(path: Path, query: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def raw_figures(path: Path) -> dict[str, Any]:
    """GPU name, idle % of the span, sync-call ms, copy share of busy time, and whether NCCL kernels ran."""
    tables = {r[0] for r in _sql(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    memset = " UNION ALL SELECT deviceId, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET" \
        if "CUPTI_ACTIVITY_KIND_MEMSET" in tables else ""
    ops = _OPS.format(memset=memset)
    (idle, span), = _sql(path, IDLE_SQL.format(ops=ops))
    gpus = [r[0] for r in _sql(path, "SELECT name FROM TARGET_INFO_GPU WHERE smCount > 0")] \
        if "TARGET_INFO_GPU" in tables else []
    # synchronous calls: explicit syncs and cudaMemcpy without Async; eventClass 67 rows are backtrace copies
    (sync,), = _sql(path, "SELECT SUM(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                          "ON s.id = r.nameId WHERE r.eventClass <> 67 AND (s.value GLOB 'cuda*Synchronize*' "
                          "OR s.value GLOB 'cudaMemcpy_v*' OR s.value = 'cudaMemcpy')")
    # copies: memcpy and memset time as a share of busy time (single device, copies never overlap each other here)
    copies = _sql(path, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY{memset.replace('deviceId, ', '')}")
    kernels = _sql(path, "SELECT k.deviceId, s.value GLOB 'nccl*', k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                         "JOIN StringIds s ON s.id = k.shortName")
    comm = overlap = 0
    for dev in {k[0] for k in kernels}:
        nccl = _union([(s, e) for d, n, s, e in kernels if d == dev and n])
        comp = _union([(s, e) for d, n, s, e in kernels if d == dev and not n])
        comm += sum(e - s for s, e in nccl)
        overlap += sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in nccl for s2, e2 in comp)
    return {"gpus": gpus, "idle_pct": 100.0 * idle / span, "busy_ms": (span - idle) / 1e6, "sync_ms": (sync or 0) / 1e6,
            "copy_ms": sum(e - s for s, e in copies) / 1e6, "nccl": comm,
            "overlap_pct": 100.0 * overlap / comm if comm else None}


def _union(intervals: list[tuple[int, int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


@pytest.fixture(scope="module", params=list(CASES))
def case(request: pytest.FixtureRequest, real_fixtures: Any,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[str, AnalysisReport, Path, dict[str, Any]]:
    path = real_fixtures / CASES[request.param]
    out = tmp_path_factory.mktemp(request.param)
    res = CliRunner().invoke(app, ["analyze", "--nsys", str(path), "--output-dir", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return request.param, AnalysisReport.load(out), out / "analysis_report.html", raw_figures(path)


@pytest.fixture
def page(chromium: Any) -> Iterator[tuple[Any, Any]]:
    """A 1920×1080 page that may read file:// (the report) and nothing else; its errors are in the log."""
    import offline_browser

    page, log = offline_browser.open_page(chromium, WIDTH, HEIGHT)
    page.unroute("**/*")

    def route(r: Any) -> None:
        if r.request.url.startswith(FILE_PREFIXES):
            r.continue_()
        else:
            log.blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    yield page, log
    page.close()


_BOXES = """(sels) => sels.map(sel => [...document.querySelectorAll(sel)].map(el => {
  const r = el.getBoundingClientRect();
  return {text: el.innerText, top: r.top + window.scrollY, bottom: r.bottom + window.scrollY,
          href: el.getAttribute('href'), target: (el.getAttribute('href') || '').startsWith('#')
            ? !!document.getElementById(el.getAttribute('href').slice(1)) : null};
}))"""


def _number(text: str) -> float:
    match = re.search(r"−?[\d,]+(?:\.\d+)?", text)
    assert match, text
    return float(match.group(0).replace(",", "").replace("−", "-"))


def test_first_screen_of_an_nsys_export(case: tuple[str, AnalysisReport, Path, dict[str, Any]],
                                        page: tuple[Any, Any]) -> None:
    name, report, path, raw = case
    p, log = page
    p.goto(path.resolve().as_uri(), wait_until="load")
    p.wait_for_selector("body[data-charts-drawn]", timeout=60_000)
    folder = os.environ.get("MYUTILS_REPORT_SCREENSHOTS")
    if folder:  # taken before the checks, so a failing page can be looked at
        Path(folder).mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(Path(folder) / f"report_nsys_{name}.png"), full_page=True)
    where, idle, overlap, top, links = p.evaluate(_BOXES, [
        "#where", '#headline [data-fact="gpu.idle"]', '#headline [data-fact="comm.overlap"]', "#top-findings > li",
        "#top-findings > li a.evidence-link"])
    for found in (where, idle, overlap):
        assert len(found) == 1 and found[0]["bottom"] <= HEIGHT, (name, found)
    # the GPU: the hardware table's model of what the export names, or "not recorded" when it names none
    assert ("GPU not recorded" if not raw["gpus"] else "A100 SXM4 40GB") in where[0]["text"], where
    # 1. idle %: the gaps between the device's work over its span (correlated subquery, not the package's sweep)
    assert _number(idle[0]["text"]) == pytest.approx(raw["idle_pct"], abs=0.051), (idle, raw)
    # overlap: with NCCL kernels, a number; without, "not measured" and why
    if raw["nccl"]:  # the communication kernels' time under computation kernels, of their time
        assert _number(overlap[0]["text"]) == pytest.approx(raw["overlap_pct"], abs=0.051), (overlap, raw)
    else:
        assert "not measured" in overlap[0]["text"]
        assert "no communication (NCCL) kernels" in str(report.fact("comm.overlap").value)
    ids = p.evaluate("[...document.querySelectorAll('#top-findings > li')].map(li => li.dataset.findingId)")
    assert all(t["bottom"] <= HEIGHT for t in top), top
    assert all(link["target"] and link["bottom"] <= HEIGHT for link in links), links
    if name == "saxpy":
        # three distinct findings above the fold, each linked to a row of the page
        assert len(top) == 3 and len(set(ids)) == 3 and len(links) == 3, ids
        texts = {i: t["text"] for i, t in zip(ids, top, strict=True)}
        # 2. the host's time blocked in synchronous CUDA calls (the second finding's number)
        assert _number(texts["nsys:host_sync"].split("blocked")[1]) == pytest.approx(raw["sync_ms"], abs=0.51)
        # 3. the copies' share of the GPU's busy time (the third finding's number)
        share = _number(texts["nsys:copies"].split("take")[1])
        assert share == pytest.approx(100 * raw["copy_ms"] / raw["busy_ms"], abs=0.51)
    else:
        # the findings worth fixing first (1% of the step or more; the triage restates the verdict: no fix)
        assert len(top) >= 1 and len(set(ids)) == len(ids), ids
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])
