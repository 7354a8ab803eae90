"""``myutils-profile diff --html`` (and ``nsys diff`` / ``ncu diff``) in headless Chromium, offline: what the page shows.

The real HTA control/test pair (A100 x8 rank 3 of 8 against V100 x2 rank 1 of 2) is diffed by
the real command; the page is opened from ``file://`` with every other request aborted. The
bars, their labels and their order are compared with the JSON the same command wrote; the gate
line and the hardware warning must be on the page; a kernel named with markup stays text. The
first screen (1280 x 900) must hold the headline and the GPU level before -> after, whose figures
are recomputed here from the raw trace and the raw exports (gzip + json, sqlite3).
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SCREEN = (1280, 900)
CONTROL = "kineto/hta/trace_diff__control.json.gz"
BEFORE, AFTER = "nsys/nsysai__mfu_2gpu_before.sqlite", "nsys/nsysai__mfu_2gpu_after.sqlite"
NCU = "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt"
TEST = "kineto/hta/trace_diff__test.json.gz"
FILE_PREFIXES = ("file://", "data:", "blob:", "about:")
EVIL = "<img src=x onerror=window.__pwned=1>"


@pytest.fixture(scope="module")
def real_pair(real_fixtures: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("diff_html")
    res = CliRunner().invoke(app, ["diff", "--base-trace", str(real_fixtures / CONTROL), "--target-trace",
                                   str(real_fixtures / TEST), "--output", str(out / "d.json"), "--html",
                                   str(out / "d.html"), "--fail-on-regression", "5"])
    assert res.exit_code == 1, res.output  # the step time is 60 % slower: the gate fails
    return out / "d.html", json.loads((out / "d.json").read_text())


@pytest.fixture
def page(chromium: Any) -> Iterator[tuple[Any, Any]]:
    """A page that may read file:// (the diff) and nothing else; its errors are in the log."""
    import offline_browser

    page, log = offline_browser.open_page(chromium, width=SCREEN[0], height=SCREEN[1])
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


def _open(page: Any, path: Path) -> None:
    page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_selector("body[data-charts-drawn]", timeout=30_000)


def _top_to_bottom(page: Any, selector: str, what: str) -> list[str]:
    """``what`` (a JS expression of ``e``) of each element, ordered by where it is drawn, top first."""
    pairs = page.eval_on_selector_all(selector, f"els => els.map(e => [e.getBoundingClientRect().top, {what}])")
    return [value for _, value in sorted(pairs, key=lambda pair: pair[0])]


def test_the_bars_are_the_largest_changes_in_order_with_their_names(real_pair: Any, page: Any) -> None:
    path, data = real_pair
    p, log = page
    _open(p, path)
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])
    assert p.get_attribute("body", "data-charts-drawn") == "2"
    # expected independently from the JSON: significant, not folded, largest |delta| first, 15 of them
    counted = [c for c in data["changes"] if c["significant"] and not c["folded_into"]]
    top = sorted(counted, key=lambda c: -abs(c["delta"]))[:15]
    assert p.locator("#chart-duration .point").count() == len(top) == 15
    labels = _top_to_bottom(p, "#chart-duration .ytick text", "e.textContent")
    assert len(labels) == 15
    for label, change in zip(labels, top, strict=True):  # top to bottom: the largest first
        assert _cut_from(label, change["name"]), (label, change["name"])
    assert labels[0] == "annotation:## sparse_data_dist ##"
    assert len(set(labels)) == len(labels)
    # red where slower, green where faster, as the deltas say
    fills = _top_to_bottom(p, "#chart-duration .point path", "e.style.fill")
    assert [f == "rgb(228, 87, 86)" for f in fills] == [c["delta"] > 0 for c in top]
    count_bars = sorted((c for c in data["changes"] if c["count_delta"]), key=lambda c: -abs(c["count_delta"]))
    assert p.locator("#chart-count .point").count() == min(15, len(count_bars))
    first = _top_to_bottom(p, "#chart-count .ytick text", "e.textContent")[0]
    assert _cut_from(first, count_bars[0]["name"]) and len(first) <= 48


