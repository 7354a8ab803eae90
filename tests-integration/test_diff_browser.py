"""``myutils-profile diff --html`` in headless Chromium, offline: what the page shows, not only that it loads.

The real HTA control/test pair (A100 x8 rank 3 of 8 against V100 x2 rank 1 of 2) is diffed by
the real command; the page is opened from ``file://`` with every other request aborted. The
bars, their labels and their order are compared with the JSON the same command wrote; the gate
line and the hardware warning must be on the page; a kernel named with markup stays text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.profiling.cli import app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CONTROL = "kineto/hta/trace_diff__control.json.gz"
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

    page, log = offline_browser.open_page(chromium, width=1280, height=900)
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
        shown = label.rstrip("…").split(" (")[0]
        assert change["name"].startswith(shown[:40]), (label, change["name"])
    assert labels[0] == "annotation:## sparse_data_dist ##"
    # red where slower, green where faster, as the deltas say
    fills = _top_to_bottom(p, "#chart-duration .point path", "e.style.fill")
    assert [f == "rgb(228, 87, 86)" for f in fills] == [c["delta"] > 0 for c in top]
    count_bars = sorted((c for c in data["changes"] if c["count_delta"]), key=lambda c: -abs(c["count_delta"]))
    assert p.locator("#chart-count .point").count() == min(15, len(count_bars))
    assert _top_to_bottom(p, "#chart-count .ytick text", "e.textContent")[0] == count_bars[0]["name"][:48]


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
