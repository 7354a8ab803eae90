"""``memory summarize --html``: the page in headless Chromium, offline: what it draws and that names stay text."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.memory.snapshot import save_snapshot
from my_utils.memory.snapshot_summary import summarize_snapshot
from my_utils.memory.summary_html import DIV_ID, SEGMENTS_CHARTED, TIMELINE_POINTS

pytestmark = [pytest.mark.browser]
pytest.importorskip("plotly", reason="plotly is not installed (the [charts] extra)")

MiB = 1 << 20
CHROMIUM = os.environ.get("MYUTILS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
EVIL = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium through Playwright, resolving no host name (one per module)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright; the browser itself comes from apt)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class Opened:
    """A page opened from file:// with every other request aborted; its errors and blocked requests kept."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.route("**/*", self._route)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.resolve().as_uri(), wait_until="load")
        self.page.wait_for_selector(f"#{DIV_ID} .main-svg", timeout=30_000)

    def _route(self, r: Any) -> None:
        if r.request.url.startswith(("file://", "data:", "blob:", "about:")):
            r.continue_()
        else:
            self.blocked.append(r.request.url)
            r.abort()

    def traces(self) -> list[dict[str, Any]]:
        """Each drawn trace's name, type, stack group and values, as plotly holds them on the page."""
        return list(self.page.evaluate(
            f"Array.from(document.getElementById('{DIV_ID}').data, t => ({{name: t.name, type: t.type, "
            "stackgroup: t.stackgroup || null, x: Array.from(t.x || []), y: Array.from(t.y || [])}))"))


def _summarize_html(snapshot_path: Path, out: Path) -> None:
    result = CliRunner().invoke(build_app(), ["memory", "summarize", str(snapshot_path), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output


def test_llm_page_draws_memory_stacks_and_segments(browser: Any, tmp_path: Path, llm_snapshot: dict[str, Any]) -> None:
    path = tmp_path / "llm.pickle"
    path.write_bytes(pickle.dumps(llm_snapshot, protocol=4))
    out = tmp_path / "llm.html"
    _summarize_html(path, out)
    s = summarize_snapshot(llm_snapshot, timeline_points=TIMELINE_POINTS)
    assert s.allocator is not None
    page = Opened(browser, out)
    try:
        traces = page.traces()
        names = [t["name"] for t in traces]
        assert names[:3] == ["in use", "reserved", "peak"]
        areas = [t for t in traces if t["stackgroup"] == "stacks"]
        assert areas[0]["name"] == "before the trace" and areas[-1]["name"] == "other stacks"
        assert len(areas) == len(s.chart_stacks) + 2
        bars = [t for t in traces if t["type"] == "bar"]
        assert [t["name"] for t in bars] == ["allocated", "free: rounding", "free: unallocated"]
        charted = min(len(s.allocator.segments), SEGMENTS_CHARTED)
        assert all(len(t["y"]) == charted for t in bars) and charted < len(s.allocator.segments)
        most_free = sorted(s.allocator.segments, key=lambda g: -g.free_bytes)[:charted]
        free = [u + r for u, r in zip(bars[1]["x"], bars[2]["x"], strict=True)]
        assert free == pytest.approx([g.free_bytes / MiB for g in most_free])
        # the peak is drawn, not sampled past: the in-use line reaches it, where the peak marker sits
        in_use, peak = traces[0], traces[2]
        assert max(in_use["y"]) == pytest.approx(s.peak_bytes / MiB) == peak["y"][0]
        at = in_use["y"].index(max(in_use["y"]))
        assert in_use["x"][at] == pytest.approx(s.peak_at_s)
        # at that moment the areas add up to the memory in use
        assert sum(t["y"][at] for t in areas) == pytest.approx(s.peak_bytes / MiB)
        assert page.page.locator("#peak_stacks tr").count() == len(s.peak_stacks) + 1
        assert page.page.locator("#end_stacks tr").count() == len(s.top_stacks) + 1
        findings = page.page.locator("#findings li").all_inner_texts()
        assert any(f.startswith("warning: churn") for f in findings)
        assert "modeling_llama.py" in page.page.locator("#peak_stacks").inner_text()
        assert page.errors == [] and page.blocked == []
    finally:
        page.page.close()


def test_names_from_the_snapshot_stay_text(browser: Any, tmp_path: Path, hand_snapshot: dict[str, Any]) -> None:
    hand_snapshot["device_traces"][0][2]["frames"] = [{"filename": "/x/m.py", "line": 1, "name": EVIL}]
    hand_snapshot["segments"][0]["segment_type"] = EVIL
    path = save_snapshot(tmp_path / "evil.pickle", hand_snapshot)
    out = tmp_path / "evil.html"
    _summarize_html(path, out)
    page = Opened(browser, out)
    try:
        assert page.page.evaluate("window.__pwned === undefined")
        assert EVIL in page.page.locator("#peak_stacks").inner_text()
        assert any(EVIL in (t["name"] or "") or "&lt;script" in (t["name"] or "") for t in page.traces())
        assert page.errors == [] and page.blocked == []
    finally:
        page.page.close()


def test_profile_made_snapshot_page_says_reserved_is_not_recorded(browser: Any, tmp_path: Path,
                                                                   profile_snapshot: dict[str, Any]) -> None:
    path = save_snapshot(tmp_path / "prof.pickle", profile_snapshot)
    out = tmp_path / "prof.html"
    _summarize_html(path, out)
    page = Opened(browser, out)
    try:
        assert "not recorded" in page.page.locator("#facts").inner_text()
        assert "reserved" not in [t["name"] for t in page.traces()]
        assert page.errors == []
    finally:
        page.page.close()