def _cut_from(label: str, name: str) -> bool:
    """Whether ``label`` is ``name`` cut with ellipses: its start kept, and each piece found in order after it."""
    pieces = label.split("…")
    if not name.startswith(pieces[0]):
        return False
    at = len(pieces[0])
    for piece in pieces[1:]:
        found = name.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return label == name or "…" in label


def test_the_gate_line_and_the_hardware_warning_are_on_the_page(real_pair: Any, page: Any) -> None:
    path, data = real_pair
    p, _ = page
    _open(p, path)
    gate = p.locator("#gate")
    assert "failed" in (gate.get_attribute("class") or "")
    text = gate.text_content() or ""
    assert "Regression gate (5%): FAILED: step_time +60.1%" in text and "hardware or software differ" in text
    warning = p.locator(".warning").first.text_content() or ""
    assert "'NVIDIA A100-PG509-200' vs 'Tesla V100-SXM2-16GB'" in warning and "world_size: 8 vs 2" in warning
    differs = p.locator("#hardware tr.differs th").all_text_contents()
    assert differs == ["GPU", "GPUs visible", "GPU memory (GiB)", "compute capability", "SMs", "world size"]
    assert p.locator("#step").text_content().startswith("Step time: 77.491 ms → 124.067 ms (+60.1%")
    rows = p.locator("#changes tbody tr")
    assert rows.count() == 60 and p.locator("#changes tbody tr.nested").count() > 0
    assert data["gate"]["passed"] is False


def test_a_kernel_named_with_markup_shows_as_text_and_does_not_run(page: Any, tmp_path: Path) -> None:
    def trace(path: Path, dur: float) -> Path:
        events = []
        for s in range(3):
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
                           "ts": s * 1000, "dur": 900})
            events.append({"ph": "X", "cat": "kernel", "name": EVIL, "pid": 0, "tid": 7, "ts": s * 1000 + 10,
                           "dur": dur, "args": {"stream": 7}})
        path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "name": EVIL}]}))
        return path

    html = tmp_path / "evil.html"
    res = CliRunner().invoke(app, ["diff", "--base-trace", str(trace(tmp_path / "a.json", 100)), "--target-trace",
                                   str(trace(tmp_path / "b.json", 300)), "--html", str(html)])
    assert res.exit_code == 0, res.output
    p, log = page
    _open(p, html)
    assert p.evaluate("typeof window.__pwned") == "undefined"
    assert p.locator("img").count() == 0
    assert EVIL[:30] in _top_to_bottom(p, "#chart-duration .ytick text", "e.textContent")[0]
    assert EVIL in p.locator("#changes td.name").first.text_content()
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])


def _busy_and_span_ms(events: list[tuple[float, float]]) -> tuple[float, float]:
    """Union length and first-to-last span of ``(start, end)`` intervals."""
    busy, reach, start = 0.0, None, 0.0
    for s, e in sorted(events):
        if reach is None or s > reach:
            if reach is not None:
                busy += reach - start
            start, reach = s, e
        else:
            reach = max(reach, e)
    busy += (reach or 0.0) - start
    return busy, max(e for _, e in events) - min(s for s, _ in events)


def _first_screen(p: Any) -> dict[str, Any]:
    """Where the headline and the GPU table are drawn, and the table's cells by row label."""
    box = p.evaluate("""() => {
      const r = s => document.querySelector(s).getBoundingClientRect();
      const cells = {};
      document.querySelectorAll('#gpu table:first-of-type tbody tr').forEach(tr => {
        cells[tr.querySelector('th').textContent.trim()] = [...tr.querySelectorAll('td')].map(td => td.textContent.trim());
      });
      return {headline: r('#headline-text'), gpu: r('#gpu table'), text: document.querySelector('#headline-text').textContent,
              cells: cells, scrollY: window.scrollY};
    }""")
    assert box["scrollY"] == 0
    for key in ("headline", "gpu"):  # wholly inside the first screen, without scrolling
        assert box[key]["top"] >= 0 and box[key]["bottom"] <= SCREEN[1], (key, box[key])
    return box


def test_the_headline_and_the_gpu_level_are_on_the_first_screen(real_pair: Any, page: Any, real_fixtures: Any,
                                                                tmp_path: Path) -> None:
    path, data = real_pair
    p, log = page
    _open(p, path)
    box = _first_screen(p)
    assert box["text"] == data["headline"]
    for name, col in ((CONTROL, 0), (TEST, 1)):
        with gzip.open(real_fixtures / name, "rt") as fh:
            gpu = [(e["ts"], e["ts"] + e["dur"]) for e in json.load(fh)["traceEvents"]
                   if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        busy, span = _busy_and_span_ms(gpu)
        cell = box["cells"]["busy (kernels, copies, sets)"][col]
        assert cell == f"{busy / 1e3:,.1f} ms ({100 * busy / span:.1f}% of span)"
        assert box["cells"]["idle"][col].startswith(f"{(span - busy) / 1e3:,.1f} ms")
    assert box["cells"]["busy (kernels, copies, sets)"][:2] == ["388.6 ms (83.6% of span)", "717.9 ms (96.3% of span)"]
    assert box["cells"]["compute (union of computation kernels)"][:2] == ["281.3 ms (60.6% of span)",
                                                                         "548.1 ms (73.6% of span)"]
    assert box["cells"]["communication under compute"][:2] == ["75.6 ms (46.2% of communication)",
                                                               "178.0 ms (70.8% of communication)"]
    p.screenshot(path=str(tmp_path / "diff_first_screen.png"))
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])


def test_the_nsys_and_ncu_pages_lead_the_same_way(page: Any, real_fixtures: Any, tmp_path: Path) -> None:
    p, log = page
    nsys_page, ncu_page = tmp_path / "nsys.html", tmp_path / "ncu.html"
    res = CliRunner().invoke(app, ["nsys", "diff", str(real_fixtures / BEFORE), str(real_fixtures / AFTER), "--html",
                                   str(nsys_page), "--output", str(tmp_path / "nsys.json")])
    assert res.exit_code == 0, res.output
    _open(p, nsys_page)
    box = _first_screen(p)
    assert box["text"] == json.loads((tmp_path / "nsys.json").read_text())["headline"]
    for col, name in enumerate((BEFORE, AFTER)):
        conn = sqlite3.connect((real_fixtures / name).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
        busy = span = 0.0
        for (dev,) in conn.execute("SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL"):
            ops = [(s, e) for t in ("KERNEL", "MEMCPY", "MEMSET") for s, e in conn.execute(
                f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t} WHERE deviceId = ?", (dev,))]
            b, sp = _busy_and_span_ms(ops)
            busy, span = busy + b, span + sp
        conn.close()
        assert box["cells"]["idle"][col] == f"{(span - busy) / 1e6:,.1f} ms ({100 * (span - busy) / span:.1f}% of span)"
    assert [box["cells"]["idle"][0], box["cells"]["idle"][1]] == ["57.4 ms (9.6% of span)", "104.4 ms (17.4% of span)"]
    assert box["text"].startswith("Not like for like (different capture windows: blocks 2–19 vs 8–23). GPU idle +47.0 ms")
    p.screenshot(path=str(tmp_path / "nsys_first_screen.png"))
    res = CliRunner().invoke(app, ["ncu", "diff", "--base", str(real_fixtures / NCU), "--target", str(real_fixtures / NCU),
                                   "--html", str(ncu_page), "--output", str(tmp_path / "ncu.json")])
    assert res.exit_code == 0, res.output
    _open(p, ncu_page)
    box = _first_screen(p)
    ncu = json.loads((tmp_path / "ncu.json").read_text())
    assert box["text"] == ncu["headline"] and box["text"].startswith("Profiled kernel time +0.000 ms (0.079 → 0.079 ms over 14 → 14 launches)")
    assert box["cells"]["profiled launches"][:2] == ["14", "14"]
    assert p.locator("#extra tbody tr").count() == min(60, len(ncu["rows"]))
    assert (log.console_errors, log.page_errors, log.blocked) == ([], [], [])
